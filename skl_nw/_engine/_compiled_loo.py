"""Compiled dense leave-one-out attention weights (numba), in the order of the targets.

The kernel fills one row of ``n`` weights per training row with the
per-query pass of ``_compiled_conditional`` (the exponential of the log
weights against the largest sample weight, redone against the row's own
largest where the sum underflows; the row itself left out by index), then
normalises it.  No (m, n, d) array and one pass instead of numpy's dozen.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_conditional import _row_weights
from ._compiled_exp import _FAST

__all__ = ["loo_weights"]


@numba.njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def loo_weights(XT, log_w, slope, rows, out):  # pragma: no cover - compiled
    """``out[r]``: every row's normalised weight for the query ``p = rows[r]``, ``p`` left out.

    NaN where every other row has weight 0 (as the numpy path's empty rows).
    """
    d = XT.shape[0]
    q, top_w = np.empty(d), log_w.max()
    for r in range(rows.size):
        p = rows[r]
        for f in range(d):
            q[f] = XT[f, p]
        e = out[r]
        scale = 1.0 / _row_weights(q, XT, log_w, top_w, slope, e, p)
        for j in range(e.size):
            e[j] *= scale
