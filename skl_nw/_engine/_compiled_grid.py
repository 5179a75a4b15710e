"""The cell grid's compiled kernels: nearest-neighbour radii and kernel sums in a few dimensions.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports them).  With a
nearest-neighbour span in 2 or 3 dimensions (``_grid``), the counted rows are
sorted by the cell of a uniform grid that holds them (``starts[c]:starts[c +
1]`` are cell ``c``'s rows).  A query's ``k``-th nearest distance comes from
the cells that meet a ball of ``rho`` cell sides about it, ``rho`` growing until ``k``
of their rows lie within the ball (every row that close is in those cells, so
the ``k``-th distance is exact); its sums from the cells that meet its radius.
No (query, row) array of the whole problem is ever written.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST

__all__ = ["grid_example", "grid_radii", "grid_sums"]


@numba.njit(inline="always")
def _box(q, lower, side, shape, reach, lo, hi):  # pragma: no cover - compiled
    """Cell index ranges ``lo[j]..hi[j]`` (inclusive) within ``reach`` of ``q``; False if none."""
    for j in range(q.shape[0]):
        a = int(np.floor((q[j] - reach - lower[j]) / side))
        b = int(np.floor((q[j] + reach - lower[j]) / side))
        lo[j] = max(a, 0)
        hi[j] = min(b, shape[j] - 1)
        if lo[j] > hi[j]:
            return False
    return True


@numba.njit(inline="always")
def _next_cell(cell, lo, hi):  # pragma: no cover - compiled
    """Advance the odometer ``cell`` over the box; False when it has run through."""
    for j in range(cell.shape[0] - 1, -1, -1):
        if cell[j] < hi[j]:
            cell[j] += 1
            return True
        cell[j] = lo[j]
    return False


@numba.njit(nogil=True, cache=True)
def grid_radii(X, starts, lower, side, shape, Q, own, k, start, out):  # pragma: no cover - compiled
    """``out[j]``: the ``k``-th smallest distance from ``Q[j]`` to the rows but ``own[j]``.

    The largest distance where fewer than ``k`` rows remain (0 with none).
    ``start``: the first search radius, in cell sides (grown by a quarter
    until ``k`` rows lie within it).
    """
    n, d = X.shape
    strides = np.ones(d, np.int64)
    for j in range(d - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    lo, hi, cell = np.empty(d, np.int64), np.empty(d, np.int64), np.empty(d, np.int64)
    buffer, spare = np.empty(n), np.empty(n)
    hist = np.zeros(256, np.int64)  # the selection's bins
    widest = 0
    for j in range(d):
        widest = max(widest, shape[j])
    for i in range(Q.shape[0]):
        q = Q[i]
        rho = start  # in cell sides: where k rows are expected, then growing
        while True:
            reach = rho * side
            reach2, skip = reach * reach, own[i]
            count, close = 0, 0
            if _box(q, lower, side, shape, reach, lo, hi):
                cell[:] = lo
                while True:
                    c = 0
                    for j in range(d):
                        c += cell[j] * strides[j]
                    first, stop = starts[c], starts[c + 1]
                    if first <= skip < stop:  # the row left out: drop it below
                        stop = skip
                    for _part in range(2):  # the rows before and after the one left out
                        for row in range(first, stop):
                            s = 0.0
                            for j in range(d):
                                s += (X[row, j] - q[j]) ** 2
                            buffer[count] = s
                            count += 1
                            close += s <= reach2
                        if stop == starts[c + 1]:
                            break
                        first, stop = skip + 1, starts[c + 1]
                    if not _next_cell(cell, lo, hi):
                        break
            if close >= k or rho > widest + 1 + _outside(q, lower, side, shape):
                break
            rho *= 1.25
        if count == 0:
            out[i] = 0.0
        elif count < k:
            out[i] = np.sqrt(buffer[:count].max())
        else:  # the k-th among the close rows (every row that close is in the box)
            limit = reach * reach if close >= k else buffer[:count].max()
            out[i] = np.sqrt(_select(buffer, count, limit, k, hist, spare))


@numba.njit(inline="always")
def _select(values, count, limit, k, hist, spare):  # pragma: no cover - compiled
    """Return the ``k``-th smallest of ``values[:count]`` (``k`` of them ``<= limit``).

    One pass counts the values in ``len(hist)`` bins of ``[0, limit]``, a
    second gathers the bin that holds the ``k``-th; only that bin is
    partitioned.
    """
    bins = hist.shape[0]
    hist[:] = 0
    scale = bins / limit if limit > 0 else 0.0
    for t in range(count):
        if values[t] <= limit:
            hist[min(int(values[t] * scale), bins - 1)] += 1
    below, chosen = 0, 0
    for chosen in range(bins):
        if below + hist[chosen] >= k:
            break
        below += hist[chosen]
    m = 0
    for t in range(count):
        if values[t] <= limit and min(int(values[t] * scale), bins - 1) == chosen:
            spare[m] = values[t]
            m += 1
    return np.partition(spare[:m], k - below - 1)[k - below - 1]


@numba.njit(inline="always")
def _outside(q, lower, side, shape):  # pragma: no cover - compiled
    """How many cell sides ``q`` lies outside the grid (its farthest coordinate)."""
    far = 0.0
    for j in range(q.shape[0]):
        top = lower[j] + shape[j] * side
        far = max(far, (lower[j] - q[j]) / side, (q[j] - top) / side)
    return int(np.ceil(far))


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def grid_sums(X, WV, starts, lower, side, shape, Q, r, own, a, b, squares,
              out):  # pragma: no cover - compiled  # fmt: skip
    """``out[j, p] = sum_{i != own[j]} K(|X_i - Q_j| / r_j)^(p+1) WV[i]``.

    ``K(u) = (1 - u^a)^b`` for ``u^2 = |X_i - Q_j|^2 / r_j^2 < 1`` (the general
    path's support test), else 0; ``r_j = 0`` keeps the rows at ``Q_j``.
    """
    n, d = X.shape
    c = WV.shape[1]
    strides = np.ones(d, np.int64)
    for j in range(d - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    lo, hi, cell = np.empty(d, np.int64), np.empty(d, np.int64), np.empty(d, np.int64)
    for i in range(Q.shape[0]):
        q = Q[i]
        out[i] = 0.0
        r2 = r[i] * r[i]
        if not _box(q, lower, side, shape, r[i], lo, hi):
            continue
        cell[:] = lo
        while True:
            cc = 0
            for j in range(d):
                cc += cell[j] * strides[j]
            for row in range(starts[cc], starts[cc + 1]):
                s = 0.0
                for j in range(d):
                    s += (X[row, j] - q[j]) ** 2
                if r2 > 0.0:
                    u2 = s / r2
                    inside = u2 < 1.0
                else:
                    u2 = 0.0
                    inside = s == 0.0
                if not inside or row == own[i]:
                    continue
                u = np.sqrt(u2)
                base = 1.0 - (u if a == 1 else (u2 if a == 2 else u2 * u))
                value = 1.0
                for _ in range(b):
                    value *= base
                for t in range(c):  # a row's values are contiguous
                    out[i, 0, t] += value * WV[row, t]
                if squares:
                    for t in range(c):
                        out[i, 1, t] += value * value * WV[row, t]
            if not _next_cell(cell, lo, hi):
                break


def grid_example() -> dict:
    """Return the kernels' arguments on a tiny problem (see ``_compiled.examples``)."""
    X, starts = np.zeros((2, 2)), np.array([0, 2], np.int64)
    lower, shape, own = np.zeros(2), np.ones(2, np.int64), np.full(1, -1, np.int64)
    return {
        grid_radii: (X, starts, lower, 1.0, shape, np.zeros((1, 2)), own, 1, 1.0, np.empty(1)),
        grid_sums: (X, np.ones((2, 2)), starts, lower, 1.0, shape, np.zeros((1, 2)),
                    np.ones(1), own, 3, 3, True, np.empty((1, 2, 2))),
    }  # fmt: skip
