"""The normal distribution function, compiled: ``Phi`` and ``exp(-u^2 / 2)`` from one ``erfcx``.

``Phi(u) = erfc(-u / sqrt 2) / 2`` is written as ``exp(-u^2 / 2) erfcx(|u| /
sqrt 2) / 2`` so that the density ``phi`` shares its exponential; ``erfcx``
is a Chebyshev series (vectorisable, unlike libm's ``erfc``).  The kernels
use numpy's error model: Python's (a ZeroDivisionError check per division)
keeps loops with a division from vectorising (4x slower ``erfcx``).
"""

from __future__ import annotations

import numba

from ._compiled_exp import _FAST, _exp_nonpositive

__all__ = ["ONE_ABOVE", "ZERO_BELOW"]

# Phi(u) rounds to exactly 1.0 above this u (1 - 9.5e-18), and exp(-u^2 / 2) underflows
# to 0 in _exp_nonpositive below -this (-708 in the exponent): outside the window
# [t - ONE_ABOVE h, t + ZERO_BELOW h] the terms of F are exact prefix sums or 0.
ONE_ABOVE = 8.5
ZERO_BELOW = 37.7
# erfcx(z) on z in [0, 38.6 / sqrt 2] as a Chebyshev series of degree 24 in
# x = 2 (t - _T_MIN) / (1 - _T_MIN) - 1, t = 2 / (2 + z): fitted to scipy's erfcx
# at 192 Chebyshev nodes; Phi from it is within 7.8e-16 of scipy's ndtr (absolute)
# on [-37, 8.5], 2.3e-13 relative in the far lower tail (the rounding of u^2 / 2).
_T_MIN = 0.06827261668007432
_SQRT_HALF = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_C = (
    0.39794764342582467, 0.4752364374549821, 0.11231631048938757,
    0.014691272824058898, 7.271345730179723e-05, -0.00026279814655858467,
    -8.333350760159358e-06, 6.9393960058289605e-06, 1.9872771212325317e-08,
    -2.2798730569582458e-07, 1.705982001366517e-08, 7.036996133671454e-09,
    -1.5000708600842865e-09, -1.052624372575053e-10, 8.288372508950164e-11,
    -8.280977325576476e-12, -2.6310371098719757e-12, 9.068112643500886e-13,
    -3.953236846724394e-14, -4.0986899231570624e-14, 1.114952033283876e-14,
    -2.6889978170378374e-16, -5.028219154923207e-16, 7.9485230673818e-17,
    -1.572602878956695e-16,
)  # fmt: skip
(_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13, _C14, _C15, _C16,
 _C17, _C18, _C19, _C20, _C21, _C22, _C23, _C24) = _C  # fmt: skip


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _erfcx(z):  # pragma: no cover - compiled
    """``exp(z^2) erfc(z)`` for ``z >= 0``: Clenshaw's recurrence, unrolled (it vectorises)."""
    t = 2.0 / (2.0 + z)
    x2 = 4.0 * (t - _T_MIN) / (1.0 - _T_MIN) - 2.0  # 2x
    # b_k = c_k + 2x b_(k+1) - b_(k+2), alternately in p and q
    p = _C24
    q = _C23 + x2 * p
    p = _C22 + x2 * q - p
    q = _C21 + x2 * p - q
    p = _C20 + x2 * q - p
    q = _C19 + x2 * p - q
    p = _C18 + x2 * q - p
    q = _C17 + x2 * p - q
    p = _C16 + x2 * q - p
    q = _C15 + x2 * p - q
    p = _C14 + x2 * q - p
    q = _C13 + x2 * p - q
    p = _C12 + x2 * q - p
    q = _C11 + x2 * p - q
    p = _C10 + x2 * q - p
    q = _C9 + x2 * p - q
    p = _C8 + x2 * q - p
    q = _C7 + x2 * p - q
    p = _C6 + x2 * q - p
    q = _C5 + x2 * p - q
    p = _C4 + x2 * q - p
    q = _C3 + x2 * p - q
    p = _C2 + x2 * q - p
    q = _C1 + x2 * p - q
    return _C0 + 0.5 * x2 * q - p


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _cdf_pdf(u):  # pragma: no cover - compiled
    """``Phi(u)`` and ``exp(-u^2 / 2)`` (the unnormalised density)."""
    e = _exp_nonpositive(-0.5 * u * u)
    half = 0.5 * e * _erfcx(abs(u) * _SQRT_HALF)
    return (half if u < 0.0 else 1.0 - half), e


@numba.njit(inline="always", error_model="numpy")
def _first_at_least(ys, value, lo):  # pragma: no cover - compiled
    """Smallest ``j >= lo`` with ``ys[j] >= value`` (``ys.size`` if none)."""
    hi = ys.size
    while lo < hi:
        mid = (lo + hi) // 2
        if ys[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo
