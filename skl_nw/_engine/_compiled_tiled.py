"""Compiled kernels that take each log weight in registers, four query rows at a time.

The Gaussian's log weight of a pair is a dot product of folded keys
(``_folded.FoldedKeys``) or, from the inputs themselves, a slope times a sum of
squared differences.  A fused kernel that takes either one feature at a time
over whole rows reads and writes the row once per feature; these kernels work
on blocks of ``_BLOCK`` training points (in L1) for ``_TILE`` query rows at a
time: each training point's features are loaded once per tile, and four
features go into each read-modify-write of the block.  Then the exponential
and the sums take the block in the same pass, and the value columns past the
first are summed in tiles (:func:`_tile_columns`).

``sq_distances_tiled`` writes the squared distances themselves (the same
register tiles), for the passes that need the (m, n) block: the grouped sums
and the other kernels' log-space path where the folded product could cancel.

Their log weights are in bits (base 2: the caller folds ``log2 e`` into the
slope and the offsets): the exponential is then ``2^x``, which needs no
reduction by ``ln 2`` (:func:`_compiled_exp._exp2_nonpositive`: three fewer
multiply-adds a pair, in kernels whose multiply-adds are the bound in d >= 8;
``python -m benchmarks engine --only exp_limit``).

``exp_dot_tiled`` (the folded dot product: ``c`` multiply-adds per pair) is
exact to the GEMM's rounding, which the caller bounds; ``exp_diff_tiled``
(squared differences: a subtraction and a multiply-add per feature) is exact
to rounding for any finite input, the path for data far from the centre.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST, _exp2_nonpositive

# Query rows per tile of the fused kernels, and value columns per tile: each training
# point's columns are read once per tile, and 4 rows x 3 columns of sums stay in
# registers (12 of AVX2's 16; a 4 x 4 tile spilled sums to memory there: 0.56x).
_TILE = 4
_COLUMNS = 3


@numba.njit(inline="always", fastmath=_FAST)
def _tile_columns(E, rows, VT, out, i0, start):  # pragma: no cover - compiled
    """``out[i0 + r, o] = sum_j E[r, j] VT[o, j]`` for ``r < rows``, ``o >= start``.

    ``E`` holds ``_TILE`` rows (those past ``rows`` are ignored).  Three
    columns at a time: one pass over the training points per three columns,
    twelve multiply-adds per seven loads, where a row at a time makes two
    loads per multiply-add.  The last ``(k - start) % 3`` columns take a pass
    each (four multiply-adds per five loads), not a padded tile.
    """
    n, k = E.shape[1], VT.shape[0]
    stop = k - (k - start) % _COLUMNS
    e0, e1, e2, e3 = E[0], E[1], E[2], E[3]
    for o in range(stop, k):
        v = VT[o]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(n):
            x = v[j]
            s0 += e0[j] * x
            s1 += e1[j] * x
            s2 += e2[j] * x
            s3 += e3[j] * x
        column = (s0, s1, s2, s3)
        for r in range(rows):
            out[i0 + r, o] = column[r]
    for o in range(start, stop, _COLUMNS):
        v0, v1, v2 = VT[o], VT[o + 1], VT[o + 2]
        s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = s30 = s31 = s32 = 0.0
        for j in range(n):
            a0, a1, a2, a3 = e0[j], e1[j], e2[j], e3[j]
            x0, x1, x2 = v0[j], v1[j], v2[j]
            s00 += a0 * x0
            s01 += a0 * x1
            s02 += a0 * x2
            s10 += a1 * x0
            s11 += a1 * x1
            s12 += a1 * x2
            s20 += a2 * x0
            s21 += a2 * x1
            s22 += a2 * x2
            s30 += a3 * x0
            s31 += a3 * x1
            s32 += a3 * x2
        tile = (s00, s01, s02, s10, s11, s12, s20, s21, s22, s30, s31, s32)
        for r in range(rows):
            for c in range(_COLUMNS):
                out[i0 + r, o + c] = tile[_COLUMNS * r + c]


# Training points per block: a (4, 256) float64 block is 8 KiB, so the
# block, four feature rows and the values stay in a 32 KiB L1 between the
# passes of a tile (``python -m benchmarks engine --only kernels``).
_BLOCK = 256
# Tiles per group of a single value column: each block of training points serves
# the group's 8 tiles (32 rows) while it is in L2, not one tile (at d = 32 the block's
# 33 feature rows no longer fit L1, and one tile a block streamed them from L3;
# ``python -m benchmarks engine --only kernels``).  With more columns a group is one
# tile: the exponentials of its rows are kept whole for the column sums (_tile_columns).
_GROUP = 8


@numba.njit(inline="always", fastmath=_FAST)
def _tile_rows(Q, i0, P):  # pragma: no cover - compiled
    """Copy the tile's four rows from ``i0`` into ``P`` (the last row repeated past the end)."""
    last = Q.shape[0] - 1
    for r in range(_TILE):
        P[r, :] = Q[min(i0 + r, last)]


