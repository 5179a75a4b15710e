"""Compiled kernels of the integer screen (AVX-512 VNNI): skip the pairs whose weight is negligible.

The Gaussian's weights of a row fall off as ``2^(slope |q - x|^2 + off)``;
most pairs of a row at a small bandwidth lie hundreds of bits below the
row's largest and add nothing to its sums.  An exact pass cannot skip them
without knowing which they are, and their float64 distances cost as much as
the pass itself.  These kernels find them from int8 copies of the points
(``_screen``): ``vpdpbusd`` takes 64 products of a query and 16 points per
instruction, against 8 float64 multiply-adds, and a rigorous bound on the
quantisation's error turns each integer dot product into a test that keeps
every pair within the margin.  The kept pairs then take float64 direct
differences and the base-2 polynomial of ``exp_diff_tiled`` (same weights to
rounding).

The kernels are LLVM IR emitted through numba's ``@intrinsic``: numba has no
int8 dot-product or compress instruction of its own.  They compile only when
called; ``_screen`` calls them only on a CPU with avx512f, avx512bw and
avx512_vnni (no import-time compilation: ``_compiled`` does not import this
module).

Layouts.  Points come in packed vectors of 16: ``groups`` blocks of 64 bytes
(16 points x 4 features, as ``vpdpbusd`` reads them), the unsigned bytes
``x~ + 128``; queries are signed int8 rows of ``4 * groups`` features.  The
float64 rows (points and queries) are padded with zeros to a multiple of 8
features (one zmm register per 8).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._compiled_exp import _EXP2_POLY, _MIN_EXPONENT2, _ROUND

# A register tile is _ROWS queries by _VECTORS packed vectors (64 points): 16 int32
# accumulators of 32 zmm, each query byte broadcast once per 4 vectors (the
# prototype's 4 x 4 tile measured fastest of 2-8 x 2-8 on an avx512_vnni Xeon, measured
# once; the whole kernel: ``python -m benchmarks engine --only exp_limit``).
_ROWS = 4
_VECTORS = 4
_LANES = 16  # int32 lanes of a zmm register: points per packed vector
_NEVER = -(1 << 30)  # the integer offset of padding (and zero-weight) points: never kept

_I1, _I16, _I32, _I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_F64 = ir.DoubleType()
_VI = ir.VectorType(_I32, 16)
_VD = ir.VectorType(_F64, 8)
_VL = ir.VectorType(_I64, 8)


def _wide(builder, value):
    """``value`` as int64 (numba passes its integers at their own width)."""
    return builder.sext(value, _I64) if value.type.width < 64 else value


def _pointer(context, builder, array_type, array, offset, element):
    """Return a pointer to ``element``s from element ``offset`` of ``array``'s data."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [offset]), element.as_pointer())


def _splat(builder, scalar, vector):
    """``scalar`` in every lane of a ``vector`` type."""
    undef = ir.Constant(vector, ir.Undefined)
    zeros = ir.Constant(ir.VectorType(_I32, vector.count), [0] * vector.count)
    return builder.shuffle_vector(builder.insert_element(undef, scalar, _I32(0)), undef, zeros)


def _load(builder, pointer, index):
    return builder.load(builder.gep(pointer, [index]), align=1)


def _store(builder, value, pointer, index):
    builder.store(value, builder.gep(pointer, [index]), align=1)


