"""The tree path's compiled passes over COO entries (a query's row, a training point's column).

numpy sums each value column with its own ``bincount`` over a gathered copy
of the rows (``k + 1`` passes over the entries and an (entries, k) block);
:func:`coo_sums` reads each entry once and adds its weighted row in place.
Compiled without ``fastmath``: each product is rounded before its sum, in
the entries' order, as ``bincount`` does, so both paths give the same bits.
:func:`coo_log_sums` adds the row maxima and the exponentials of log terms to
that pass, and :func:`pair_sq_distances` takes each entry's squared distance
by direct differences, where numpy gathers both rows of every entry first.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST, _exp_nonpositive


@numba.njit(inline="always")
def _add_entry(out, r, V, c, w):  # pragma: no cover - compiled
    """``out[r] += w [V[c], 1]``."""
    k = V.shape[1]
    for j in range(k):
        out[r, j] += w * V[c, j]
    out[r, k] += w


@numba.njit(nogil=True, cache=True)
def coo_sums(row, col, e, V, out):  # pragma: no cover - compiled
    """``out[r] = [sum e V[col], sum e]`` over the entries of row ``r`` (``out`` zeroed)."""
    for i in range(row.size):
        _add_entry(out, row[i], V, col[i], e[i])


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def coo_log_sums(key, col, t, V, mult, top, out):  # pragma: no cover - compiled
    """:func:`coo_sums` of ``e = exp(t - top[key]) mult`` (``mult`` empty: 1), ``top`` row maxima.

    ``top`` comes filled with ``-inf`` and leaves with each row's largest ``t``
    (``-inf`` where a row has none, whose terms are then ``exp(t)``: 0 for
    ``t = -inf``).  Each entry's exponential is taken once, in the pass that
    adds it (the compiled polynomial, 2 ulp).  NaN and infinite terms give
    numpy's results (a row with a NaN term sums to NaN).
    """
    for i in range(key.size):
        r, v = key[i], t[i]
        if top[r] == top[r] and not v <= top[r]:  # a NaN sticks, as in numpy's maximum.at
            top[r] = v
    for i in range(key.size):
        shift = top[key[i]]
        x = t[i] - (shift if np.isfinite(shift) else 0.0)
        w = _exp_nonpositive(x) if x <= 0.0 else np.exp(x)  # NaN, x > 0: numpy's values
        if mult.size:
            w *= mult[i]
        _add_entry(out, key[i], V, col[i], w)


@numba.njit(nogil=True, cache=True)
def pair_sq_distances(Q, X, row, col, out):  # pragma: no cover - compiled
    """``out[i] = |Q[row[i]] - X[col[i]]|^2`` by direct differences."""
    for i in range(row.size):
        q, x, s = Q[row[i]], X[col[i]], 0.0
        for f in range(q.size):
            v = q[f] - x[f]
            s += v * v
        out[i] = s


def coo_example() -> dict:
    """Return the kernels' arguments on a tiny problem (see ``_compiled.examples``)."""
    index, point = np.zeros(1, np.intp), np.zeros((1, 2))
    return {
        coo_sums: (index, index, np.ones(1), np.ones((1, 1)), np.zeros((1, 2))),
        coo_log_sums: (
            index,
            index,
            np.zeros(1),
            np.ones((1, 1)),
            np.ones(0),
            np.full(1, -np.inf),
            np.zeros((1, 2)),
        ),  # fmt: skip
        pair_sq_distances: (point, point, index, index, np.empty(1)),
    }
