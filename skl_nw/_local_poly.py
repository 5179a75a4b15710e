"""LocalPolynomialRegressor: the kernel-weighted least-squares polynomial at each query."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _engine
from ._base import _NWBase
from ._engine._chunks import single_threaded_blas
from ._kernels import Kernel
from ._local_fit import exponents, gram_index, monomials, npar, position, shift, solve

__all__ = ["LocalPolynomialRegressor"]

# Upper bound on the floats of the per-query temporaries of one block of queries
# (moments, their expansion terms, Gram matrices): blocks stay a few tens of MiB.
_BLOCK_FLOATS = 1 << 22


class _Moments:
    """The value columns of one kind of local fit and the moments read back from the sums.

    Plain moments ``E[z^g]`` up to total degree ``top`` and target moments
    ``E[z^g y]`` up to ``ytop`` (``E`` the kernel-weighted mean), in
    bandwidth-scaled units.  A local fit of degree ``p`` needs ``top = 2p``,
    ``ytop = p``; derivatives in the bandwidth need two more of each.
    """

    def __init__(self, d: int, top: int, ytop: int):
        self.d, self.top, self.ytop = d, top, ytop
        self.shift, self.yshift = shift(d, top), shift(d, ytop)
        self.n_plain, self.n_y = npar(d, top), npar(d, ytop)

    def values(self, Z: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Columns ``[z^g (g != 0), y_k z^g]``: (n, n_plain - 1 + n_y * k)."""
        plain = monomials(Z, self.top)[:, 1:]
        ymono = Y[:, None, :] * monomials(Z, self.ytop)[:, :, None]
        return np.column_stack([plain, ymono.reshape(len(Z), -1)])

    def read(self, sums: _engine.KernelSums, f: int, t: int, k: int):
        """Raw moments of power ``t`` normalised by the power-1 weight sum: (m, P), (m, Py, k)."""
        sc = sums.scaled[:, f, :, 0]
        total = sc[:, 0, -1]
        ratio = sc[:, t] / total[:, None] * sums.value_scale
        if t:  # another power: its own log scale (the shift is shared)
            ratio *= np.exp(sums.log_scale[:, f, t, 0] - sums.log_scale[:, f, 0, 0])[:, None]
        M = np.empty((len(total), self.n_plain))
        M[:, 0] = ratio[:, -1]
        M[:, 1:] = ratio[:, : self.n_plain - 1]
        B = ratio[:, self.n_plain - 1 : -1].reshape(len(total), self.n_y, k)
        return M, B

    def about(self, M: np.ndarray, B: np.ndarray, q: np.ndarray):
        """Shift raw moments to moments about the queries ``q``."""
        return self.shift(M, q), self.yshift(B, q)

    def rescale(self, M: np.ndarray, B: np.ndarray, factor: float):
        """Moments in units of ``factor`` bandwidths."""
        if factor == 1.0:
            return M, B
        deg = exponents(self.d, self.top).sum(axis=1)
        ydeg = exponents(self.d, self.ytop).sum(axis=1)
        return M / factor**deg, B / factor ** ydeg[:, None]


def _fit(mom: _Moments, M, B, q, degree: int):
    """Local coefficients about ``q`` from raw moments (``_local_fit.solve``): coef, a, Mq, Bq."""
    Mq, Bq = mom.about(M, B, q)
    d = q.shape[1]
    P = npar(d, degree)
    if degree == 0:
        return Bq[:, :1].copy(), np.ones((len(q), 1)), Mq, Bq
    gi = gram_index(d, degree)
    diag = np.diagonal(gi)[1:]
    noise = Mq[:, diag] + M[:, diag] + monomials(q, 2 * degree)[:, diag]
    sizes = [npar(d, p) for p in range(degree + 1)]
    with single_threaded_blas():  # many small matrices: BLAS threads only spin
        coef, a = solve(Mq[:, gi], Bq[:, :P], noise, sizes)
    return coef, a, Mq, Bq


def usable_degree(degree: int, d: int, n_points: int) -> int:
    """Highest degree ``<= degree`` with no more coefficients than ``n_points`` points."""
    while degree > 0 and npar(d, degree) > n_points:
        degree -= 1
    return degree


