"""The binned path's compiled kernels: linear binning and the binned leave-one-out.

The linear binning takes one pass adding each row's ``2^d`` hat-function
weights (1.6x numpy's scatter-adds at n = 1e7); the binned leave-one-out
ratios one pass per candidate bandwidth instead of some twenty numpy passes.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports them), so
that one import decides whether numba serves the engine.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["binned_examples", "binned_loo", "linear_bin"]


@numba.njit(inline="always")
def _cell(x, lo, inv_step, n):
    """Lowest node of the cell holding ``x`` on an axis of ``n`` nodes, and the fraction."""
    t = (x - lo) * inv_step
    j = min(max(np.floor(t), 0.0), n - 2.0)
    return np.int64(j), min(max(t - j, 0.0), 1.0)


@numba.njit(inline="always")
def _scatter_line(out, o, node, lam, f, v):
    """Add ``lam (1 - f) v`` at ``out[o, node]`` and ``lam f v`` at ``out[o, node + 1]``."""
    out[o, node] += lam * (1.0 - f) * v
    out[o, node + 1] += lam * f * v


@numba.njit(inline="always")
def _scatter_square(out, o, node, stride, lam, f, g, v):
    """Add ``lam v`` over the four nodes of a square cell: two lines ``stride`` apart."""
    _scatter_line(out, o, node, lam * (1.0 - f), g, v)
    _scatter_line(out, o, node + stride, lam * f, g, v)


@numba.njit(nogil=True, cache=True)
def linear_bin(X, lo, inv_step, shape, w, V, mid, out):  # pragma: no cover - compiled
    """Add the linear binning of the rows of ``X`` (1 to 3 features) to ``out`` (k + 1, G).

    Row ``i`` adds ``lambda_c w_i [V_i - mid, 1]`` to the ``2^d`` nodes ``c``
    of its cell on the grid ``lo + j / inv_step`` of ``shape`` (C order),
    ``lambda_c`` the product over axes of ``1 - f`` or ``f`` (in axis order),
    ``f`` the row's fraction of the cell, clipped to the grid as in the
    numpy passes.
    """
    n, d = X.shape
    k = V.shape[1]
    s1 = shape[2] if d == 3 else 1  # the strides of axes 0 and 1 in C order
    s0 = s1 * shape[1] if d > 1 else 1
    for i in range(n):
        j, f0 = _cell(X[i, 0], lo[0], inv_step[0], shape[0])
        base, f1, f2 = j * s0, 0.0, 0.0
        if d > 1:
            j, f1 = _cell(X[i, 1], lo[1], inv_step[1], shape[1])
            base += j * s1
        if d > 2:
            j, f2 = _cell(X[i, 2], lo[2], inv_step[2], shape[2])
            base += j
        for o in range(k + 1):
            v = w[i] * (V[i, o] - mid[o]) if o < k else w[i]
            if d == 1:
                _scatter_line(out, o, base, 1.0, f0, v)
            elif d == 2:
                _scatter_square(out, o, base, s0, 1.0, f0, f1, v)
            else:
                _scatter_square(out, o, base, s1, 1.0 - f0, f1, f2, v)
                _scatter_square(out, o, base + s0, s1, f0, f1, f2, v)


@numba.njit(nogil=True, cache=True)
def binned_loo(flat, lam, pairs, taps, sums, w, V, mid, floor, out, below):  # pragma: no cover
    """Binned leave-one-out ratios at the training points, in one pass.

    Point ``i``'s binned sums are ``S = sum_c lam[c, i] sums[:, flat[c, i]]``
    over its cell's corners; its own binned weight ``own = w_i sum_e
    pairs[e, i] taps[e]`` comes off: ``out[i] = (S_o - own (V_io - mid_o)) /
    (S_k - own) + mid_o``.  ``below[i]`` when the remaining weight sum is not
    above ``floor`` (``out[i]`` is then NaN: the caller redoes the row).
    """
    corners, n = flat.shape
    k = V.shape[1]
    for i in range(n):
        own = 0.0
        for e in range(taps.size):
            own += pairs[e, i] * taps[e]
        own = w[i] * own
        den = 0.0
        for c in range(corners):
            den += lam[c, i] * sums[k, flat[c, i]]
        den -= own
        below[i] = not den > floor
        for o in range(k):
            num = 0.0
            for c in range(corners):
                num += lam[c, i] * sums[o, flat[c, i]]
            num -= own * (V[i, o] - mid[o])
            out[i, o] = num / den + mid[o] if not below[i] else np.nan


def binned_examples() -> dict:
    """Return the arguments of each kernel on a tiny problem (see ``_compiled.examples``)."""
    grid = np.array([0.0]), np.array([1.0]), np.array([3], np.int64)
    flat, lam = np.zeros((2, 1), np.int64), np.full((2, 1), 0.5)
    return {
        linear_bin: (np.zeros((1, 1)), *grid, np.ones(1), np.ones((1, 1)), np.zeros(1),
                     np.zeros((2, 3))),
        binned_loo: (flat, lam, np.ones((2, 1)), np.ones(2), np.ones((2, 3)), np.ones(1),
                     np.ones((1, 1)), np.zeros(1), 0.0, np.empty((1, 1)), np.empty(1, bool)),
    }  # fmt: skip
