"""A GEMM-fed compiled pass, measured against the register-tiled kernels (not in the package).

``python -m benchmarks engine --only kernels`` times it beside the engine's own
passes: each group of query rows takes its log weights from a BLAS product
(numba's ``np.dot``, OpenBLAS) block by block of training points, in cache,
then one compiled pass adds the constant terms and takes the exponential and
the sums.  No rounding check (every block is taken as exact): the most this
design can give.  It lost at every d measured, so the engine has none.
"""

from __future__ import annotations

import numba
import numpy as np

from skl_nw._engine._compiled_exp import _FAST
from skl_nw._engine._compiled_tiled import _TILE, _exp_block, _finish_group, _group_rows

# Rows per group and training points per block: the best of 64-256 rows x 512-2048
# points measured in d = 16-64 (the block of log weights, 2 MiB, in L2 and L3).
ROWS, BLOCK = 256, 1024


@numba.njit(inline="always", fastmath=_FAST)
def _fold(G, s, qq, xx, j0, jb, slope, off):  # pragma: no cover - compiled
    """``G = slope (|q|^2 + |x|^2 - 2 G) + off`` on the tile's rows, in place (in bits)."""
    for r in range(s, s + _TILE):
        g, q = G[r], qq[r]
        for j in range(jb):
            g[j] = slope * max(q + xx[j0 + j] - 2.0 * g[j], 0.0) + off[j0 + j]


@numba.njit(nogil=True, fastmath=_FAST)
def exp_gemm_fed(Q, X, qq, xx, slope, off, VT, out):  # pragma: no cover - compiled
    """:func:`skl_nw._engine._compiled.exp_diff_tiled`'s sums, one value column, ``X`` (n, d)."""
    m, n = Q.shape[0], X.shape[0]
    E, flat = np.zeros((ROWS, 0)), np.empty(ROWS * BLOCK)
    P, sums, q = np.empty((ROWS, Q.shape[1])), np.empty((ROWS, 2)), np.zeros(ROWS)
    for g0 in range(0, m, ROWS):
        sums[:] = 0.0
        tiles = _group_rows(Q, g0, P)
        for r in range(min(ROWS, m - g0)):
            q[r] = qq[g0 + r]
        for j0 in range(0, n, BLOCK):
            jb = min(BLOCK, n - j0)
            G = flat[: ROWS * jb].reshape((ROWS, jb))
            np.dot(P, X[j0 : j0 + jb].T, G)
            for s in range(0, tiles * _TILE, _TILE):
                _fold(G, s, q, xx, j0, jb, slope, off)
                tile = slice(s, s + _TILE)
                _exp_block(G[tile], E[tile], j0, jb, VT[0], True, sums[tile])
        _finish_group(sums, E, g0, VT, out, True)


def call(Qp: np.ndarray, Xp: np.ndarray, slope: float, off: np.ndarray, VT, out):
    """Return a function running :func:`exp_gemm_fed` on padded inputs."""
    qq, xx = np.einsum("ij,ij->i", Qp, Qp), np.einsum("ij,ij->i", Xp, Xp)
    return lambda: exp_gemm_fed(Qp, Xp, qq, xx, slope, off, VT, out)
