"""The local noise variance behind Nadaraya–Watson's standard errors: residuals about a local line.

Nadaraya–Watson's fit ``m_hat(q) = sum_i alpha_i y_i`` has the variance
``sum_i alpha_i^2 sigma^2(x_i) / w_i``, about ``sigma^2(q) sum_i alpha_i^2 / w_i``.
The spread of ``y`` about the local constant, ``sum_i alpha_i (y_i - m_hat(q))^2``,
estimates ``sigma^2(q)`` plus the spread of the curve over the window,
``m'(q)^2 h^2`` at a slope (``sin 2 pi x``, ``h = 0.03``: 0.036 against a noise
variance of 0.09, the normal interval covering 0.985 for 0.95).  Here the
residuals are taken about the kernel-weighted least-squares line through the
window instead, and their weighted mean square is divided by its expectation
per unit noise variance: Fan & Gijbels (1995; 1996, chapter 4; Ruppert, Wand,
Holst & Hössjer 1997) normalise a local fit's weighted residual sum of squares
by ``tr(W - W X (X' W X)^-1 X' W)``, which with ``alpha`` the weights reads

``sigma^2(q) = sum_i alpha_i (y_i - a - b . (x_i - q))^2 / (1 - tr(G^-1 G2))``,

``G = sum_i alpha_i phi_i phi_i'``, ``G2 = sum_i alpha_i^2 phi_i phi_i' / w_i``,
``phi_i = [1, x_i - q]``: unbiased for a locally linear curve and a locally
constant noise variance (the slope's share is gone, a curvature's ``h^4``
remains), where the local constant's mean square was biased by the slope
and, at ``1 - sum_i alpha_i^2``, low by the fit's share.  The line is solved
as a local linear fit is (:func:`skl_nw._engine._local_fit.solve`: a window
that cannot carry a slope drops to the constant, whose correction is
``1 - sum_i alpha_i^2``); a window with fewer effective points
(``1 / sum_i alpha_i^2``) than the line's coefficients plus one, whose line
would leave less than one residual degree of freedom, takes the constant's
residuals, and one effective point has ``sigma^2 = 0``.

The moments are those of ``Z`` (:func:`noise_units`): ``y`` less a robust
global line in the continuous features, standardised.  A local line's (or
polynomial's) residuals do not change when a line in ``x`` is added to ``y``,
but their mean square is formed from moments about the query, which cancel
by the square of ``y``'s spread over the noise's: ``y = 10^8 x + N(0, 1)``
lost every digit (49% off), and so did an outlier of ``10^10`` with no
weight at the query, through the mean it moved.  Less that line, ``Z`` is
of the noise's order.  The constant's residuals (the fallbacks above) are
those of ``y`` less the global line: its slope stands in for the local one
the window cannot carry.
"""

from __future__ import annotations

import numpy as np

from .. import _engine
from .._engine import (
    BinnedLocalFit,
    Moments,
    blocks,
    fit_local_units,
    gram_index,
    grid_step,
    npar,
    power_of_two,
    solve,
    to_units,
)
from ._formulas import local_residual_variance, root_in_unit

__all__ = [
    "GridNoise", "line_std", "local_sums", "noise_units", "noise_variance", "residual_share",
    "zero_lambda_cells",
]  # fmt: skip

# 1 - tr(G^-1 G2) below this is no residual degree of freedom (one effective point, or
# as many as the line's coefficients): rounding, whose ratio to a rounding-sized
# residual sum of squares is no variance.  sigma^2 is then 0 (and se = 0, warned).
_NO_RESIDUAL_DF = 1e-8

# Reweighting steps of the global line ``noise_units`` subtracts (bisquare weights at
# 6 median absolute residuals, as LOWESS's): an outlier does not tilt it.
_ROBUST_STEPS = 2
# A median absolute residual at most this share of the largest |y| is rounding (the line
# fits the median row exactly): its bisquare weights would be noise, so the steps stop.
_ROUNDING = 1e-10
# The line is fitted to at most about this many rows, evenly spaced (any line serves:
# the local fits absorb it; what it removes only has to be most of y's spread).
_LINE_ROWS = 1 << 16


