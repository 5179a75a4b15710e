"""Binned local polynomial fits: moments about every grid node, a fit per node, interpolation.

The binned path of :class:`~skl_nw.LocalPolynomialRegressor` follows
KernSmooth's ``locpoly`` (Wand 1994), with the points kept where they are:

1. the weights and the weighted targets are binned linearly with their
   offsets from the nodes: node ``g`` holds ``c_b(g) = sum_i Lambda_g(x_i)
   w_i (x_i - g)^b [1, y_i]`` (:func:`skl_nw._engine._binned_offsets.offset_bin`);
2. the node sums are convolved with the *moment stencils* ``K(u) u^e`` and
   combined binomially into the moments about every node ``g`` itself,
   ``sum_i omega_i(g) (x_i - g)^a`` with ``omega_i(g)`` the kernel's
   multilinear interpolant (:func:`~skl_nw._engine._binned_offsets.node_moments`):
   every term a product of offsets within the kernel's reach, in bandwidths,
   so nothing cancels wherever the node lies and whatever the bandwidth, and
   the inputs are exact (only the weights are binned): a polynomial of the
   fit's degree is reproduced to rounding;
3. the local problem is solved at every node about the weighted mean of its
   neighbourhood (:func:`skl_nw._engine._local_fit.solve_about`, the exact path's
   compiled pass where numba is available: the same treatment of
   degenerate neighbourhoods, a column constant over the neighbourhood
   dropped, the degree lowered where the local correlation matrix is
   ill-conditioned, with the transforms' rounding added to the noise level);
4. at a query, the local polynomials of the ``2^d`` nodes of its cell are
   evaluated there and blended with the multilinear weights (and so are
   their slopes): exact for a polynomial of the fit's degree.

A query outside the grid, or with a corner node whose binned weight sum is
below the floor of the Nadaraya–Watson binned path (tail and FFT rounding),
is left to the exact path by the caller.

A pickle holds the training data and the settings only (not the grid's
arrays, some ``10^6`` values where the data may be a few hundred): loading
fits the nodes again, the same computation, so the same bits (where numba
is used as it was at the fit: its passes and numpy's round differently).
"""

from __future__ import annotations

import functools

import numpy as np

from .._kernels import Kernel
from ._binned import (
    BinnedSums,
    column_range,
    grid_step,
    make_grid,
    margin_radius,
    truncation_radius,
)
from ._binned_convolve import check_grid_size, stencil
from ._binned_offsets import (
    moment_stencils,
    node_moments,
    node_moments_binning_each,
    offset_bin,
    powers,
    sums_fit,
)
from ._local_fit import (
    DEAD_VARIANCE,
    Moments,
    blocks,
    exponents,
    gram_index,
    monomials,
    position,
    solve_about,
    usable_degree,
)

__all__ = ["BinnedLocalFit", "local_step", "moment_stencils"]

# Relative rounding of the moments about the nodes summed directly, against that of
# the exact path's kernel sums (~1e-12, which DEAD_VARIANCE is set for): products of
# offsets within the kernel's reach, each moment summed with its own terms only.
_DIRECT_ROUNDING = 1e-3
# Queries blended per pass in predict: (rows, P, k) gathers of node coefficients.
_PREDICT_ROWS = 1 << 14


def local_step(kernel: Kernel, tol: float, d: int, degree: int) -> float:
    """Grid spacing in bandwidths at ``degree``: the pooling one over ``sqrt(2 degree)``.

    The spacing ``binned_tol`` promises (see
    :class:`~skl_nw.LocalPolynomialRegressor`), set when the binned fit
    interpolated its moment stencils ``K(u) u^a``, whose second derivatives
    are up to 2 (degree 1) and 4.3 (degree 2) times the kernel's own.  The
    offset binning interpolates the kernel only, so the pooling spacing
    itself would do (measured on ``test_error_bound``'s data: values within
    0.07 ``binned_tol``, slopes within 2); the finer one is kept, a margin.
    """
    step = grid_step(kernel, tol, d)
    return step / np.sqrt(2 * degree) if degree >= 1 else step


def resolves(X: np.ndarray, rows, step: float, degree: int, tol: float) -> bool:
    """Whether nodes ``step`` apart resolve the data's spread for a fit of ``degree``.

    A node's moments are shifted to the centre of its neighbourhood: the
    moment of order ``2 degree`` about the data's centre keeps a relative
    rounding of ``eps (step / spread)^(2 degree)`` (offsets of the order of
    the step, a spread of the data, in bandwidths, far below it: a bandwidth
    wide against the data).  Above ``tol^2`` the fit's degree is lost (a
    quadratic turns into a line: measured 0.77 of the range of y at 1e6
    times the data's spread, within 1e-4 of it below the bound), so the
    nodes are not used and every query goes to the exact path.
    """
    if degree == 0:
        return True
    low, high = column_range(X, rows)
    spread = high - low
    spread = spread[spread > 0]
    if spread.size == 0:
        return True
    return bool(np.finfo(np.float64).eps * (step / spread.min()) ** (2 * degree) <= tol**2)


