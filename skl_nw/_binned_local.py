"""Binned local polynomial fits: moments about every grid node, a fit per node, interpolation.

The binned path of :class:`~skl_nw.LocalPolynomialRegressor` follows
KernSmooth's ``locpoly`` (Wand 1994).  Binning raw monomials ``z^g`` and
moving their sums to a query by the binomial expansion would cancel far from
the data (moments of degree ``k`` lose ``(R / h)^k``).  Instead:

1. the weights and the weighted targets are binned once, linearly, as on the
   Nadaraya–Watson binned path: node ``g`` holds ``c_g = sum_i Lambda_g(x_i) w_i [y_i, 1]``;
2. the node sums are convolved with the *moment stencils* ``K(u) u^a``
   (``u`` the scaled offset between two nodes; every monomial ``a`` of total
   degree ``<= 2 degree`` for the Gram entries, ``<= degree`` for the target
   moments), giving at each node ``g`` the moments about ``g`` itself,
   ``sum_g' K(g' - g) (g' - g)^a c_g'``: terms of size ``|u|^|a|`` with ``u``
   within the kernel's reach, so no cancellation wherever the node lies;
3. the local problem is solved at every node (:func:`skl_nw._local_fit.fit_local`,
   the same treatment of degenerate neighbourhoods: the degree drops where
   the local correlation matrix is ill-conditioned);
4. the fitted values (and slopes) are interpolated multilinearly to the queries.

A query outside the grid, or with a corner node whose binned weight sum is
below the floor of the Nadaraya–Watson binned path (tail and FFT rounding),
is left to the exact path by the caller.
"""

from __future__ import annotations

import numpy as np

from ._engine._binned import (
    BinnedSums,
    _check_size,
    column_range,
    convolve,
    grid_step,
    linear_bin,
    make_grid,
    margin_radius,
    truncation_radius,
)
from ._kernels import Kernel
from ._local_fit import Moments, blocks, exponents, fit_local, usable_degree

__all__ = ["BinnedLocalFit", "local_step", "moment_stencils"]