# The block loops index with unsigned integers: numba then emits no negative-index
# wrap-around, and LLVM vectorises over j a loop that updates four rows of A from
# four feature rows at once (16 multiply-adds per 4 loads of features and 4 of A;
# with one row per loop LLVM's run-time overlap checks or their limit of 8 kept
# it scalar, 5x slower per multiply-add in a micro-benchmark).  The whole kernel
# against the one-pass one: ``python -m benchmarks engine --only kernels``.
# Features come in fours: the caller pads them with zero rows (_dense.pad_features).
@numba.njit(inline="always", fastmath=_FAST)
def _dot_block(P, KT, j0, jb, A):  # pragma: no cover - compiled
    """``A[r, j] = P[r, :c] . KT[:c, j0 + j] + KT[c, j0 + j] + P[r, c]``, ``c % 4 == 0``."""
    c = KT.shape[0] - 1
    z, o, t, h = numba.uint64(0), numba.uint64(1), numba.uint64(2), numba.uint64(3)
    u0, ub, uc = numba.uint64(j0), numba.uint64(jb), numba.uint64(c)
    b0, b1, b2, b3 = P[0, c], P[1, c], P[2, c], P[3, c]
    for f in range(0, c, 4):  # four features of four rows per pass
        x00, x01, x02, x03 = P[0, f], P[0, f + 1], P[0, f + 2], P[0, f + 3]
        x10, x11, x12, x13 = P[1, f], P[1, f + 1], P[1, f + 2], P[1, f + 3]
        x20, x21, x22, x23 = P[2, f], P[2, f + 1], P[2, f + 2], P[2, f + 3]
        x30, x31, x32, x33 = P[3, f], P[3, f + 1], P[3, f + 2], P[3, f + 3]
        uf = numba.uint64(f)
        if f == 0:  # the first pass starts from the constant terms (no pass of its own)
            for j in range(ub):
                jj = u0 + j
                y0, y1, y2, y3 = KT[uf, jj], KT[uf + o, jj], KT[uf + t, jj], KT[uf + h, jj]
                w = KT[uc, jj]
                A[z, j] = w + b0 + x00 * y0 + x01 * y1 + x02 * y2 + x03 * y3
                A[o, j] = w + b1 + x10 * y0 + x11 * y1 + x12 * y2 + x13 * y3
                A[t, j] = w + b2 + x20 * y0 + x21 * y1 + x22 * y2 + x23 * y3
                A[h, j] = w + b3 + x30 * y0 + x31 * y1 + x32 * y2 + x33 * y3
            continue
        for j in range(ub):
            jj = u0 + j
            y0, y1, y2, y3 = KT[uf, jj], KT[uf + o, jj], KT[uf + t, jj], KT[uf + h, jj]
            A[z, j] += x00 * y0 + x01 * y1 + x02 * y2 + x03 * y3
            A[o, j] += x10 * y0 + x11 * y1 + x12 * y2 + x13 * y3
            A[t, j] += x20 * y0 + x21 * y1 + x22 * y2 + x23 * y3
            A[h, j] += x30 * y0 + x31 * y1 + x32 * y2 + x33 * y3


@numba.njit(inline="always", fastmath=_FAST)
def _sq4(x0, x1, x2, x3, y0, y1, y2, y3):  # pragma: no cover - compiled
    """``|x - y|^2`` over four features."""
    v0, v1, v2, v3 = x0 - y0, x1 - y1, x2 - y2, x3 - y3
    return v0 * v0 + v1 * v1 + v2 * v2 + v3 * v3


