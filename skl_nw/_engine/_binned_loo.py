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

from ._binned import _CHUNK, BinnedSums, Grid, convolve

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


def _self_weight(K: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``sum_a sum_b lambda_a lambda_b K(g_a - g_b)`` over the corners of each point's cell."""
    d = f.shape[1]
    center = np.array(K.shape) // 2
    corners = np.array(np.meshgrid(*[[0, 1]] * d, indexing="ij")).reshape(d, -1).T
    lam = [np.prod(np.where(c == 1, f, 1.0 - f), axis=1) for c in corners]
    out = np.zeros(len(f))
    for a, ca in enumerate(corners):
        for b, cb in enumerate(corners):
            out += lam[a] * lam[b] * K[tuple(center + ca - cb)]
    return out


def _loo_one(binned: BinnedSums, grid: Grid, counts, factor: float, out: np.ndarray):
    """Leave-one-out ratios at one multiple into ``out`` (n, k); return the rows to redo."""
    K = binned.stencil(grid, factor)
    sums, used_fft = convolve(counts, grid.shape, K)
    floor = binned.floor_for(used_fft, grid)
    X, w, V = binned.X, binned.w, binned.values
    redo = []
    for start in range(0, len(X), _CHUNK):
        rows = slice(start, start + _CHUNK)
        j, f, _ = grid.cells(X[rows])
        S = np.zeros((len(j), sums.shape[0]))
        for _, flat, weight in grid.corners(j, f):
            S += weight[:, None] * sums[:, flat].T
        own = w[rows] * _self_weight(K, f)
        S[:, :-1] -= own[:, None] * (V[rows] - binned.mid)
        S[:, -1] -= own
        good = S[:, -1] > max(floor, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows] = S[:, :-1] / S[:, -1:] + binned.mid
        redo.append(start + np.flatnonzero(~good))
    return np.concatenate(redo) if redo else np.empty(0, np.intp)


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
    for t, factor in enumerate(factors):
        grid, counts = levels[level_of[t]]
        redo = _loo_one(binned, grid, counts, float(factor), out[t])
        if len(redo):
            if tree is None:
                from sklearn.neighbors import KDTree

                tree = KDTree(binned.X)
            out[t, redo] = _exact_rows(binned, redo, float(factor), fallback, tree)
    return out
