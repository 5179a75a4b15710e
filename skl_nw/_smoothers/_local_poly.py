"""LocalPolynomialRegressor: the kernel-weighted least-squares polynomial at each query."""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._engine import BinnedLocalFit, Moments, fit_local, npar
from .._inference._diagnostics import _SummaryMixin
from .._inference._local import _LocalInferenceMixin
from .._inference._local_variance import local_sums
from .._inference._methods import local_constant_gradient
from .._inference._recentred import local_fits
from . import _loess
from ._base import _NWBase, _RegressorMixin, target_frame
from ._local_loo import LocalLeaveOneOut
from ._local_mixed import MixedLocalLeaveOneOut

__all__ = ["LocalPolynomialRegressor"]

# Smallest eigenvalue of the continuous features' correlation matrix below which they
# are affinely dependent, so every neighbourhood's are (the solve's floor is 1e-4).
_COLLINEAR = 1e-10


def _warn_if_collinear(est, Xs: np.ndarray, w: np.ndarray) -> None:
    """Warn where the continuous features are affinely dependent: every fit drops to degree 0.

    One-hot columns that sum to 1, or a column that is a combination of the
    others: no neighbourhood can tell their slopes apart, and the solve
    drops whole degrees (see Notes), so the fit is Nadaraya–Watson's.
    Constant columns are left out by the solve and do not count.
    """
    cats = getattr(est, "_categories", None)
    Z = Xs[w > 0][:, : int((~cats.mask).sum())] if cats is not None else Xs[w > 0]
    Z = Z - Z.mean(axis=0)
    Z = Z[:, np.abs(Z).max(axis=0, initial=0.0) > 0]
    if Z.shape[1] < 2 or len(Z) <= Z.shape[1]:
        return
    Z /= np.abs(Z).max(axis=0)
    C = Z.T @ Z
    s = np.sqrt(np.diag(C))
    if np.linalg.eigvalsh(C / np.outer(s, s))[0] < _COLLINEAR:
        warnings.warn(
            "LocalPolynomialRegressor: the continuous features are collinear (one-hot "
            "columns that sum to 1, or a column that combines others), so every local fit "
            "drops to degree 0, the Nadaraya-Watson fit. Drop a column (e.g. "
            "OneHotEncoder(drop='first')) or declare the categories with "
            "categorical_features.",
            UserWarning,
            stacklevel=3,
        )


