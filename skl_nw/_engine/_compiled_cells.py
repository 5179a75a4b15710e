"""Taylor cells of the ``y``-sorted rows: a normal mixture summed per cell, not per row.

Loaded through :mod:`skl_nw._engine._compiled_conditional`.  The training rows
in the order of ``y`` are cut into cells of width ``2 CELL_HALF h_y`` on a
grid (only the non-empty ones are kept, see ``_conditional.taylor_cells``),
so that each row is ``y_j = c_b + s_j h_y`` with ``|s_j| <= CELL_HALF`` about
its cell's centre ``c_b``.  For a query's weights ``e_j`` a cell's share of
``F(t) = sum_j e_j Phi((t - y_j) / h_y)`` is, at ``u = (t - c_b) / h_y``,

    ``sum_j e_j Phi(u - s_j) = Phi(u) M_0 - phi(u) sum_(p=1..K) He_(p-1)(u) M_p / p!``

with the moments ``M_p = sum_j e_j s_j^p`` (Taylor's formula with
``(-1)^p Phi^(p) = -He_(p-1) phi``, ``He`` the probabilists' Hermite
polynomials).  The remainder is at most ``|s|^(K+1) / (K+1)! max |phi^(K)|
<= 1.0865 sqrt(K!) / sqrt(2 pi) |s|^(K+1) / (K+1)!`` of the cell's weight
(Cramér's bound on ``He_K``): 9e-17 at ``K = ORDER = 14``,
``|s| <= 1/4``; the density and its slope come from the same moments.  A
value then costs one ``Phi`` per cell near ``t`` (at most
``(CELL_EDGE + reach) / (2 CELL_HALF) + 2`` of them, whatever ``n``) instead
of one per row, and the moments ``n (K + 1)`` multiply-adds per query, once.
One value per query (``_compiled_paired``) skips the moments: each row's
share is its cell's polynomial in ``s``, tabulated.

The bound is absolute (a share of the weight): where ``F`` or ``f`` is itself
below ``TAIL`` of the total, the callers sum those values row by row
(relative accuracy in the lower tail).
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST
from ._compiled_phi import _cdf_pdf, _first_at_least

__all__ = [
    "CELL_EDGE",
    "CELL_HALF",
    "ORDER",
    "TAIL",
    "cell_moments",
    "cells_at",
    "cells_window",
]

# Cells of half-width 1/4 h_y and Taylor order 14: the remainder bound above is
# 9e-17 of a cell's weight (measured against scipy's ndtr: 4e-16 absolute, rounding;
# tests/inference/test_conditional_cells.py).  Wider cells need a higher order (1/2
# and 20: 6e-18, 1.5x the flops per row); narrower ones more cells per value
# (python -m benchmarks conditional).
CELL_HALF = 0.25
ORDER = 14
# Values of F (or f) below this share of the total are summed row by row: the cells'
# absolute error (a few 1e-16 of the total) is then within 1e-12 of the value.
TAIL = 1e-3
# Cells wholly this many h_y below t count their weight (Phi > 1 - 5.2e-17), and the
# values leave out the rows this far above t (Phi < 5.2e-17): 3% off a paired value
# against 8.5 and 9 (python -m benchmarks conditional).
CELL_EDGE = 8.3
_INV = 1.0 / np.maximum(np.arange(ORDER + 2), 1)  # 1 / p (1 at p = 0)


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def cells_window(centres, lo, hi, inv_h, reach):  # pragma: no cover - compiled
    """Return the cells ``a:b`` that values at ``lo <= t <= hi`` sum (below ``a``: all 1).

    A cell's rows lie within ``CELL_HALF`` of its centre (in units of
    ``h_y``): below ``a`` every row has ``Phi`` within 5.2e-17 of 1
    (``CELL_EDGE``), from ``b`` on every row is more than ``reach`` above ``t``.
    """
    a = _first_at_least(centres, lo - (CELL_EDGE + CELL_HALF) / inv_h, 0)
    b = _first_at_least(centres, hi + (reach + CELL_HALF) / inv_h, a)
    return a, b


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def _eight_moments(e, s, first, m):  # pragma: no cover - compiled
    """``m[p] = sum_j e_j s_j^(first + p)`` for ``p < 8`` (``first``: 0 or 8)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = 0.0
    for j in range(e.size):  # from 0: no negative-index check per row
        x = s[j]
        x2 = x * x
        x4 = x2 * x2
        w0 = e[j] * (x4 * x4 if first else 1.0)
        w1, w2 = w0 * x, w0 * x2
        w3 = w1 * x2
        m0, m1, m2, m3 = m0 + w0, m1 + w1, m2 + w2, m3 + w3
        m4, m5, m6, m7 = m4 + w0 * x4, m5 + w1 * x4, m6 + w2 * x4, m7 + w3 * x4
    m[first], m[first + 1], m[first + 2], m[first + 3] = m0, m1, m2, m3
    m[first + 4], m[first + 5], m[first + 6], m[first + 7] = m4, m5, m6, m7


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def cell_moments(e, s, starts, a, b, M):  # pragma: no cover - compiled
    """``M[p, c] = sum_(j in cell c) e_j s_j^p`` for the cells ``a <= c < b``, ``p <= ORDER``.

    ``M``: (``ORDER + 2``, cells), a cell's moments down a column (``M[15]``
    is scratch), so that :func:`cells_at` reads each order along the cells.
    Two passes of eight running sums (``ORDER = 14``): fifteen in one pass
    spill out of the registers and the loop no longer vectorises (5x slower).
    """
    for c in range(a, b):
        ec, sc = e[starts[c] : starts[c + 1]], s[starts[c] : starts[c + 1]]
        _eight_moments(ec, sc, 0, M[:, c])
        _eight_moments(ec, sc, 8, M[:, c])


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def cells_at(t, e, P, centres, starts, M, inv_h, reach):  # pragma: no cover - compiled
    """``F`` (unnormalised), ``sum e phi(u)`` and ``sum e phi(u) u`` at ``t`` from the cells.

    The cells wholly at ``Phi = 1`` count their weights: ``P[c]``, the
    weights of the cells below ``c``, or where ``P`` is empty ``e`` summed
    here (a vectorised sum: it rounds less than a running one).  The moments
    ``M`` must hold the cells of :func:`cells_window` at ``t``.  Rows more
    than ``reach`` above ``t`` are left out.  Per cell, ``A_p = He_p(u) /
    p!`` by ``A_(p+1) = (u A_p - A_(p-1)) / (p + 1)``: the loop over ``p``
    unrolls and the one over the cells vectorises.
    """
    a, b = cells_window(centres, t, t, inv_h, reach)
    F = 0.0
    if P.size:
        F = P[a]
    else:
        for j in range(starts[a]):
            F += e[j]
    f = g = 0.0
    for c in range(a, b):
        u = (t - centres[c]) * inv_h
        cdf, d = _cdf_pdf(u)
        m0 = M[0, c]
        a0, a1 = 1.0, u
        Fc, fc, gc = 0.0, m0, u * m0
        for p in range(1, ORDER + 1):
            m = M[p, c]
            a2 = (u * a1 - a0) * _INV[p + 1]
            Fc += a0 * m * _INV[p]  # He_(p-1) M_p / p!
            fc += a1 * m  # He_p M_p / p!
            gc += (p + 1) * a2 * m  # He_(p+1) M_p / p!
            a0, a1 = a1, a2
        F += cdf * m0 - d * Fc * 0.3989422804014327
        f += d * fc
        g += d * gc
    return F, f * 0.3989422804014327, g * 0.3989422804014327
