"""Closed-form leave-one-out on the binned path, for many bandwidth multiples at once.

At bandwidth ``f * h`` the binned sums at a training point ``x_i`` include
the point itself with the weight ``w_i Kt_ii``, where ``Kt_ii`` is the binned
kernel's value for the pair ``(x_i, x_i)``: the multilinear interpolant
``sum_a sum_b lambda_a(x_i) lambda_b(x_i) K(g_a - g_b)`` over the corners of
its cell, computed exactly.  Subtracting it,

``yhat_-i = (N(x_i) - w_i Kt_ii V_i) / (D(x_i) - w_i Kt_ii)``,

removes the point from its own binned prediction exactly (not just its
``K(0)`` term).  Points whose remaining sum falls below the floor (isolated
points, where the subtraction cancels) are computed exactly over their
neighbourhood, or take the nearest other point's value (``fallback``).

Candidates share the binned data: a multiple ``f >= 1`` uses the grid
coarsened ``2^floor(log2 f)`` times (restriction with weights 1/2, 1, 1/2 per
axis, which *is* linear binning on the coarser grid, by the refinement
relation of the hat function), so it keeps between 1 and 2 times the
fitted number of nodes per bandwidth; multiples below 1 use the fitted grid.
"""

from __future__ import annotations

import numpy as np

from ._binned import BinnedSums, Grid, convolve, stencil_at

__all__ = ["loo_pool"]


def _restrict(A: np.ndarray, axis: int) -> np.ndarray:
    """Full-weighting restriction along ``axis``: ``C_J = A_2J + (A_2J-1 + A_2J+1) / 2``."""
    A = np.moveaxis(A, axis, 0)
    n = A.shape[0]
    m = (n + 2) // 2
    B = np.zeros((2 * m + 1, *A.shape[1:]))
    B[:n] = A
    odd = B[1 : 2 * m : 2]
    C = B[0 : 2 * m : 2] + 0.5 * odd
    C[1:] += 0.5 * odd[:-1]
    return np.moveaxis(C, 0, axis)


def _levels(binned: BinnedSums, top: int):
    """``(grid, counts)`` for each level 0..top, each twice as coarse as the last."""
    grid, counts = binned.grid, binned.counts
    out = [(grid, counts)]
    for _ in range(top):
        C = counts.reshape(counts.shape[0], *grid.shape)
        for axis in range(1, C.ndim):
            C = _restrict(C, axis)
        grid = grid.coarsened()
        counts = C.reshape(C.shape[0], -1)
        out.append((grid, counts))
    return out


class _Points:
    """The training points on one grid: corner nodes and weights, self-pair coefficients.

    Computed once per grid level and shared by its candidates: the binned
    self-weight at any bandwidth is ``sum_e pairs[e] K(e * step)`` over the
    corner offsets ``e`` in ``{-1, 0, 1}^d``, where ``pairs[e]`` sums
    ``lambda_a lambda_b`` over the corner pairs with ``a - b = e``.
    """

    def __init__(self, grid: Grid, X: np.ndarray):
        base, fractions, _ = grid.cells(X)
        corners = list(grid.corners(base, fractions))
        self.nodes = [(flat, weight) for _, flat, weight in corners]
        self.pairs: dict[tuple, np.ndarray] = {}
        for ca, _, la in corners:
            for cb, _, lb in corners:
                e = tuple(ca - cb)
                self.pairs[e] = self.pairs.get(e, 0.0) + la * lb


def _loo_one(binned: BinnedSums, grid: Grid, counts, points: _Points, factor: float, out):
    """Leave-one-out ratios at one multiple into ``out`` (n, k); return the rows to redo."""
    K = binned.stencil(grid, factor)
    sums, used_fft = convolve(counts, grid.shape, K)
    floor = binned.floor_for(used_fft, grid)
    S = np.zeros((len(binned.X), sums.shape[0]))
    for flat, weight in points.nodes:
        S += weight[:, None] * sums[:, flat].T
    own = sum(c * stencil_at(K, e) for e, c in points.pairs.items())
    own = binned.w * own
    S[:, :-1] -= own[:, None] * (binned.values - binned.mid)
    S[:, -1] -= own
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:] = S[:, :-1] / S[:, -1:] + binned.mid
    return np.flatnonzero(~(S[:, -1] > max(floor, 0.0)))


def _exact_rows(binned: BinnedSums, rows, factor: float, fallback: str, tree) -> np.ndarray:
    """Exact leave-one-out ratios at ``rows``: neighbours within the radius, self by index."""
    X, w, V = binned.X, binned.w, binned.values
    radius = binned.radius * factor
    neighbours, distances = tree.query_radius(X[rows], r=radius, return_distance=True)
    out = np.empty((len(rows), V.shape[1]))
    for t, (i, idx, dist) in enumerate(zip(rows, neighbours, distances, strict=True)):
        keep = idx != i
        idx, dist = idx[keep], dist[keep]
        weights = w[idx] * binned.kernel.profile((dist / factor) ** 2)
        if weights.sum() > 0:
            out[t] = weights @ V[idx] / weights.sum()
        elif fallback == "nan":
            out[t] = np.nan
        else:  # the h -> 0 limit: the nearest other point
            _, near = tree.query(X[i : i + 1], k=2)
            other = near[0][near[0] != i][0]
            out[t] = V[other]
    return out


def loo_pool(binned: BinnedSums, factors, fallback: str = "nearest") -> np.ndarray:
    """Binned leave-one-out predictions at bandwidths ``factor * h``: (F, n, k)."""
    factors = np.asarray(factors, dtype=float)
    n, k = binned.values.shape
    out = np.empty((len(factors), n, k))
    level_of = np.maximum(np.floor(np.log2(factors)), 0).astype(int)
    levels = _levels(binned, int(level_of.max(initial=0)))
    tree = None
    for level in np.unique(level_of):
        grid, counts = levels[level]
        points = _Points(grid, binned.X)
        for t in np.flatnonzero(level_of == level):
            redo = _loo_one(binned, grid, counts, points, float(factors[t]), out[t])
            if len(redo):
                if tree is None:
                    from sklearn.neighbors import KDTree

                    tree = KDTree(binned.X)
                out[t, redo] = _exact_rows(binned, redo, float(factors[t]), fallback, tree)
    return out