def _blocks(m: int, floats_per_row: int):
    rows = max(1, _BLOCK_FLOATS // max(floats_per_row, 1))
    return [slice(s, min(s + rows, m)) for s in range(0, m, rows)]


class LocalLeaveOneOut:
    """Leave-one-out predictions and loss gradient of a local polynomial fit (the search protocol).

    The interface of :class:`skl_nw._engine.LeaveOneOut`.  The leave-one-out
    fit at training row ``i`` is the local fit of moment sums from which the
    engine drops row ``i`` by index: the exact refit without ``i`` (the
    treatment of a degenerate local problem included), computed at once
    for every row and bandwidth multiple.  Where the local problem stays
    well-posed it equals the linear-smoother identity
    ``y_i - yhat_(-i) = (y_i - yhat_i) / (1 - H_ii)``, computed without its
    cancellation as ``H_ii -> 1``.
    """

    def __init__(self, train, kernel: Kernel, degree: int, rtol: float):
        d = train.X.shape[1]
        # A refit without one row has one point of positive weight fewer.
        degree = usable_degree(degree, d, int(np.isfinite(train.log_w).sum()) - 1)
        self.train, self.kernel, self.degree, self.rtol = train, kernel, degree, rtol
        self.targets = train.to_caller(train.values)
        self.Z = train.to_caller(train.X)
        self._mom = _Moments(d, 2 * degree, degree)
        self._dmom = _Moments(d, 2 * degree + 2, degree + 2)
        # Where sum w K' t_j^2 z^(a + b) (and z^a y) read the raw moments of two more
        # degrees: t_j^2 = z_j^2 - 2 q_j z_j + q_j^2 (see loss_grad).
        basis = exponents(d, degree)
        pair = basis[:, None, :] + basis[None, :, :]
        unit = np.eye(d, dtype=np.intp)
        top, ytop = 2 * degree + 2, degree + 2
        self._plain = [
            np.stack([position(d, top, (pair + s * unit[j]).reshape(-1, d)).reshape(pair.shape[:2])
                      for j in range(d)])
            for s in (0, 1, 2)
        ]  # fmt: skip
        self._y = [np.stack([position(d, ytop, basis + s * unit[j]) for j in range(d)])
                   for s in (0, 1, 2)]  # fmt: skip

    def predictions(self, factors, n_jobs=None) -> np.ndarray:
        """Leave-one-out predictions at every training row, per bandwidth multiple: (F, n, k)."""
        Y, k = self.targets, self.targets.shape[1]
        sums = _engine.kernel_sums(
            None, self.train, self.kernel, values=self._mom.values(self.Z, Y),
            factors=factors, loo=True, options=_engine.Options(rtol=self.rtol, n_jobs=n_jobs),
        )  # fmt: skip
        out = np.empty((len(sums.shift[0]), len(Y), k))
        for f, factor in enumerate(np.asarray(factors, dtype=float)):
            M, B = self._mom.rescale(*self._mom.read(sums, f, 0, k), factor)
            out[f] = _fit(self._mom, M, B, self.Z / factor, self.degree)[0][:, 0]
        return out

    def loss_grad(
        self,
        log_factors: np.ndarray,
        rows: np.ndarray,
        loss_fn: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
        row_weights: np.ndarray,
    ) -> tuple[float, np.ndarray]:
        """Leave-one-out loss at ``rows`` and its gradient in the log bandwidth multiples.

        With weights ``W_k = w_k K(s_k)``, the fit ``a . b`` (``a = G^-1 e_1``)
        moves by ``dm / d log h_j = sum_k dW_k/d log h_j (phi_k . a) r_k``
        (``r_k`` the local residual) and ``dW_k / d log h_j = -2 w_k K'(s_k) t_kj^2``:
        raw moments of ``w K'`` (the engine's ``"ds"`` sums) of two more
        degrees, contracted with the fitted polynomials written in raw
        monomials (so only the fit's own moments are moved to the query).
        Exact for the degree each query is fitted at (it is piecewise
        constant in the bandwidths).
        """
        factors = np.exp(log_factors)
        train = self.train.rescaled(factors)
        Z, Y = self.Z / factors, self.targets
        k, dmom, mom = Y.shape[1], self._dmom, self._mom
        sums = _engine.kernel_sums(
            train.queries(train.inverse_rows(rows)), train, self.kernel,
            values=dmom.values(Z, Y), powers=(1, "ds"),
            exclude=rows, options=_engine.Options(rtol=self.rtol),
        )  # fmt: skip
        q = Z[rows]
        M, B = dmom.read(sums, 0, 0, k)
        coef, a, _, _ = _fit(mom, M[:, : mom.n_plain], B[:, : mom.n_y], q, self.degree)
        losses, R = loss_fn(coef[:, 0], rows)
        # The fitted polynomials in raw monomials: phi(z - q) . a = phi(z) . (T^T a).
        T = mom.yshift.matrix(q)
        a_raw = np.einsum("mab,ma->mb", T, a)
        coef_raw = np.einsum("mab,mak->mbk", T, coef)
        Md, Bd = dmom.read(sums, 0, 1, k)
        r = row_weights / row_weights.sum()
        grad = np.empty(len(factors))
        for j in range(len(factors)):
            qj = q[:, j, None, None]
            N = Md[:, self._plain[2][j]] - 2 * qj * Md[:, self._plain[1][j]]
            N += qj**2 * Md[:, self._plain[0][0]]
            By = Bd[:, self._y[2][j]] - 2 * qj * Bd[:, self._y[1][j]] + qj**2 * Bd[:, self._y[0][0]]
            dP = np.einsum("ma,mak->mk", a_raw, By - N @ coef_raw)
            grad[j] = -2.0 * np.einsum("m,mk,mk->", r, R, dP)
        return float(r @ losses), grad


class LocalPolynomialRegressor(RegressorMixin, _NWBase):
    """Local polynomial kernel regression: a weighted least-squares polynomial at each query.

    At a query ``q`` the training points get the attention weights of
    :class:`NadarayaWatsonRegressor`, ``w_i K(u_i)`` (a softmax for the
    Gaussian); instead of their weighted *mean*, the prediction is the value
    at ``q`` of the weighted least-squares polynomial of total degree
    ``<= degree`` in ``x - q`` (every monomial, cross terms included):

    ``min_beta sum_i w_i K(u_i) (y_i - phi(x_i - q) . beta)^2``,  ``f(q) = beta_0``.

    ``degree=0`` is the Nadaraya–Watson estimator; ``degree=1`` (local
    linear) removes its bias at the boundary of the data and where the inputs
    are unevenly spread, and gives derivative estimates (:meth:`predict_gradient`).

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, \
default="scott"
        Kernel width ``h``, one per feature or shared (see :func:`rule_of_thumb`).
    kernel : {"gaussian", "tophat", "boxcar", "epanechnikov", "exponential", \
"linear", "triangular", "cosine"}, default="gaussian"
        Kernel profile.
    degree : int, default=1
        Total degree of the local polynomial: 0 (local constant, the
        Nadaraya–Watson estimator), 1 (local linear), 2 (local quadratic), ...
        The fit has ``C(d + degree, degree)`` coefficients and its moment sums
        ``C(d + 2 degree, d)`` columns (35 for ``degree=2``, ``d=3``).
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
        How the kernel sums are computed, as for :class:`NadarayaWatsonRegressor`:
        compact kernels are exact on every path, infinite-support kernels
        agree to ``rtol``.
    leaf_size : int, default=40
        Leaf size of the tree.
    rtol : float, default=1e-16
        Tree path, infinite-support kernels: the kernel mass left outside each
        query's search radius is at most ``rtol`` times the mass inside.
    n_jobs : int, default=None
        Threads over chunks of queries at predict.
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
        Categorical features enter through the weights only: the local
        polynomial is in the continuous features.

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
    its ``h -> 0`` limit).  The solved problems are thus well-conditioned: the
    rounding of the kernel sums reaches the predictions amplified at most
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
    >>> reg.predict([[0.0], [0.5]]).round(6)  # a line is reproduced exactly
    array([1. , 2.5])
    >>> reg.predict_gradient([[0.0]]).round(6)
    array([[3.]])
    """

    _parameter_constraints: dict = {
        **_NWBase._parameter_constraints,
        # The exact paths only: local polynomial moments are not binned.
        "algorithm": [StrOptions({"auto", "brute", "kd_tree", "ball_tree"})],
        "degree": [Interval(Integral, 0, None, closed="left")],
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
        n_jobs: int | None = None,
        categorical_features="from_dtype",
        ordered_features="from_dtype",
        categorical_kernel: str = "aitchison_aitken",
        ordered_kernel: str = "wang_van_ryzin",
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.degree = degree
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.ordered_features = ordered_features
        self.categorical_kernel = categorical_kernel
        self.ordered_kernel = ordered_kernel

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
        X, y = self._validate_fit(X, y, multi_output=True, y_numeric=True)
        Xs, w = self._fit_inputs(X, sample_weight)
        self._build(Xs, w, y.reshape(len(y), -1))
        self._y_1d = y.ndim == 1
        return self

    def _local(self, Q: np.ndarray, mom: _Moments, powers=(1,)):
        """Yield ``(block, q, sums)`` over blocks of scaled queries (``q`` centred)."""
        train = self._train
        Y = train.to_caller(train.values)
        V = mom.values(train.to_caller(train.X), Y)
        per_row = (mom.shift.pairs + mom.yshift.pairs * Y.shape[1]) * 2 + V.shape[1] * 4
        for block in _blocks(len(Q), per_row):
            sums = _engine.kernel_sums(
                Q[block], train, self._kernel, values=V, powers=powers, options=self._options()
            )
            yield block, Q[block, : train.d] - train.center, sums

    def _coefficients(self, X: ArrayLike) -> np.ndarray:
        """Local coefficients about each query, scaled units: (m, P, k)."""
        Q = self._queries(X)
        d, k = self._train.d, self._train.values.shape[1]
        # No local problem of more coefficients than training points is well-posed.
        degree = usable_degree(self.degree, d, int(np.isfinite(self._train.log_w).sum()))
        mom = _Moments(d, 2 * degree, degree)
        coef = np.zeros((len(Q), npar(d, self.degree), k))
        for block, q, sums in self._local(Q, mom):
            fitted = _fit(mom, *mom.read(sums, 0, 0, k), q, degree)[0]
            coef[block, : fitted.shape[1]] = fitted
        return coef

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Value of the local polynomial at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_targets)
            Predictions, shaped like the training targets.
        """
        pred = self._coefficients(X)[:, 0]
        return pred[:, 0] if self._y_1d else pred

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
        d = self._train.d
        if self.degree >= 1:
            grad = np.swapaxes(self._coefficients(X)[:, 1 : d + 1], 1, 2) / self._continuous_h()
        else:
            grad = self._nw_gradient(X)
        return grad[:, 0] if self._y_1d else grad

    def _nw_gradient(self, X: ArrayLike) -> np.ndarray:
        """``d/dq_j`` of the NW ratio with ``dK/dq_j = dK/ds * (-2 (z_j - q_j))``: (m, k, d)."""
        Q = self._queries(X)
        d, k = self._train.d, self._train.values.shape[1]
        mom = _Moments(d, 1, 1)
        parts = []
        for _, q, sums in self._local(Q, mom, powers=(1, "ds")):
            _, B = mom.about(*mom.read(sums, 0, 0, k), q)
            Md, Bd = mom.about(*mom.read(sums, 0, 1, k), q)
            mean = B[:, 0]  # (m, k)
            dq = -2.0 * (Bd[:, 1:] - Md[:, 1:, None] * mean[:, None, :])  # (m, d, k)
            parts.append(np.swapaxes(dq, 1, 2))
        grad = np.concatenate(parts) if parts else np.empty((0, k, d))
        return grad / self._continuous_h()

    def _continuous_h(self) -> np.ndarray:
        return self.bandwidth_[~self.is_categorical_]

    def _leave_one_out(self) -> LocalLeaveOneOut:
        """Return what BandwidthSearchCV needs (see :class:`skl_nw._engine.LeaveOneOut`)."""
        check_is_fitted(self)
        return LocalLeaveOneOut(self._train, self._kernel, self.degree, self.rtol)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
