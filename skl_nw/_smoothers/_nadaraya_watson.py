"""NadarayaWatsonRegressor: a thin API layer over the engine."""

from __future__ import annotations

from numbers import Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from .._inference._conditional import Y_RULES, _ConditionalMixin
from .._inference._diagnostics import _SummaryMixin
from .._inference._methods import _NWInferenceMixin
from .._kernels import KERNELS
from . import _loess
from ._base import _NWBase, _RegressorMixin, check_weights, rule_of_thumb

__all__ = ["NadarayaWatsonRegressor", "check_weights", "rule_of_thumb"]


class NadarayaWatsonRegressor(
    _ConditionalMixin, _SummaryMixin, _NWInferenceMixin, _RegressorMixin, _NWBase
):
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
"linear", "triangular", "cosine", "tricube", "biweight", "triweight"}, default="gaussian"
        Kernel profile; "boxcar" is "tophat" and "triangular" is "linear".
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, default="auto"
        How the kernel sums are computed.  "brute" sums over every training
        point in chunks of queries; "kd_tree" / "ball_tree" build scikit-learn's
        tree on the scaled data at fit and sum over each query's neighbourhood
        (``query_radius``).  The algorithm changes speed, not results: compact
        kernels are exact on every path, infinite-support kernels agree to
        ``rtol``.  "auto" picks from the data size, dimension, kernel and the
        neighbourhood size that the bandwidth implies (brute force below 1,000
        points, above 12 features and for the Gaussian whenever its weights
        fold into one matrix product; a ball tree where a query's neighbourhood
        holds a small share of the data); ``tree_`` shows the choice.
        "binned" (1 to 3 features) approximates the sums on a regular grid
        (linear binning, one FFT convolution, multilinear interpolation) to
        ``binned_tol``: see the user guide's "Binned path"; "auto" takes it
        only when ``binned_tol`` is set, from 100,000 training points on, and
        where its grid fits the path's memory limit.
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
    binned_tol : float in (0, 1), default=None
        Accuracy of ``algorithm="binned"``: the grid spacing is
        ``3 sqrt(binned_tol / d)`` bandwidths (``binned_tol / d`` for the
        tophat), and predictions on data with many points per bandwidth
        differ from the exact ones by at most about
        ``binned_tol * (max(y) - min(y))`` (class probabilities by about
        ``binned_tol``); the user guide states the bound and when it holds.
        None: 1e-4 with ``algorithm="binned"``, and "auto" never bins.
    span : float > 0, default=None
        Nearest-neighbour bandwidths (LOESS's span): each query's kernel scale
        is its distance, in the metric ``||(x - q) / bandwidth_||``, to its
        ``k``-th nearest training row, ``k = floor(span * n)`` (rows of positive
        weight, counted as rows, not weights; at least 1).  ``bandwidth`` then
        gives the metric's shape (``bandwidth=1.0`` is R's ``normalize=FALSE``);
        ``span > 1`` takes every row and enlarges the farthest one's distance by
        ``sqrt(span)``, as R's ``loess`` does.  Not with ``algorithm="binned"``.
        None: the bandwidth is fixed.  See the user guide's "LOESS and LOWESS".
    robust_iterations : int, default=0
        Cleveland's robustness iterations: each refits with the sample weights
        times the bisquare weights ``B(e_i / (6 median |e|))`` of the residuals
        at the training rows (statsmodels' ``lowess(it=...)``; R's
        ``family="symmetric"`` is 3).  Stops early when ``median |e|`` is 0 or
        rounding (at most ``1e-10`` of the largest ``|y|``).
        One-dimensional ``y`` only.

    categorical_features : "from_dtype", array-like of bool, int or str, or None, \
default="from_dtype"
        Features smoothed by a discrete kernel with a bandwidth ``lambda``
        instead of a continuous one: a boolean mask of shape (n_features,),
        integer indices, or feature names; "from_dtype" takes the pandas
        ``category`` columns of a DataFrame (numpy input stays continuous);
        None makes every feature continuous.  Their labels may be any hashable
        values (ints, strings, pandas categories); a category unseen at fit
        matches no training category; a missing value (NaN, None) is an error.
    ordered_features : "from_dtype", array-like of bool, int or str, or None, \
