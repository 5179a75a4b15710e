"""The cell grid's compiled kernels: nearest-neighbour radii and kernel sums in a few dimensions.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports them).  With a
nearest-neighbour span in 2 or 3 dimensions (``_grid``), the counted rows are
sorted by the cell of a uniform grid that holds them (``starts[c]:starts[c +
1]`` are cell ``c``'s rows), and the queries by the cell that holds them.  The
cells along the last axis are consecutive, so the cells that meet a ball are a
few *lines* of consecutive rows (:func:`_lines`: one per cell of the other
axes, cut to the ball's chord).

A query's ``k``-th nearest distance comes from the lines within ``rho`` cell
sides of it, ``rho`` growing until ``k`` of their rows lie within that reach
(every row that close is in those lines, so the ``k``-th distance is exact):
the squared distances in one vectorised pass, then a selection by a histogram
(no sort, no heap of ``k`` entries).  The sums take a *group* of queries (at
most ``_GROUP`` of one cell) at a time: the lines within the group's largest
radius of its bounding box, in pieces of ``_PIECE`` rows, each a block of
kernel weights ``(queries, rows)`` (0 beyond a query's radius) times the
rows' value columns: one matrix product (BLAS), each row's values read once
per group instead of once per query.  No (query, row) array of the whole
problem is ever written.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["grid_example", "grid_radii", "grid_sums"]

# Rows per block of the sums' weights (a group's block, _GROUP x _PIECE doubles, stays
# in L2).  CPU time of the sums at n = 2e4, k = 2000, d = 2 (see docs/benchmarks.md,
# "LOESS and LOWESS"): 128 rows 10 % slower, 256 to 1024 alike.
_PIECE = 256
# Bins of the radius's selection (a histogram of the squared distances within reach).
_BINS = 256
# _span.EDGE: squared distances within it of r^2 are on the kernel's edge.
_EDGE = 64 * np.finfo(np.float64).eps


@numba.njit(inline="always")
def _strides(shape):  # pragma: no cover - compiled
    """Flat-index strides of a C-ordered grid of ``shape``."""
    d = shape.shape[0]
    strides = np.ones(d, np.int64)
    for j in range(d - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    return strides


@numba.njit(inline="always")
def _lines(low, high, reach, lower, side, shape, strides, lines):  # pragma: no cover - compiled
    """Fill ``lines[t] = (first, stop)`` (flat cells) within ``reach`` of the box ``[low, high]``.

    One line per cell of the first ``d - 1`` axes that the reach meets, cut
    to the chord of the ball there (widened by a relative 1e-12, so that
    rounding never drops a row within reach).  Returns the number of lines.
    """
    d = low.shape[0]
    last = d - 1
    lo, hi, cell = np.empty(d, np.int64), np.empty(d, np.int64), np.empty(d, np.int64)
    for j in range(last):
        lo[j] = _cell((low[j] - reach - lower[j]) / side, shape[j])
        hi[j] = _cell((high[j] + reach - lower[j]) / side, shape[j])
        if lo[j] > hi[j] or lo[j] == shape[j] or hi[j] < 0:
            return 0
        lo[j], hi[j] = max(lo[j], 0), min(hi[j], shape[j] - 1)
        cell[j] = lo[j]
    reach2 = reach * reach * (1.0 + 1e-12)
    count = 0
    while True:
        gap2, flat = 0.0, 0
        for j in range(last):  # the box's distance to this line, along the other axes
            corner = lower[j] + cell[j] * side
            gap = max(corner - high[j], low[j] - (corner + side), 0.0)
            gap2 += gap * gap
            flat += cell[j] * strides[j]
        if gap2 <= reach2:
            half = np.sqrt(reach2 - gap2) * (1.0 + 1e-12)
            a = max(_cell((low[last] - half - lower[last]) / side, shape[last]), 0)
            b = min(_cell((high[last] + half - lower[last]) / side, shape[last]), shape[last] - 1)
            if a <= b:
                lines[count, 0], lines[count, 1] = flat + a, flat + b + 1
                count += 1
        if not _next_line(cell, lo, hi, last):
            return count


@numba.njit(inline="always")
def _cell(position, count):  # pragma: no cover - compiled
    """``floor(position)`` clipped to ``[-1, count]`` before the conversion (no overflow)."""
    return int(np.floor(min(max(position, -1.0), float(count))))


@numba.njit(inline="always")
def _next_line(cell, lo, hi, last):  # pragma: no cover - compiled
    """Advance the odometer ``cell[:last]`` over the box; False when it has run through."""
    for j in range(last - 1, -1, -1):
        if cell[j] < hi[j]:
            cell[j] += 1
            return True
        cell[j] = lo[j]
    return False


@numba.njit(inline="always")
def _distances(XT, first, stop, q, buffer, at):  # pragma: no cover - compiled
    """``buffer[at + t] = |X[first + t] - q|^2`` for the rows ``first:stop`` (vectorised).

    On 1-D views: indexing ``XT[j, t]`` itself keeps the loop scalar (0.65x
    the radii's speed, n = 2e4, k = 2000, d = 2).
    """
    d, out = XT.shape[0], buffer[at : at + stop - first]
    if d == 2:
        q0, q1, x0, x1 = q[0], q[1], XT[0, first:stop], XT[1, first:stop]
        for t in range(stop - first):
            out[t] = (x0[t] - q0) ** 2 + (x1[t] - q1) ** 2
    elif d == 3:
        q0, q1, q2 = q[0], q[1], q[2]
        x0, x1, x2 = XT[0, first:stop], XT[1, first:stop], XT[2, first:stop]
        for t in range(stop - first):
            out[t] = (x0[t] - q0) ** 2 + (x1[t] - q1) ** 2 + (x2[t] - q2) ** 2
    else:
        out[:] = 0.0
        for j in range(d):
            x, qj = XT[j, first:stop], q[j]
            for t in range(stop - first):
                out[t] += (x[t] - qj) ** 2


@numba.njit(inline="always")
def _gather(XT, starts, lines, count, q, skip, buffer):  # pragma: no cover - compiled
    """Squared distances from ``q`` to the rows of ``lines[:count]`` but ``skip``; their number."""
    m = 0
    for t in range(count):
        first, stop = starts[lines[t, 0]], starts[lines[t, 1]]
        _distances(XT, first, stop, q, buffer, m)
        m += stop - first
        if first <= skip < stop:  # the row left out: the last value takes its place
            m -= 1
            buffer[m - (stop - 1 - skip)] = buffer[m]
    return m


@numba.njit(nogil=True, cache=True)
def grid_radii(XT, starts, lower, side, shape, Q, own, k, start,
               out):  # pragma: no cover - compiled  # fmt: skip
    """``out[j]``: the ``k``-th smallest distance from ``Q[j]`` to the rows but ``own[j]``.

    The largest distance where fewer than ``k`` rows remain (0 with none).
    ``start``: the first search radius, in cell sides (grown by a quarter
    until ``k`` rows lie within it).  ``XT`` (d, n): the rows' inputs by
    feature.  Queries in cell order share their lines in the cache.
    """
    d, n = XT.shape
    strides = _strides(shape)
    lines = np.empty((np.prod(shape[:-1]), 2), np.int64)
    buffer, spare = np.empty(n), np.empty(n)
    index = np.empty(n, np.int64)
    hist = np.zeros(_BINS + 8, np.int64)
    for i in range(Q.shape[0]):
        q = Q[i]
        rho = start  # in cell sides: where k rows are expected, then growing
        everything = _farthest(q, lower, side, shape) + 1.0  # a reach that meets every cell
        if i > 0:  # the previous query's k nearest lie within its radius plus the step
            step = 0.0
            for j in range(d):
                step += (q[j] - Q[i - 1, j]) ** 2
            rho = min(max((out[i - 1] + np.sqrt(step)) / side * (1.0 + 1e-9), 0.25), everything)
        while True:
            reach = rho * side
            count = _lines(q, q, reach, lower, side, shape, strides, lines)
            m = _gather(XT, starts, lines, count, q, own[i], buffer)
            close = 0
            for t in range(m):
                close += buffer[t] <= reach * reach
            if close >= k or rho > everything:
                break
            rho *= 1.25
        if m == 0:
            out[i] = 0.0
        elif m < k:
            out[i] = np.sqrt(buffer[:m].max())
        else:  # the k-th among the close rows (every row that close is in the lines)
            limit = reach * reach if close >= k else buffer[:m].max()
            out[i] = np.sqrt(_select(buffer, m, limit, k, hist, spare, index))


@numba.njit(inline="always")
def _select(values, count, limit, k, hist, spare, index):  # pragma: no cover - compiled
    """Return the ``k``-th smallest of ``values[:count]`` (``k`` of them ``<= limit``).

    One pass bins the values of ``[0, limit]`` (``_BINS`` bins; those above
    go to 8 spare bins in turn, so that no increment waits on the last), a
    second counts the bins, a third gathers the bin that holds the ``k``-th;
    only that bin is partitioned.
    """
    hist[:] = 0
    scale = _BINS / limit if limit > 0 else 0.0
    for t in range(count):
        v = values[t]
        index[t] = min(int(v * scale), _BINS - 1) if v <= limit else _BINS + (t & 7)
    for t in range(count):
        hist[index[t]] += 1
    below, chosen = 0, 0
    for chosen in range(_BINS):
        if below + hist[chosen] >= k:
            break
        below += hist[chosen]
    m = 0
    for t in range(count):  # a rare branch: the bin holds about count / _BINS values
        if index[t] == chosen:
            spare[m] = values[t]
            m += 1
    return np.partition(spare[:m], k - below - 1)[k - below - 1]


@numba.njit(inline="always")
def _farthest(q, lower, side, shape):  # pragma: no cover - compiled
    """Return the distance from ``q`` to the grid's farthest corner, in cell sides."""
    far = 0.0
    for j in range(q.shape[0]):
        far += max(abs(q[j] - lower[j]), abs(lower[j] + shape[j] * side - q[j])) ** 2
    return np.sqrt(far) / side


@numba.njit(inline="always")
def _weights(XT, first, stop, q, r, a, b, row):  # pragma: no cover - compiled
    """``row[t] = K(|X[first + t] - q| / r)`` with ``K(u) = (1 - u^a)^b`` for ``u < 1``, else 0.

    ``r = 0`` keeps the rows at ``q`` (``K = 1``).  The support test is the
    general path's ``s / r^2 < 1 - EDGE`` (``s`` the squared distance; the
    k-th row lies on the edge, whatever the rounding), taken as ``s`` below
    ``r^2 (1 - EDGE)``; the kernel then takes ``s`` times ``1 / r^2`` (a
    division costs more than the rest of the pass).  The
    tricube (LOESS's kernel) in 2 and 3 dimensions takes one branch-free pass
    from the inputs, the others two.
    """
    d, L, r2 = XT.shape[0], stop - first, r * r
    scale = 1.0 / r2 if r > 0.0 else 0.0
    r2 *= 1.0 - _EDGE
    if a == 3 and b == 3 and d == 2 and r > 0.0:
        q0, q1, x0, x1 = q[0], q[1], XT[0, first:stop], XT[1, first:stop]
        for t in range(L):
            s = (x0[t] - q0) ** 2 + (x1[t] - q1) ** 2
            u2 = s * scale
            base = 1.0 - u2 * np.sqrt(u2)
            row[t] = base * base * base if s < r2 else 0.0
        return
    if a == 3 and b == 3 and d == 3 and r > 0.0:
        q0, q1, q2 = q[0], q[1], q[2]
        x0, x1, x2 = XT[0, first:stop], XT[1, first:stop], XT[2, first:stop]
        for t in range(L):
            s = (x0[t] - q0) ** 2 + (x1[t] - q1) ** 2 + (x2[t] - q2) ** 2
            u2 = s * scale
            base = 1.0 - u2 * np.sqrt(u2)
            row[t] = base * base * base if s < r2 else 0.0
        return
    _distances(XT, first, stop, q, row, 0)
    for t in range(L):
        u2 = row[t] * scale
        base = 1.0 - (np.sqrt(u2) if a == 1 else (u2 if a == 2 else u2 * np.sqrt(u2)))
        value = base**b
        if b <= 3:
            value = 1.0 if b == 0 else (base if b == 1 else base * base * (base if b == 3 else 1.0))
        inside = row[t] < r2 if r > 0.0 else row[t] == 0.0
        row[t] = value if inside else 0.0


@numba.njit(nogil=True, cache=True)
def grid_sums(XT, WV, starts, lower, side, shape, Q, r, own, groups, a, b, squares,
              out):  # pragma: no cover - compiled  # fmt: skip
    """``out[j, p] = sum_{i != own[j]} K(|X_i - Q_j| / r_j)^(p+1) WV[i]``.

    ``K(u) = (1 - u^a)^b`` for ``u^2 = |X_i - Q_j|^2 / r_j^2 < 1`` (the general
    path's support test), else 0; ``r_j = 0`` keeps the rows at ``Q_j``.
    ``groups``: the queries ``groups[g]:groups[g + 1]`` share their lines
    (neighbours, by cell); ``XT`` (d, n) the rows' inputs by feature.
    """
    d = XT.shape[0]
    strides = _strides(shape)
    lines = np.empty((np.prod(shape[:-1]), 2), np.int64)
    most = 1
    for g in range(groups.shape[0] - 1):
        most = max(most, groups[g + 1] - groups[g])
    block = np.empty(most * _PIECE)
    low, high = np.empty(d), np.empty(d)
    out[:] = 0.0
    for g in range(groups.shape[0] - 1):
        first, stop = groups[g], groups[g + 1]
        reach = 0.0
        low[:], high[:] = np.inf, -np.inf
        for i in range(first, stop):
            reach = max(reach, r[i])
            for j in range(d):
                low[j], high[j] = min(low[j], Q[i, j]), max(high[j], Q[i, j])
        count = _lines(low, high, reach, lower, side, shape, strides, lines)
        for t in range(count):
            for row in range(starts[lines[t, 0]], starts[lines[t, 1]], _PIECE):
                end = min(row + _PIECE, starts[lines[t, 1]])
                W = block[: (stop - first) * (end - row)].reshape(stop - first, end - row)
                for i in range(first, stop):
                    _weights(XT, row, end, Q[i], r[i], a, b, W[i - first])
                    if row <= own[i] < end:
                        W[i - first, own[i] - row] = 0.0
                _accumulate(W, WV[row:end], out[first:stop], squares)


@numba.njit(inline="always")
def _accumulate(W, V, out, squares):  # pragma: no cover - compiled
    """``out[:, 0] += W V`` and, with ``squares``, ``out[:, 1] += (W * W) V`` (BLAS)."""
    out[:, 0] += np.dot(W, V)
    if squares:
        W *= W
        out[:, 1] += np.dot(W, V)


def grid_example() -> dict:
    """Return the kernels' arguments on a tiny problem (see ``_compiled.examples``)."""
    XT, starts = np.zeros((2, 2)), np.array([0, 2], np.int64)
    lower, shape, own = np.zeros(2), np.ones(2, np.int64), np.full(1, -1, np.int64)
    return {
        grid_radii: (XT, starts, lower, 1.0, shape, np.zeros((1, 2)), own, 1, 1.0, np.empty(1)),
        grid_sums: (XT, np.ones((2, 2)), starts, lower, 1.0, shape, np.zeros((1, 2)),
                    np.ones(1), own, np.array([0, 1], np.int64), 3, 3, True,
                    np.empty((1, 2, 2))),
    }  # fmt: skip
