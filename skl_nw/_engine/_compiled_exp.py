"""The compiled exponential: a vectorisable polynomial for ``x <= 0``.

Cody-Waite reduction ``x = n ln 2 + r`` with ``|r| <= ln 2 / 2``, a degree-10
near-minimax polynomial for ``exp(r)`` and ``2^n`` built from its bits.
Relative error about 2 ulp (tested against ``np.exp``) for the ``x <= 0`` the
engine passes; below ``-708`` it returns 0.  Every fused kernel inlines
:func:`_exp_nonpositive`.  :func:`_exp2_nonpositive` is its base-2 twin for
callers that have their exponents in bits already (no reduction by ``ln 2``).
"""

from __future__ import annotations

import numba
from numba.core import types
from numba.extending import intrinsic

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split in two: n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2^52: (x + _ROUND) - _ROUND rounds x to an integer
_MIN_EXPONENT = -708.0  # below it 2^n leaves the normal range: returned as 0 (exp < 3.3e-308)


def _bitcast(source, target):
    """Return an intrinsic reinterpreting the bits of a ``source`` as a ``target``."""

    @intrinsic
    def cast(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return cast


_bits_to_float = _bitcast(types.int64, types.float64)  # unlike ldexp, it vectorises
_float_to_bits = _bitcast(types.float64, types.int64)


# contract: fused multiply-adds; reassoc: lets the row sums vectorise (the
# summation order changes, as it does between BLAS builds).  No nnan/ninf.
_FAST = {"contract", "reassoc"}


# exp(r) on |r| <= ln(2) / 2: the degree-10 polynomial interpolating exp at the
# Chebyshev nodes (near-minimax), solved in 50-digit arithmetic (mpmath) and
# rounded to float64: 2.9e-16 relative before rounding; measured 4.7e-16 (2 ulp)
# for the whole exp.  Two multiply-adds fewer than the Taylor polynomial of the
# same accuracy (degree 12), and 12% faster in the kernels.
_EXP_POLY = (1.0, 1.0000000000000067, 0.5000000000000006, 0.16666666666554406,
             0.04166666666657314, 0.008333333385667782, 0.0013888888932488599,
             0.00019841170270440067, 2.4801504346997686e-05, 2.764018079620985e-06,
             2.7626357241447223e-07)  # fmt: skip
_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10 = _EXP_POLY


# Compiled without "reassoc" and not inlined by numba: LLVM inlines it into the
# loops keeping these flags, so the two-step reduction is never re-associated
# into x - n (ln2_hi + ln2_lo), which would cost up to 1e-13 at x = -700.
# n comes from adding and subtracting 1.5 * 2^52 (round to nearest), and 2^n from
# the low bits of that sum: no float -> int64 conversion, which has no packed form
# before AVX-512 (with floor and int64 the loops ran 1.6x slower on AVX2).
@numba.njit(fastmath={"contract"})
def _exp_nonpositive(x):
    shifted = x * _LOG2E + _ROUND
    n = shifted - _ROUND
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + _C1
    p = p * r + _C0
    two_n = _bits_to_float((_float_to_bits(shifted) + 1023) << 52)
    return p * two_n if x > _MIN_EXPONENT else 0.0


# 2^f on |f| <= 1/2: the degree-10 polynomial interpolating 2^f at the Chebyshev
# nodes, solved in 50-digit arithmetic (mpmath) and rounded to float64: 3.1e-16
# relative before rounding (the same function as _EXP_POLY, rescaled by ln 2).
_EXP2_POLY = (1.0, 0.69314718055995, 0.24022650695910097, 0.05550410866444772,
              0.009618129107606888, 0.0013333558230164974, 0.0001540353044173605,
              1.5252657260200837e-05, 1.321544258792169e-06, 1.0208690299958306e-07,
              7.072585949269223e-09)  # fmt: skip
_D0, _D1, _D2, _D3, _D4, _D5, _D6, _D7, _D8, _D9, _D10 = _EXP2_POLY
_MIN_EXPONENT2 = -1021.0  # 2^n normal from n = -1022: below, returned as 0 (< 4.5e-308)


@numba.njit(fastmath={"contract"})
def _exp2_nonpositive(x):
    """``2^x`` for ``x <= 0`` (0 below ``-1021``); about 2 ulp, as :func:`_exp_nonpositive`.

    ``f = x - round(x)`` is exact, so the reduction costs two additions and
    no multiply-adds: three fewer than the natural exponential's (a quarter of
    a weight pass's, ``python -m benchmarks conditional``).  The exponent's own
    rounding (``|x|`` ulp) is the natural one's, rescaled.
    """
    shifted = x + _ROUND
    n = shifted - _ROUND
    f = x - n
    p = _D10
    p = p * f + _D9
    p = p * f + _D8
    p = p * f + _D7
    p = p * f + _D6
    p = p * f + _D5
    p = p * f + _D4
    p = p * f + _D3
    p = p * f + _D2
    p = p * f + _D1
    p = p * f + _D0
    two_n = _bits_to_float((_float_to_bits(shifted) + 1023) << 52)
    return p * two_n if x > _MIN_EXPONENT2 else 0.0