def _dot_tile(context, builder, signature, args):
    """Return the tile's ``_ROWS x _VECTORS`` int32 accumulators: offsets plus dots.

    ``args``: the packed points, their byte offset, the int8 queries, the first query row,
    the groups of four features, the offsets, the first point.  The loop over groups runs
    at run time (any d) with the accumulators in allocas, which LLVM keeps in registers.
    """
    Xp, xoff, Qq, qrow, groups, offsets, p0 = args[:7]
    tX, _, tQ, _, _, tN, _ = signature.args[:7]
    dpbusd = builder.module.declare_intrinsic(
        "llvm.x86.avx512.vpdpbusd.512", fnty=ir.FunctionType(_VI, [_VI, _VI, _VI])
    )
    groups = _wide(builder, groups)
    xp = _pointer(context, builder, tX, Xp, _wide(builder, xoff), _VI)
    qp = _pointer(
        context,
        builder,
        tQ,
        Qq,
        builder.mul(_wide(builder, qrow), builder.mul(groups, _I64(4))),
        _I32,
    )
    first = _pointer(context, builder, tN, offsets, _wide(builder, p0), _VI)
    slots = [[cgutils.alloca_once(builder, _VI) for _ in range(_VECTORS)] for _ in range(_ROWS)]
    for u in range(_VECTORS):
        start = _load(builder, first, _I64(u))
        for r in range(_ROWS):
            builder.store(start, slots[r][u])
    with cgutils.for_range(builder, groups) as loop:
        g = loop.index
        xv = [
            _load(builder, xp, builder.add(builder.mul(_I64(u), groups), g))
            for u in range(_VECTORS)
        ]
        for r in range(_ROWS):
            q = _load(builder, qp, builder.add(builder.mul(_I64(r), groups), g))
            qv = _splat(builder, q, _VI)
            for u in range(_VECTORS):
                acc = builder.load(slots[r][u])
                builder.store(builder.call(dpbusd, [acc, xv[u], qv]), slots[r][u])
    return [[builder.load(slots[r][u]) for u in range(_VECTORS)] for r in range(_ROWS)]


@intrinsic
def screen_tile(typingctx, Xp, xoff, Qq, qrow, groups, negib, p0, thr, r0, mask, moff, mstride):
    """Mask the kept pairs of one tile.

    ``mask[moff + r * mstride + u]`` bit ``l``: point ``p0 + 16 u + l`` of query
    ``qrow + r``, set where ``negib + dot >= thr[r0 + r]``.
    """
    sig = types.void(Xp, xoff, Qq, qrow, groups, negib, p0, thr, r0, mask, moff, mstride)

    def codegen(context, builder, signature, args):
        acc = _dot_tile(context, builder, signature, args)
        tT, tK = signature.args[7], signature.args[9]
        thp = _pointer(context, builder, tT, args[7], _wide(builder, args[8]), _I32)
        mkp = _pointer(context, builder, tK, args[9], _wide(builder, args[10]), _I16)
        stride = _wide(builder, args[11])
        for r in range(_ROWS):
            tv = _splat(builder, _load(builder, thp, _I64(r)), _VI)
            for u in range(_VECTORS):
                bits = builder.bitcast(builder.icmp_signed(">=", acc[r][u], tv), _I16)
                _store(builder, bits, mkp, builder.add(builder.mul(_I64(r), stride), _I64(u)))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def bound_tile(typingctx, Xp, xoff, Qq, qrow, groups, negib, p0, delta, v, mx, best, r0):
    """Take the pre-pass's maxima of one tile.

    ``mx[16 (r0 + r) + l]``: the running max of ``negib + dot - delta`` over the
    lane's points; ``best[...]``: the packed vector (``v``, the tile's first) where it rose.
    """
    sig = types.void(Xp, xoff, Qq, qrow, groups, negib, p0, delta, v, mx, best, r0)

    def codegen(context, builder, signature, args):
        acc = _dot_tile(context, builder, signature, args)
        tD, _, tM, tB, _ = signature.args[7:]
        delta, v, mx, best, r0 = args[7:]
        row = builder.mul(_wide(builder, r0), _I64(_LANES))
        dlp = _pointer(context, builder, tD, delta, _wide(builder, args[6]), _VI)
        mxp = _pointer(context, builder, tM, mx, row, _VI)
        bip = _pointer(context, builder, tB, best, row, _VI)
        vv = _splat(builder, builder.trunc(_wide(builder, v), _I32), _VI)
        dl = [_load(builder, dlp, _I64(u)) for u in range(_VECTORS)]
        for r in range(_ROWS):
            old = top = _load(builder, mxp, _I64(r))
            for u in range(_VECTORS):
                a = builder.sub(acc[r][u], dl[u])
                top = builder.select(builder.icmp_signed(">", a, top), a, top)
            rose = builder.icmp_signed("!=", top, old)
            _store(builder, top, mxp, _I64(r))
            _store(builder, builder.select(rose, vv, _load(builder, bip, _I64(r))), bip, _I64(r))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def compress16(typingctx, word, base, idx, count):
    """``idx[count : count + popcount(word)] = base + (the set bits of word)``; the new count.

    ``vpcompressd``: the kept points of a packed vector in one store (16 readable
    entries from ``count``), where a loop over bits mispredicts at every kept pair.
    """
    sig = types.intp(word, base, idx, count)

    def codegen(context, builder, signature, args):
        word, base, idx, count = args
        count = _wide(builder, count)
        w16 = builder.trunc(word, _I16) if word.type.width > 16 else word
        lanes = ir.Constant(_VI, list(range(16)))
        values = builder.add(lanes, _splat(builder, builder.trunc(_wide(builder, base), _I32), _VI))
        fnty = ir.FunctionType(_VI, [_VI, _VI, ir.VectorType(_I1, 16)])
        compress = builder.module.declare_intrinsic(
            "llvm.x86.avx512.mask.compress.v16i32", fnty=fnty
        )
        packed = builder.call(
            compress, [values, ir.Constant(_VI, None), builder.bitcast(w16, ir.VectorType(_I1, 16))]
        )
        builder.store(
            packed, _pointer(context, builder, signature.args[2], idx, count, _VI), align=1
        )
        popcount = builder.module.declare_intrinsic(
            "llvm.ctpop.i16", fnty=ir.FunctionType(_I16, [_I16])
        )
        return builder.add(count, builder.zext(builder.call(popcount, [w16]), _I64))

    return sig, codegen


