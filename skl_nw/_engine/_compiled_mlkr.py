"""Optional compiled kernel (numba): a tile of the learned metric's loss and gradient.

The numpy tile (``_mlkr._folded_tile``) makes about ten passes over its
(b, n) block: a product, the row maxima, the exponential, three products and
the elementwise gradient terms.  This kernel takes one query at a time
through one row buffer of n log weights: the folded dot product, the
vectorisable exponential of ``_compiled_exp`` (0 below ``-708``, so no
subnormal products), the pooled targets, then the gradient terms, with the
coordinates and targets stored feature-major so that every inner loop runs
over contiguous keys.  Only ``log K = c s`` kernels with positive weights
come here (the folded keys).
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_exp import _FAST, _exp_nonpositive

__all__ = ["mlkr_tile"]


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def mlkr_tile(Zq, own, keys_t, Z_t, Y_t, r, slope, grad, Gq, Gk_t):  # pragma: no cover
    """Loss of the queries ``Zq`` (b, r) against every key; gradient terms added in place.

    ``keys_t`` (r + 1, n): the folded keys ``[-2 c z_i, c |z_i|^2 + log w_i]``
    feature-major; ``Z_t`` (r, n) and ``Y_t`` (k, n) the coordinates and
    targets; ``r`` the queries' loss weights.  With ``grad``: ``Gq`` (b, r)
    receives ``sum_i C_qi (z_q - z_i)`` and ``Gk_t`` (r, n) accumulates
    ``sum_q C_qi (z_i - z_q)``.  Returns the tile's weighted squared error.
    """
    b, d = Zq.shape
    k, n = Y_t.shape
    buf = np.empty(n)
    coef = np.empty(n)
    P = np.empty(k)
    R = np.empty(k)
    loss = 0.0
    for a in range(b):
        for i in range(n):
            buf[i] = keys_t[d, i]
        for j in range(d):
            zj = Zq[a, j]
            for i in range(n):
                buf[i] += zj * keys_t[j, i]
        buf[own[a]] = -np.inf
        top = -np.inf
        for i in range(n):
            top = max(top, buf[i])
        total = 0.0
        for i in range(n):
            e = _exp_nonpositive(buf[i] - top) if i != own[a] else 0.0
            buf[i] = e
            total += e
        residual = 0.0
        for m in range(k):
            s = 0.0
            for i in range(n):
                s += buf[i] * Y_t[m, i]
            P[m] = s / total
            res = P[m] - Y_t[m, own[a]]
            residual += res * res
            R[m] = 2.0 * slope * r[a] * res / total
        loss += r[a] * residual
        if not grad:
            continue
        c = 0.0
        for m in range(k):
            c += R[m] * P[m]
        # buf becomes C_qi = e_qi (R . y_i - c) (alpha's 1 / total and g = slope in R).
        for i in range(n):
            coef[i] = -c
        for m in range(k):
            for i in range(n):
                coef[i] += R[m] * Y_t[m, i]
        for i in range(n):
            buf[i] *= coef[i]
        row = 0.0
        for i in range(n):
            row += buf[i]
        for j in range(d):
            zj = Zq[a, j]
            acc = 0.0
            for i in range(n):
                acc += buf[i] * Z_t[j, i]
                Gk_t[j, i] += buf[i] * (Z_t[j, i] - zj)
            Gq[a, j] = row * zj - acc
    return loss
