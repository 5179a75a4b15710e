"""Leave-one-out with categorical features: every lambda from one pass over the cells.

The discrete kernels are constant on each *cell* (the training points that
share every category), so the leave-one-out sums for any lambdas are
combinations of per-cell sums that do not depend on lambda:

``S_i(lambda) = sum_g L(a_i, g; lambda) S_ig``,  ``S_ig = sum_{k in g, k != i} w_k K_ik [V_k, 1]``.

One :func:`kernel_sums` call (grouped by cell, all bandwidth factors) gives
``S_ig`` in its log-scaled form; each candidate lambda vector is then an
``(n, F, G)`` combination.  Gradient descent works on
``lambda = lambda_max sigmoid(theta + theta_0)``, an unconstrained transform.
"""

from __future__ import annotations

import numpy as np

from . import _gradient
from ._chunks import Options, budget
from ._discrete import left_out
from ._sums import kernel_sums
from ._train import TrainSet, prepare_train

# Largest lambda / lambda_max that gradient descent starts from (its logit is finite).
_EDGE = 1e-6


def tables_of(lambdas) -> np.ndarray:
    """Candidate lambda vectors as an (L, n_categorical) float array."""
    return np.atleast_2d(np.asarray(lambdas, dtype=np.float64))


class MixedLeaveOneOut:
    """The leave-one-out protocol on mixed data (:class:`MixedLeaveOneOutProtocol`).

    ``predictions`` also takes ``lambdas``, an (L, n_categorical) array of
    candidate lambda vectors (the continuous bandwidths scaled by ``factors``
    as usual): it then returns (L, F, n, k) predictions from one pass.
    ``loss_grad`` takes ``theta`` of shape (n_features,): the log factor of
    each continuous bandwidth, and the transformed lambda of each categorical
    feature; ``bandwidth_at(theta)`` maps it to a bandwidth vector.
    """

    takes_lambdas = True

    def __init__(self, base, kernels, bandwidth: np.ndarray, mask: np.ndarray):
        self.base, self.kernels = base, kernels
        self.train: TrainSet = base.train
        self.targets = base.targets
        self.bandwidth, self.mask = np.asarray(bandwidth, float), np.asarray(mask, bool)
        train = self.train
        self.sizes = np.diff(np.append(train.offsets, train.onehot.shape[1]))
        self.max = np.array([k.max_lambda(c) for k, c in zip(kernels, self.sizes, strict=True)])
        self.codes = train.to_caller(train.codes)
        self.cells, self.cell_of = np.unique(self.codes, axis=0, return_inverse=True)
        self.cell_of = self.cell_of.ravel()
        # Points of positive weight, and per cell (the cells any row may count).
        self.live = train.to_caller(np.isfinite(train.log_w))
        self.live_counts = np.bincount(self.cell_of[self.live], minlength=len(self.cells))
        self._cellset = None

    def fits(self, factors, n_jobs=None, lambdas=None):
        """In-sample fits (F, n, k) and hat diagonal (F, n); (L, F, ...) for ``lambdas``.

        With ``lambdas`` every lambda vector comes from one grouped pass (the
        point itself included): ``H_ii = w_i L(z_i, z_i) / sum_j w_j K_ij L_ij``
        (``K(0) = 1``), a point's own share of its fit.
        """
        if lambdas is None:
            return self.base.fits(factors, n_jobs)
        rows = np.arange(self.train.n_samples)
        own_log_w = self.train.to_caller(self.train.log_w)
        shape = (len(tables_of(lambdas)), len(factors), len(rows))
        fits, hat = np.empty((*shape, self.targets.shape[1])), np.empty(shape)
        for t, block, P, sums, logL, top, den in self._lambda_pass(
            factors, rows, lambdas, n_jobs, loo=False
        ):
            fits[t, :, block] = P.transpose(1, 0, 2)
            part = rows[block]
            own = own_log_w[part] + logL[np.arange(len(part)), self.cell_of[part]]
            with np.errstate(over="ignore", invalid="ignore"):
                H = np.exp(own[:, None] - sums.shift - top[..., 0]) / den[..., 0]
            hat[t, :, block] = np.where(np.isfinite(own)[:, None], H, 0.0).T
        return fits, hat

    def tables(self, lambdas, derivative: bool = False) -> list[np.ndarray]:
        """Per categorical feature, the (c, c) table of ``log L`` (or ``d log L / d lambda``)."""
        out = []
        for kernel, lam, c in zip(self.kernels, lambdas, self.sizes, strict=True):
            a = np.arange(c)
            dist = np.abs(a[:, None] - a) if kernel.ordered else (a[:, None] != a).astype(float)
            fn = kernel.dlog_dlambda if derivative else kernel.log_value
            out.append(np.asarray(fn(lam, c, dist), dtype=np.float64))
        return out

    def predictions(self, factors, n_jobs=None, rows=None, lambdas=None) -> np.ndarray:
        """Leave-one-out predictions (F, n, k), or (L, F, n, k) for candidate ``lambdas``."""
        if lambdas is None:
            return self.base.predictions(factors, n_jobs=n_jobs, rows=rows)
        rows = np.arange(self.train.n_samples) if rows is None else np.asarray(rows)
        out = np.empty((len(tables_of(lambdas)), len(factors), len(rows), self.targets.shape[1]))
        for t, block, P, *_ in self._lambda_pass(factors, rows, lambdas, n_jobs, loo=True):
            out[t, :, block] = P.transpose(1, 0, 2)
        return out

    def _lambda_pass(self, factors, rows, lambdas, n_jobs, loo: bool):
        """Pool every lambda vector from one grouped pass, by blocks of ``rows``.

        Yields ``(t, block, P, sums, logL, top, den)`` per lambda vector ``t``
        and block of rows (a slice into ``rows``): the pooled values P (b, F, k),
        the block's kernel sums, ``log L`` to every cell (b, G), the log-sum
        shift ``top`` (b, F, 1) and the pooled weight ``den`` (b, F, 1; NaN
        where 0).  ``loo`` leaves each point out of its own sums.
        """
        G, k1 = len(self.cells), self.targets.shape[1] + 1
        _, mib = budget(Options())
        size = max(1, int(mib * 2**20 / (8 * 3 * len(factors) * G * k1)))
        for start in range(0, len(rows), size):
            block = slice(start, min(start + size, len(rows)))
            part = rows[block]
            sums = kernel_sums(
                None, self._cells(), self.base.kernel, factors=factors, grouped=True,
                loo=loo, rows=part, fallback=self.base.fallback,
                options=Options(rtol=self.base.rtol, n_jobs=n_jobs),
            )  # fmt: skip
            log_scale, scaled = sums.log_scale[:, :, 0], sums.scaled[:, :, 0]  # (b, F, G[, k1])
            for t, logL in enumerate(self.counted_logs(lambdas, part, loo)):  # (b, G) each
                terms = log_scale + logL[:, None, :]
                top = terms.max(axis=2, keepdims=True)
                top = np.where(np.isfinite(top), top, 0.0)
                S = np.einsum("bfg,bfgk->bfk", np.exp(terms - top), scaled)
                den = np.where(S[..., -1:] > 0, S[..., -1:], np.nan)
                P = S[..., :-1] / den * sums.value_scale[:-1]
                empty = np.flatnonzero(np.isnan(den[..., 0]).any(axis=1))
                if empty.size and self.base.fallback == "nearest":
                    fill = self._nearest(part[empty], logL[empty], loo)  # (e, k)
                    P[empty] = np.where(np.isnan(den[empty]), fill[:, None, :], P[empty])
                yield t, block, P, sums, logL, top, den

    def _counted(self, logL: np.ndarray, rows: np.ndarray, loo: bool) -> np.ndarray:
        """``logL`` (b, G) with ``-inf`` for the cells the discrete kernels leave out.

        (:func:`skl_nw._engine._discrete.left_out`, against the best cell of
        points of positive weight; ``loo``: without the row itself.)
        """
        counts = self.live_counts
        present = np.broadcast_to(counts > 0, logL.shape).copy()
        if loo:
            own = self.cell_of[rows]
            present[np.arange(len(rows)), own] &= counts[own] - self.live[rows] > 0
        best = np.where(present, logL, -np.inf).max(axis=1, keepdims=True, initial=-np.inf)
        return np.where(left_out(logL, best), -np.inf, logL)

    def _nearest(self, rows: np.ndarray, logL: np.ndarray, loo: bool) -> np.ndarray:
        """Return the fallback of rows with no counted point in reach: the nearest counted.

        Their targets' mean (k,) per row, weighted by the points' weights and
        discrete kernels (the ``h -> 0`` limit, as the exact path's fallback).
        """
        t = self.train
        X, log_w = t.to_caller(t.X), t.to_caller(t.log_w)
        out = np.empty((len(rows), self.targets.shape[1]))
        for r, (i, cell_log) in enumerate(zip(rows, logL, strict=True)):
            S = ((X - X[i]) ** 2).sum(axis=1)
            lw = log_w + cell_log[self.cell_of]
            if loo:
                lw[i] = -np.inf
            S[~np.isfinite(lw)] = np.inf
            tie = np.flatnonzero((S == S.min()) & np.isfinite(S))
            w = np.exp(lw[tie] - lw[tie].max()) if tie.size else tie
            out[r] = w @ self.targets[tie] / w.sum() if tie.size else np.nan
        return out

    def counted_logs(self, lambdas, rows: np.ndarray, loo: bool) -> list[np.ndarray]:
        """Per candidate lambda vector, ``log L`` (b, G) between ``rows`` and every cell.

        With ``-inf`` for the cells the discrete kernels leave out (:meth:`_counted`).
        """
        return [self._counted(self._cell_log(self.tables(lam), rows), rows, loo)
                for lam in tables_of(lambdas)]  # fmt: skip

    def _cells(self) -> TrainSet:
        """Return the continuous training set grouped by cell (built on first need)."""
        if self._cellset is None:
            t = self.train
            self._cellset = prepare_train(
                t.to_caller(t.X), log_w=t.to_caller(t.log_w), values=self.targets,
                groups=self.cell_of,
            )  # fmt: skip
        return self._cellset

    def _cell_log(self, tables, rows) -> np.ndarray:
        """``log L(a_i, g)`` between training rows ``rows`` and every cell: (b, G)."""
        logL = np.zeros((len(rows), len(self.cells)))
        for j, table in enumerate(tables):
            logL += table[self.codes[rows, j]][:, self.cells[:, j]]
        return logL

    # ------------------------------------------------------------- gradient descent
    def _split(self, theta: np.ndarray):
        theta = np.asarray(theta, dtype=np.float64)
        start = np.clip(self.bandwidth[self.mask] / np.where(self.max > 0, self.max, 1.0),
                        _EDGE, 1 - _EDGE)  # fmt: skip
        s = 1.0 / (1.0 + np.exp(-(theta[self.mask] + np.log(start / (1 - start)))))
        return np.exp(theta[~self.mask]), self.max * s, self.max * s * (1 - s)

    def bandwidth_at(self, theta: np.ndarray) -> np.ndarray:
        """Return the bandwidth vector that ``theta`` stands for."""
        factors, lambdas, _ = self._split(theta)
        h = self.bandwidth.copy()
        h[~self.mask] *= factors
        h[self.mask] = lambdas
        return h

    def loss_grad(self, theta, rows, loss_fn, row_weights):
        """Leave-one-out loss at ``rows`` and its gradient in ``theta`` (n_features,)."""
        factors, lambdas, dlam = self._split(theta)
        train = self.train.rescaled(factors)
        tables = self.tables(lambdas)
        train.code_rows = np.hstack([tab[train.codes[:, j]] for j, tab in enumerate(tables)])
        dtables = self.tables(lambdas, derivative=True)
        loss, grad_h, grad_lam = _gradient.loo_loss_grad(
            train, self.base.kernel, rows, loss_fn, row_weights, dtables=dtables
        )
        grad = np.empty(len(self.mask))
        grad[~self.mask], grad[self.mask] = grad_h, grad_lam * dlam
        return loss, grad