class LocalPolynomialRegressor(_SummaryMixin, _LocalInferenceMixin, _RegressorMixin, _NWBase):
    r"""Local polynomial kernel regression: a weighted least-squares polynomial at each query.

    At a query ``q`` the training points get the attention weights of
    :class:`NadarayaWatsonRegressor`, ``w_i K(u_i)`` (a softmax for the
    Gaussian); instead of their weighted *mean*, the prediction is the value
    at ``q`` of the weighted least-squares polynomial of total degree
    ``<= degree`` in ``x - q`` (every monomial, cross terms included), with
    :math:`\phi` the vector of those monomials (``1`` first):

    .. math::

        \hat\beta(q) = \arg\min_\beta \sum_i w_i K(u_i)
        \bigl(y_i - \phi(x_i - q)^\top \beta\bigr)^2,
        \qquad \hat f(q) = \hat\beta_0 .

    ``degree=0`` is the Nadaraya–Watson estimator; ``degree=1`` (local
    linear) removes its bias at the boundary of the data and where the inputs
    are unevenly spread, and gives derivative estimates (:meth:`predict_gradient`).

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, default="scott"
        Kernel width ``h``, one per feature or shared (see :func:`rule_of_thumb`).
    kernel : str, default="gaussian"
        Kernel profile: "gaussian", "tophat", "boxcar", "epanechnikov",
        "exponential", "linear", "triangular", "cosine", "tricube" (LOESS's),
        "biweight" or "triweight".
    degree : int, default=1
        Total degree of the local polynomial: 0 (local constant, the
        Nadaraya–Watson estimator), 1 (local linear), 2 (local quadratic), ...
        The fit has ``C(d + degree, degree)`` coefficients and its moment sums
        ``C(d + 2 degree, d)`` columns (35 for ``degree=2``, ``d=3``).
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, default="auto"
        How the kernel sums are computed, as for :class:`NadarayaWatsonRegressor`:
        compact kernels are exact on every path, infinite-support kernels
        agree to ``rtol``.  "binned" (1 to 3 features) fits the local
        polynomial at the nodes of a regular grid from binned moments and
        interpolates, within ``binned_tol`` (see the user guide's "Binned
        path"); "auto" takes it only when ``binned_tol`` is set, from 100,000
        training points on, and where its grid fits the path's memory limit.
    leaf_size : int, default=40
        Leaf size of the tree.
    rtol : float, default=1e-16
        Tree path, infinite-support kernels: the kernel mass left outside each
        query's search radius is at most ``rtol`` times the mass inside.
    fallback : {"nearest", "nan"}, default="nearest"
        What a compact kernel predicts at a query with no training point inside
        its support, as for :class:`NadarayaWatsonRegressor`: "nearest" fits
        the nearest training point(s), each with ``K = 1`` (the ``h -> 0``
        limit: one nearest point gives its target), "nan" returns NaN (prediction,
        standard error, gradient, attention weights; a leave-one-out
        prediction too, which the search scores as the worst).
        Infinite-support kernels never need it.
    binned_tol : float in (0, 1), default=None
        Accuracy of ``algorithm="binned"``: the grid spacing is that of
        :class:`NadarayaWatsonRegressor`'s binned path divided by
        ``sqrt(2 degree)``, so that predictions stay within about
        ``binned_tol * (max(y) - min(y))`` of the exact ones where the data
        has many points per bandwidth.  None: 1e-4 with ``algorithm="binned"``,
        and "auto" never bins.
    n_jobs : int, default=None
        Threads over chunks of queries at predict.
    categorical_features : "from_dtype", array-like of bool, int or str, None, default="from_dtype"
        Features smoothed by a discrete kernel with a bandwidth ``lambda``
        instead of a continuous one: a boolean mask of shape (n_features,),
        integer indices, or feature names; "from_dtype" takes the pandas
        ``category`` columns of a DataFrame (numpy input stays continuous);
        None makes every feature continuous.  Their labels may be any hashable
        values (ints, strings, pandas categories); a category unseen at fit
        matches no training category; a missing value (NaN, None) is an error.
    ordered_features : "from_dtype", array-like of bool, int or str, None, default="from_dtype"
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
        Categorical features enter through the weights only: the local
        polynomial is in the continuous features; with no continuous feature
        at all, the fit is the weighted mean of the targets under the
        discrete kernels (:class:`NadarayaWatsonRegressor`'s).
    span : float > 0, default=None
        Nearest-neighbour bandwidths (LOESS's span), as for
        :class:`NadarayaWatsonRegressor`: each query's kernel scale is its
        distance to its ``k = floor(span * n)``-th nearest training row in the
        metric ``||(x - q) / bandwidth_||``.  Not with ``algorithm="binned"``.
    robust_iterations : int, default=0
        Cleveland's robustness iterations, as for
        :class:`NadarayaWatsonRegressor`: ``LocalPolynomialRegressor(kernel="tricube",
        degree=1, span=f, robust_iterations=it)`` is statsmodels' ``lowess(frac=f,
        it=it, delta=0)`` at the training rows.  One-dimensional ``y`` only.

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    tree_ : KDTree, BallTree or None
        The tree over the bandwidth-scaled (centred) training inputs, in its
        own leaf order, or None on the brute-force path.
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

    See Also
    --------
    NadarayaWatsonRegressor : The local-constant fit (``degree=0``).
    BandwidthSearchCV : Choose ``bandwidth`` by closed-form leave-one-out or SGD.

    Notes
    -----
    Every sum comes from one engine call per block of queries: kernel-weighted
    sums of the monomials of the scaled training inputs (up to degree
    ``2 degree``) and of the targets times them (up to ``degree``), moved to
    the query by the binomial expansion.  The expansion cancels for queries far
    from the training mean: moments of degree ``k`` lose about
    ``(R / s)^k`` in relative precision (``R`` the query's distance from the
    mean, ``s`` the local spread, both in bandwidths).

    A local problem can be degenerate: fewer neighbours than coefficients
    inside a compact kernel's support, neighbours on a line, a bandwidth so
    small or a query so far from the data that one point dominates the
    weights.  The fit then keeps what the neighbourhood determines.  A basis
    function with no variance over the neighbourhood is left out (neighbours
    on the line ``x_2 = c`` give the one-dimensional fit along it, slope 0
    across it).  Each query then uses the highest degree ``<= degree`` whose
    local correlation matrix of the basis has no eigenvalue below ``1e-4``,
    down to degree 0, the Nadaraya–Watson value (one neighbour; a compact
    kernel with no neighbour at all predicts the nearest training target(s),
    its ``h -> 0`` limit, or NaN with ``fallback="nan"``).  The solved
    problems are thus well-conditioned: the rounding of the kernel sums
    reaches the predictions amplified at most
    ``1e4`` times (about ``1e-8`` of the targets' scale), and finite input
    always gives a finite prediction.  Where the degree drops the prediction
    (and its gradient) jumps: a sign that the bandwidth is too small for the
    degree there.

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import LocalPolynomialRegressor
    >>> X = np.linspace(0, 1, 50)[:, None]
    >>> y = 3 * X[:, 0] + 1
    >>> reg = LocalPolynomialRegressor(bandwidth=0.1).fit(X, y)
    >>> # a line is reproduced exactly, even at the boundary:
    >>> reg.predict([[0.0], [0.5]]).round(6)
    array([1. , 2.5])
    >>> reg.predict_gradient([[0.0]]).round(6)
    array([[3.]])
    """

    # Its leave-one-out is exact on every algorithm (a binned fit's grid serves predict).
    _binned_leave_one_out = False

    _parameter_constraints: dict = {
        **_NWBase._parameter_constraints,
        "degree": [Interval(Integral, 0, None, closed="left")],
        "fallback": [StrOptions({"nearest", "nan"})],
        **_loess.SPAN_CONSTRAINTS,
        **_loess.ROBUST_CONSTRAINTS,
    }

    def __init__(
        self,
        bandwidth: float | ArrayLike | str = "scott",
        *,
        kernel: str = "gaussian",
        degree: int = 1,
        algorithm: str = "auto",
        leaf_size: int = 40,
        rtol: float = 1e-16,
        fallback: str = "nearest",
        binned_tol: float | None = None,
        n_jobs: int | None = None,
        categorical_features="from_dtype",
        ordered_features="from_dtype",
        categorical_kernel: str = "aitchison_aitken",
        ordered_kernel: str = "wang_van_ryzin",
        span: float | None = None,
        robust_iterations: int = 0,
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.degree = degree
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.fallback = fallback
        self.binned_tol = binned_tol
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.ordered_features = ordered_features
        self.categorical_kernel = categorical_kernel
        self.ordered_kernel = ordered_kernel
        self.span = span
        self.robust_iterations = robust_iterations

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Store the bandwidth-scaled training set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights with a positive sum; they multiply the kernel
            weights of the local least-squares problems.

        Returns
        -------
        self : LocalPolynomialRegressor
            The fitted estimator.
        """
        X_in = X
        X, y = self._validate_fit(X, y, sample_weight, multi_output=True, y_numeric=True)
        y = _loess.one_target(self, y)
        Xs, w = self._fit_inputs(X, sample_weight)
        if self.degree > 0:
            _warn_if_collinear(self, Xs, w)
        self._y_1d = y.ndim == 1
        _loess.build(self, X_in, Xs, w, y.reshape(len(y), -1))
        return self

    def _local(self, Q: np.ndarray, mom: Moments, powers=(1,), values=None, extra=None):
        """Yield ``(block, q, sums)`` over blocks of scaled queries (``q`` centred).

        Value columns ``mom.values(Z, values)`` (default: the training targets),
        then the columns ``extra`` (n, e) if given (:func:`local_sums`).
        """
        return local_sums(self, Q, mom, powers, values, extra)

    def _fit_degree(self) -> int:
        """``degree``, lowered to the number of points of positive weight (see Notes)."""
        return self._backend.usable_degree(self.degree)

    def _coefficients(self, Q: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Local coefficients about each scaled query, scaled units: (m, P, k).

        ``values`` (n, k) replaces the training targets (the fit is linear in them).
        """
        train = self._exact_train()
        d = train.d  # the continuous features
        Y = train.to_caller(train.values) if values is None else values
        k = Y.shape[1]
        centre, unit = target_frame(Y)
        degree = self._fit_degree()
        mom = Moments(d, 2 * degree, degree)
        coef = np.zeros((len(Q), npar(d, self.degree), k))

        def solve(q, sums):
            fitted, _, Mq, _ = fit_local(mom, *mom.read(sums, 0, 0, k), q, degree)
            return (fitted,), Mq

        (fitted,) = local_fits(self, Q, mom, degree, solve, values=(Y - centre) / unit)
        coef[:, : fitted.shape[1]] = fitted
        with np.errstate(over="ignore"):  # a fit or slope beyond the float range
            coef *= unit
            coef[:, 0] += centre
        return coef

    def predict(self, X: ArrayLike, return_std: bool = False):
        """Value of the local polynomial at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        return_std : bool, default=False
            Also return the pointwise standard error of the fit (scikit-learn's
            ``GaussianProcessRegressor`` convention).  The fit is linear in the
            targets, ``f(q) = sum_i l_i(q) y_i`` with the equivalent-kernel
            weights ``l_i(q) = w_i K_i phi(x_i - q) . G^-1 e_1 / sum_j w_j K_j``, and
            ``se(q)^2 = sigma^2(q) sum_i l_i(q)^2 / w_i``
            (``e_1' G^-1 G_2 G^-1 e_1 sigma^2(q)``, ``G_2`` the Gram matrix of the
            weights ``w_i K_i^2``), with the local residual variance
            ``sigma^2(q) = sum_i alpha_i(q) (y_i - phi(x_i - q) . beta(q))^2``
            (``alpha`` the attention weights).  At ``degree=0`` it is
            :class:`NadarayaWatsonRegressor`'s standard error (its noise variance
            about a local line).  A query with one
            effective neighbour (the degree drops to 0 there) has ``se = 0``.
            The smoother's bias is not included (see :meth:`predict_interval`).

        Returns
        -------
        y_mean : ndarray of shape (n_queries,) or (n_queries, n_targets)
            Predictions, shaped like the training targets.
        y_std : ndarray of the shape of y_mean
            Standard errors; only with ``return_std=True``.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import LocalPolynomialRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (400, 1))
        >>> y = 2 * X[:, 0] + rng.normal(0, 0.1, 400)
        >>> reg = LocalPolynomialRegressor(bandwidth=0.1).fit(X, y)
        >>> mean, std = reg.predict([[0.0], [0.5]], return_std=True)
        >>> mean.round(2), std.round(3)  # wider at the boundary
        (array([0.02, 1.  ]), array([0.023, 0.008]))
        """
        if return_std:
            return self._predict_with_std(X)
        Q = self._queries(X)
        self._check_extrapolation(Q)
        return self._shaped(self._backend.local_fit(Q, False, self._exact_fit)[0])

    def attention_weights(self, X: ArrayLike, *, sparse: bool = False):
        """Return the equivalent-kernel weights ``l_i(q)`` of every query on every training point.

        The local polynomial fit is linear in the targets: ``f(q) = sum_i l_i(q) y_i``
        with ``l_i(q) = w_i K_i phi(x_i - q) . G^-1 e_1 / sum_j w_j K_j`` (``G``
        the normalised local Gram matrix, the degree each query is fitted at).
        These are the rows of the hat matrix (``H = attention_weights(X_train)``)
        and generalise :class:`NadarayaWatsonRegressor`'s attention weights
        (``degree=0`` gives those).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        sparse : bool, default=False
            Return a ``scipy.sparse`` CSR matrix of the non-zero weights instead
            of a dense array, whatever ``algorithm`` is.

        Returns
        -------
        ndarray or csr_matrix of shape (n_queries, n_samples_fit)
            Rows summing to 1, columns in training order, so that
            ``attention_weights(X) @ y`` equals ``predict(X)``.  Unlike attention
            weights they can be negative for ``degree >= 1`` (the local line
            extrapolates); they are zero outside a compact kernel's support.
            NaN rows where ``fallback="nan"`` leaves a query empty.  On the
            binned path they are the exact weights, so the product matches
            ``predict`` to ``binned_tol``.

        Raises
        ------
        MemoryError
            Before any work, when the dense matrix would exceed scikit-learn's
            ``working_memory`` budget (pass ``sparse=True``, or fewer queries).

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import LocalPolynomialRegressor
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> y = X[:, 0] ** 2
        >>> reg = LocalPolynomialRegressor(bandwidth=0.2).fit(X, y)
        >>> L = reg.attention_weights([[0.0], [0.5]])
        >>> L.sum(axis=1).round(12), bool((L < 0).any())
        (array([1., 1.]), True)
        >>> bool(np.allclose(L @ y, reg.predict([[0.0], [0.5]])))
        True
        """
        return self._equivalent_kernel(self._queries(X), sparse=sparse)

    def _exact_fit(self, Q: np.ndarray, slopes: bool = False):
        """Exact fitted values (m, k) and slopes (m, d, k) or None, scaled units."""
        coef = self._coefficients(Q)
        d = self._exact_train().d  # the continuous features (Q also holds category rows)
        return coef[:, 0], (coef[:, 1 : d + 1] if slopes else None)

    def predict_gradient(self, X: ArrayLike) -> np.ndarray:
        """Estimated gradient ``dm/dx_j`` of the regression function at each query.

        For ``degree >= 1`` the local slopes (the coefficients of ``x_j - q_j``,
        divided by the bandwidth: the fit runs in scaled units).  For
        ``degree=0`` the exact derivative of the Nadaraya–Watson ratio
        ``sum w K y / sum w K`` in the query (a kernel with a kink at 0, the
        exponential or the linear, takes ``x_j - q_j = 0`` times its infinite
        slope as 0 at a training point; the tophat's is 0 almost everywhere).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_features) or (n_queries, n_targets, n_features)
            The gradient per query (and per target, for 2-D targets).  With
            categorical features, one column per continuous feature only (in
            feature order): a category has no derivative.
        """
        return self._shaped(self._gradient(self._queries(X)))

    def _gradient(self, Q: np.ndarray) -> np.ndarray:
        """Return the gradient at the scaled queries: (m, k, d)."""
        if self.degree >= 1:
            slopes = self._backend.local_fit(Q, True, self._exact_fit)[1]
            return np.swapaxes(slopes, 1, 2) / self._widths()
        return local_constant_gradient(self, Q)  # degree 0 is Nadaraya–Watson

    def _leave_one_out(self) -> LocalLeaveOneOut:
        """Return what BandwidthSearchCV needs (see :class:`skl_nw._engine.LeaveOneOut`)."""
        check_is_fitted(self)
        # The binned path's leave-one-out is the exact one (its training set built on need).
        loo = LocalLeaveOneOut(
            self._exact_train(), self._kernel, self.degree, self.rtol, self.fallback
        )
        cats = getattr(self, "_categories", None)
        if cats is None or self.span is not None:  # a span's lambdas are not searched
            return loo
        return MixedLocalLeaveOneOut(loo, cats.kernels, self.bandwidth_, cats.mask)

    def _binned_training(self, Xs: np.ndarray, w: np.ndarray, values: np.ndarray, tol: float):
        """Return the binned path's training side: local fits at the grid nodes."""
        return BinnedLocalFit(Xs, w, values, self._kernel, tol, self.degree, self.rtol)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # robustness weights are one per row: robust_iterations > 0 takes a 1-D y
        tags.target_tags.multi_output = not getattr(self, "robust_iterations", 0)
        return tags