@functools.cache
def _derivatives(d: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """``d/du_j u^a = a_j u^(a - e_j)``: the index of ``a - e_j`` (0 where ``a_j = 0``), ``a_j``.

    Both of shape (d, P), over the monomials of ``exponents(d, degree)``.
    """
    exps = exponents(d, degree)
    index = np.zeros((d, len(exps)), np.intp)
    for j in range(d):
        lower = exps - np.eye(d, dtype=np.intp)[j]
        has = exps[:, j] > 0
        index[j, has] = position(d, degree, lower[has])
    return index, exps.T.astype(float)


def node_solve(mom: Moments, M, B, centre, error, degree: int) -> np.ndarray:
    """Local coefficients about ``centre`` from moments about the nodes: (m, P, k).

    The exact path's floored solve (:func:`skl_nw._engine._local_fit.solve_about`,
    compiled where numba is available: dead columns out, the degree dropped
    where the correlation matrix has an eigenvalue below the floor), with
    the rounding scale of the binned
    moments: the moments about the node carry ``_DIRECT_ROUNDING`` of the
    exact path's relative rounding, plus ``error`` (m, P), the transforms'
    absolute rounding, carried through the shift to the centre (bounded).  A column
    constant over the neighbourhood (a constant feature) is dead: its
    variance is rounding of one or the other.
    """
    diag = np.diagonal(gram_index(mom.d, degree))[1:]
    # The shift's terms C(a, b) |centre|^(a - b) error_b sum to at most (1 + |centre|)^a max error.
    spread = monomials(1.0 + np.abs(centre), 2 * degree)[:, diag] * error.max(axis=1)[:, None]
    return solve_about(mom, M, B, centre, degree, _DIRECT_ROUNDING, spread / DEAD_VARIANCE)


class BinnedLocalFit(BinnedSums):
    """The training side of a binned local polynomial fit: per-node fits on a grid.

    Shares :class:`~skl_nw._engine._binned.BinnedSums`'s grid rules (spacing,
    margin, truncation, floor) and its exact fallback (:meth:`exact`); its
    node values are local polynomial fits instead of pooled values.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Bandwidth-scaled training inputs, ``n_features <= 3``.
    w : ndarray of shape (n_samples,)
        Non-negative sample weights with a positive sum.
    values : ndarray of shape (n_samples, k)
        Targets.
    kernel : Kernel
        The kernel.
    tol : float
        Relative tolerance (as for :class:`~skl_nw._engine._binned.BinnedSums`).
    degree : int
        Degree of the local polynomial (lowered to the number of points).
    rtol : float, default=1e-16
        The exact path's ``rtol``.

    Attributes
    ----------
    coef : ndarray of shape (G, P, k)
        The local polynomial of each node, in the monomials of
        ``exponents(n_features, degree)`` of the scaled offset from the
        node plus ``centre`` (targets centred on ``mid``): the value there
        first, then the slopes.
    centre : ndarray of shape (G, n_features)
        Offset from each node of the weighted mean of its neighbourhood, the
        centre of its polynomial (0 at degree 0).
    valid : ndarray of bool of shape (G,)
        Nodes whose binned weight sum is above the floor (fitted).
    """

    def __init__(self, X, w, values, kernel: Kernel, tol: float, degree: int, rtol=1e-16):
        n, d = X.shape
        self.X, self.w, self.values, self.kernel = X, w, values, kernel
        self.tol, self.rtol = float(tol), float(rtol)
        self.degree = usable_degree(degree, d, int((w > 0).sum()))
        active = w > 0
        if active.all():
            active = slice(None)
        self._set_mid(values, active)
        self.radius = truncation_radius(kernel, tol)
        step = self._node_step(kernel, tol, d)
        self.grid = make_grid(X, step, margin_radius(kernel, tol), active)
        self.resolved = resolves(X, active, step, self.degree, self.tol)
        mom = Moments(d, 2 * self.degree, self.degree)
        check_grid_size(self.grid.shape, self.columns(d, self.degree, values.shape[1]))
        self._unit_weights(w)
        M, B, error = self._moments(mom)
        self.floor = self.floor_for(bool(error.any()), self.grid)
        self.coef, self.centre, self.valid = self._fit_nodes(mom, M, B, error)
        self.sums = None
        self._exact = None

    @staticmethod
    def columns(d: int, degree: int, k: int) -> int:
        """Values a node of the grid holds at once, for ``k`` value columns.

        The moments, one monomial's offset sums and a convolution's output
        (``_moments`` holds all the sums, and ``node_moments`` more
        temporaries, only where they fit).
        """
        mom = Moments(d, 2 * degree, degree)
        return mom.n_plain + mom.n_y * k + 2 * (1 + k)

    def _node_step(self, kernel: Kernel, tol: float, d: int) -> float:
        """Return the nodes' spacing in bandwidths (:func:`local_step`)."""
        return local_step(kernel, tol, d, self.degree)

    def __getstate__(self) -> dict:
        state = {**super().__getstate__(), "degree": self.degree}
        del state["power"]  # always 1 here
        return state

    def _moments(self, mom: Moments, power: int = 1):
        """Moments about every node: plain (n_plain, G), target (n_y, k, G), transform rounding.

        Of the kernel's ``power`` (2: the sums of squared weights of standard
        errors).  The offset sums binned at once where they fit next to the
        moments, else one monomial at a time (a pass over the data each).
        """
        grid, n_y, k = self.grid, mom.n_y, self.values.shape[1]
        exps = exponents(grid.lo.size, mom.top)
        K = stencil(self.kernel, grid.step, self.radius, 1.0, power)
        stencils = moment_stencils(K, grid.step, exps)
        values, mid = self.scaled_values()
        if sums_fit(grid.shape, mom.n_plain + n_y * k):
            plain, targets = offset_bin(self.X, self.wb, values, mid, grid, exps, n_y)
            return node_moments(plain, targets, grid.shape, stencils, exps, n_y)

        def bin_one(b: int) -> np.ndarray:
            plain, targets = offset_bin(self.X, self.wb, values, mid, grid,
                                        exps[b : b + 1], int(b < n_y))  # fmt: skip
            return np.concatenate([plain, targets[0]]) if b < n_y else plain

        return node_moments_binning_each(bin_one, grid.size, k, grid.shape, stencils, exps, n_y)

    def _fit_nodes(self, mom: Moments, M: np.ndarray, B: np.ndarray, error: np.ndarray):
        """Solve the local problem at every node above the floor: coef (G, P, k), centre, valid.

        Each node's problem is solved about the weighted mean of its
        neighbourhood (``centre``, the offset from the node): in the basis
        about the node, ``t`` and ``t^2`` are nearly collinear where the data
        is narrow against its distance from the node (a bandwidth wide
        against the data: a quadratic fit would drop to a line).
        """
        G, d, k = self.grid.size, self.grid.lo.size, self.values.shape[1]
        D = M[0]
        valid = (D > self.floor) & (D > 0) & self.resolved
        nodes = np.flatnonzero(valid)
        coef = np.zeros((G, len(exponents(d, self.degree)), k))
        centre = np.zeros((G, d))
        per_row = (mom.shift.pairs + mom.yshift.pairs * k) * 2 + (mom.n_plain + mom.n_y * k) * 4
        for block in blocks(len(nodes), per_row):
            g = nodes[block]
            Mg = (M[:, g] / D[g]).T
            Bg = np.moveaxis(B[:, :, g] / D[g], 2, 0)
            if self.degree == 0:
                coef[g] = Bg[:, :1]
                continue
            centre[g] = Mg[:, 1 : d + 1]
            coef[g] = node_solve(mom, Mg, Bg, centre[g], error[None, :] / D[g, None], self.degree)
        return coef, centre, valid

    def predict(self, Q: np.ndarray, slopes: bool = False):
        """Blended fits at scaled queries ``Q``: values (m, k), slopes (m, d, k), exact mask.

        Each corner node's local polynomial is evaluated at the query and the
        ``2^d`` results blended with the multilinear weights; ``slopes`` (in
        scaled units, blended alike) only when asked (else None).  Rows of
        the mask are outside the grid or have a corner node below the floor:
        the caller computes them on the exact path.
        """
        m, k, d = len(Q), self.values.shape[1], self.grid.lo.size
        out = np.zeros((m, k))
        grad = np.zeros((m, d, k)) if slopes else None
        redo = np.zeros(m, dtype=bool)
        for start in range(0, m, _PREDICT_ROWS):
            rows = slice(start, start + _PREDICT_ROWS)
            part = self._blend(Q[rows], slopes)
            out[rows], redo[rows] = part[0], part[2]
            if slopes:
                grad[rows] = part[1] * self.unit
        out *= self.unit
        out += self.mid
        return out, grad, redo

    def _blend(self, Q: np.ndarray, slopes: bool):
        """:meth:`predict` of one block of queries (``mid`` not added)."""
        m, k, d = len(Q), self.values.shape[1], self.grid.lo.size
        exps = exponents(d, self.degree)
        out = np.zeros((m, k))
        grad = np.zeros((m, d, k)) if slopes else None
        base, fractions, inside = self.grid.cells(Q)
        redo = ~inside
        for corner, flat, weight in self.grid.corners(base, fractions):
            redo |= (weight > 0) & ~self.valid[flat]
            U = np.column_stack([(f - c) * s for f, c, s in
                                 zip(fractions, corner, self.grid.step, strict=True)])  # fmt: skip
            U -= self.centre[flat]
            basis = powers(U, exps) * weight[:, None]
            coef = self.coef[flat]  # (m, P, k)
            out += np.einsum("mp,mpk->mk", basis, coef)
            if slopes:
                index, factor = _derivatives(d, self.degree)
                dbasis = basis[:, index] * factor  # (m, d, P): weight d/du_j u^a
                grad += np.einsum("mjp,mpk->mjk", dbasis, coef)
        return out, grad, redo

    def pool(self, Q, fallback="nearest", options=None):  # pragma: no cover - not a pooling
        raise NotImplementedError("a binned local polynomial fit predicts with .predict")
