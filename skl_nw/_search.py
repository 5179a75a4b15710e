"""BandwidthSearchCV: closed-form leave-one-out grid, GridSearchCV, and SGD."""

from __future__ import annotations

import warnings
from copy import deepcopy
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import GridSearchCV
from sklearn.utils import check_random_state, get_tags
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._estimators import _NWBase, check_weights, rule_of_thumb
from ._inference import CRITERIA, criterion_scores

__all__ = ["BandwidthSearchCV"]

# Default grid: multiples of the per-feature rule of thumb, log-spaced.
# 40 log-spaced multiples from 2^-5.5 = 0.022 to 2^4.25 = 19: a step of 2^(1/4),
# so every other candidate is the bandwidth over sqrt(2), whose Gaussian kernel
# values are the squares of the previous ones (the engine reuses them).
_DEFAULT_FACTORS = 2.0 ** (np.arange(-22, 18) / 4)
# log-bandwidths may move this far from their start (e^40 ~ 2e17): unbounded in
# practice, yet every scaled coordinate stays finite.
_MAX_LOG_STEP = 40.0
# Probabilities below this are clipped in the log-loss, as sklearn.metrics.log_loss does.
_PROBA_FLOOR = np.finfo(np.float64).eps


def _estimator_has(attr: str):
    """Whether the fitted best estimator, or else the wrapped one, has ``attr``."""

    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, attr)
        return hasattr(self.estimator, attr)

    return check


class _LOORegressor(BaseEstimator):
    """Identity 'estimator' that lets any scorer score precomputed predictions."""

    def predict(self, P):
        return P

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "regressor"
        return tags