@numba.njit(inline="always", fastmath=_FAST)
def _sq4x4(x, XT, uf, jj):  # pragma: no cover - compiled
    """Return the four rows' ``|x_r - X_jj|^2`` over features ``uf:uf + 4`` (``x``: 16 values)."""
    o, t, h = numba.uint64(1), numba.uint64(2), numba.uint64(3)
    y0, y1, y2, y3 = XT[uf, jj], XT[uf + o, jj], XT[uf + t, jj], XT[uf + h, jj]
    return (
        _sq4(x[0], x[1], x[2], x[3], y0, y1, y2, y3),
        _sq4(x[4], x[5], x[6], x[7], y0, y1, y2, y3),
        _sq4(x[8], x[9], x[10], x[11], y0, y1, y2, y3),
        _sq4(x[12], x[13], x[14], x[15], y0, y1, y2, y3),
    )


# The first four features write the block (no pass of its own zeroes it); with only
# four, that pass also scales it: in d = 4-32 up to 1.2x the whole kernel's rate
# (``python -m benchmarks engine --only kernels``, "tiled differences").
@numba.njit(inline="always", fastmath=_FAST)
def _diff_block(P, XT, j0, jb, slope, off, A):  # pragma: no cover - compiled
    """``A[r, j] = slope |P_r - X_(j0 + j)|^2 + off[j0 + j]``, ``d % 4 == 0``."""
    d = XT.shape[0]
    z, o, t, h = numba.uint64(0), numba.uint64(1), numba.uint64(2), numba.uint64(3)
    u0, ub = numba.uint64(j0), numba.uint64(jb)
    for f in range(0, d, 4):  # four features of four rows per pass
        x = (P[0, f], P[0, f + 1], P[0, f + 2], P[0, f + 3],
             P[1, f], P[1, f + 1], P[1, f + 2], P[1, f + 3],
             P[2, f], P[2, f + 1], P[2, f + 2], P[2, f + 3],
             P[3, f], P[3, f + 1], P[3, f + 2], P[3, f + 3])  # fmt: skip
        uf = numba.uint64(f)
        if d == 4:
            for j in range(ub):
                s0, s1, s2, s3 = _sq4x4(x, XT, uf, u0 + j)
                w = off[u0 + j]
                A[z, j], A[o, j] = slope * s0 + w, slope * s1 + w
                A[t, j], A[h, j] = slope * s2 + w, slope * s3 + w
        elif f == 0:
            for j in range(ub):
                A[z, j], A[o, j], A[t, j], A[h, j] = _sq4x4(x, XT, uf, u0 + j)
        else:
            for j in range(ub):
                s0, s1, s2, s3 = _sq4x4(x, XT, uf, u0 + j)
                A[z, j] += s0
                A[o, j] += s1
                A[t, j] += s2
                A[h, j] += s3
    if d > 4:
        for j in range(ub):
            w = off[u0 + j]
            A[z, j] = slope * A[z, j] + w
            A[o, j] = slope * A[o, j] + w
            A[t, j] = slope * A[t, j] + w
            A[h, j] = slope * A[h, j] + w


@numba.njit(inline="always", fastmath=_FAST)
def _exp_block(A, E, j0, jb, v, lead, sums):  # pragma: no cover - compiled
    """``2^A`` of the block, added to ``sums[r] = (sum e, sum e v)``; into ``E`` if it has columns.

    ``sum e v`` only when ``lead`` (the first value column, in this pass).
    """
    store = E.shape[1] > 0
    v = v[j0 : j0 + jb]
    for r in range(A.shape[0]):
        a, den, num = A[r], 0.0, 0.0
        if store:
            e = E[r, j0 : j0 + jb]
            for j in range(jb):
                t = _exp2_nonpositive(a[j])
                e[j] = t
                den += t
        elif lead:
            for j in range(jb):
                t = _exp2_nonpositive(a[j])
                den += t
                num += t * v[j]
        else:
            for j in range(jb):
                den += _exp2_nonpositive(a[j])
        if store and lead:
            for j in range(jb):
                num += e[j] * v[j]
        sums[r, 0] += den
        sums[r, 1] += num


@numba.njit(inline="always", fastmath=_FAST)
def _finish_group(sums, E, g0, VT, out, lead):  # pragma: no cover - compiled
    """Write a group's sums: the weight sums, the lead column, then the others in tiles."""
    m, k = out.shape[0], VT.shape[0]
    for r in range(min(sums.shape[0], m - g0)):
        out[g0 + r, k] = sums[r, 0]
        if lead:
            out[g0 + r, 0] = sums[r, 1]
    if E.shape[1] > 0:
        for s in range(0, min(sums.shape[0], m - g0), _TILE):
            _tile_columns(E[s : s + _TILE], min(_TILE, m - g0 - s), VT, out, g0 + s, int(lead))


