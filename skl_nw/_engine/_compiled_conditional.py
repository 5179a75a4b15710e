"""Compiled per-query mixtures (numba): each query's weights reduced over ``y``-sorted rows.

The twin of the attention-weight path of ``_inference._mixture`` (the
numpy reference): for a query ``q`` the kernels compute the unnormalised
weights ``e_j = exp(log w_j + c |q - x_j|^2 - max)`` of the training rows in
the order of their targets ``y_j`` into one buffer of ``n`` floats, and
reduce it at once: cumulative sums and a binary search for the weighted
empirical quantiles (``h_y = 0``); the mixture ``sum_j e_j G((t - y_j) / h_y)``
(``G`` the normal distribution function, ``_compiled_phi``) by Taylor cells
of the sorted rows (``_compiled_cells``: one ``G`` per cell near ``t``, not
per row; one value a query by tabulated polynomials, ``_compiled_paired``)
for ``predict_cdf`` and ``predict_pdf``, and safeguarded Halley
steps on it for the smoothed quantiles; values in the lower tail (below
``TAIL`` of the total) are summed row by row over the window of sorted ``y``
where ``G`` is neither exactly 1 nor 0.  No (m, n) array, no Python loop per
query.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_cells import CELL_EDGE, ORDER, TAIL, cell_moments, cells_at, cells_window
from ._compiled_exp import _FAST, _exp_nonpositive
from ._compiled_paired import LANES, paired_cells, paired_table, rows_base2
from ._compiled_phi import _INV_SQRT_2PI, ONE_ABOVE, ZERO_BELOW, _cdf_pdf, _first_at_least

__all__ = [
    "conditional_examples",
    "empirical_quantiles",
    "loo_empirical_crps",
    "mixture_values",
    "smoothed_quantiles",
]

# Halley steps stop once a step is below this many h_y: the next error is then of
# the order of its cube (below 1e-15 h_y), within the 1e-11 h_y asked.
_HALLEY_DONE = 1e-5
# The root search at levels from TAIL up leaves out rows more than this many
# bandwidths above t: their terms are below Phi(-9) = 1.1e-19 of their weight.
_ROOT_REACH = 9.0
# A row's weights summed to below this (e^-600) are redone with the row's own
# largest log weight as the shift (see _row_weights).
_UNDERFLOW = 1e-260
# Weights per block of the empirical quantiles' cumulative sums (a scan of one
# block per level instead of a cumulative sum over every row).
_BLOCK = 64
_MAX_STEPS = 100
_LOG2E = 1.4426950408889634


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
def _exp_pass_near(q, XT, log_w, slope, shift, e):  # pragma: no cover - compiled
    """``e_j = exp(log_w[j] - shift + slope |q - XT[:, j]|^2)`` for one or two features; the sum.

    One pass where :func:`_exponents` and :func:`_exp_pass` take ``d + 2``
    (1.8x the rows per second at ``d = 2``, ``python -m benchmarks conditional``).
    """
    last = XT.shape[0] - 1
    x0, x1, q0, q1 = XT[0], XT[last], q[0], q[last]
    second = 1.0 if last else 0.0
    total = 0.0
    for j in range(e.size):
        a, b = q0 - x0[j], (q1 - x1[j]) * second
        w = _exp_nonpositive(log_w[j] - shift + slope * (a * a + b * b))
        e[j] = w
        total += w
    return total


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _row_weights(q, XT, log_w, top_w, slope, e, own=-1):  # pragma: no cover - compiled
    """``e_j = exp(a_j - s)``, ``a_j = log_w[j] + slope |q - XT[:, j]|^2``; return ``sum e``.

    ``s`` is the largest log weight ``top_w`` (the point at distance 0): one
    exponential pass.  Where that sum falls below ``_UNDERFLOW`` (a query far
    from every point) the pass is redone with ``s = max a``, so the largest
    term is 1 and no term that matters underflows.  Row ``own`` (if ``>= 0``)
    is left out by index: its weight is 0.
    """
    if own < 0 and 1 <= XT.shape[0] <= 2:
        total = _exp_pass_near(q, XT, log_w, slope, top_w, e)
    else:
        _exponents(q, XT, log_w, slope, own, e)
        total = _exp_pass(e, top_w)
    return total if total >= _UNDERFLOW else _weights_from_top(q, XT, log_w, slope, own, e)


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _weights_from_top(q, XT, log_w, slope, own, e):  # pragma: no cover - compiled
    """:func:`_row_weights` shifted by the row's own largest log weight (its term is 1)."""
    _exponents(q, XT, log_w, slope, own, e)
    top = -np.inf
    for j in range(e.size):
        if e[j] > top:
            top = e[j]
    return _exp_pass(e, top) if top > -np.inf else 0.0


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


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _mixture(t, e, P, ys, cells, M, span, inv_h, reach, rows):  # pragma: no cover - compiled
    """:func:`_mixture_at` by Taylor cells (``rows``: row by row); ``reach``: as ``above``.

    ``M`` holds the moments of the cells ``span[0]:span[1]`` (none when
    ``span[0] >= span[1]``); the cells ``t`` reaches are added to it first.
    ``P``: the cells' cumulative weights, or empty (see :func:`cells_at`).
    """
    if rows:
        return _mixture_at(t, e, P[:0], ys, inv_h, reach)
    s, starts, centres = cells
    a, b = cells_window(centres, t, t, inv_h, reach)
    if span[0] >= span[1]:
        cell_moments(e, s, starts, a, b, M)
        span[0], span[1] = a, b
    if a < span[0]:
        cell_moments(e, s, starts, a, span[0], M)
        span[0] = a
    if b > span[1]:
        cell_moments(e, s, starts, span[1], b, M)
        span[1] = b
    return cells_at(t, e, P, centres, starts, M, inv_h, reach)


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _bits_inputs(XT, log_w, slope):  # pragma: no cover - compiled
    """``(X2, lw2, scale)`` for :func:`rows_base2`: features and log weights in bits.

    ``X2 = XT sqrt(-slope log2 e)`` (a zero second row for one feature),
    ``lw2 = (log_w - max) log2 e``; no columns unless ``d`` is 1 or 2.
    """
    d, n = XT.shape
    scale = np.sqrt(-slope * _LOG2E)
    X2 = np.zeros((2, n if 1 <= d <= 2 else 0))
    for f in range(d if X2.shape[1] else 0):
        for j in range(n):
            X2[f, j] = XT[f, j] * scale
    return X2, (log_w - log_w.max()) * _LOG2E, scale


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _paired_weights(q, XT, log_w, top_w, slope, bits, lo, e):  # pragma: no cover - compiled
    """Set the weights ``e`` (as :func:`_row_weights`); return their sum and that of ``e[:lo]``.

    In bits for one or two features (:func:`rows_base2`, the rows below
    ``lo`` summed apart: no second pass); an underflowing sum is redone from
    the row's largest log weight.
    """
    X2, lw2, scale = bits
    if X2.shape[1] == e.size:
        q0, q1 = q[0] * scale, (q[1] * scale if XT.shape[0] == 2 else 0.0)
        below = rows_base2(q0, q1, X2[0, :lo], X2[1, :lo], lw2[:lo], e[:lo])
        total = below + rows_base2(q0, q1, X2[0, lo:], X2[1, lo:], lw2[lo:], e[lo:])
        if total >= _UNDERFLOW:
            return total, below
        total = _weights_from_top(q, XT, log_w, slope, -1, e)
    else:
        total = _row_weights(q, XT, log_w, top_w, slope, e)
    below = 0.0
    for j in range(lo):
        below += e[j]
    return total, below


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _paired_value(  # pragma: no cover - compiled
    t, q, XT, log_w, top_w, slope, ys, cells, bits, paired, inv_h, pdf, padded
):
    """``F(t | q)`` (``pdf``: ``f``) of one value: the weights, then the tabulated cells.

    ``padded``: the weights' buffer and the offsets ``s``, ``LANES`` longer
    (:func:`paired_cells`).  A value below ``TAIL`` of the total is summed
    again row by row.
    """
    (s, starts, centres), (table, u0, inv_step), (e_pad, s_pad) = cells, paired, padded
    e = e_pad[: s.size]
    a, b = cells_window(centres, t, t, inv_h, CELL_EDGE)
    total, below = _paired_weights(q, XT, log_w, top_w, slope, bits, starts[a], e)
    F = paired_cells(t, e_pad, s_pad, starts, centres, a, b, inv_h, table, u0, inv_step)
    F += 0.0 if pdf else below
    if F < TAIL * total:
        G, g, _ = _mixture_at(t, e, e[:0], ys, inv_h, ZERO_BELOW)
        F = g if pdf else G
    return (F * inv_h if pdf else F) / total


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def mixture_values(Q, XT, log_w, slope, ys, cells, paired, T, inv_h, pdf, out):  # pragma: no cover
    """``out[i, k] = F(T[i, k] | q_i)`` (``pdf``: ``f``); a 1-row ``T`` is a shared grid.

    ``cells = (s, starts, centres)`` (``_compiled_cells``): the moments of
    the cells a query's values reach; for one value a query (``T`` of one
    column) the cells' polynomials from ``paired`` (:func:`paired_table` of
    the kind) row by row.  A value below ``TAIL`` of the total is summed
    again row by row, reaching ``ZERO_BELOW``.
    """
    n, nc = XT.shape[1], cells[2].size
    e_pad, s_pad, none, top_w = np.zeros(n + LANES), np.zeros(n + LANES), np.empty(0), log_w.max()
    e = e_pad[:n]
    s_pad[:n] = cells[0]
    M, span = np.empty((ORDER + 2, nc)), np.zeros(2, np.int64)
    bits = _bits_inputs(XT, log_w, slope)
    for i in range(Q.shape[0]):
        row = T[min(i, T.shape[0] - 1)]
        if row.size == 1:
            out[i, 0] = _paired_value(row[0], Q[i], XT, log_w, top_w, slope, ys, cells, bits,
                                      paired, inv_h, pdf, (e_pad, s_pad))  # fmt: skip
            continue
        total = _row_weights(Q[i], XT, log_w, top_w, slope, e)
        span[:] = 0
        for k in range(row.size):
            F, f, _ = _mixture(row[k], e, none, ys, cells, M, span, inv_h, CELL_EDGE, False)
            if (f if pdf else F) < TAIL * total:
                F, f, _ = _mixture_at(row[k], e, none, ys, inv_h, ZERO_BELOW)
            out[i, k] = (f * inv_h if pdf else F) / total


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _log_halley(F, f, minus_curvature, target):  # pragma: no cover - compiled
    """Newton's step and Halley's divisor on ``log F(t) = log target``: far tails.

    ``F`` falls by hundreds of decades there, where its logarithm is near
    linear: steps on ``F`` itself move by about ``h / |u|`` each (a root 20
    bandwidths out took more than the hundred steps allowed).
    """
    slope = f / F  # d log F / dt
    step = (np.log(F) - np.log(target)) / slope
    bend = (-minus_curvature / F - slope * slope) / slope  # (log F)'' / (log F)'
    return step, 1.0 - 0.5 * step * bend


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _root(target, t, lo, hi, e, P, ys, cells, M, span, inv_h, rtol, rows):  # pragma: no cover
    """Safeguarded Halley steps on ``F(t) = target`` from ``t`` in ``F(lo) < target <= F(hi)``."""
    h = 1.0 / inv_h
    # Levels below TAIL (row by row) reach every row: Phi(-9) of a row's weight would
    # pass the level itself below about 1e-16 (the root of 1e-30 was 0.24 h_y off).
    reach = ZERO_BELOW if rows else _ROOT_REACH
    for _ in range(_MAX_STEPS):
        F, f, g = _mixture(t, e, P, ys, cells, M, span, inv_h, reach, rows)
        r = F - target
        if r < 0.0:
            lo = t
        else:
            hi = t
        f *= inv_h  # dF/dt; d2F/dt2 = -g inv_h^2
        if rows and F > 0.0 and f > 0.0 and target > 0.0:
            step, halley = _log_halley(F, f, g * inv_h * inv_h, target)
        else:
            step = r / f if f > 0.0 else np.inf
            halley = 1.0 + 0.5 * step * g * inv_h * inv_h / f if f > 0.0 else 0.0
        if halley > 0.5:
            step /= halley
        new = t - step
        if abs(step) <= _HALLEY_DONE * h and lo <= new <= hi:
            return new
        if not (lo < new < hi):
            new = 0.5 * (lo + hi)
        t = new
        if hi - lo <= rtol * h:
            break
    return t