def _shuffle(builder, a, b, lanes):
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, len(lanes)), lanes))


_LO = [j for c in range(4) for j in (2 * c, 8 + 2 * c)]
_HI = [j + 1 for j in _LO]
_EVEN_PAIRS = [0, 1, 4, 5, 8, 9, 12, 13]
_ODD_PAIRS = [2, 3, 6, 7, 10, 11, 14, 15]


def _sum8(builder, rows):
    """Return lane ``t`` = the sum of ``rows[t]`` (a transpose-add: 7 adds, not 8 reductions)."""
    add = builder.fadd
    b = [
        add(
            _shuffle(builder, rows[2 * i], rows[2 * i + 1], _LO),
            _shuffle(builder, rows[2 * i], rows[2 * i + 1], _HI),
        )
        for i in range(4)
    ]
    c = [
        add(
            _shuffle(builder, b[2 * i], b[2 * i + 1], _EVEN_PAIRS),
            _shuffle(builder, b[2 * i], b[2 * i + 1], _ODD_PAIRS),
        )
        for i in range(2)
    ]
    return add(
        _shuffle(builder, c[0], c[1], _EVEN_PAIRS), _shuffle(builder, c[0], c[1], _ODD_PAIRS)
    )


@intrinsic
def distances8(typingctx, X, idx, i, Q, qrow, octets, d2):
    """``d2[i + t] = |Q_qrow - X_idx[i + t]|^2`` for ``t < 8``, by float64 direct differences.

    ``X`` and ``Q`` are C-contiguous with ``8 * octets`` columns; ``idx`` holds 8 entries
    from ``i``.  Sums of squares in 8 lanes per pair, then one transpose-add for 8 pairs.
    """
    sig = types.void(X, idx, i, Q, qrow, octets, d2)

    def codegen(context, builder, signature, args):
        X, idx, i, Q, qrow, octets, d2 = args
        tX, tI, _, tQ, _, _, tB = signature.args
        i, octets = _wide(builder, i), _wide(builder, octets)
        xbase = _pointer(context, builder, tX, X, _I64(0), _VD)
        ip = _pointer(context, builder, tI, idx, i, _I32)
        row = builder.mul(_wide(builder, qrow), builder.mul(octets, _I64(8)))  # in float64s
        qp = _pointer(context, builder, tQ, Q, row, _VD)
        rows = [
            builder.mul(builder.sext(_load(builder, ip, _I64(t)), _I64), octets) for t in range(8)
        ]
        slots = [cgutils.alloca_once_value(builder, ir.Constant(_VD, None)) for _ in range(8)]
        with cgutils.for_range(builder, octets) as loop:
            q = _load(builder, qp, loop.index)
            for t in range(8):
                diff = builder.fsub(_load(builder, xbase, builder.add(rows[t], loop.index)), q)
                builder.store(
                    builder.fadd(builder.load(slots[t]), builder.fmul(diff, diff)), slots[t]
                )
        total = _sum8(builder, [builder.load(s) for s in slots])
        builder.store(total, _pointer(context, builder, tB, d2, i, _VD), align=8)
        return context.get_dummy_value()

    return sig, codegen


