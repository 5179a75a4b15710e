"""NadarayaWatsonRegressor and ParzenClassifier: thin API layers over the engine."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import _engine
from ._kernels import KERNELS, get_kernel

__all__ = ["NadarayaWatsonRegressor", "ParzenClassifier", "rule_of_thumb"]

_RULES = ("scott", "silverman")
_ALGORITHMS = ("auto", "brute", "kd_tree", "ball_tree")
# Scaled coordinates beyond this would overflow when squared and summed.
_MAX_SCALED = 1e150


def _weighted_scale(x: np.ndarray, w: np.ndarray) -> float:
    """Robust scale ``min(std, IQR / 1.349)`` of one feature with frequency weights.

    A zero IQR (a feature that is mostly constant) falls back to the standard
    deviation, and a constant feature to 1.0, so the bandwidth is never zero.
    Weighted quantiles use the inverted CDF, so integer weights give exactly
    the scale of the data with repeated rows.
    """
    support = x[w > 0]
    if support.min() == support.max():
        # Zero spread.  Tested exactly: the weighted mean of a constant is not
        # always that constant, and its rounding would give a std of ~1e-16 |x|.
        return 1.0
    mean = np.average(x, weights=w)
    std = np.sqrt(np.average((x - mean) ** 2, weights=w))
    q1, q3 = np.quantile(x, [0.25, 0.75], weights=w, method="inverted_cdf")
    iqr = (q3 - q1) / 1.349
    positive = [s for s in (std, iqr) if s > 0 and np.isfinite(s)]
    return float(min(positive)) if positive else 1.0


def check_weights(sample_weight: ArrayLike | None, X: np.ndarray) -> np.ndarray:
    """Non-negative float64 sample weights with a positive sum (ones for None)."""
    w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if not w.sum() > 0:  # older scikit-learn lets all-zero weights through
        raise ValueError("sample_weight must have a positive sum; got all zeros.")
    return w


def rule_of_thumb(
    X: ArrayLike, rule: str = "scott", sample_weight: ArrayLike | None = None
) -> np.ndarray:
    """Per-feature rule-of-thumb bandwidths.

    ``h_j = scale_j * factor``, where ``scale_j = min(std_j, IQR_j / 1.349)``
    is a robust scale of feature ``j`` (so the rule follows each feature's
    units, unlike a single scalar) and the factor is Scott's
    ``n^(-1 / (d + 4))`` or Silverman's ``(n (d + 2) / 4)^(-1 / (d + 4))``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Training inputs.
    rule : {"scott", "silverman"}, default="scott"
        Which factor to use.
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights: ``n = sum(sample_weight)``, weighted std and
        quantiles, so integer weights equal repeated rows.

    Returns
    -------
    ndarray of shape (n_features,)
        Positive bandwidths.  A feature of zero spread gets a scale of 1.0
        (a constant feature shifts every distance equally, so any positive
        bandwidth gives the same Gaussian weights).

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import rule_of_thumb
    >>> X = np.column_stack([np.arange(100.0), 1000 * np.arange(100.0)])
    >>> rule_of_thumb(X).round(2)
    array([   13.4 , 13398.44])
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array of shape {X.shape}.")
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got {rule!r}.")
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, float)
    n, d = float(w.sum()), X.shape[1]
    scales = np.array([_weighted_scale(X[:, j], w) for j in range(d)])
    if rule == "scott":
        factor = n ** (-1.0 / (d + 4))
    else:
        factor = (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))
    return scales * factor