@numba.njit(inline="always", error_model="numpy")
def _empirical_in_cells(e, ys, starts, P, tau):  # pragma: no cover - compiled
    """Return the weighted inverted-CDF ``tau``-quantile of ``ys`` (a first guess).

    A binary search of the cells' cumulative weights ``P``, then a scan of
    the rows of the cell found (to the rounding of ``P``).
    """
    total = P[P.size - 1]
    c = _reaching(P[1:], total, tau)
    run = P[c]
    for j in range(starts[c], starts[c + 1]):
        run += e[j]
        if run >= tau * total and run > 0.0:
            return ys[j]
    return ys[starts[c + 1] - 1]


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def smoothed_quantiles(  # pragma: no cover - compiled
    Q, XT, log_w, slope, ys, cells, taus, inv_h, reach, rtol, out
):
    """``out[i, k]``: the root of ``F(t | q_i) = taus[k]`` (``taus`` ascending), to ``rtol h``.

    Safeguarded Halley steps from the weighted empirical quantile, inside a
    bracket ``F(lo) < tau <= F(hi)`` (the previous level's root below,
    ``reach`` bandwidths beyond the data at first); a step leaving it
    bisects.  ``F`` by Taylor cells (``cells`` as :func:`mixture_values`; the
    moments of every cell first, and their cumulative weights ``P``), row by
    row for levels below ``TAIL``.
    """
    n, nc = XT.shape[1], cells[2].size
    h = 1.0 / inv_h
    e, P, top_w = np.empty(n), np.empty(nc + 1), log_w.max()
    M, span = np.empty((ORDER + 2, nc)), np.zeros(2, np.int64)
    span[1] = nc
    for i in range(Q.shape[0]):
        _row_weights(Q[i], XT, log_w, top_w, slope, e)
        cell_moments(e, cells[0], cells[1], 0, nc, M)
        P[0] = 0.0
        for c in range(nc):
            P[c + 1] = P[c] + M[0, c]
        total = P[nc]
        lo = ys[0] - reach * h
        for k in range(taus.size):
            hi = ys[n - 1] + reach * h
            t = _empirical_in_cells(e, ys, cells[1], P, taus[k])
            t = t if lo < t < hi else 0.5 * (lo + hi)
            lo = _root(taus[k] * total, t, lo, hi, e, P, ys, cells, M, span, inv_h, rtol,
                       taus[k] < TAIL)  # fmt: skip
            out[i, k] = lo


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
    cells = (np.zeros(3), np.arange(4), ys)  # one row per cell
    paired = paired_table(False)
    return {
        empirical_quantiles: (Q, XT, log_w, -0.5, ys, taus, out),
        mixture_values: (Q, XT, log_w, -0.5, ys, cells, paired, np.zeros((1, 1)), 1.0, False, out),
        smoothed_quantiles: (Q, XT, log_w, -0.5, ys, cells, taus, 1.0, 40.0, 1e-11, out),
        loo_empirical_crps: (XT, log_w, -0.5, ys, np.arange(3), np.empty(3)),
    }