def _fma(builder):
    return builder.module.declare_intrinsic(
        "llvm.fma.v8f64", fnty=ir.FunctionType(_VD, [_VD, _VD, _VD])
    )


def _exp2(builder, x):
    """``_compiled_exp._exp2_nonpositive`` in 8 lanes (the same steps and coefficients)."""
    fma = _fma(builder)

    def const(value):
        return ir.Constant(_VD, [value] * 8)

    shifted = builder.fadd(x, const(_ROUND))
    f = builder.fsub(x, builder.fsub(shifted, const(_ROUND)))
    p = const(_EXP2_POLY[-1])
    for c in reversed(_EXP2_POLY[:-1]):
        p = builder.call(fma, [p, f, const(c)])
    bits = builder.add(builder.bitcast(shifted, _VL), ir.Constant(_VL, [1023] * 8))
    two_n = builder.bitcast(builder.shl(bits, ir.Constant(_VL, [52] * 8)), _VD)
    normal = builder.fcmp_ordered(">", x, const(_MIN_EXPONENT2))
    return builder.select(normal, builder.fmul(p, two_n), const(0.0))


def _gather(builder, pointer, columns):
    out = ir.Constant(_VD, ir.Undefined)
    for t, j in enumerate(columns):
        out = builder.insert_element(out, builder.load(builder.gep(pointer, [j])), _I32(t))
    return out


@intrinsic
def weights8(typingctx, d2, idx, i, slope, off, v, acc, left):
    """Add 8 kept pairs' weights: ``acc[0:8] += e``, ``acc[8:16] += e v[j]``.

    ``e = 2^(slope d2[i + t] + off[j])``, ``j = idx[i + t]``, for the lanes
    ``t < left`` (the tiled kernel's weight of the pair).
    """
    sig = types.void(d2, idx, i, slope, off, v, acc, left)

    def codegen(context, builder, signature, args):
        d2, idx, i, slope, off, v, acc, left = args
        tB, tI, _, _, tO, tV, tA, _ = signature.args
        i = _wide(builder, i)
        ip = _pointer(context, builder, tI, idx, i, _I32)
        columns = [builder.sext(_load(builder, ip, _I64(t)), _I64) for t in range(8)]
        dd = builder.load(_pointer(context, builder, tB, d2, i, _VD), align=8)
        offsets = _gather(builder, _pointer(context, builder, tO, off, _I64(0), _F64), columns)
        x = builder.call(_fma(builder), [_splat(builder, slope, _VD), dd, offsets])
        lanes = ir.Constant(_VL, list(range(8)))
        valid = builder.icmp_signed("<", lanes, _splat(builder, _wide(builder, left), _VL))
        e = builder.select(valid, _exp2(builder, x), ir.Constant(_VD, None))
        values = _gather(builder, _pointer(context, builder, tV, v, _I64(0), _F64), columns)
        ap = _pointer(context, builder, tA, acc, _I64(0), _VD)
        _store(builder, builder.fadd(_load(builder, ap, _I64(0)), e), ap, _I64(0))
        _store(
            builder, builder.fadd(_load(builder, ap, _I64(1)), builder.fmul(e, values)), ap, _I64(1)
        )
        return context.get_dummy_value()

    return sig, codegen


