"""One value a query (paired ``t``): tabulated cell polynomials, one Horner per row.

Loaded through :mod:`skl_nw._engine._compiled_conditional`.  For
``predict_cdf(X, y[:, None])`` each query has its own ``t``: the cells' moments
(``_compiled_cells``) are not worth their fifteen sums a row, so each row's
share of ``F(t) = sum_j e_j Phi(u - s_j)`` is its cell's polynomial in
``s_j``.  A cell's polynomial depends on ``t`` only through ``u = (t - c_b) /
h_y``, so it is tabulated once (:func:`paired_table`, numpy) at the nodes
``u_i = U_0 + i STEP`` over the window: a cell at ``u`` takes the polynomial of
its nearest node at ``x = s_j - (u - u_i)``, ``|x| <= RADIUS = CELL_HALF +
STEP / 2``.  No ``Phi`` and no Hermite recurrence per cell and query.

Each node's Taylor polynomial of ``x -> Phi(u_i - x)`` (or ``phi(u_i - x)``)
of order ``_TAYLOR = 18`` is economised (Chebyshev) to degree ``ORDER = 12`` on
``|x| <= RADIUS``: within 1.2e-16 absolute of mpmath's ``Phi`` and ``phi``
there (float64 rounding included; order 11: 3.5e-16 and 1.1e-15), so 13
multiply-adds a row where the cells' Taylor polynomials of order 14 took 15.
The bound is absolute, as the cells'; the callers sum values below ``TAIL``
of the total row by row.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numpy.polynomial import chebyshev
from scipy.special import ndtr

from ._compiled_cells import CELL_EDGE, CELL_HALF
from ._compiled_exp import _FAST, _exp2_nonpositive

__all__ = ["LANES", "ORDER", "RADIUS", "STEP", "paired_cells", "paired_table", "rows_base2"]

# Nodes an eighth of a cell apart: |x| <= 9/32, where degree 12 keeps 1.2e-16 (the
# table is 277 nodes, 28 KB a kind).  A node per cell (|x| <= 1/2) needs degree 14;
# finer nodes gain nothing at degree 12 (1/16 of a cell: 1.3e-16); degree 11 misses
# (python -m benchmarks conditional, tests/inference/test_conditional_cells.py).
STEP = CELL_HALF / 4
RADIUS = CELL_HALF + STEP / 2
ORDER = 12
_TAYLOR = 18
# A cell's rows are taken in whole vectors of this many (AVX-512 doubles), the ones past
# the cell weighing 0: no scalar remainder loop per cell (2% of a paired value, python -m
# benchmarks conditional).  The weights and offsets come padded by as many.
LANES = 8
_INV_SQRT_2PI = 0.3989422804014327


def _economised(order: int, taylor: int, radius: float) -> np.ndarray:
    """Return ``E``: ``b[: order + 1] + E @ b[order + 1 :]`` is ``b`` economised to ``order``.

    From the top down, ``b_n x^n`` is replaced by ``b_n (x^n - r^n T_n(x / r) /
    2^(n - 1))`` (degree ``n - 2``), off by at most ``|b_n| r^n / 2^(n - 1)``
    on ``|x| <= r``: Chebyshev economisation, a fixed linear map.
    """
    E = np.zeros((order + 1, taylor - order))
    for col in range(taylor - order):
        b = np.zeros(taylor + 1)
        b[order + 1 + col] = 1.0
        for n in range(taylor, order, -1):
            t_n = chebyshev.cheb2poly(np.eye(n + 1)[n])  # T_n in powers of its argument
            b[:n] -= b[n] * t_n[:n] * radius ** (n - np.arange(n)) / 2.0 ** (n - 1)
            b[n] = 0.0
        E[:, col] = b[: order + 1]
    return E


@functools.cache
def paired_table(pdf: bool) -> tuple[np.ndarray, float, float]:
    """Return ``(table, U_0, 1 / STEP)``: row ``i`` the coefficients at node ``U_0 + i STEP``.

    ``table[i, p]`` multiplies ``x^p`` in ``Phi(u_i - x)`` (``pdf``:
    ``phi(u_i - x)``); the nodes span the window of :func:`cells_window` at
    ``reach = CELL_EDGE`` and one step beyond.
    """
    reach = CELL_EDGE + CELL_HALF + STEP
    u = -reach + STEP * np.arange(int(np.ceil(2 * reach / STEP)) + 1)
    d = np.exp(-0.5 * u * u) * _INV_SQRT_2PI
    B = np.empty((u.size, _TAYLOR + 1))
    B[:, 0] = d if pdf else ndtr(u)
    a0, a1 = np.ones_like(u), u.copy()  # He_(p-1)(u) / (p-1)!, He_p(u) / p!
    for p in range(1, _TAYLOR + 1):
        B[:, p] = d * a1 if pdf else -d * a0 / p
        a0, a1 = a1, (u * a1 - a0) / (p + 1)
    table = B[:, : ORDER + 1] + B[:, ORDER + 1 :] @ _economised(ORDER, _TAYLOR, RADIUS).T
    return np.ascontiguousarray(table), float(u[0]), 1.0 / STEP


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def rows_base2(q0, q1, x0, x1, lw2, e):  # pragma: no cover - compiled
    """``e_j = 2^(lw2_j - (q0 - x0_j)^2 - (q1 - x1_j)^2)``; return ``sum e``.

    The features and log weights come scaled to bits (``x sqrt(-c log2 e)``,
    ``log_w log2 e``): the exponent is one multiply-add fewer and the
    exponential three (:func:`_exp2_nonpositive`).
    """
    total = 0.0
    for j in range(e.size):
        a, b = q0 - x0[j], q1 - x1[j]
        w = _exp2_nonpositive(lw2[j] - a * a - b * b)
        e[j] = w
        total += w
    return total


@numba.njit(inline="always", fastmath=_FAST, error_model="numpy")
def paired_cells(t, e, s, starts, centres, a, b, inv_h, table, u0, inv_step):  # pragma: no cover
    """``sum_(c = a..b-1) sum_(j in c) e_j P_i(s_j - (u_c - u_i))``: the cells' share at ``t``.

    ``P_i`` the polynomial of the node ``i`` nearest ``u_c = (t - c_b) /
    h``, from :func:`paired_table` (Horner, written out for ``ORDER = 12``).
    ``e`` and ``s`` run ``LANES`` past the last row (any finite values).
    """
    step, last = 1.0 / inv_step, table.shape[0] - 1
    F = 0.0
    for c in range(a, b):
        u = (t - centres[c]) * inv_h
        i = min(max(int(round((u - u0) * inv_step)), 0), last)
        delta = u - (u0 + i * step)
        b0, b1, b2, b3, b4 = table[i, 0], table[i, 1], table[i, 2], table[i, 3], table[i, 4]
        b5, b6, b7, b8, b9 = table[i, 5], table[i, 6], table[i, 7], table[i, 8], table[i, 9]
        b10, b11, b12 = table[i, 10], table[i, 11], table[i, 12]
        lo, k = starts[c], starts[c + 1] - starts[c]
        m = (k + LANES - 1) // LANES * LANES
        ec, sc = e[lo : lo + m], s[lo : lo + m]
        acc = 0.0
        for j in range(m):
            x = sc[j] - delta
            v = ((b12 * x + b11) * x + b10) * x + b9
            v = ((v * x + b8) * x + b7) * x + b6
            v = ((v * x + b5) * x + b4) * x + b3
            w = ec[j] if j < k else 0.0
            acc += w * (((v * x + b2) * x + b1) * x + b0)
        F += acc
    return F
