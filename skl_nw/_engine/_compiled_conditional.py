"""Compiled per-query mixtures (numba): each query's weights reduced over ``y``-sorted rows.

The twin of the attention-weight path of ``_inference._conditional`` (the
numpy reference): for a query ``q`` the kernels compute the unnormalised
weights ``e_j = exp(log w_j + c |q - x_j|^2 - max)`` of the training rows in
the order of their targets ``y_j`` into one buffer of ``n`` floats, and
reduce it at once: cumulative sums and a binary search for the weighted
empirical quantiles (``h_y = 0``); the mixture ``sum_j e_j G((t - y_j) / h_y)``
over the window of sorted ``y`` where ``G`` is neither exactly 1 nor 0
(``predict_cdf``, ``predict_pdf``); safeguarded Halley steps on it for the
smoothed quantiles.  No (m, n) array, no Python loop per query.

``G`` is the normal distribution function, ``Phi(u) = erfc(-u / sqrt 2) / 2``,
written as ``exp(-u^2 / 2) erfcx(|u| / sqrt 2) / 2`` so that the density
``phi`` shares its exponential; ``erfcx`` is a Chebyshev series (vectorisable,
unlike libm's ``erfc``).  The kernels use numpy's error model: Python's
(a ZeroDivisionError check per division) keeps loops with a division from
vectorising (4x slower ``erfcx``).
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST, _exp_nonpositive

__all__ = [
    "conditional_examples",
    "empirical_quantiles",
    "loo_empirical_crps",
    "mixture_values",
    "smoothed_quantiles",
]

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
# Halley steps stop once a step is below this many h_y: the next error is then of
# the order of its cube (below 1e-15 h_y), within the 1e-11 h_y asked.
_HALLEY_DONE = 1e-5
# The root search leaves out rows more than this many bandwidths above t: their
# terms are below Phi(-9) = 1.1e-19 of their weight.
_ROOT_REACH = 9.0
# A row's weights summed to below this (e^-600) are redone with the row's own
# largest log weight as the shift (see _row_weights).
_UNDERFLOW = 1e-260
# Weights per block of the empirical quantiles' cumulative sums (a scan of one
# block per level instead of a cumulative sum over every row).
_BLOCK = 64
_MAX_STEPS = 100


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


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _exp_pass(e, shift):  # pragma: no cover - compiled
    """``e = exp(e - shift)`` in place; return the sum."""
    total = 0.0
    for j in range(e.size):
        w = _exp_nonpositive(e[j] - shift)
        e[j] = w
        total += w
    return total


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _exponents(q, XT, log_w, slope, own, e):  # pragma: no cover - compiled
    """``e_j = log_w[j] + slope |q - XT[:, j]|^2``; ``e[own] = -inf`` (``own >= 0``)."""
    d, n = XT.shape
    for j in range(n):
        e[j] = log_w[j]
    for f in range(d):
        qf, xf = q[f], XT[f]
        for j in range(n):
            t = qf - xf[j]
            e[j] += slope * (t * t)
    if own >= 0:
        e[own] = -np.inf


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _row_weights(q, XT, log_w, top_w, slope, e, own=-1):  # pragma: no cover - compiled
    """``e_j = exp(a_j - s)``, ``a_j = log_w[j] + slope |q - XT[:, j]|^2``; return ``sum e``.

    ``s`` is the largest log weight ``top_w`` (the point at distance 0): one
    exponential pass.  Where that sum falls below ``_UNDERFLOW`` (a query far
    from every point) the pass is redone with ``s = max a``, so the largest
    term is 1 and no term that matters underflows.  Row ``own`` (if ``>= 0``)
    is left out by index: its weight is 0.
    """
    _exponents(q, XT, log_w, slope, own, e)
    total = _exp_pass(e, top_w)
    if total >= _UNDERFLOW:
        return total
    _exponents(q, XT, log_w, slope, own, e)
    top = -np.inf
    for j in range(e.size):
        if e[j] > top:
            top = e[j]
    return _exp_pass(e, top) if top > -np.inf else 0.0


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


@numba.njit(inline="always", error_model="numpy")
def _reaching(C, total, tau):  # pragma: no cover - compiled
    """Return the inverted-CDF index: the first ``j``, ``C[j] / total >= tau`` and ``C[j] > 0``."""
    lo, hi = 0, C.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        c = C[mid] / total
        if c < tau or c == 0.0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True)
def _cumulate(e):  # pragma: no cover - compiled
    """Cumulative sums in place, in order (no re-association); return the total."""
    c = 0.0
    for j in range(e.size):
        c += e[j]
        e[j] = c
    return c


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _block_prefix(e, P):  # pragma: no cover - compiled
    """Set ``P[b + 1] = P[b] + sum(e[b B : (b + 1) B])`` (``B = _BLOCK``): cumulative block sums."""
    P[0] = 0.0
    for b in range(P.size - 1):
        s = 0.0
        for j in range(b * _BLOCK, min((b + 1) * _BLOCK, e.size)):
            s += e[j]
        P[b + 1] = P[b] + s


@numba.njit(inline="always", error_model="numpy")
def _reaching_blocks(e, P, tau):  # pragma: no cover - compiled
    """:func:`_reaching` from the block sums ``P``: a binary search, then a scan of the weights."""
    total = P[P.size - 1]
    b = _reaching(P[1:], total, tau)
    c = P[b]
    for j in range(b * _BLOCK, e.size):
        c += e[j]
        r = c / total
        if r >= tau and r != 0.0:
            return j
    return e.size - 1


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def empirical_quantiles(Q, XT, log_w, slope, ys, taus, out):  # pragma: no cover - compiled
    """``out[i, k]``: the weighted inverted-CDF ``taus[k]``-quantile of ``ys`` at query ``i``.

    The cumulative weights are summed by blocks (vectorised), then scanned in
    the block where each level is reached: no cumulative sum over all rows.
    """
    n = XT.shape[1]
    e, P, top_w = np.empty(n), np.empty((n + _BLOCK - 1) // _BLOCK + 1), log_w.max()
    for i in range(Q.shape[0]):
        _row_weights(Q[i], XT, log_w, top_w, slope, e)
        _block_prefix(e, P)
        for k in range(taus.size):
            out[i, k] = ys[_reaching_blocks(e, P, taus[k])]


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _window(t, e, ys, inv_h, a, b):  # pragma: no cover - compiled
    """Sum ``e_j (Phi(u_j), phi(u_j), phi(u_j) u_j)`` over ``a <= j < b``, ``u_j = (t - y_j) / h``.

    Two halves of the window side by side: two independent chains of the
    Chebyshev recurrence per vector (its latency bounds one chain).
    """
    half = (b - a) // 2
    F = f = g = F2 = f2 = g2 = 0.0
    for j in range(a, a + half):
        u = (t - ys[j]) * inv_h
        p, d = _cdf_pdf(u)
        F += e[j] * p
        f += e[j] * d
        g += e[j] * d * u
        k = j + half
        u2 = (t - ys[k]) * inv_h
        p2, d2 = _cdf_pdf(u2)
        F2 += e[k] * p2
        f2 += e[k] * d2
        g2 += e[k] * d2 * u2
    if (b - a) % 2:
        u = (t - ys[b - 1]) * inv_h
        p, d = _cdf_pdf(u)
        F += e[b - 1] * p
        f += e[b - 1] * d
        g += e[b - 1] * d * u
    return F + F2, (f + f2) * _INV_SQRT_2PI, (g + g2) * _INV_SQRT_2PI


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _mixture_at(t, e, C, ys, inv_h, above):  # pragma: no cover - compiled
    """``F`` (unnormalised), ``f inv_h^-1`` and ``sum_j e_j phi(u_j) u_j`` at ``t``.

    ``C``: the cumulative sums of ``e`` (the rows wholly below the window),
    or an empty array (then summed here).  Rows beyond ``above`` bandwidths
    over ``t`` are left out (``ZERO_BELOW``: exactly 0).
    """
    a = _first_at_least(ys, t - ONE_ABOVE / inv_h, 0)
    b = _first_at_least(ys, t + above / inv_h, a)
    below = 0.0
    if C.size:
        below = C[a - 1] if a > 0 else 0.0
    else:
        for j in range(a):
            below += e[j]
    F, f, g = _window(t, e, ys, inv_h, a, b)
    return below + F, f, g


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def mixture_values(Q, XT, log_w, slope, ys, T, inv_h, pdf, out):  # pragma: no cover - compiled
    """``out[i, k] = F(T[i, k] | q_i)`` (``pdf``: ``f``); a 1-row ``T`` is a shared grid."""
    e, none, top_w = np.empty(XT.shape[1]), np.empty(0), log_w.max()
    for i in range(Q.shape[0]):
        total = _row_weights(Q[i], XT, log_w, top_w, slope, e)
        row = T[min(i, T.shape[0] - 1)]
        for k in range(row.size):
            F, f, _ = _mixture_at(row[k], e, none, ys, inv_h, ZERO_BELOW)
            out[i, k] = (f * inv_h if pdf else F) / total


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def smoothed_quantiles(Q, XT, log_w, slope, ys, taus, inv_h, reach, rtol, out):  # pragma: no cover
    """``out[i, k]``: the root of ``F(t | q_i) = taus[k]`` (``taus`` ascending), to ``rtol h``.

    Safeguarded Halley steps from the weighted empirical quantile, inside a
    bracket ``F(lo) < tau <= F(hi)`` (the previous level's root below,
    ``reach`` bandwidths beyond the data at first); a step leaving it bisects.
    """
    n = XT.shape[1]
    h = 1.0 / inv_h
    e, C, top_w = np.empty(n), np.empty(n), log_w.max()
    for i in range(Q.shape[0]):
        _row_weights(Q[i], XT, log_w, top_w, slope, e)
        C[:] = e
        total = _cumulate(C)
        lo = ys[0] - reach * h
        for k in range(taus.size):
            target = taus[k] * total
            hi = ys[n - 1] + reach * h
            t = ys[_reaching(C, total, taus[k])]
            t = t if lo < t < hi else 0.5 * (lo + hi)
            for _ in range(_MAX_STEPS):
                F, f, g = _mixture_at(t, e, C, ys, inv_h, _ROOT_REACH)
                r = F - target
                if r < 0.0:
                    lo = t
                else:
                    hi = t
                f *= inv_h  # dF/dt; d2F/dt2 = -g inv_h^2
                step = r / f if f > 0.0 else np.inf
                halley = 1.0 + 0.5 * step * g * inv_h * inv_h / f if f > 0.0 else 0.0
                if halley > 0.5:
                    step /= halley
                new = t - step
                if abs(step) <= _HALLEY_DONE * h and lo <= new <= hi:
                    t = new
                    break
                if not (lo < new < hi):
                    new = 0.5 * (lo + hi)
                t = new
                if hi - lo <= rtol * h:
                    break
            out[i, k] = t
            lo = t


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def loo_empirical_crps(XT, log_w, slope, ys, rows, out):  # pragma: no cover - compiled
    """``out[r]``: the CRPS at ``ys[p]`` (``p = rows[r]``) of the others' weighted empirical law.

    Row ``p`` is the query and is left out of its own weights by index;
    ``sum_j a_j |y - y_j| - sum_k a_k y_k (2 C_k - a_k - 1)`` with ``C`` the
    cumulative weights in ``y`` order (the pair sum ``1/2 sum_jk a_j a_k
    |y_j - y_k|`` in one pass), as ``crps_rows`` computes it.  NaN where
    every other row has weight 0.
    """
    d, n = XT.shape
    e, q, top_w = np.empty(n), np.empty(d), log_w.max()
    for r in range(rows.size):
        p = rows[r]
        for f in range(d):
            q[f] = XT[f, p]
        scale = 1.0 / _row_weights(q, XT, log_w, top_w, slope, e, p)
        y, near = ys[p], 0.0
        for j in range(n):  # normalised first: the pair sum has the total's square
            e[j] *= scale
            near += e[j] * abs(y - ys[j])
        c = half = 0.0
        for k in range(n):  # in order: the cumulative sum
            c += e[k]
            half += e[k] * ys[k] * (2.0 * c - e[k] - 1.0)
        out[r] = near - half


def conditional_examples() -> dict:
    """Tiny arguments of every kernel here, of the engine's types (the compiled signature)."""
    Q, XT, log_w, ys = np.zeros((1, 2)), np.zeros((2, 3)), np.zeros(3), np.arange(3.0)
    taus, out = np.array([0.5]), np.empty((1, 1))
    return {
        empirical_quantiles: (Q, XT, log_w, -0.5, ys, taus, out),
        mixture_values: (Q, XT, log_w, -0.5, ys, np.zeros((1, 1)), 1.0, False, out),
        smoothed_quantiles: (Q, XT, log_w, -0.5, ys, taus, 1.0, 40.0, 1e-11, out),
        loo_empirical_crps: (XT, log_w, -0.5, ys, np.arange(3), np.empty(3)),
    }