class _NWBase(BaseEstimator):
    """Shared parameters, validation and scaling of both estimators."""

    _parameter_constraints: dict = {
        "bandwidth": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions(set(_RULES)),
            "array-like",
        ],
        "kernel": [StrOptions(set(KERNELS))],
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "rtol": [Interval(Real, 0, 1, closed="left")],
        "n_jobs": [Integral, None],
    }

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        # The kernel record holds functions (lambdas); keep its name only, so that
        # pickle and skops.io store plain data (skops cannot load a lambda).
        if "_kernel" in state:
            state = {**state, "_kernel": state["_kernel"].name}
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state.get("_kernel"), str):
            state = {**state, "_kernel": get_kernel(state["_kernel"])}
        super().__setstate__(state)

    def _resolve_bandwidth(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        n_features = X.shape[1]
        if isinstance(self.bandwidth, str):
            return rule_of_thumb(X, self.bandwidth, w)
        h = np.asarray(self.bandwidth)
        if h.dtype.kind not in "iuf":
            raise ValueError(
                "bandwidth must be a positive float, an array of positive floats of "
                f"shape (n_features,) = ({n_features},) or one of {_RULES}; got an "
                f"array of dtype {h.dtype}."
            )
        if h.ndim > 1 or h.size not in (1, n_features) or (h.ndim == 1 and h.size != n_features):
            raise ValueError(
                f"bandwidth must be a scalar or have shape (n_features,) = ({n_features},); "
                f"got shape {h.shape}."
            )
        h = np.broadcast_to(h.astype(np.float64), (n_features,)).copy()
        if not (np.all(np.isfinite(h)) and np.all(h > 0)):
            raise ValueError(f"bandwidth must be finite and positive; got {h}.")
        return h

    def _scale(self, X: np.ndarray, name: str = "X") -> np.ndarray:
        with np.errstate(over="ignore"):  # an overflow is the error raised below
            Xs = X / self.bandwidth_
        if Xs.size and not np.abs(Xs).max() < _MAX_SCALED:
            raise ValueError(
                f"{name} divided by bandwidth_ overflows (|x / h| >= {_MAX_SCALED:g}); "
                "choose a larger bandwidth or rescale the features."
            )
        return Xs

    def _fit_inputs(self, X: np.ndarray, sample_weight) -> tuple[np.ndarray, np.ndarray]:
        """Resolve kernel and bandwidth; return the scaled X and the sample weights."""
        w = check_weights(sample_weight, X)
        self._kernel = get_kernel(self.kernel)
        self.bandwidth_ = self._resolve_bandwidth(X, w)
        return self._scale(X), w

    def _build(self, Xs: np.ndarray, w: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
        """Choose the algorithm (the one place that does) and prepare the training set.

        Returns the order in which the training set stores the rows (tree
        leaf order on the tree path, within each group): values must follow it.
        """
        with np.errstate(divide="ignore"):
            self._log_w = np.log(w)
        if self.algorithm != "auto":
            self._fit_method = self.algorithm
        else:
            self._fit_method = _engine.choose_algorithm(Xs, self._log_w, self._kernel, self.rtol)
        self._train = _engine.prepare_train(
            Xs, self._fit_method, self.leaf_size, active=w > 0, groups=groups, tree_order=True
        )
        self._log_w = self._log_w[self._train.order]
        trees = self._train.tree
        self.tree_ = trees[0] if trees is not None and groups is None else trees
        return self._train.order

    def _set_order(self, order: np.ndarray) -> None:
        """Record that stored row ``i`` is training row ``order[i]`` (and the inverse)."""
        self._order = order
        identity = np.array_equal(order, np.arange(len(order)))
        self._inverse_order = None if identity else np.argsort(order)

    def _engine_options(self) -> dict:
        return {"rtol": self.rtol, "n_jobs": self.n_jobs}

    def _queries(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._scale(X)

    def _attention(self, X: ArrayLike, fallback: str = "nearest") -> np.ndarray:
        """Attention weights with columns in training order (the engine's are in ``_order``)."""
        A = _engine.attention(
            self._queries(X), self._train, self._log_w, self._kernel,
            fallback=fallback, **self._engine_options(),
        )  # fmt: skip
        return A if self._inverse_order is None else A[:, self._inverse_order]


class NadarayaWatsonRegressor(RegressorMixin, _NWBase):
    """Nadaraya–Watson kernel regression: attention pooling of the targets.

    The prediction at a query ``q`` is the attention-weighted average of the
    training targets,

    ``f(q) = sum_i alpha_i(q) y_i``,  ``alpha_i(q) = w_i K(u_i) / sum_j w_j K(u_j)``,

    with ``u_i = ||(q - x_i) / h||`` (each feature divided by its own
    bandwidth).  For the Gaussian kernel ``alpha(q)`` is the softmax of
    ``-||(q - x_i) / h||^2 / 2``: the query attends to the keys ``x_i`` and
    pools the values ``y_i``.  Weights are computed in log space, so a tiny
    bandwidth gives the nearest training target, never ``0 / 0``.

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, \
default="scott"
        Kernel width ``h``, one per feature or shared.  The rules of thumb are
        computed per feature from a robust scale (see :func:`rule_of_thumb`).
    kernel : {"gaussian", "tophat", "boxcar", "epanechnikov", "exponential", \
"linear", "triangular", "cosine"}, default="gaussian"
        Kernel profile; "boxcar" is "tophat" and "triangular" is "linear".
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
        How the kernel sums are computed.  "brute" sums over every training
        point in chunks of queries; "kd_tree" / "ball_tree" build scikit-learn's
        tree on the scaled data at fit and sum over each query's neighbourhood
        (``query_radius``).  The algorithm changes speed, not results: compact
        kernels are exact on every path, infinite-support kernels agree to
        ``rtol``.  "auto" picks from the data size, dimension, kernel and the
        neighbourhood size that the bandwidth implies (see ``_fit_method``).
    leaf_size : int, default=40
        Leaf size of the tree.
    rtol : float, default=1e-16
        Tree path, infinite-support kernels (gaussian, exponential): each query
        sums over the radius outside which the total kernel mass is at most
        ``rtol`` times the mass inside, so the prediction differs from the
        exact one by at most ``rtol * (max(y) - min(y))`` (per output; class
        probabilities by at most ``rtol``).  The default changes nothing at
        float64 precision; larger values trade accuracy for speed; 0 sums over
        every point.  Brute force and compact kernels are always exact.
    fallback : {"nearest", "nan"}, default="nearest"
        What a compact kernel predicts at a query with no training point inside
        its support.  "nearest" (default) returns the ``h -> 0`` limit, the
        (weighted) mean target of the nearest training point(s); "nan" returns
        NaN, as R's ``ksmooth`` does.  Infinite-support kernels never need it.
    n_jobs : int, default=None
        Threads over chunks of queries at predict; ``None`` means 1 unless in a
        :func:`joblib.parallel_backend` context, ``-1`` means all processors.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    tree_ : KDTree, BallTree or None
        The tree over the bandwidth-scaled (centred) training inputs of
        positive weight, or None on the brute-force path.  It stores them in
        its own leaf order (close points close in memory), so its indices are
        not those of the training set.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    ParzenClassifier : The same attention pooling applied to one-hot labels.
    sklearn.neighbors.KNeighborsRegressor : Uniform weights over k neighbours.

    Notes
    -----
    Sample weights multiply the kernel weights (``w_i K(u_i)``) and act as
    frequency weights in the rules of thumb.  Memory at predict is bounded by
    ``sklearn.get_config()["working_memory"]`` whatever the number of queries
    and training points; only :meth:`attention_weights` returns an
    ``(n_queries, n_samples_fit)`` matrix, because that is what it is asked for.

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import NadarayaWatsonRegressor
    >>> X = np.linspace(0, 5, 50)[:, None]
    >>> y = 2 * np.sin(X[:, 0]) + X[:, 0] ** 0.8
    >>> reg = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    >>> reg.predict([[1.0], [2.5]]).round(3)
    array([2.602, 3.223])
    >>> reg.attention_weights([[1.0]]).sum().round(12)
    np.float64(1.0)
    """

    _parameter_constraints: dict = {
        **_NWBase._parameter_constraints,
        "fallback": [StrOptions({"nearest", "nan"})],
    }

    def __init__(
        self,
        bandwidth: float | ArrayLike | str = "scott",
        *,
        kernel: str = "gaussian",
        algorithm: str = "auto",
        leaf_size: int = 40,
        rtol: float = 1e-16,
        fallback: str = "nearest",
        n_jobs: int | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.fallback = fallback
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Store the bandwidth-scaled training set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (the keys).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (the values).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights with a positive sum.

        Returns
        -------
        self : NadarayaWatsonRegressor
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        Xs, w = self._fit_inputs(X, sample_weight)
        self._set_order(self._build(Xs, w))
        self._y = y.reshape(len(y), -1).astype(np.float64)[self._order]
        self._y_1d = y.ndim == 1
        return self

    def _pooled_targets(self) -> np.ndarray:
        """Return the values the engine pools, one row per stored training row."""
        return self._y

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Attention-weighted average of the training targets at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_targets)
            Predictions, shaped like the training targets.
        """
        pooled = _engine.pool(
            self._queries(X), self._train, self._log_w, self._y, self._kernel,
            fallback=self.fallback, **self._engine_options(),
        )  # fmt: skip
        return pooled[:, 0] if self._y_1d else pooled

    def attention_weights(self, X: ArrayLike) -> np.ndarray:
        """Return the attention weights ``alpha_i(q)`` of every query on every training point.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_samples_fit)
            Non-negative rows summing to 1 (NaN rows where ``fallback="nan"``
            leaves a query empty), columns in training order, so that
            ``attention_weights(X) @ y`` equals ``predict(X)``.
        """
        return self._attention(X, self.fallback)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class ParzenClassifier(ClassifierMixin, _NWBase):
    """Parzen-window classifier: Nadaraya–Watson regression on one-hot labels.

    With ``priors=None`` the class probabilities are the attention-pooled
    one-hot labels,

    ``P(c | q) = sum_{i in c} w_i K(u_i) / sum_i w_i K(u_i)``.

    This *is* the Parzen-window (kernel density) classifier: with empirical
    priors ``pi_c = W_c / W`` and class densities
    ``p(q | c) ∝ sum_{i in c} w_i K(u_i) / W_c`` (``W_c`` the class weight), Bayes'
    rule ``pi_c p(q | c) / sum_c' pi_c' p(q | c')`` cancels ``W_c`` and the
    kernel's normalising constant and gives the same expression.  Given
    ``priors``, ``P(c | q) ∝ pi_c sum_{i in c} w_i K(u_i) / W_c``.

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, \
default="scott"
        Kernel width ``h``, one per feature or shared (see :func:`rule_of_thumb`).
    kernel : {"gaussian", "tophat", "boxcar", "epanechnikov", "exponential", \
"linear", "triangular", "cosine"}, default="gaussian"
        Kernel profile.
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
        How the kernel sums are computed.  "brute" sums over every training
        point in chunks of queries; "kd_tree" / "ball_tree" build scikit-learn's
        tree on the scaled data at fit and sum over each query's neighbourhood
        (``query_radius``).  The algorithm changes speed, not results: compact
        kernels are exact on every path, infinite-support kernels agree to
        ``rtol``.  "auto" picks from the data size, dimension, kernel and the
        neighbourhood size that the bandwidth implies (see ``_fit_method``).
    leaf_size : int, default=40
        Leaf size of the tree.
    rtol : float, default=1e-16
        Tree path, infinite-support kernels (gaussian, exponential): each query
        sums over the radius outside which the total kernel mass is at most
        ``rtol`` times the mass inside, so the prediction differs from the
        exact one by at most ``rtol * (max(y) - min(y))`` (per output; class
        probabilities by at most ``rtol``).  The default changes nothing at
        float64 precision; larger values trade accuracy for speed; 0 sums over
        every point.  Brute force and compact kernels are always exact.
    priors : array-like of shape (n_classes,), default=None
        Class prior probabilities in ``classes_`` order.  None uses the
        (weighted) class frequencies of the training set.
    n_jobs : int, default=None
        Threads over chunks of queries at predict.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    class_prior_ : ndarray of shape (n_classes,)
        The priors in use: ``priors``, or the weighted class frequencies.
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    tree_ : list of KDTree or BallTree, or None
        One tree per class over the bandwidth-scaled (centred) training inputs
        of positive weight (so each class's log-probability keeps ``rtol``
        accuracy however far the class is), or None on the brute-force path.
        Trees store their points in leaf order: their indices are not those of
        the training set.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    NadarayaWatsonRegressor : The same attention pooling of real targets.

    Notes
    -----
    A compact kernel with no training point inside its support uses the
    ``h -> 0`` limit: the class shares of the nearest training point(s).
    Probabilities are computed in log space, with each class shifted by its own
    maximum, so ``predict_log_proba`` is finite wherever the probability is
    positive; it is ``-inf`` exactly where the probability is exactly 0 (no
    point of that class inside a compact kernel's support).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skl_nw import ParzenClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = ParzenClassifier().fit(X, y)
    >>> clf.predict(X[[0, 60, 120]])
    array([0, 1, 2])
    >>> clf.predict_proba(X[[70]]).round(3)
    array([[0.   , 0.558, 0.442]])
    """

    _parameter_constraints: dict = {
        **_NWBase._parameter_constraints,
        "priors": ["array-like", None],
    }

    def __init__(
        self,
        bandwidth: float | ArrayLike | str = "scott",
        *,
        kernel: str = "gaussian",
        algorithm: str = "auto",
        leaf_size: int = 40,
        rtol: float = 1e-16,
        priors: ArrayLike | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.priors = priors
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Store the bandwidth-scaled training set, sorted by class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels (any type scikit-learn accepts).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights with a positive sum.

        Returns
        -------
        self : ParzenClassifier
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        priors = self._check_priors(n_classes)
        Xs, w = self._fit_inputs(X, sample_weight)
        class_weight = np.bincount(y_enc, weights=w, minlength=n_classes)
        self.class_prior_ = class_weight / class_weight.sum() if priors is None else priors

        # Sorted by class, each class is a contiguous block of training rows.
        order = np.argsort(y_enc, kind="stable")
        self._starts = np.searchsorted(y_enc[order], np.arange(n_classes))
        w, y_sorted = w[order], y_enc[order]
        if priors is not None:
            # P(c | q) ∝ pi_c sum_{i in c} w_i K_i / W_c: rescale each class's weights.
            # w_i / W_c <= 1 cannot overflow; a class of zero weight gives 0 / 0 -> 0.
            with np.errstate(divide="ignore", invalid="ignore"):
                w = w / class_weight[y_sorted] * priors[y_sorted]
            w = np.where(np.isfinite(w), w, 0.0)
        self._set_order(order[self._build(Xs[order], w, groups=self._starts)])
        return self

    def _pooled_targets(self) -> np.ndarray:
        """One-hot labels of the stored (class-sorted) training rows."""
        counts = np.diff(np.append(self._starts, self._train.n_samples))
        labels = np.repeat(np.arange(len(self.classes_)), counts)
        return np.eye(len(self.classes_))[labels]

    def _check_priors(self, n_classes: int) -> np.ndarray | None:
        if self.priors is None:
            return None
        priors = np.asarray(self.priors)
        if priors.dtype.kind not in "iuf" or priors.shape != (n_classes,):
            raise ValueError(
                f"priors must be an array of shape (n_classes,) = ({n_classes},) with one "
                f"probability per class in classes_ order; got {self.priors!r}."
            )
        priors = priors.astype(np.float64)
        if not (np.all(np.isfinite(priors)) and np.all(priors >= 0)):
            raise ValueError(f"priors must be non-negative and finite; got {priors}.")
        if not np.isclose(priors.sum(), 1.0):
            raise ValueError(f"priors must sum to 1; got sum {priors.sum()}.")
        return priors / priors.sum()

    def _log_class_sums(self, X: ArrayLike) -> np.ndarray:
        return _engine.log_group_sums(
            self._queries(X), self._train, self._log_w, self._starts, self._kernel,
            relative=True, **self._engine_options(),
        )  # fmt: skip

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log class probabilities, computed in log space.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``log P(c | q)`` in ``classes_`` order.
        """
        L = self._log_class_sums(X)
        # Shift each row by its maximum first: far from the data (log sums near
        # -1e24) logsumexp's own ``max + log(sum)`` rounds the log(sum) away and
        # the probabilities no longer sum to 1.
        top = L.max(axis=1, keepdims=True)
        L -= np.where(np.isfinite(top), top, 0.0)
        return L - logsumexp(L, axis=1, keepdims=True)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities: the attention-pooled one-hot labels.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``P(c | q)`` in ``classes_`` order; rows sum to 1.
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict the most probable class at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,)
            Labels from ``classes_``.
        """
        best = np.argmax(self._log_class_sums(X), axis=1)
        return self.classes_[best]

    def attention_weights(self, X: ArrayLike) -> np.ndarray:
        """Return the attention weights of every query on every training point.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_samples_fit)
            Non-negative rows summing to 1, columns in training order, so that
            ``attention_weights(X) @ onehot(y)`` equals ``predict_proba(X)``.
        """
        return self._attention(X)
