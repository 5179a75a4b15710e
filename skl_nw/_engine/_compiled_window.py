"""The window path's compiled kernels: kernel sums over each query's window of sorted rows.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports them).  With a
nearest-neighbour span in one dimension, the rows inside a query's radius are
a window ``lo:hi`` of the rows sorted by their input (see ``_window``), and a
kernel of the form ``(1 - u^a)^b`` (the tricube, the biweight, ...) is a
polynomial of degree ``D = a b`` in ``|x - q| / r`` on each side of ``q``.

:func:`window_moments` stores, for aligned blocks of ``2^l`` sorted rows
(``l >=`` a smallest level), the moments ``sum w V (x - c)^j`` (``j <= D``) about the
block's centre ``c``: a binary tree of blocks.  :func:`window_tree_sums` then
covers each side of ``q`` (and each side of a row left out) by ``O(log k)``
blocks, each summed by shifting the kernel's polynomial to the block's centre
(a Taylor shift, ``O(D^2)``, then ``D + 1`` products per value column), and
the few rows outside whole blocks one by one: ``O(log k)`` per query instead
of ``O(k)``.  Every row of a block lies within ``r`` of ``q``, so each shifted
term is bounded by the block's ``sum |w V|`` and the rounding error of a sum is
a few ``D`` units of ``sum |w V|`` (tested against the row-by-row loop,
:func:`window_sums`, which serves the cases the tree cannot: overflowing
powers, and radii so small that ``r^D`` underflows).
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST

__all__ = ["window_example", "window_moments", "window_sums", "window_tree_sums"]


@numba.njit(inline="always", fastmath=_FAST)
def _profile(x, q, r, a, b, K, lo, hi):  # pragma: no cover - compiled
    """``K[i - lo] = (1 - u^a)^b`` for ``|x_i - q| < r`` (``u = |x_i - q| / r``), else 0.

    The support is decided on the distances themselves, as the general path
    decides it on their squares: a row at the radius has weight 0.
    """
    inv_r = 1.0 / r
    for i in range(lo, hi):
        d = abs(x[i] - q)
        u = min(d * inv_r, 1.0)
        p = u if a == 1 else (u * u if a == 2 else u * u * u)
        base = 1.0 - p
        value = 1.0
        if b >= 1:
            value = base
        if b >= 2:
            value = value * base
        if b >= 3:
            value = value * base
        K[i - lo] = value if d < r else 0.0


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
            _profile(x, q[j], r[j], a, b, K, start, stop)
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


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def window_moments(x, WVT, degree, min_level):  # pragma: no cover - compiled
    """Moments of aligned blocks of sorted rows: ``(centres, M, first)``.

    Block ``i`` of level ``l`` (rows ``i 2^l : (i + 1) 2^l``, whole blocks only)
    is entry ``first[l - min_level] + i``; ``M[e, t, j] = sum (x_i - c_e)^j
    WVT[t, i]`` over its rows (``j <= degree``), ``c_e`` the middle of its
    inputs.  The smallest blocks sum their rows, each larger one its two
    halves' moments shifted to its centre (binomially).
    """
    n, c = x.shape[0], WVT.shape[0]
    levels = 0
    while (1 << (min_level + levels)) <= n:
        levels += 1
    first = np.zeros(levels + 1, np.int64)
    for level in range(levels):
        first[level + 1] = first[level] + (n >> (min_level + level))
    centres = np.empty(first[levels])
    M = np.zeros((first[levels], c, degree + 1))
    power = np.empty(degree + 1)
    size = 1 << min_level
    for e in range(n >> min_level):
        centres[e] = 0.5 * (x[e * size] + x[(e + 1) * size - 1])
        for row in range(e * size, (e + 1) * size):
            y = x[row] - centres[e]
            power[0] = 1.0
            for j in range(1, degree + 1):
                power[j] = power[j - 1] * y
            for t in range(c):
                v = WVT[t, row]
                for j in range(degree + 1):
                    M[e, t, j] += power[j] * v
    binom = np.zeros((degree + 1, degree + 1))
    for j in range(degree + 1):
        binom[j, 0] = 1.0
        for m in range(1, j + 1):
            binom[j, m] = binom[j - 1, m - 1] + binom[j - 1, m]
    for level in range(1, levels):
        size = 1 << (min_level + level)
        for i in range(n // size):
            e = first[level] + i
            centres[e] = 0.5 * (x[i * size] + x[(i + 1) * size - 1])
            for child in (first[level - 1] + 2 * i, first[level - 1] + 2 * i + 1):
                delta = centres[child] - centres[e]  # (x - c_e) = (x - c_child) + delta
                power[0] = 1.0
                for j in range(1, degree + 1):
                    power[j] = power[j - 1] * delta
                for t in range(c):
                    for j in range(degree + 1):
                        total = 0.0
                        for m in range(j + 1):
                            total += binom[j, m] * power[j - m] * M[child, t, m]
                        M[e, t, j] += total
    return centres, M, first


@numba.njit(inline="always", fastmath=_FAST)
def _value(u, a, b):  # pragma: no cover - compiled
    """``(1 - u^a)^b`` for ``0 <= u <= 1`` (``a`` in 1, 2, 3; ``b`` in 0..3)."""
    base = 1.0 - (u if a == 1 else (u * u if a == 2 else u * u * u))
    value = 1.0
    for _ in range(b):
        value *= base
    return value


@numba.njit(inline="always", fastmath=_FAST)
def _add_range(x, WVT, centres, M, first, min_level, start, stop, q, inv_r, sign,
               a, b, shifts, g, power, acc):  # pragma: no cover - compiled  # fmt: skip
    """Add the sums of rows ``start:stop`` (one side of ``q``, all within ``r``) to ``acc``.

    A block's rows have ``|x - q| / r = ratio + scale (x - c)``: the kernel's
    polynomial about ``ratio`` has coefficients ``g_j`` in ``x - c``, and the
    block adds ``sum_j g_j M[e, t, j]``.
    """
    c, levels = WVT.shape[0], first.shape[0] - 1
    small = 1 << min_level
    P, D = shifts.shape[0], shifts.shape[1] - 1
    i = start
    while i < stop:
        if (i & (small - 1)) != 0 or i + small > stop:  # a row outside whole blocks
            k1 = _value(min(abs(x[i] - q) * inv_r, 1.0), a, b)
            for t in range(c):
                acc[0, t] += k1 * WVT[t, i]
            if P == 2:
                for t in range(c):
                    acc[1, t] += k1 * k1 * WVT[t, i]
            i += 1
            continue
        level = 0  # the largest aligned block inside the range
        while (level + 1 < levels and (i & ((small << (level + 1)) - 1)) == 0
               and i + (small << (level + 1)) <= stop):  # fmt: skip
            level += 1
        e = first[level] + (i >> (min_level + level))
        # |x - q| / r = (delta + sign (x - c)) / r on this side of q
        ratio = sign * (centres[e] - q) * inv_r
        scale = sign * inv_r
        power[0] = 1.0
        for m in range(1, D + 1):
            power[m] = power[m - 1] * ratio
        for p in range(P):
            step = 1.0
            for j in range(D + 1):  # g_j = scale^j sum_m shifts[p, j, m] ratio^m
                total = 0.0
                for m in range(D + 1 - j):
                    total += shifts[p, j, m] * power[m]
                g[j] = total * step
                step *= scale
            for t in range(c):
                total = 0.0
                for j in range(D + 1):
                    total += g[j] * M[e, t, j]
                acc[p, t] += total
        i += small << level


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def window_tree_sums(x, WVT, centres, M, first, min_level, q, r, lo, hi, own, a, b,
                     shifts, out):  # pragma: no cover - compiled  # fmt: skip
    """Compute the sums of :func:`window_sums` through the blocks of :func:`window_moments`.

    ``shifts`` (P, D + 1, D + 1): ``shifts[p, j, m] = C(j + m, j) coef[j + m]``
    for the kernel's powers as polynomials in ``u`` (``coef``: ``K``, then
    ``K^2`` when P = 2; zero-padded to ``M``'s degree).  Queries with ``r^D``
    below 1e-280 take the row-by-row loop.
    """
    c = WVT.shape[0]
    D = M.shape[2] - 1
    tiny = 1e-280
    g, power = np.empty(D + 1), np.empty(D + 1)
    acc = np.zeros((2, c))
    for j in range(q.shape[0]):
        out[j] = 0.0
        if not r[j] > 0.0 or r[j] ** D < tiny:
            window_sums(x, WVT, q[j : j + 1], r[j : j + 1], lo[j : j + 1], hi[j : j + 1],
                        own[j : j + 1], a, b, shifts.shape[0] == 2, out[j : j + 1])  # fmt: skip
            continue
        inv_r = 1.0 / r[j]
        start, stop = lo[j], hi[j]
        while start < stop and abs(x[start] - q[j]) >= r[j]:  # the support: d < r
            start += 1
        while stop > start and abs(x[stop - 1] - q[j]) >= r[j]:
            stop -= 1
        split, right = start, stop  # split: the first row at or right of q
        while split < right:
            mid = (split + right) // 2
            if x[mid] < q[j]:
                split = mid + 1
            else:
                right = mid
        acc[:] = 0.0
        for side_start, side_stop, sign in ((start, split, -1.0), (split, stop, 1.0)):
            o = own[j]
            if side_start <= o < side_stop:  # the row left out splits its side
                _add_range(x, WVT, centres, M, first, min_level, side_start, o, q[j], inv_r,
                           sign, a, b, shifts, g, power, acc)  # fmt: skip
                _add_range(x, WVT, centres, M, first, min_level, o + 1, side_stop, q[j],
                           inv_r, sign, a, b, shifts, g, power, acc)  # fmt: skip
            else:
                _add_range(x, WVT, centres, M, first, min_level, side_start, side_stop, q[j],
                           inv_r, sign, a, b, shifts, g, power, acc)  # fmt: skip
        for t in range(c):
            out[j, 0, t] = acc[0, t]
            out[j, 1, t] = acc[1, t] if shifts.shape[0] == 2 else 0.0


def window_example() -> dict:
    """Return the kernels' arguments on a tiny problem (see ``_compiled.examples``)."""
    index = np.zeros(1, np.int64)
    x, WVT = np.zeros(2), np.ones((2, 2))
    centres, M, first = np.zeros(0), np.zeros((0, 2, 10)), np.zeros(1, np.int64)
    return {
        window_sums: (x, WVT, np.zeros(1), np.ones(1), index, np.full(1, 2, np.int64),
                      np.full(1, -1, np.int64), 3, 3, True, np.empty((1, 2, 2))),
        window_moments: (x, WVT, 9, 4),
        window_tree_sums: (x, WVT, centres, M, first, 4, np.zeros(1), np.ones(1),
                           index, np.full(1, 2, np.int64), np.full(1, -1, np.int64), 3, 3,
                           np.ones((2, 10, 10)), np.empty((1, 2, 2))),
    }  # fmt: skip