def moment_stencils(K, step: np.ndarray, exps: np.ndarray) -> list:
    """Return the stencils ``K(e) (-e)^a`` for each exponent ``a`` (rows of ``exps``).

    ``K`` as :func:`skl_nw._engine._binned.stencil` returns it (at factor 1):
    a ``d``-dimensional array over the node offsets ``e`` (in bandwidths), or a
    list of one-dimensional factors, which stay factors (``prod_j K_j(e_j)
    (-e_j)^(a_j)``).  The sign makes the convolution
    ``sum_e T(e) c_(g - e)`` the moment ``sum_g' K(g' - g) (g' - g)^a c_g'``.
    """
    if isinstance(K, list):
        offsets = [(np.arange(len(k)) - len(k) // 2) * s for k, s in zip(K, step, strict=True)]
        return [[k * (-u) ** int(p) for k, u, p in zip(K, offsets, a, strict=True)] for a in exps]
    axes = np.meshgrid(
        *[(np.arange(n) - n // 2) * s for n, s in zip(K.shape, step, strict=True)], indexing="ij"
    )
    return [K * np.prod([(-u) ** int(p) for u, p in zip(axes, a, strict=True)], axis=0)
            for a in exps]  # fmt: skip


def local_step(kernel: Kernel, tol: float, d: int, degree: int) -> float:
    """Grid spacing in bandwidths at ``degree``: the pooling one over ``sqrt(2 degree)``.

    Binning replaces each stencil by its multilinear interpolant, an error
    proportional to its second derivative.  The moment stencils ``K(u) u^a``
    of the Gaussian (``|a| <= 2 degree``) have second derivatives up to 2
    (degree 1) and 4.3 (degree 2) times the kernel's own: dividing the
    spacing by ``sqrt(2 degree)`` keeps their binning error at the
    Nadaraya–Watson path's.
    """
    step = grid_step(kernel, tol, d)
    return step / np.sqrt(2 * degree) if degree >= 1 else step


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
    coef : ndarray of shape (G, 1 + n_features, k)
        Fitted value (targets centred on ``mid``) and slopes at each node.
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
        bottom, top = column_range(values, active)
        self.mid = 0.5 * (top + bottom)
        self.radius = truncation_radius(kernel, tol)
        step = local_step(kernel, tol, d, self.degree)
        self.grid = make_grid(X, step, margin_radius(kernel, tol), active)
        mom = Moments(d, 2 * self.degree, self.degree)
        _check_size(self.grid.shape, mom.n_plain + mom.n_y * values.shape[1])
        self.total = float(w.sum())
        self.counts = linear_bin(X, w, values, self.mid, self.grid)
        M, B, used_fft = self._moments(mom)
        self.floor = self.floor_for(used_fft, self.grid)
        self.coef, self.valid = self._fit_nodes(mom, M, B)
        self.sums = None
        self._exact = None

    def _moments(self, mom: Moments):
        """Moments about every node: plain (n_plain, G) and target (n_y, k, G); whether by FFT."""
        grid, k = self.grid, self.values.shape[1]
        K = self.stencil(grid)
        plain = exponents(grid.lo.size, mom.top)
        stencils = moment_stencils(K, grid.step, plain)
        M = np.empty((mom.n_plain, grid.size))
        B = np.empty((mom.n_y, k, grid.size))
        used_fft = False
        for a, T in enumerate(stencils):
            rows = self.counts if a < mom.n_y else self.counts[-1:]
            S, fft = convolve(rows, grid.shape, T)
            used_fft |= fft
            M[a] = S[-1]
            if a < mom.n_y:
                B[a] = S[:-1]
        return M, B, used_fft

    def _fit_nodes(self, mom: Moments, M: np.ndarray, B: np.ndarray):
        """Solve the local problem at every node above the floor: coef (G, 1 + d, k), valid."""
        G, d, k = self.grid.size, self.grid.lo.size, self.values.shape[1]
        D = M[0]
        valid = (D > self.floor) & (D > 0)
        nodes = np.flatnonzero(valid)
        coef = np.zeros((G, 1 + d, k))
        width = min(1 + d, mom.n_y)
        per_row = (mom.shift.pairs + mom.yshift.pairs * k) * 2 + (mom.n_plain + mom.n_y * k) * 4
        for block in blocks(len(nodes), per_row):
            g = nodes[block]
            Dg = D[g]
            Mg = (M[:, g] / Dg).T
            Bg = np.moveaxis(B[:, :, g] / Dg, 2, 0)
            fitted = fit_local(mom, Mg, Bg, np.zeros((len(g), d)), self.degree)[0]
            coef[g, :width] = fitted[:, :width]
        return coef, valid

    def predict(self, Q: np.ndarray, slopes: bool = False):
        """Interpolated fits at scaled queries ``Q``: values (m, k), slopes (m, d, k), exact mask.

        ``slopes`` (in scaled units) only when asked (else None).  Rows of the
        mask are outside the grid or have a corner node below the floor: the
        caller computes them on the exact path.
        """
        m, k, d = len(Q), self.values.shape[1], self.grid.lo.size
        out = np.zeros((m, k))
        grad = np.zeros((m, d, k)) if slopes else None
        base, fractions, inside = self.grid.cells(Q)
        redo = ~inside
        for _, flat, weight in self.grid.corners(base, fractions):
            redo |= (weight > 0) & ~self.valid[flat]
            out += weight[:, None] * self.coef[flat, 0]
            if slopes:
                grad += weight[:, None, None] * self.coef[flat, 1:]
        out += self.mid
        return out, grad, redo

    def pool(self, Q, fallback="nearest", options=None):  # pragma: no cover - not a pooling
        raise NotImplementedError("a binned local polynomial fit predicts with .predict")