default="from_dtype"
        The categorical features whose categories are ordered, compared by
        the distance between their positions in the order (the sorted labels,
        or the pandas-declared order); same forms, "from_dtype" taking the
        ordered pandas categoricals.  A feature named here is categorical
        whether or not ``categorical_features`` names it.
    categorical_kernel : {"aitchison_aitken", "li_racine"}, default="aitchison_aitken"
        Kernel of the unordered categorical features: Aitchison–Aitken,
        ``1 - lambda`` for equal categories and ``lambda / (c - 1)`` otherwise
        (``c`` categories, ``0 <= lambda <= (c - 1) / c``), or Li–Racine, 1 and
        ``lambda`` (``0 <= lambda <= 1``).
    ordered_kernel : {"wang_van_ryzin", "li_racine"}, default="wang_van_ryzin"
        Kernel of the ordered features: Wang–van Ryzin, ``1 - lambda`` for
        equal categories and ``(1 - lambda) / 2 * lambda^|a - b|`` otherwise
        (``0 <= lambda < 1``), or Li–Racine, ``lambda^|a - b|``
        (``0 <= lambda <= 1``).  ``lambda = 0`` smooths nothing (only the
        query's own category counts); the largest ``lambda`` of the
        Aitchison–Aitken and Li–Racine kernels ignores the feature.
    y_bandwidth : float >= 0 or {"scott", "silverman"}, default="scott"
        Smoothing ``h_y`` of the predictive distribution of a 1-D ``y``
        (:meth:`predict_cdf`, :meth:`predict_pdf`, :meth:`predict_quantiles`):
        ``F(y | x) = sum_i alpha_i(x) G((y - y_i) / h_y)``.  0 gives the
        weighted empirical distribution of the targets (no density).  The
        default, Scott's rule for the joint density of ``(x, y)``
        (``scale(y) n^(-1 / (d + 5))``, as statsmodels' conditional densities),
        gives a distribution with a density and quantiles that move smoothly
        with ``x``; it is a marginal rule, so it over-smooths where the
        conditional spread is much smaller than the marginal one: choose it
        with ``BandwidthSearchCV(criterion="crps")``.  The mean prediction
        does not depend on it.
    y_kernel : str, default="gaussian"
        Kernel ``G`` integrates (any name of ``kernel``).

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    tree_ : KDTree, BallTree or None
        The tree over the bandwidth-scaled (centred) training inputs of
        positive weight, or None on the brute-force path.  It stores them in
        its own leaf order (close points close in memory), so its indices are
        not those of the training set.
    is_categorical_ : ndarray of bool of shape (n_features,)
        Which features are categorical.
    is_ordered_ : ndarray of bool of shape (n_features,)
        Which categorical features are ordered.
    categories_ : list of ndarray
        The categories of each categorical feature, in feature order and in
        code order (the pandas-declared categories, or the sorted labels seen
        at fit).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.
    n_neighbors_ : int or None
        The neighbour count ``k`` of ``span`` (None without it).
    robust_weights_ : ndarray of shape (n_samples,)
        The robustness weights of the last fit (all ones without iterations).
    y_bandwidth_ : float or None
        The resolved ``y_bandwidth`` (None for a 2-D ``y``).

    See Also
    --------
    KernelQuantileRegressor : Conditional quantiles as predictions.
    ParzenClassifier : The same attention pooling applied to one-hot labels.
    BandwidthSearchCV : Choose ``bandwidth`` by closed-form leave-one-out or SGD.
    sklearn.neighbors.KNeighborsRegressor : Uniform weights over k neighbours.

    Notes
    -----
    Sample weights multiply the kernel weights (``w_i K(u_i)``) and act as
    frequency weights in the rules of thumb.  Memory at predict is bounded by
    ``sklearn.get_config()["working_memory"]`` whatever the number of queries
    and training points; only :meth:`attention_weights` returns an
    ``(n_queries, n_samples_fit)`` matrix, because that is what it is asked for.

    Categorical features multiply the continuous kernel by their discrete
    kernels, ``w_i K(u_i) prod_j L_j(q_j, x_ij; lambda_j)``.  Where every
    training point has a discrete weight of 0 (``lambda = 0`` and a category
    no training point has), the points that differ from the query in the
    fewest categorical features count, weighted by the rest of their kernel:
    the ``lambda -> 0`` limit.

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
        **_loess.SPAN_CONSTRAINTS,
        **_loess.ROBUST_CONSTRAINTS,
        "y_bandwidth": [Interval(Real, 0, None, closed="left"), StrOptions(set(Y_RULES))],
        "y_kernel": [StrOptions(set(KERNELS))],
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
        binned_tol: float | None = None,
        categorical_features="from_dtype",
        ordered_features="from_dtype",
        categorical_kernel: str = "aitchison_aitken",
        ordered_kernel: str = "wang_van_ryzin",
        span: float | None = None,
        robust_iterations: int = 0,
        y_bandwidth: float | str = "scott",
        y_kernel: str = "gaussian",
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.fallback = fallback
        self.n_jobs = n_jobs
        self.binned_tol = binned_tol
        self.categorical_features = categorical_features
        self.ordered_features = ordered_features
        self.categorical_kernel = categorical_kernel
        self.ordered_kernel = ordered_kernel
        self.span = span
        self.robust_iterations = robust_iterations
        self.y_bandwidth = y_bandwidth
        self.y_kernel = y_kernel

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
        X_in = X
        X, y = self._validate_fit(X, y, sample_weight, multi_output=True, y_numeric=True)
        y = _loess.one_target(self, y)
        return self._fit_validated(X_in, X, y, check_weights(sample_weight, X))

    def _fit_validated(self, X_in, X: np.ndarray, y: np.ndarray, w: np.ndarray):
        """Fit on data that :meth:`_validate_fit` returned (``X_in`` the input of ``fit``).

        What a search reruns at each candidate bandwidth: the data and the
        parameters were validated by the first, public ``fit``.
        """
        Xs, w = self._fit_inputs(X, w, checked=True)
        self._y_1d = y.ndim == 1
        _loess.build(self, X_in, Xs, w, y.reshape(len(y), -1))
        self._fit_distribution(y, w)
        return self

    def predict(self, X: ArrayLike, return_std: bool = False):
        """Attention-weighted average of the training targets at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        return_std : bool, default=False
            Also return the pointwise standard error of the fit,
            ``se(q)^2 = sigma^2(q) sum_i w_i K_i^2 / (sum_i w_i K_i)^2``
            (scikit-learn's ``GaussianProcessRegressor`` convention), with the
            noise variance ``sigma^2(q)`` estimated from the residuals about the
            kernel-weighted least-squares line at ``q``, over their expectation
            per unit noise, ``1 - tr(G^-1 G2)`` (Fan & Gijbels; the user
            guide's "Inference" page).  A query with one effective neighbour
            has ``se = 0``.  It is the standard error of the smoothed curve:
            the smoother's bias is not included (see :meth:`predict_interval`).

        Returns
        -------
        y_mean : ndarray of shape (n_queries,) or (n_queries, n_targets)
            Predictions, shaped like the training targets.
        y_std : ndarray of the shape of y_mean
            Standard errors; only with ``return_std=True``.
        """
        if return_std:
            return self._predict_with_std(X)
        Q = self._queries(X)
        pooled = self._backend.pool(Q, self._kernel, self.fallback, self._options())
        return pooled[:, 0] if self._y_1d else pooled

    def attention_weights(self, X: ArrayLike, *, sparse: bool = False):
        """Return the attention weights ``alpha_i(q)`` of every query on every training point.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        sparse : bool, default=False
            Return a ``scipy.sparse`` CSR matrix of the non-zero weights instead
            of a dense array, whatever ``algorithm`` is: the compact form for
            compact kernels and large data.

        Returns
        -------
        ndarray or csr_matrix of shape (n_queries, n_samples_fit)
            Non-negative rows summing to 1 (NaN rows where ``fallback="nan"``
            leaves a query empty), columns in training order, so that
            ``attention_weights(X) @ y`` equals ``predict(X)``.  On the binned
            path they are the exact weights (the grid never forms per-point
            weights), so the product matches ``predict`` to ``binned_tol``.

        Raises
        ------
        MemoryError
            Before any work, when the dense matrix would exceed scikit-learn's
            ``working_memory`` budget (pass ``sparse=True``, or fewer queries).
        """
        return self._attention(X, self.fallback, sparse)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # robustness weights are one per row: robust_iterations > 0 takes a 1-D y
        tags.target_tags.multi_output = not getattr(self, "robust_iterations", 0)
        return tags
