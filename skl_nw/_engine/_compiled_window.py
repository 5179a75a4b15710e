"""The window path's compiled kernel: kernel sums over each query's window of sorted rows.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports it).  With a
nearest-neighbour span in one dimension, the rows inside a query's radius are
a window ``lo:hi`` of the rows sorted by their input (see ``_window``); a
kernel of the form ``(1 - u^a)^b`` (the tricube, the biweight, ...) is
evaluated in the loop.  Per query, one pass writes the window's kernel
values into a buffer (branch-free: it vectorises), then one dot product per
value column (``WVT`` holds the columns as rows, each contiguous): no
(query, row) array of the whole problem is ever written.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST

__all__ = ["window_example", "window_sums"]


@numba.njit(inline="always", fastmath=_FAST)
def _profile(x, q, inv_r, a, b, K, lo, hi):  # pragma: no cover - compiled
    """``K[i - lo] = (1 - u^a)^b`` for ``u = |x_i - q| inv_r < 1``, else 0."""
    for i in range(lo, hi):
        u = abs(x[i] - q) * inv_r
        p = u if a == 1 else (u * u if a == 2 else u * u * u)
        base = 1.0 - p if u < 1.0 else 0.0
        value = 1.0 if u < 1.0 else 0.0
        if b >= 1:
            value = base
        if b >= 2:
            value = value * base
        if b >= 3:
            value = value * base
        K[i - lo] = value


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def window_sums(x, WVT, q, r, lo, hi, own, a, b, squares, out):  # pragma: no cover - compiled
    """``out[j, p] = sum_{i in lo[j]:hi[j], i != own[j]} K(|x_i - q_j| / r_j)^(p+1) WVT[:, i]``.

    ``K(u) = (1 - u^a)^b`` for ``u < 1`` (``a`` in 1, 2, 3, ``b`` in 0..3),
    else 0; ``r_j = 0`` keeps the rows at ``q_j`` (``u = 0``).  ``out`` (m, 2, c):
    the second power only when ``squares``.
    """
    c = WVT.shape[0]
    width = 0
    for j in range(q.shape[0]):
        width = max(width, hi[j] - lo[j])
    K = np.empty(max(width, 1))
    for j in range(q.shape[0]):
        start, stop = lo[j], hi[j]
        if r[j] > 0.0:
            _profile(x, q[j], 1.0 / r[j], a, b, K, start, stop)
        else:  # r = 0: the rows at q only
            for i in range(start, stop):
                K[i - start] = 1.0 if x[i] == q[j] else 0.0
        if start <= own[j] < stop:
            K[own[j] - start] = 0.0
        for t in range(c):
            row = WVT[t]
            acc = 0.0
            for i in range(start, stop):
                acc += K[i - start] * row[i]
            out[j, 0, t] = acc
            out[j, 1, t] = 0.0
        if squares:
            for t in range(c):
                row = WVT[t]
                acc = 0.0
                for i in range(start, stop):
                    acc += K[i - start] * K[i - start] * row[i]
                out[j, 1, t] = acc


def window_example() -> dict:
    """Return the kernel's arguments on a tiny problem (see ``_compiled.examples``)."""
    index = np.zeros(1, np.int64)
    return {
        window_sums: (np.zeros(2), np.ones((2, 2)), np.zeros(1), np.ones(1), index,
                      np.full(1, 2, np.int64), np.full(1, -1, np.int64), 3, 3, True,
                      np.empty((1, 2, 2))),
    }  # fmt: skip
