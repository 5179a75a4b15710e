"""BandwidthSearchCV: closed-form leave-one-out grid, GridSearchCV, and SGD."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone, is_classifier
from sklearn.metrics import get_scorer_names
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metadata_routing import (
    UNUSED,
)
from sklearn.utils.validation import column_or_1d

from .._inference._formulas import CRITERIA
from . import _span
from ._context import Context
from ._crps import DISTRIBUTION_CRITERIA, check_distribution, fit_distribution
from ._delegation import _Delegation
from ._results import caller_level
from ._routes import check_criterion, closed_form, cross_validated, pipeline
from ._routing import _ESTIMATOR_ERROR, _nw_step, get_scorer, metadata_router, route, validate

__all__ = ["BandwidthSearchCV"]


class BandwidthSearchCV(_Delegation, MetaEstimatorMixin, BaseEstimator):
    """Select the bandwidths of a kernel regressor or classifier by cross-validation.

    It tunes :class:`NadarayaWatsonRegressor`, :class:`ParzenClassifier` and
    :class:`LocalPolynomialRegressor` (or a pipeline ending in one).  Four
    routes to the same goal, all minimising an honest out-of-sample
    loss (minimising the *training* loss fails: ``y_i`` is part of its own
    prediction, so the loss falls to 0 as ``h -> 0``):

    * ``method="grid", cv="loo"``: every candidate is scored by the
      exact closed-form leave-one-out predictions, without refitting; the
      distances of each chunk are computed once for all the candidates
      (multiples of one bandwidth vector), only the kernel per candidate.
    * ``method="grid"`` with any other ``cv``: scikit-learn's
      :class:`~sklearn.model_selection.GridSearchCV` over ``bandwidth``.
    * ``method="sgd"``: minibatch Adam on the log of each feature's bandwidth,
      minimising the leave-one-out loss (mean squared error, or log-loss for
      the classifier) with analytic gradients.  A feature that carries no
      signal drifts to a large bandwidth (automatic relevance determination).
    * ``method="lbfgs"``: the same loss and gradients over every training row
      at once, minimised by scipy's L-BFGS-B (quasi-Newton): deterministic,
      and a handful of passes where SGD needs tens of epochs; it converges
      to the nearest local minimum of the leave-one-out loss, from the rule of
      thumb (as statsmodels' ``cv_ls`` does, by Nelder-Mead).
    * ``method="auto"`` (default): one of them, chosen from the data at fit
      (``method_``): the closed-form grid for continuous features (one pass
      for all 40 candidates, the global optimum of one bandwidth scale;
      extended past an end where its best is one); L-BFGS-B from the rule of
      thumb where there are categorical features (their default grid has
      ``40 x 7^J`` candidates for J of them: 13,720 for three, tens of seconds,
      where L-BFGS-B learns every lambda in a fraction of that and reaches a
      lower leave-one-out loss); with a ``cv`` other than "loo" on
      categorical features, GridSearchCV over 15 candidates around the
      L-BFGS-B optimum.  Given ``bandwidths``, an in-sample ``criterion`` or
      the tophat kernel (which has no gradient), the grid.

    Parameters
    ----------
    estimator : NadarayaWatsonRegressor, ParzenClassifier, LocalPolynomialRegressor or Pipeline
        The estimator whose ``bandwidth`` is selected; its other parameters
        are kept.  A :class:`~sklearn.pipeline.Pipeline` whose last step is
        one of them has that step's bandwidth selected (see Notes).
    method : {"auto", "grid", "sgd", "lbfgs"}, default="auto"
        Grid search, stochastic gradient descent, full-batch L-BFGS-B, or
        the one of them that suits the data (see above; ``method_``).
    bandwidths : array-like, default=None
        Grid candidates: a list of positive scalars or of per-feature arrays.
        None uses 40 log-spaced multiples, 2^(k/4) from 0.022 to 19, of the per-feature
        rule of thumb (the estimator's "scott" / "silverman", else "scott"),
        with ``cv="loo"`` on continuous data extended by 8 more multiples (up
        to 3 times) while the best is an end.  A best candidate that is still
        the grid's smallest or largest bandwidth warns (UserWarning): the
        optimum may lie beyond.  With categorical features (the estimator's
        ``categorical_features``), a candidate holds a ``lambda`` at each
        categorical feature's position, and None crosses the multiples of the
        continuous rule of thumb with the lambdas 0, 0.05, 0.1, 0.2, 0.4, 0.7
        and 1 times each feature's largest (0.95 for the Wang–van Ryzin
        kernel, whose largest is excluded): for ``cv="loo"`` every lambda
        vector of the grid is scored from one pass (the sums per cell of
        categories do not depend on lambda), by leave-one-out or by an
        in-sample ``criterion`` alike.
    spans : array-like of float, default=None
        Candidate spans, used when the estimator has a ``span`` set: the
        search then selects the span (the bandwidth stays the estimator's: it
        is the metric's shape, and a common multiple of it changes no
        nearest-neighbour fit).  None: ``2^(k/4)`` from 1/32 to 1, those
        leaving each local fit more rows than its coefficients (and at least
        5).  Each candidate is one fit; ``cv="loo"`` scores its closed-form
        leave-one-out (row ``i`` left out: its ``k``-th neighbour is taken among
        the other rows) or its ``criterion`` ("aicc", "gcv": the trace of its
        smoother, at its final robustness weights); any other ``cv`` is
        GridSearchCV's over ``span``.  ``span_`` and ``best_params_["span"]``
        hold the choice.  Needs ``method="grid"`` or "auto" and the estimator
        itself (not a pipeline).
    cv : "loo", int, cross-validation generator or iterable, default="loo"
        "loo" scores the closed-form leave-one-out predictions; anything else
        is passed to GridSearchCV (``None`` is its 5-fold default).  Only
        ``method="grid"`` and ``"auto"`` use it.
    scoring : str or callable, default=None
        Scorer applied to the out-of-sample predictions.  None means negative
        mean squared error for regressors and negative log-loss for classifiers.
    criterion : {"loo", "aicc", "gcv"}, default="loo"
        What the candidates are scored by.  "loo": ``scoring`` of the
        out-of-sample predictions (``cv``).  For regressors, two in-sample
        criteria that need one fit per candidate, no held-out point:
        "aicc", the corrected AIC of Hurvich, Simonoff & Tsai (1998),
        ``log sigma^2 + (1 + tr(H) / n) / (1 - (tr(H) + 2) / n)`` (+inf where the
        denominator is not positive or ``sigma^2 = 0``), and "gcv", generalised
        cross-validation, ``sigma^2 / (1 - tr(H) / n)^2`` (+inf where
        ``tr(H) >= n``); where every candidate is infinite, a ValueError says
        which of these held (e.g. AICc on 3 points, or a constant y).
        ``sigma^2`` is the mean squared in-sample residual, ``tr(H) = sum_i
        H_ii`` the trace of the smoother (``H_ii`` a point's weight in its own
        fit), sample weights frequency weights (``n = sum w``).
        ``best_score_`` and ``mean_test_score`` then hold the negated
        criterion.  They need ``method="grid"`` and
        ``cv="loo"`` and take no ``scoring``.
        "crps" (a :class:`NadarayaWatsonRegressor`) and "pinball" (a
        :class:`KernelQuantileRegressor`) score the predictive distribution
        instead: the leave-one-out continuous ranked probability score, or the
        pinball loss of the leave-one-out quantiles, in closed form from the
        attention weights (``cv="loo"``; GridSearchCV for any other ``cv``).
        They choose ``bandwidth`` and, when the estimator's ``y_bandwidth`` is
        a rule, ``y_bandwidth`` too (1/16 to 2 times the rule), alternating
        scans of the two grids; ``best_params_`` holds both.  At
        ``y_bandwidth=0`` the CRPS is the weighted empirical one.  See the
        user guide's "Conditional distributions and quantiles".
    per_feature : bool or "auto", default="auto"
        For ``method="sgd"`` and ``"lbfgs"``: learn one bandwidth per feature (True) or one
        common multiple of the rule of thumb (False).  "auto": per feature for
        regressors (relevance determination), one common multiple for
        classifiers (on load_digits per-feature L-BFGS-B took 12x the time
        for a worse held-out log-loss: a classifier's leave-one-out log-loss
        over many features overfits per-feature bandwidths).  The lambda of each
        categorical feature is always learnt on its own, through
        ``lambda = lambda_max sigmoid(theta)`` (an unconstrained transform).
    max_iter : int, default=200
        Maximum number of SGD epochs (passes over the training rows), or of
        L-BFGS-B iterations.
    learning_rate : float, default=0.05
        Adam step size in log-bandwidth units (0.05 is a 5% change per step).
    batch_size : int or "auto", default="auto"
        Training rows per SGD step, each scored against all others;
        "auto" is ``min(256, n_samples)``.
    tol : float or None, default=1e-4
        SGD stops when the epoch loss has not improved by ``tol`` times the
        best loss so far (a relative tolerance, so the scale of ``y`` does not
        matter) for ``n_iter_no_change`` epochs; None runs ``max_iter`` epochs.
        L-BFGS-B stops when an iteration lowers the loss by at most ``tol``
        times the starting loss.
    n_iter_no_change : int, default=5
        Patience of the early stopping.
    random_state : int, RandomState instance or None, default=None
        Seeds the SGD minibatch order; an int makes results reproducible bit
        for bit.
    n_jobs : int, default=None
        Threads for the closed-form leave-one-out, workers for GridSearchCV.
    verbose : int, default=0
        Progress on standard output; it never changes what is computed.  1: a
        start line (samples, features, candidates or epochs, the path, what
        scores the candidates: "binned grid", brute force or a tree's class),
        a progress line with the fraction done and the time left at most every
        few seconds (within a long pass, the training rows done), and a final line
        with the selected bandwidths' range and the time taken.  2: also one
        line per candidate score, SGD epoch or L-BFGS-B iteration (its loss).
        3: whole bandwidth
        vectors instead of their range.  With ``cv`` other than "loo",
        GridSearchCV's own messages.

    Attributes
    ----------
    best_estimator_ : estimator
        The wrapped estimator (or pipeline) refitted on all the data with
        ``bandwidth_``.
    bandwidth_ : ndarray of shape (n_features,)
        The selected bandwidths, equal to ``best_estimator_.bandwidth_`` (for
        a pipeline, its last step's).
    best_score_ : float
        Score of the selected bandwidths (leave-one-out, or mean CV score),
        in the units of ``y``.  The closed-form routes select on ``y``
        divided by a power of two near its spread (exact), so the choice
        does not depend on the scale of ``y``; a squared error beyond the
        float range (``y ~ 1e200``) is reported as ``-inf``.
    best_params_ : dict
        ``{"bandwidth": ...}``, the selected bandwidths (every method);
        ``{"<last step>__bandwidth": ...}`` for a pipeline, ``{"span": ...}``
        when the span is selected, with ``"y_bandwidth"`` for the criteria
        "crps" and "pinball".
    best_index_ : int
        Index of the selected candidate in ``cv_results_`` (grid).
    cv_results_ : dict of ndarrays
        As GridSearchCV's (grid only).  On the closed-form path the splits
        are the training rows: no ``split<i>_test_score`` keys (one per row),
        ``std_test_score`` the weighted standard deviation of the rows'
        scores (NaN for a given ``scoring``, an in-sample ``criterion`` and
        the mixed-data grid, which keep no per-row terms), and the times
        each candidate's share of the predictions computed for all of them.
    span_ : float or None
        The selected span (None when the estimator has no span).
    method_ : str
        The method run: ``method``, or what "auto" chose ("grid", "lbfgs").
    loss_curve_ : list of float
        Leave-one-out loss of each SGD epoch or L-BFGS-B iteration.
    n_iter_ : int
        Number of SGD epochs or L-BFGS-B iterations run; for
        ``method="grid"``, the number of candidates scored.
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
    (or ``"lbfgs"``) cannot move it: use ``method="grid"`` for that kernel.

    A pipeline ending in a Nadaraya–Watson estimator: on the leave-one-out
    paths (``cv="loo"``, ``method="sgd"`` or ``"lbfgs"``) its preceding steps are fitted once
    on the training data and the search runs on their output, exactly as
    ``make_pipeline(StandardScaler(), BandwidthSearchCV(NadarayaWatsonRegressor()))``
    does; ``best_estimator_`` is the whole pipeline refitted with the selected
    bandwidth.  With any other ``cv``, GridSearchCV searches the pipeline's
    ``<last step>__bandwidth``, refitting the preceding steps on every split.
    Without metadata routing, ``sample_weight`` goes to every step whose
    ``fit`` takes it, and weights the held-out folds' scores as well (whatever
    the version of scikit-learn, whose own search weights a pipeline's fits
    only).

    Metadata routing (``sklearn.set_config(enable_metadata_routing=True)``):
    ``sample_weight`` goes where the estimator asks for it
    (``set_fit_request``, ``set_score_request``); the default scorer asks for
    what the estimator's ``score`` asks for, and a given scorer for what its
    own ``set_score_request`` says.  The leave-one-out paths weight fits and
    scores alike, so they need both requests or neither; with an integer
    ``cv``, GridSearchCV routes each one separately.

    Binned estimators (``algorithm="binned"``, or a ``binned_tol`` that
    ``algorithm="auto"`` takes): the binned grid's size grows as ``h^-d``
    (some 1e9 nodes at the smallest default candidate for 300 points in 2-D),
    so a candidate's leave-one-out predictions come from the grid only where
    it holds at most ``n^2 / 16`` nodes (``n`` training points: beyond that
    the exact path is cheaper) and within the binned path's memory limit;
    the smaller candidates are scored on the exact path, exactly as the
    estimator with ``algorithm="auto"`` scores them.  The in-sample criteria
    and the local polynomial's leave-one-out are exact on every algorithm,
    so those searches run entirely on the exact path, whose neighbour search
    is chosen by measurement as for ``algorithm="auto"``.  ``best_estimator_``
    is refitted with the estimator's own algorithm.

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
        "method": [StrOptions({"auto", "grid", "sgd", "lbfgs"})],
        "bandwidths": ["array-like", None],
        "spans": ["array-like", None],
        "cv": ["cv_object", StrOptions({"loo"})],
        "scoring": [StrOptions(set(get_scorer_names())), callable, None],
        "criterion": [StrOptions({*CRITERIA, *DISTRIBUTION_CRITERIA})],
        "per_feature": ["boolean", StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }
    # sample_weight is routed to the estimator and the scorer (get_metadata_routing),
    # never consumed here: no set_fit_request / set_score_request of our own.
    __metadata_request__fit = {"sample_weight": UNUSED}
    __metadata_request__score = {"sample_weight": UNUSED}

    def __init__(
        self,
        estimator,
        *,
        method: str = "auto",
        bandwidths: ArrayLike | None = None,
        spans: ArrayLike | None = None,
        cv="loo",
        scoring=None,
        criterion: str = "loo",
        per_feature: bool | str = "auto",
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
        self.spans = spans
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
            Frequency weights, used in the fits and in the leave-one-out loss
            (with metadata routing, where the estimator and the scorer ask
            for them).

        Returns
        -------
        self : BandwidthSearchCV
            The fitted search.
        """
        step = _nw_step(self.estimator)
        if step is None:
            raise ValueError(_ESTIMATOR_ERROR.format(type(self.estimator).__name__))
        _span.check_spans(self, step)  # spans= needs an estimator with a span
        ctx = Context.of(self, get_scorer(self.estimator, self.scoring))
        given = X
        selection, X, y, fit_params = self._run_search(ctx, step, X, y, sample_weight)
        for name, value in vars(selection).items():
            if value is not None:
                setattr(self, name, value)
        self.span_ = selection.span_
        # The refit takes a DataFrame as given, so that predict checks its column names.
        named = hasattr(given, "columns") and not hasattr(X, "columns")
        if selection.best_estimator_ is None or named:  # else the route refitted it
            best = clone(self.estimator).set_params(**selection.best_params_)
            self.best_estimator_ = best.fit(given if named else X, y, **fit_params)
        self.bandwidth_ = _nw_step(self.best_estimator_).bandwidth_.copy()
        if self.criterion in DISTRIBUTION_CRITERIA:
            self.y_bandwidth_ = self.best_estimator_.y_bandwidth_
        return self

    def _run_search(self, ctx: Context, step, X, y, sample_weight) -> tuple:
        """Take the one route the parameters call for; return it with the refit's data.

        Returns ``(selection, X, y, fit_params)``: the route's selection, the
        data (validated where the route validated it) and what the refit of
        ``best_estimator_`` passes to ``fit``.
        """
        if self.criterion in DISTRIBUTION_CRITERIA:  # proper scores of the distribution
            check_distribution(ctx, None)  # the parameters, before the data
            X, y = validate(self, self.estimator, X, y)
            if y.ndim == 2 and y.shape[1] == 1:  # a column, as scikit-learn's regressors take it
                y = column_or_1d(y, warn=True)
            weights = {} if sample_weight is None else {"sample_weight": sample_weight}
            return fit_distribution(ctx, X, y, sample_weight), X, y, weights
        loo_cv = isinstance(self.cv, str) and self.cv == "loo"
        check_criterion(ctx, is_classifier(self.estimator))
        if self.method not in ("grid", "auto") and not loo_cv:
            warnings.warn(
                f"cv is ignored by method={self.method!r}, which minimises the closed-form "
                "leave-one-out loss; it applies to method='grid' (and 'auto') only.",
                UserWarning,
                stacklevel=caller_level(),
            )
        # Any cv but "loo" is GridSearchCV's: method="grid", or "auto" (which then means it).
        closed = loo_cv or self.method not in ("grid", "auto")
        routed = route(self, sample_weight)
        if _span.selects_span(step):  # LOESS: the span, one fit per candidate
            X, y = validate(self, self.estimator, X, y)
            return _span.fit_span(ctx, X, y, routed, loo_cv), X, y, routed.fit
        if step is not self.estimator:
            return pipeline(self, ctx, X, y, routed, closed), X, y, routed.fit
        X, y = validate(self, self.estimator, X, y)
        if closed:
            selection = closed_form(ctx, X, y, routed.nw, routed.score)
        else:
            selection = cross_validated(ctx, X, y, routed, ctx.continuous_mask(X))
        return selection, X, y, routed.fit

    def get_metadata_routing(self):
        """Get the metadata routing of this object.

        ``fit``'s metadata goes to the estimator's ``fit`` and to the scorer
        (the default scorer asks for what the estimator's ``score`` asks for),
        ``score``'s to the estimator's ``score``.

        Returns
        -------
        routing : MetadataRouter
            The routing information.
        """
        return metadata_router(self)