@numba.njit(inline="always", fastmath=_FAST)
def _group_rows(Q, g0, P):  # pragma: no cover - compiled
    """Copy the group's rows from ``g0`` into ``P``; return its number of tiles."""
    tiles = min(P.shape[0], Q.shape[0] - g0 + _TILE - 1) // _TILE
    for s in range(tiles):
        _tile_rows(Q, g0 + s * _TILE, P[s * _TILE : (s + 1) * _TILE])
    return tiles


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_dot_tiled(Qk, KT, VT, out):  # pragma: no cover - compiled
    """``exp_dot_sums`` with the log weights in register tiles and in bits.

    The same arguments and result, except that the folded product is the
    base-2 log weight: ``e_ij = 2^(Qk_i . KT_j)`` (the caller's slope and
    offsets times ``log2 e``).  The number of features ``c = KT.shape[0] - 1``
    is a multiple of 4 (zero rows padded).
    """
    m, n, k = Qk.shape[0], KT.shape[1], VT.shape[0]
    lead = k % _COLUMNS == 1  # the first column in the exponential's pass, the others in tiles
    rows = _TILE * (_GROUP if k == 1 else 1)
    E = np.zeros((rows, n if k > 1 else 0))
    A, P, sums = np.empty((_TILE, _BLOCK)), np.empty((rows, Qk.shape[1])), np.empty((rows, 2))
    for g0 in range(0, m, rows):
        sums[:] = 0.0
        tiles = _group_rows(Qk, g0, P)
        for j0 in range(0, n, _BLOCK):
            jb = min(_BLOCK, n - j0)
            for s in range(0, tiles * _TILE, _TILE):
                _dot_block(P[s : s + _TILE], KT, j0, jb, A)
                _exp_block(A, E[s : s + _TILE], j0, jb, VT[0], lead, sums[s : s + _TILE])
        _finish_group(sums, E, g0, VT, out, lead)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_diff_tiled(Q, XT, slope, off, VT, out):  # pragma: no cover - compiled
    """``out[i] = [sum_j e_ij VT[:, j], sum_j e_ij]``, ``e_ij = 2^(slope |Q_i - X_j|^2 + off_j)``.

    ``XT`` is ``X.T`` (d, n) with ``d`` a multiple of 4 (zero rows padded, and
    zero columns in ``Q``), ``slope <= 0`` and ``off <= 0``; squared distances
    by direct differences, never stored.
    """
    m, n, k = Q.shape[0], XT.shape[1], VT.shape[0]
    lead = k % _COLUMNS == 1
    rows = _TILE * (_GROUP if k == 1 else 1)
    E = np.zeros((rows, n if k > 1 else 0))
    A, P, sums = np.empty((_TILE, _BLOCK)), np.empty((rows, Q.shape[1])), np.empty((rows, 2))
    for g0 in range(0, m, rows):
        sums[:] = 0.0
        tiles = _group_rows(Q, g0, P)
        for j0 in range(0, n, _BLOCK):
            jb = min(_BLOCK, n - j0)
            for s in range(0, tiles * _TILE, _TILE):
                _diff_block(P[s : s + _TILE], XT, j0, jb, slope, off, A)
                _exp_block(A, E[s : s + _TILE], j0, jb, VT[0], lead, sums[s : s + _TILE])
        _finish_group(sums, E, g0, VT, out, lead)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def sq_distances_tiled(Q, XT, S):  # pragma: no cover - compiled
    """``S[i, j] = |Q_i - X_j|^2`` by direct differences (exact to rounding for any finite input).

    ``XT`` is ``X.T`` (d, n) with ``d`` a multiple of 4 (zero rows padded, and
    zero columns in ``Q``).  Each block of training points serves a group of
    ``_GROUP`` tiles of four rows, as in :func:`exp_diff_tiled`.
    """
    m, n = Q.shape[0], XT.shape[1]
    rows = _TILE * _GROUP
    A, P, off = np.empty((_TILE, _BLOCK)), np.empty((rows, Q.shape[1])), np.zeros(n)
    for g0 in range(0, m, rows):
        tiles = _group_rows(Q, g0, P)
        for j0 in range(0, n, _BLOCK):
            jb = min(_BLOCK, n - j0)
            for s in range(0, tiles * _TILE, _TILE):
                _diff_block(P[s : s + _TILE], XT, j0, jb, 1.0, off, A)
                for r in range(min(_TILE, m - g0 - s)):
                    S[g0 + s + r, j0 : j0 + jb] = A[r, :jb]