class _LOOClassifier(BaseEstimator):
    """Identity classifier: ``predict_proba`` returns the given probabilities."""

    def __init__(self, classes):
        self.classes = classes
        self.classes_ = classes

    def predict_proba(self, P):
        # Pooled one-hot rows sum to 1 up to rounding; metrics reject 1 + 1e-16.
        return np.clip(P, 0.0, 1.0)

    def predict_log_proba(self, P):
        return np.log(np.maximum(P, _PROBA_FLOOR))

    def predict(self, P):
        return self.classes_[np.argmax(P, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        return tags


def _squared_error(Y: np.ndarray):
    def loss(P, rows):
        residual = P - Y[rows]
        k = Y.shape[1]
        return (residual**2).sum(axis=1) / k, 2.0 * residual / k

    return loss


def _log_loss(Y: np.ndarray):
    labels = np.argmax(Y, axis=1)

    def loss(P, rows):
        idx = np.arange(len(rows))
        p = np.maximum(P[idx, labels[rows]], _PROBA_FLOOR)
        R = np.zeros_like(P)
        R[idx, labels[rows]] = -1.0 / p
        return -np.log(p), R

    return loss


def _collapse(X: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Merge identical (x, y) rows, summing their weights; drop zero weights.

    With frequency weights a row of weight 3 *is* three identical rows, so the
    leave-one-out loss must leave identical rows out together
    (leave-one-location-out); merging them first makes integer weights and
    repeated rows give the same data, and stops exact duplicates from pulling
    the bandwidth to 0.
    """
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    # Labels may be strings (object arrays have no row-wise unique): code them first.
    _, codes = np.unique(y, return_inverse=True, **({"axis": 0} if y.ndim > 1 else {}))
    key = np.column_stack([X, codes.reshape(len(X), -1)])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    weights = np.bincount(inverse.ravel(), weights=w, minlength=len(first))
    return X[first], y[first], weights


class BandwidthSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Select the bandwidths of a Nadaraya–Watson estimator by cross-validation.

    Three routes to the same goal, all minimising an honest out-of-sample
    loss (minimising the *training* loss fails: ``y_i`` is part of its own
    prediction, so the loss falls to 0 as ``h -> 0``):

    * ``method="grid", cv="loo"`` (default): every candidate is scored by the
      exact closed-form leave-one-out predictions, without refitting; the
      distances of each chunk are computed once for all the candidates
      (multiples of one bandwidth vector), only the kernel per candidate.
    * ``method="grid"`` with any other ``cv``: scikit-learn's
      :class:`~sklearn.model_selection.GridSearchCV` over ``bandwidth``.
    * ``method="sgd"``: minibatch Adam on the log of each feature's bandwidth,
      minimising the leave-one-out loss (mean squared error, or log-loss for
      the classifier) with analytic gradients.  A feature that carries no
      signal drifts to a large bandwidth (automatic relevance determination).

    Parameters
    ----------
    estimator : NadarayaWatsonRegressor or ParzenClassifier
        The estimator whose ``bandwidth`` is selected; its other parameters
        are kept.
    method : {"grid", "sgd"}, default="grid"
        Grid search or gradient descent.
    bandwidths : array-like, default=None
        Grid candidates: a list of positive scalars or of per-feature arrays.
        None uses 40 log-spaced multiples, 2^(k/4) from 0.022 to 19, of the per-feature
        rule of thumb (the estimator's "scott" / "silverman", else "scott").
    cv : "loo", int, cross-validation generator or iterable, default="loo"
        "loo" scores the closed-form leave-one-out predictions; anything else
        is passed to GridSearchCV (``None`` is its 5-fold default).  Only
        ``method="grid"`` uses it.
    scoring : str or callable, default=None
        Scorer applied to the out-of-sample predictions.  None means negative
        mean squared error for regressors and negative log-loss for classifiers.
    criterion : {"loo", "aicc", "gcv"}, default="loo"
        What the candidates are scored by.  "loo": ``scoring`` of the
        out-of-sample predictions (``cv``).  For regressors, two in-sample
        criteria that need one fit per candidate, no held-out point:
        "aicc", the corrected AIC of Hurvich, Simonoff & Tsai (1998),
        ``log sigma^2 + (1 + tr(H) / n) / (1 - (tr(H) + 2) / n)`` (+inf where the
        denominator is not positive), and "gcv", generalised cross-validation,
        ``sigma^2 / (1 - tr(H) / n)^2``; ``sigma^2`` is the mean squared
        in-sample residual, ``tr(H) = sum_i H_ii`` the trace of the smoother
        (``H_ii`` a point's weight in its own fit), sample weights frequency
        weights (``n = sum w``).  ``best_score_`` and ``mean_test_score`` then
        hold the negated criterion.  They need ``method="grid"`` and
        ``cv="loo"`` and take no ``scoring``.
    per_feature : bool, default=True
        For ``method="sgd"``: learn one bandwidth per feature (True) or one
        common multiple of the rule of thumb (False).
    max_iter : int, default=200
        Maximum number of SGD epochs (passes over the training rows).
    learning_rate : float, default=0.05
        Adam step size in log-bandwidth units (0.05 is a 5% change per step).
    batch_size : int or "auto", default="auto"
        Training rows per SGD step, each scored against all others;
        "auto" is ``min(256, n_samples)``.
    tol : float or None, default=1e-4
        SGD stops when the epoch loss has not improved by ``tol`` times the
        best loss so far (a relative tolerance, so the scale of ``y`` does not
        matter) for ``n_iter_no_change`` epochs; None runs ``max_iter`` epochs.
    n_iter_no_change : int, default=5
        Patience of the early stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the SGD minibatch order; an int makes results reproducible bit
        for bit.
    n_jobs : int, default=None
        Threads for the closed-form leave-one-out, workers for GridSearchCV.
    verbose : int, default=0
        Prints one line per SGD epoch (and GridSearchCV's own messages).

    Attributes
    ----------
    best_estimator_ : estimator
        The wrapped estimator refitted on all the data with ``bandwidth_``.
    bandwidth_ : ndarray of shape (n_features,)
        The selected bandwidths, equal to ``best_estimator_.bandwidth_``.
    best_score_ : float
        Score of the selected bandwidths (leave-one-out, or mean CV score).
    best_params_ : dict
        ``{"bandwidth": ...}`` for the selected candidate (grid).
    best_index_ : int
        Index of the selected candidate in ``cv_results_`` (grid).
    cv_results_ : dict of ndarrays
        As GridSearchCV's; on the closed-form path the keys are ``params``,
        ``param_bandwidth``, ``mean_test_score`` and ``rank_test_score``.
    loss_curve_ : list of float
        Leave-one-out loss of each SGD epoch.
    n_iter_ : int
        Number of SGD epochs run; for ``method="grid"``, the number of
        candidates scored.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    NadarayaWatsonRegressor : The kernel regressor whose bandwidth it selects.
    ParzenClassifier : The kernel classifier whose bandwidth it selects.
    sklearn.linear_model.RidgeCV : The same closed-form leave-one-out idea.

    Notes
    -----
    Sample weights are frequency weights: identical ``(x, y)`` rows are merged
    (their weights summed) before the leave-one-out, so integer weights give
    exactly the result of repeated rows.  A duplicate ``x`` with a different
    ``y`` is a different observation and still counts.  With priors, the
    classifier's class weights are those of the full sample.

    The tophat kernel's leave-one-out loss is piecewise constant in the
    bandwidth (its gradient is 0 almost everywhere), so ``method="sgd"``
    cannot move it: use ``method="grid"`` for that kernel.

    Adam rather than momentum: per-feature log-bandwidth gradients differ by
    orders of magnitude between relevant and irrelevant features, and Adam's
    per-parameter step normalisation moves both at a useful rate with one
    learning rate.

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, (200, 2))
    >>> y = 2 * np.sin(X[:, 0]) + rng.normal(0, 0.3, 200)  # feature 1 is noise
    >>> search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd",
    ...                            random_state=0).fit(X, y)
    >>> bool(search.bandwidth_[1] > 3 * search.bandwidth_[0])
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "method": [StrOptions({"grid", "sgd"})],
        "bandwidths": ["array-like", None],
        "cv": ["cv_object", StrOptions({"loo"})],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "criterion": [StrOptions(set(CRITERIA))],
        "per_feature": ["boolean"],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator,
        *,
        method: str = "grid",
        bandwidths: ArrayLike | None = None,
        cv="loo",
        scoring=None,
        criterion: str = "loo",
        per_feature: bool = True,
        max_iter: int = 200,
        learning_rate: float = 0.05,
        batch_size: int | str = "auto",
        tol: float | None = 1e-4,
        n_iter_no_change: int = 5,
        random_state=None,
        n_jobs: int | None = None,
        verbose: int = 0,
    ) -> None:
        self.estimator = estimator
        self.method = method
        self.bandwidths = bandwidths
        self.cv = cv
        self.scoring = scoring
        self.criterion = criterion
        self.per_feature = per_feature
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Select the bandwidths, then refit the estimator with them on all data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets or class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights, used in the fits and in the leave-one-out loss.

        Returns
        -------
        self : BandwidthSearchCV
            The fitted search.
        """
        if not isinstance(self.estimator, _NWBase):
            raise ValueError(
                "estimator must be a NadarayaWatsonRegressor or a ParzenClassifier; "
                f"got {type(self.estimator).__name__}."
            )
        if self.method == "sgd" and not (isinstance(self.cv, str) and self.cv == "loo"):
            warnings.warn(
                "cv is ignored by method='sgd', which minimises the closed-form "
                "leave-one-out loss; it applies to method='grid' only.",
                UserWarning,
                stacklevel=2,
            )
        classifier = is_classifier(self.estimator)
        self._check_criterion(classifier)
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=not classifier)
        if classifier:
            check_classification_targets(y)
        w = check_weights(sample_weight, X)
        self._scorer = check_scoring(
            self.estimator,
            self.scoring or ("neg_log_loss" if classifier else "neg_mean_squared_error"),
        )

        if self.method == "grid" and not (isinstance(self.cv, str) and self.cv == "loo"):
            self._fit_grid_cv(X, y, w, sample_weight is not None)
        else:
            Xu, yu, wu = _collapse(X, y, w)
            if len(Xu) < 2:
                raise ValueError(
                    "Leave-one-out needs at least 2 distinct training points with positive "
                    f"weight; got {len(Xu)} (1 sample)."
                )
            if self.method == "grid":
                bandwidth = self._fit_grid_loo(Xu, yu, wu)
            else:
                bandwidth = self._fit_sgd(Xu, yu, wu)
            self.best_estimator_ = clone(self.estimator).set_params(bandwidth=bandwidth)
            self.best_estimator_.fit(X, y, sample_weight=sample_weight)
        self.bandwidth_ = self.best_estimator_.bandwidth_.copy()
        # Needed during fit only; a fitted search then holds no functions, so
        # skops can load it trusting data types alone.
        del self._scorer
        return self

    def _check_criterion(self, classifier: bool) -> None:
        if self.criterion == "loo":
            return
        if classifier:
            raise ValueError(
                f"criterion={self.criterion!r} applies to regressors only; a classifier "
                "takes criterion='loo' (scored by scoring)."
            )
        if self.method != "grid" or not (isinstance(self.cv, str) and self.cv == "loo"):
            raise ValueError(
                f"criterion={self.criterion!r} needs method='grid' and cv='loo' (an "
                f"in-sample criterion); got method={self.method!r}, cv={self.cv!r}."
            )
        if self.scoring is not None:
            raise ValueError(
                f"scoring applies to criterion='loo' only; got scoring={self.scoring!r} "
                f"with criterion={self.criterion!r}."
            )

    def _base_bandwidth(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        rule = self.estimator.bandwidth
        return rule_of_thumb(X, rule if isinstance(rule, str) else "scott", w)

    def _candidates(self, X: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        """Candidate bandwidth vectors, validated."""
        if self.bandwidths is None:
            base = self._base_bandwidth(X, w)
            return [factor * base for factor in _DEFAULT_FACTORS]
        candidates = []
        for value in self.bandwidths:
            h = np.asarray(value)
            if h.dtype.kind not in "iuf" or h.ndim > 1 or h.size not in (1, X.shape[1]):
                raise ValueError(
                    "bandwidths must be a list of positive floats or of arrays of shape "
                    f"(n_features,) = ({X.shape[1]},); got {value!r}."
                )
            h = np.broadcast_to(h.astype(np.float64), (X.shape[1],)).copy()
            if not (np.all(np.isfinite(h)) and np.all(h > 0)):
                raise ValueError(f"bandwidths must be finite and positive; got {value!r}.")
            candidates.append(h)
        if not candidates:
            raise ValueError("bandwidths must hold at least one candidate; got an empty list.")
        return candidates

    def _score(self, base, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        """Score precomputed out-of-sample predictions ``P`` with the scorer."""
        if np.isnan(P).any():  # fallback="nan": some point had no neighbour
            return -np.inf
        classifier = is_classifier(base)
        if self.scoring is None:
            # The default scores, computed directly: the scorer machinery
            # validates its inputs on every call, a sixth of a small grid's time.
            if classifier:
                p = P[np.arange(len(P)), np.searchsorted(base.classes_, y)]
                p = np.clip(p, _PROBA_FLOOR, 1 - _PROBA_FLOOR)
                return float(np.average(np.log(p), weights=w))
            Y = y.reshape(len(y), -1)
            return -float(np.average((P - Y) ** 2, axis=0, weights=w).mean())
        if classifier:
            return float(self._scorer(_LOOClassifier(base.classes_), P, y, sample_weight=w))
        P = P[:, 0] if y.ndim == 1 else P
        return float(self._scorer(_LOORegressor(), P, y, sample_weight=w))

    def _loo_predictions(self, Xu, yu, wu, base_bandwidth, factors):
        """Leave-one-out predictions for ``factor * base_bandwidth``, rows in training order."""
        base = clone(self.estimator).set_params(bandwidth=base_bandwidth).fit(Xu, yu, wu)
        return base, base._leave_one_out().predictions(factors, n_jobs=self.n_jobs)

    def _fit_grid_loo(self, Xu, yu, wu) -> np.ndarray:
        candidates = self._candidates(Xu, wu)
        first = candidates[0]
        factors = np.array([h[0] / first[0] for h in candidates])
        if all(
            np.allclose(h, f * first, rtol=1e-12, atol=0)
            for h, f in zip(candidates, factors, strict=True)
        ):
            groups = [(first, factors, np.arange(len(candidates)))]
        else:  # not multiples of one vector: distances per candidate
            groups = [(h, np.ones(1), np.array([t])) for t, h in enumerate(candidates)]
        scores = np.empty(len(candidates))
        for base_bandwidth, group_factors, index in groups:
            if self.criterion != "loo":  # in-sample fits and hat diagonal of the protocol
                base = clone(self.estimator).set_params(bandwidth=base_bandwidth).fit(Xu, yu, wu)
                fits, hat = base._leave_one_out().fits(group_factors, n_jobs=self.n_jobs)
                Y = yu.reshape(len(yu), -1)
                scores[index] = criterion_scores(fits, hat, Y, wu, self.criterion)
                continue
            base, P = self._loo_predictions(Xu, yu, wu, base_bandwidth, group_factors)
            for t, P_t in zip(index, P, strict=True):
                scores[t] = self._score(base, P_t, yu, wu)
        if not np.isfinite(scores).any():
            raise ValueError(
                "No candidate bandwidth could be scored: with fallback='nan' every candidate "
                "left some training point without a neighbour."
            )
        self.best_index_ = int(np.argmax(scores))
        best = candidates[self.best_index_]
        params = [{"bandwidth": h} for h in candidates]
        self.cv_results_ = {
            "params": params,
            "param_bandwidth": np.ma.MaskedArray(
                np.empty(len(candidates), dtype=object), mask=False
            ),
            "mean_test_score": scores,
            "rank_test_score": rankdata(-scores, method="min").astype(np.int32),
        }
        self.cv_results_["param_bandwidth"][:] = candidates
        self.best_score_ = float(scores[self.best_index_])
        self.best_params_ = {"bandwidth": best}
        self.n_iter_ = len(candidates)
        return best

    def _fit_grid_cv(self, X, y, w, weighted: bool) -> None:
        candidates = self._candidates(X, w)
        search = GridSearchCV(
            self.estimator,
            {"bandwidth": candidates},
            scoring=self._scorer,
            cv=self.cv,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        search.fit(X, y, **({"sample_weight": w} if weighted else {}))
        for name in (
            "cv_results_",
            "best_estimator_",
            "best_score_",
            "best_params_",
            "best_index_",
        ):
            setattr(self, name, getattr(search, name))
        self.n_iter_ = len(candidates)

    def _fit_sgd(self, Xu, yu, wu) -> np.ndarray:
        rng = check_random_state(self.random_state)
        h0 = self._base_bandwidth(Xu, wu)
        loo = clone(self.estimator).set_params(bandwidth=h0).fit(Xu, yu, wu)._leave_one_out()
        V = loo.targets
        loss_fn = _log_loss(V) if is_classifier(self.estimator) else _squared_error(V)
        n, d = Xu.shape
        batch = min(256, n) if self.batch_size == "auto" else min(self.batch_size, n)

        theta = np.zeros(d if self.per_feature else 1)  # log(h / h0)
        m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
        beta1, beta2, step = 0.9, 0.999, 0
        self.loss_curve_ = []
        best_loss, stall = np.inf, 0
        # Minibatches are drawn in training order: the same random_state gives
        # the same bandwidths on every algorithm.
        for epoch in range(1, self.max_iter + 1):
            order = rng.permutation(n)
            epoch_loss = 0.0
            for start in range(0, n, batch):
                rows = order[start : start + batch]
                log_factors = np.broadcast_to(theta, (d,))
                loss, grad = loo.loss_grad(log_factors, rows, loss_fn, wu[rows])
                epoch_loss += loss * wu[rows].sum()
                grad = grad if self.per_feature else grad.sum(keepdims=True)
                step += 1
                m1 = beta1 * m1 + (1 - beta1) * grad
                m2 = beta2 * m2 + (1 - beta2) * grad**2
                update = (m1 / (1 - beta1**step)) / (np.sqrt(m2 / (1 - beta2**step)) + 1e-12)
                theta = np.clip(theta - self.learning_rate * update, -_MAX_LOG_STEP, _MAX_LOG_STEP)
            epoch_loss /= wu.sum()
            self.loss_curve_.append(epoch_loss)
            if self.verbose:
                h = h0 * np.exp(theta)
                print(f"Epoch {epoch}, LOO loss = {epoch_loss:.6g}, bandwidth = {h}")  # noqa: T201
            if self.tol is not None:
                stall = stall + 1 if epoch_loss > best_loss - self.tol * abs(best_loss) else 0
                best_loss = min(best_loss, epoch_loss)
                if stall >= self.n_iter_no_change:
                    break
        else:
            if self.tol is not None:
                warnings.warn(
                    f"BandwidthSearchCV(method='sgd') reached max_iter={self.max_iter} "
                    "before the loss stopped improving; increase max_iter.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.n_iter_ = epoch
        bandwidth = h0 * np.exp(theta)
        base, P = self._loo_predictions(Xu, yu, wu, bandwidth, np.ones(1))
        self.best_score_ = self._score(base, P[0], yu, wu)
        return bandwidth

    # ----------------------------------------------------------- delegation
    @available_if(_estimator_has("predict"))
    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict with the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray
            ``best_estimator_.predict(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities from the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``best_estimator_.predict_proba(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log class probabilities from the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``best_estimator_.predict_log_proba(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_estimator_has("attention_weights"))
    def attention_weights(self, X: ArrayLike) -> np.ndarray:
        """Attention weights of the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_samples_fit)
            ``best_estimator_.attention_weights(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.attention_weights(X)

    @available_if(_estimator_has("score"))
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Score of the best estimator (R² for regressors, accuracy for classifiers).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y : array-like of shape (n_queries,) or (n_queries, n_targets)
            True targets or labels.
        sample_weight : array-like of shape (n_queries,), default=None
            Sample weights.

        Returns
        -------
        float
            ``best_estimator_.score(X, y, sample_weight)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)

    @property
    def classes_(self) -> np.ndarray:
        """Class labels of the best estimator (classifiers only)."""
        check_is_fitted(self)
        return self.best_estimator_.classes_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = deepcopy(sub.classifier_tags)
        tags.regressor_tags = deepcopy(sub.regressor_tags)
        tags.target_tags = deepcopy(sub.target_tags)
        tags.input_tags = deepcopy(sub.input_tags)
        return tags