# Queries per group: the pre-pass's maxima and the masks of a block stay in L1 for
# the group, and each block of packed points (32 vectors, 16 KiB at d = 32) serves
# its 32 tiles from L1/L2 (the prototype's 128 x 512 measured fastest of 64-512 x
# 256-1024; ``python -m benchmarks engine --only exp_limit``).
_GROUP_ROWS = 128
_BLOCK_VECTORS = 32
_INT32_MAX = 2**31 - 1
_SLACK = 1e-9  # relative slack on every float bound: their rounding is ~1e-15 relative


@numba.njit(inline="always")
def _candidates(best, mx, r, n, idx):  # pragma: no cover - compiled
    """Put the pre-pass's best point of each lane and tile in ``idx``; return their count."""
    count = 0
    for u in range(_VECTORS):
        for lane in range(_LANES):
            j = (best[r * _LANES + lane] + u) * _LANES + lane
            if mx[r * _LANES + lane] > -_INT32_MAX and j < n:
                idx[count] = j
                count += 1
    for k in range(count, (count + 7) & ~7):
        idx[k] = idx[max(count - 1, 0)]
    return count


@numba.njit(inline="always")
def _threshold(
    i, top, X, Q, octets, doff, qa, qb, Sq, s2, margin, idx, count, d2
):  # pragma: no cover - compiled
    """Return the integer threshold of query ``i``: ``floor(alpha) + 128 Sq`` (``_screen``).

    ``U``, an upper bound on the row's least ``D = d2 + doff``: the pre-pass's integer
    one (``top``), then the exact ``D`` of its candidates (a tighter one, from the pairs
    most likely the nearest).
    """
    shift = 2.0 * s2 * (top - 128.0 * Sq[i])
    upper = qb[i] - shift
    upper += _SLACK * (1.0 + abs(qb[i]) + abs(shift))
    for k in range(0, count, 8):
        distances8(X, idx, k, Q, i, octets, d2)
    for k in range(count):
        exact = d2[k] + doff[idx[k]]
        upper = min(upper, exact + _SLACK * (1.0 + exact))
    reach = (upper + margin) / (2.0 * s2)
    alpha = qa[i] - reach - _SLACK * (1.0 + abs(qa[i]) + abs(reach)) + 128.0 * Sq[i]
    # Never below the padding points' value (_NEVER, dot product 0): a far query's
    # threshold under it kept them, and the exact pass read past X, off and v (NaN).
    # Every live point's value lies above it (|offsets|, |dot products| < 2^29).
    return np.int32(max(min(np.floor(alpha), _INT32_MAX), _NEVER + 1))


@numba.njit(inline="always")
def _row_sums(
    mask, r, per, v0, vectors, X, Q, i, octets, slope, off, v, idx, d2, acc
):  # pragma: no cover - compiled
    """Add the kept pairs of query ``i`` in one block to ``acc[:8]``, ``acc[8:]``; their count."""
    count = 0
    for u in range(vectors):
        count = compress16(mask[r * per + u], (v0 + u) * _LANES, idx, count)
    while count > 0 and idx[count - 1] >= X.shape[0]:  # padding (in order: at the end)
        count -= 1
    if count == 0:
        return 0
    for k in range(count, (count + 7) & ~7):
        idx[k] = idx[count - 1]
    for k in range(0, count, 8):
        distances8(X, idx, k, Q, i, octets, d2)
    for k in range(0, count, 8):
        weights8(d2, idx, k, slope, off, v, acc, count - k)
    return count


