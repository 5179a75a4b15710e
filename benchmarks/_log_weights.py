"""The dense predict's log weights alone: a ceiling of its design (not in the package).

``python -m benchmarks engine --only exp_limit`` times it beside the predict:
the block loop of the engine's tiled kernels (``_compiled_tiled``) that takes
each pair's log weight in registers, with no exponential and no sums, on the
path the predict takes (the folded dot product where its rounding bound
allows, else direct differences).  Unlike a BLAS product, it writes no
(m, n) block, so it bounds the fused kernels from above where a GEMM alone
does not.
"""

from __future__ import annotations

import numba
import numpy as np

from skl_nw._engine import _dense
from skl_nw._engine._compiled_exp import _FAST
from skl_nw._engine._compiled_tiled import _BLOCK, _GROUP, _TILE, _diff_block, _dot_block


@numba.njit(nogil=True, fastmath=_FAST)
def _log_weights(P, KT, slope, off, dot):  # pragma: no cover - compiled
    """The tiles' log weights of ``P``'s rows against ``KT``'s columns; their sum (kept live)."""
    m, n = P.shape[0], KT.shape[1]
    rows = _TILE * _GROUP
    A, total = np.empty((_TILE, _BLOCK)), 0.0
    for g0 in range(0, m - rows + 1, rows):
        for j0 in range(0, n, _BLOCK):
            jb = min(_BLOCK, n - j0)
            for s in range(g0, g0 + rows, _TILE):
                if dot:
                    _dot_block(P[s : s + _TILE], KT, j0, jb, A)
                else:
                    _diff_block(P[s : s + _TILE], KT, j0, jb, slope, off, A)
                total += A[0, 0]
    return total


def log_weights_call(Q: np.ndarray, X: np.ndarray, bandwidth: float):
    """A call of :func:`_log_weights` for the Gaussian at ``bandwidth``; the path it takes.

    ``Q``'s rows are a multiple of the group's (32).
    """
    bits = -0.5 / bandwidth**2 * np.log2(np.e)
    q_sq, x_sq = (Q * Q).sum(1), (X * X).sum(1)
    Xp, Qp = _dense.pad_features(X), _dense.pad_features(Q)
    if not _dense.gemm_exact(0.5 / bandwidth**2, Q.shape[1], q_sq.max() + x_sq.max()):
        XT, off = np.ascontiguousarray(Xp.T), np.zeros(len(X))
        return lambda: _log_weights(Qp, XT, bits, off, False), "differences"
    KT = np.ascontiguousarray(np.vstack([Xp.T, bits * x_sq]))
    P = np.ascontiguousarray(np.column_stack([-2 * bits * Qp, bits * q_sq]))
    return lambda: _log_weights(P, KT, bits, np.zeros(0), True), "dot"
