"""In-sample fits and hat diagonals of the mixed-data grid: every lambda from one pass.

The in-sample criteria (AICc, GCV) need, per candidate, the fitted values
at the training points and the hat diagonal ``H_ii = w_i K(0) L(z_i, z_i) /
sum_j w_j K_ij L_ij``.  As for the leave-one-out predictions
(:class:`skl_nw._engine.MixedLeaveOneOut`), both are combinations of the
per-cell sums ``S_ig = sum_{k in g} w_k K_ik [V_k, 1]`` (the point itself
included), which do not depend on lambda: one grouped pass serves the whole
lambda grid.
"""

from __future__ import annotations

import numpy as np

from ._engine import Options, kernel_sums
from ._engine._chunks import budget
from ._local_mixed import MixedLocalLeaveOneOut

__all__ = ["fits_over_lambdas"]


def fits_over_lambdas(loo, factors, lambdas: np.ndarray, n_jobs=None):
    """In-sample fits (L, F, n, k) and hat diagonals (L, F, n) for every (lambda, factor).

    Parameters
    ----------
    loo : MixedLeaveOneOut or MixedLocalLeaveOneOut
        The protocol object of the estimator fitted at the base bandwidth.
    factors : array-like of shape (F,)
        Multiples of the continuous bandwidths.
    lambdas : ndarray of shape (L, n_categorical)
        Candidate lambda vectors.
    n_jobs : int or None
        Threads of the kernel sums.

    Returns
    -------
    fits : ndarray of shape (L, F, n, k)
    hat : ndarray of shape (L, F, n)
    """
    if isinstance(loo, MixedLocalLeaveOneOut):  # local fits: moments per cell
        return loo.fits(factors, n_jobs=n_jobs, lambdas=lambdas)
    return _pooled_fits(loo, np.asarray(factors, dtype=np.float64), lambdas, n_jobs)


def _pooled_fits(loo, factors: np.ndarray, lambdas: np.ndarray, n_jobs):
    """Pool by ratios of cell-weighted sums; each point's own share is its hat entry."""
    lambdas = np.atleast_2d(np.asarray(lambdas, dtype=np.float64))
    n, k = loo.targets.shape
    G = len(loo.cells)
    fits = np.empty((len(lambdas), len(factors), n, k))
    hat = np.empty((len(lambdas), len(factors), n))
    _, mib = budget(Options())
    block = max(1, int(mib * 2**20 / (8 * 3 * len(factors) * G * (k + 1))))
    train = loo.train
    own_log_w = train.to_caller(train.log_w)
    tables = [loo.tables(lam) for lam in lambdas]
    for start in range(0, n, block):
        stop = min(n, start + block)
        part = np.arange(start, stop)
        sums = kernel_sums(
            None, loo._cells(), loo.base.kernel, factors=factors, grouped=True, rows=part,
            fallback=loo.base.fallback, options=Options(rtol=loo.base.rtol, n_jobs=n_jobs),
        )  # fmt: skip
        log_scale, scaled = sums.log_scale[:, :, 0], sums.scaled[:, :, 0]  # (b, F, G[, k + 1])
        for t, table in enumerate(tables):
            logL = loo._cell_log(table, part)  # (b, G)
            terms = log_scale + logL[:, None, :]
            top = terms.max(axis=2, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            S = np.einsum("bfg,bfgk->bfk", np.exp(terms - top), scaled)
            den = np.where(S[..., -1] > 0, S[..., -1], np.nan)  # (b, F)
            pooled = S[..., :-1] / den[..., None] * sums.value_scale[:-1]
            fits[t, :, start:stop] = pooled.transpose(1, 0, 2)
            # H_ii = w_i L(z_i, z_i) / D_i, with D_i = exp(shift + top) * S_last (K(0) = 1).
            own = own_log_w[part] + logL[np.arange(len(part)), loo.cell_of[part]]
            with np.errstate(over="ignore", invalid="ignore"):
                H = np.exp(own[:, None] - sums.shift - top[..., 0]) / den
            hat[t, :, start:stop] = np.where(np.isfinite(own)[:, None], H, 0.0).T
    return fits, hat