@numba.njit(nogil=True, cache=True)
def screen_sums(
    Qq, Sq, qa, qb, Xp, negib, delta, doff, X, Q, s2, margin, slope, off, v, out, thr
):  # pragma: no cover - compiled
    """``out[i] = [sum e_ij v_j, sum e_ij]`` over the pairs the screen keeps; the kept count.

    ``e_ij = 2^(slope |Q_i - X_j|^2 + off_j)`` as ``exp_diff_tiled`` (direct
    differences).  Every pair whose ``D = |Q_i - X_j|^2 - off_j / slope`` is within
    ``margin`` of the row's least is kept (``_screen`` derives the bound).  ``Qq``
    (int8, rows padded to a multiple of ``_ROWS``), ``Xp`` (packed, flat), ``negib`` and
    ``delta`` (points padded to a multiple of ``16 _VECTORS``) as ``_screen.prepare``
    makes them; ``thr`` receives each row's integer threshold.
    """
    m, n, octets = Q.shape[0], X.shape[0], Q.shape[1] // 8
    groups = Qq.shape[1] // 4
    nv, width = negib.size // _LANES, groups * 64  # packed vectors, bytes per vector
    mask = np.zeros(_GROUP_ROWS * _BLOCK_VECTORS, np.uint16)
    idx = np.zeros(_BLOCK_VECTORS * _LANES + 64, np.int32)
    d2 = np.zeros(_BLOCK_VECTORS * _LANES + 64)
    mx, best = np.empty(_GROUP_ROWS * _LANES, np.int32), np.zeros(_GROUP_ROWS * _LANES, np.int32)
    th, acc, sums = np.empty(_GROUP_ROWS, np.int32), np.empty(16), np.empty((_GROUP_ROWS, 2))
    kept = 0
    for t0 in range(0, m, _GROUP_ROWS):
        rows = min(_GROUP_ROWS, m - t0)
        tiles = (rows + _ROWS - 1) // _ROWS * _ROWS
        mx[:] = -_INT32_MAX - 1
        for r0 in range(0, tiles, _ROWS):
            for u in range(0, nv, _VECTORS):
                bound_tile(
                    Xp, u * width, Qq, t0 + r0, groups, negib, u * _LANES, delta, u, mx, best, r0
                )
        th[:] = _INT32_MAX
        for r in range(rows):
            count = _candidates(best, mx, r, n, idx)
            top = mx[r * _LANES : (r + 1) * _LANES].max()
            th[r] = _threshold(
                t0 + r, top, X, Q, octets, doff, qa, qb, Sq, s2, margin, idx, count, d2
            )
            thr[t0 + r] = th[r]
        sums[:] = 0.0
        for v0 in range(0, nv, _BLOCK_VECTORS):
            vectors = min(_BLOCK_VECTORS, nv - v0)
            for r0 in range(0, tiles, _ROWS):
                for u in range(v0, v0 + vectors, _VECTORS):
                    screen_tile(
                        Xp,
                        u * width,
                        Qq,
                        t0 + r0,
                        groups,
                        negib,
                        u * _LANES,
                        th,
                        r0,
                        mask,
                        r0 * _BLOCK_VECTORS + u - v0,
                        _BLOCK_VECTORS,
                    )
            for r in range(rows):
                acc[:] = 0.0
                kept += _row_sums(
                    mask,
                    r,
                    _BLOCK_VECTORS,
                    v0,
                    vectors,
                    X,
                    Q,
                    t0 + r,
                    octets,
                    slope,
                    off,
                    v,
                    idx,
                    d2,
                    acc,
                )
                sums[r, 0] += acc[8:].sum()
                sums[r, 1] += acc[:8].sum()
        out[t0 : t0 + rows] = sums[:rows]
    return kept