def noise_units(
    Y: np.ndarray, w: np.ndarray, X: np.ndarray, groups: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``Z`` (n, k) and its unit (k,): the targets less a robust line in ``X``, standardised.

    Scale first, square later, and subtract what the local fits absorb: ``Y``
    in units of a power of two near its largest value, less a line in the
    continuous features ``X`` (any origin; :func:`_robust_line` of every
    ``n / _LINE_ROWS``-th row of positive weight), one per group of rows
    where ``groups`` (n,) gives them (the cells of the categorical features
    at ``lambda = 0``, which no neighbourhood mixes: each is then what one
    model per category subtracts), then in units of a power of two near the
    largest residual (the squares of ``Z`` neither overflow nor underflow;
    exact divisions, so ``Z`` is equivariant in ``y``).  Rows of weight 0
    take no part and get ``Z = 0``.  With no continuous feature the line is a
    robust location.

    Examples
    --------
    >>> X = np.linspace(0.0, 1.0, 5)[:, None]
    >>> Z, unit = noise_units(1e8 * X + [[0.0], [1.0], [-1.0], [1.0], [0.0]], np.ones(5), X)
    >>> bool(np.abs(Z).max() <= 2), bool(unit[0] < 4)
    (True, True)
    """
    live = np.flatnonzero(w > 0)
    unit = power_of_two(np.abs(Y[live]).max(axis=0))
    R = np.zeros(Y.shape)
    if groups is None:
        every = len(live) == len(w)  # no copies of the inputs then
        rows = slice(None) if every else live
        R[rows] = _less_line(Y[rows] / unit, w[rows], X[rows])
    else:
        order = live[np.argsort(groups[live], kind="stable")]
        starts = np.flatnonzero(np.diff(groups[order], prepend=-1))
        for rows in np.split(order, starts[1:]):
            R[rows] = _less_line(Y[rows] / unit, w[rows], X[rows])
    spread = power_of_two(np.abs(R).max(axis=0))
    return R / spread, unit * spread


def zero_lambda_cells(est) -> np.ndarray | None:
    """Each training row's cell (caller order) of the categorical features at ``lambda = 0``.

    None where there are none: the groups of :func:`noise_units`.
    """
    cats = getattr(est, "_categories", None)
    zero = None if cats is None else est.bandwidth_[cats.mask] == 0
    if zero is None or not zero.any():
        return None
    train = est._exact_train()
    codes = train.to_caller(train.codes)[:, zero]
    return np.unique(codes, axis=0, return_inverse=True)[1].ravel()


def _less_line(R: np.ndarray, w: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``R`` (n, k) less its robust line in ``X`` (:func:`_robust_line`), column by column."""
    rows = np.arange(0, len(R), max(1, len(R) // _LINE_ROWS))
    scale = power_of_two(np.abs(X[rows]).max(axis=0))
    T = X - (X[rows] / scale).mean(axis=0) * scale  # about the rows' mean
    scale = power_of_two(np.abs(T[rows]).max(axis=0))  # the fitted rows' |T / scale| <= 1
    Phi = np.column_stack([np.ones(len(rows)), T[rows] / scale])
    out = np.empty_like(R)
    for j in range(R.shape[1]):
        beta = _robust_line(R[rows, j], w[rows] / w[rows].max(), Phi)
        out[:, j] = R[:, j] - beta[0] - T @ (beta[1:] / scale)
    return out


def _robust_line(r: np.ndarray, w: np.ndarray, Phi: np.ndarray) -> np.ndarray:
    """Return the coefficients of ``r``'s robust weighted least-squares fit on ``Phi``'s columns.

    The weighted least-squares fit, refitted ``_ROBUST_STEPS`` times with the
    weights times the bisquare of the residuals over 6 times their weighted
    median absolute value (stopping where that is rounding, ``_ROUNDING`` of
    the largest ``|r|``, as LOWESS's iterations stop; weighted, so that
    integer weights are repeated rows); the weighted mean instead where the
    fit does not shrink that median (a Gram matrix too ill-conditioned to
    trust).
    """
    weight = w
    for step in range(_ROBUST_STEPS + 1):
        G = Phi.T @ (weight[:, None] * Phi)
        beta = np.linalg.lstsq(G, Phi.T @ (weight * r), rcond=1e-10)[0]
        res = r - Phi @ beta
        s = 6.0 * _weighted_median(np.abs(res), w)
        if step == _ROBUST_STEPS or not s > _ROUNDING * np.abs(r).max(initial=0.0):
            break
        with np.errstate(over="ignore"):
            weight = w * np.square(np.clip(1.0 - np.square(res / s), 0.0, None))
    mean = np.zeros_like(beta)
    mean[0] = np.average(r, weights=w)
    return beta if s <= 6.0 * _weighted_median(np.abs(r - mean[0]), w) else mean


def _weighted_median(a: np.ndarray, w: np.ndarray) -> float:
    """Return the lower weighted median of ``a`` (the least with half the weight at or below).

    Half to a relative 1e-9: integer weights come back from their logs a few
    ulps off, and must pick the value that the rows repeated pick.
    """
    if w.min() == w.max():  # equal weights: the lower median, by partition
        middle = (len(a) - 1) // 2
        return float(np.partition(a, middle)[middle])
    order = np.argsort(a, kind="stable")
    cumulative = np.cumsum(w[order])
    half = 0.5 * cumulative[-1] * (1.0 - 1e-9)
    return float(a[order[np.searchsorted(cumulative, half)]])


def local_sums(est, Q: np.ndarray, mom: Moments, powers=(1,), values=None, extra=None,
               origin=None):  # fmt: skip
    """Yield ``(block, q, sums)`` over blocks of an estimator's scaled queries (``q`` centred).

    ``est`` is a fitted Nadaraya–Watson or local polynomial estimator (its
    ``_exact_train``, ``_kernel``, ``fallback`` and ``_options``).  Value
    columns ``mom.values(Z, values)`` (default: the training targets), then
    the columns ``extra`` (n, e) if given.  ``origin`` (d,): the monomials,
    and ``q``, about that point of the centred units instead of the centre.
    """
    train = est._exact_train()
    origin = np.zeros(train.d) if origin is None else origin
    Y = train.to_caller(train.values) if values is None else values
    V = mom.values(train.to_caller(train.X) - origin, Y)
    if extra is not None:
        V = np.column_stack([V, extra])
    per_row = (mom.shift.pairs + mom.yshift.pairs * Y.shape[1]) * 2 + V.shape[1] * 4
    for block in blocks(len(Q), per_row):
        sums = _engine.kernel_sums(
            Q[block], train, est._kernel, values=V, powers=powers,
            fallback=est.fallback, options=est._options(),
        )  # fmt: skip
        yield block, Q[block, : train.d] - train.center - origin, sums


def residual_share(mom: Moments, M: np.ndarray, M2: np.ndarray, q: np.ndarray, degree: int):
    """``1 - tr(G_S^-1 G2_S)`` per query: the noise's share in a local fit's weighted residuals.

    Parameters
    ----------
    mom : Moments
        The moments' layout (``top >= 2 degree``).
    M, M2 : ndarray of shape (m, mom.n_plain)
        Raw moments of kernel powers 1 and 2 (over ``D`` and ``D^2``), in the
        units of ``q`` (:func:`skl_nw._engine.to_units`).
    q : ndarray of shape (m, d)
        The queries, in those units.
    degree : int
        Degree of the local fit.

    Returns
    -------
    ndarray of shape (m,)
        With ``S`` the basis the solve keeps (its degree drop and dead
        columns, the same tests as the fit's), at most 1; NaN where ``M``
        is (an empty neighbourhood).
    """
    gi = gram_index(mom.d, degree)
    Mq, M2q = mom.shift(M, q), mom.shift(M2, q)
    if gi.shape[0] == 1:
        return 1.0 - M2q[:, 0]
    # The scale of each slope's variance terms, as the fit's solve has it.
    diag = np.diagonal(gi)[1:]
    noise = Mq[:, diag] + M[:, diag] + _engine.monomials(q, 2 * degree)[:, diag]
    sizes = [npar(mom.d, p) for p in range(degree + 1)]
    # Solved with the columns of G2 as right-hand sides: G_S^-1 G2_S, 0 off S.
    with np.errstate(invalid="ignore"):
        X = solve(Mq[:, gi], M2q[:, gi], noise, sizes)[0]
    return 1.0 - np.einsum("mjj->m", X)


def noise_variance(mom: Moments, Mq, Bq, second, coef, M, M2, q, degree: int) -> np.ndarray:
    """``sigma^2`` (m, k): the line's residuals over their share, else the constant's, else 0.

    ``Mq``, ``Bq``: normalised moments of the weights and of the ``k``
    targets about a point (the query, or a node's centre), ``second`` (m,
    k) the targets' mean squares, ``coef`` (m, >= P, k) the line fitted there
    (``P`` its coefficients at ``degree``); ``M``, ``M2``: the moments of
    kernel powers 1 and 2 (over ``D`` and ``D^2``) about ``q``'s origin.  The
    line's weighted mean square over its expectation per unit noise, ``1 -
    tr(G^-1 G2)`` (:func:`residual_share`), where the window has at least
    ``P + 1`` effective points (``1 / sum alpha^2 / w``): fewer leave it less
    than one residual degree of freedom, and its share (then of the order of
    its rounding, which grows with the Gram matrix's condition) would decide
    by the order of the rows; there the constant's, over ``1 - sum alpha^2 /
    w``, and with one effective point, 0.  An empty window (NaN share), NaN.
    """
    gi, P = gram_index(mom.d, degree), npar(mom.d, degree)
    k = second.shape[1]
    rss = local_residual_variance(Mq[:, gi], Bq[:, :P], second, coef[:, :P], np.zeros(k))
    with np.errstate(invalid="ignore", over="ignore"):  # M2 inf: far below one point
        share = residual_share(mom, M, M2, q, degree)[:, None]
    rss0 = np.maximum(second - Bq[:, 0] ** 2, 0.0)
    share0 = 1.0 - M2[:, :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma2 = np.where(share0 > _NO_RESIDUAL_DF, rss0 / share0, 0.0)
        line = (share > _NO_RESIDUAL_DF) & ((1.0 - share0) * (P + 1) <= 1.0)
        sigma2 = np.where(line, rss / share, sigma2)
    return np.where(np.isnan(share0), np.nan, sigma2)


def line_std(est, Q: np.ndarray, Z: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nadaraya–Watson's fit of ``Y`` and its standard error in units of ``Z``: two (m, k) arrays.

    ``Z`` the targets less a robust line, standardised (:func:`noise_units`),
    ``Y`` the targets (the fit is ``predict``'s columns).  One pass
    of kernel powers 1 and 2 over the local line's moments, ``Z``, ``Z^2`` and
    ``Y``; the line is solved in the query's units, so that far queries do not
    overflow.  ``se^2 = sigma^2(q) sum_i alpha_i^2 / w_i`` with the
    ``sigma^2(q)`` of the module docstring.
    """
    train = est._exact_train()
    k, d, E = Y.shape[1], train.d, train.weight_exponent()
    mom = Moments(d, 2, 1)
    fit, std = np.empty((len(Q), k)), np.empty((len(Q), k))
    for block, q, sums in local_sums(est, Q, mom, (1, 2), Z, np.column_stack([Z**2, Y])):
        coef, _, Mq, Bq, e = fit_local_units(mom, *mom.read(sums, 0, 0, k), q, 1)
        columns = Moments.columns(sums, 0, 0)  # [..., Z^2, Y, weight sum]
        second = columns[:, -1 - 2 * k : -1 - k]
        M, _, qe = to_units(mom, mom.read(sums, 0, 0, k)[0], None, q, e)
        # Kernel power 2 in the weights' unit 2^E, then in theirs: inf only where the
        # window holds far less than one point (sigma^2 = 0), where it would be NaN.
        M2u = to_units(mom, mom.read(sums, 0, 1, k, E)[0], None, q, e)[0]
        with np.errstate(over="ignore"):
            M2 = np.ldexp(M2u, -E)
        sigma2 = noise_variance(mom, Mq, Bq, second, coef, M, M2, qe, 1)
        fit[block] = columns[:, -1 - k : -1]
        std[block] = root_in_unit(np.maximum(M2u[:, :1], 0.0) * sigma2, E)  # sum alpha^2 / w
    return fit, std


class GridNoise(BinnedLocalFit):
    """Nadaraya–Watson's noise variance about a local line at every grid node (binned fits).

    The binned local linear fit of ``[Z, Z^2]``
    (:class:`~skl_nw._engine.BinnedLocalFit`: moments about every node with
    the points kept where they are) gives each node's line and mean square
    about it, as :func:`line_std` has them about a query; the moments of the
    squared kernel about the node give ``1 - tr(G^-1 G2)``.  ``sigma^2(q)``
    is the nodes' blended multilinearly (a smooth function of ``q``): ``O(n +
    G)`` where the exact pass is ``O(n m)``.

    Parameters
    ----------
    X, w : ndarray
        Bandwidth-scaled training inputs (at most 3 features) and weights.
    Z : ndarray of shape (n_samples, k)
        The targets less a robust line, standardised (:func:`noise_units`).
    kernel, tol
        As :class:`~skl_nw._engine.BinnedSums`.

    Attributes
    ----------
    noise : ndarray of shape (G, k)
        ``sigma^2`` at each node (0 where not :attr:`valid`).
    """

    def __init__(self, X, w, Z, kernel, tol: float):
        super().__init__(X, w, np.column_stack([Z, Z * Z]), kernel, tol, degree=1)

    @staticmethod
    def fits(shape: tuple[int, ...], k: int) -> bool:
        """Whether the noise's grid of ``shape`` for ``k`` targets is within the path's limit.

        It holds more columns than the fit's grid (a local line of ``[Z, Z^2]``).
        """
        return _engine.grid_fits(shape, BinnedLocalFit.columns(len(shape), 1, 2 * k))

    def _node_step(self, kernel, tol: float, d: int) -> float:
        """Return the pooling grid's spacing: ``sigma^2`` is blended, not moments."""
        return grid_step(kernel, tol, d)

    def _fit_nodes(self, mom: Moments, M: np.ndarray, B: np.ndarray, error: np.ndarray):
        coef, centre, valid = super()._fit_nodes(mom, M, B, error)
        M2 = self._moments(Moments(mom.d, mom.top, 0), power=2)[0] / self.weight_unit
        k = B.shape[1] // 2
        self.noise = np.zeros((len(valid), k))
        nodes = np.flatnonzero(valid)
        for block in blocks(len(nodes), 8 * (mom.n_plain + mom.n_y * 2 * k)):
            g = nodes[block]
            D = M[0, g][:, None]
            Mg, M2g = M[:, g].T / D, M2[:, g].T / D**2
            Bg = np.moveaxis(B[:, :, g], 2, 0) / D[:, :, None]
            Mq, Bq = mom.about(Mg, Bg, centre[g])
            mean = Bq[:, 0, :k] + self.mid[:k]  # E[Z]
            # E[(Z - mid)^2], the Z^2 column binned about its own mid
            second = Bq[:, 0, k:] + self.mid[k:] - 2 * self.mid[:k] * mean + self.mid[:k] ** 2
            self.noise[g] = noise_variance(mom, Mq, Bq[:, :, :k], second, coef[g][:, :, :k],
                                           Mg, M2g, centre[g], self.degree)  # fmt: skip
        return coef, centre, valid

    def at(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sigma^2`` at scaled queries (m, k), and the rows the grid cannot answer (m,) bool.

        Those are outside the grid or have a corner node below the floor.
        """
        out = np.zeros((len(Q), self.noise.shape[1]))
        base, fractions, inside = self.grid.cells(Q)
        redo = ~inside
        for _, flat, weight in self.grid.corners(base, fractions):
            redo |= (weight > 0) & ~self.valid[flat]
            out += weight[:, None] * self.noise[flat]
        return out, redo
