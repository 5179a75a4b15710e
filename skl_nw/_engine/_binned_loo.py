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

from ._binned import BinnedSums, Grid
from ._binned_convolve import GridSizeError, convolve, stencil_at
from ._loader import compiled

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
    ``lambda_a lambda_b`` over the corner pairs with ``a - b = +-e`` (the
    stencil is symmetric: ``e`` and ``-e`` share one coefficient).

    Attributes
    ----------
    flat, lam : ndarray of shape (2^d, n_samples)
        Each point's corner nodes (flat indices) and multilinear weights.
    offsets : list of tuple
        The offsets ``e`` kept, one of each pair ``+-e``.
    pairs : ndarray of shape (len(offsets), n_samples)
        Their coefficients.
    """

    def __init__(self, grid: Grid, X: np.ndarray):
        base, fractions, _ = grid.cells(X)
        corners = list(grid.corners(base, fractions))
        self.flat = np.stack([flat for _, flat, _ in corners])
        self.lam = np.stack([weight for _, _, weight in corners])
        pairs: dict[tuple, np.ndarray] = {}
        for ca, _, la in corners:
            for cb, _, lb in corners:
                e = max(tuple(ca - cb), tuple(cb - ca))
                pairs[e] = pairs.get(e, 0.0) + la * lb
        self.offsets = list(pairs)
        self.pairs = np.stack(list(pairs.values()))


def _loo_one(binned: BinnedSums, grid: Grid, counts, points: _Points, factor: float, out):
    """Leave-one-out ratios at one multiple into ``out`` (n, k); return the rows to redo."""
    K = binned.stencil(grid, factor)
    try:
        sums, used_fft = convolve(counts, grid.shape, K)
    except GridSizeError:  # a wider stencil pads the transform past the limit: all exact
        return np.arange(len(out))
    floor = max(binned.floor_for(used_fft, grid), 0.0)
    taps = np.array([stencil_at(K, e) for e in points.offsets])
    below = np.empty(len(out), dtype=bool)
    kernels = compiled()
    if kernels is not None:
        kernels.binned_loo(points.flat, points.lam, points.pairs, taps, sums, binned.wb,
                           *binned.scaled_values(), floor, out, below)  # fmt: skip
    else:
        _loo_ratios(points, sums, taps, binned, floor, out, below)
    out *= binned.unit
    return np.flatnonzero(below)


def _loo_ratios(points: _Points, sums, taps, binned: BinnedSums, floor: float, out, below):
    """Run the numpy passes of ``_compiled.binned_loo``: ratios, and which rows are below."""
    own = binned.wb * (taps @ points.pairs)
    den = _interpolated(points, sums[-1]) - own
    values, mid = binned.scaled_values()
    with np.errstate(divide="ignore", invalid="ignore"):
        for o, m in enumerate(mid):
            num = _interpolated(points, sums[o]) - own * (values[:, o] - m)
            out[:, o] = num / den + m
    np.logical_not(den > floor, out=below)


def _interpolated(points: _Points, values: np.ndarray) -> np.ndarray:
    """Interpolate node values (G,) at the points: ``sum_c lam_c values[flat_c]``."""
    out = points.lam[0] * values[points.flat[0]]
    for flat, lam in zip(points.flat[1:], points.lam[1:], strict=True):
        out += lam * values[flat]
    return out


def _exact_rows(binned: BinnedSums, rows, factor: float, fallback: str, tree) -> np.ndarray:
    """Exact leave-one-out ratios at ``rows``: neighbours within the radius, self by index."""
    X, w, V = binned.X, binned.wb, binned.scaled_values()[0]
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
        else:  # the h -> 0 limit: the nearest other point (none: one row)
            _, near = tree.query(X[i : i + 1], k=min(2, len(X)))
            others = near[0][near[0] != i]
            out[t] = V[others[0]] if len(others) else np.nan
    return out * binned.unit


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
