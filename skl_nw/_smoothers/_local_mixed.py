"""Leave-one-out of local polynomial fits with categorical features: lambdas by cells.

As for Nadaraya–Watson (:class:`skl_nw._engine.MixedLeaveOneOut`), the
discrete kernels are constant on each cell of categories, so every moment
sum is ``sum_g L(z_i, g) S_ig`` with per-cell sums ``S_ig`` that do not
depend on lambda: one grouped pass gives the leave-one-out fits for a whole
grid of lambdas, and the derivative of a fit in ``lambda_j`` comes from the
same sums weighted by ``L d log L_j / d lambda_j``.  The fit ``beta = G^-1 b``
moves by ``G^-1 (db - dG beta)`` (the weight sum's derivative cancels), so
``dm/d lambda_j = a . (db_j - dG_j beta)`` with ``a = G^-1 e_1``.
"""

from __future__ import annotations

import copy

import numpy as np

from .. import _engine
from .._engine import MixedLeaveOneOut, Moments, fit_local, gram_index, npar


class MixedLocalLeaveOneOut(MixedLeaveOneOut):
    """The search protocol of a local polynomial fit with categorical features.

    ``base`` is the fit's :class:`skl_nw._smoothers._local_loo.LocalLeaveOneOut`; the
    continuous bandwidths' gradient is its own (the engine weights its sums
    by the discrete kernels), the lambdas' gradient comes from cell sums.
    """

    def predictions(self, factors, n_jobs=None, rows=None, lambdas=None) -> np.ndarray:
        """Leave-one-out fits (F, n, k), or (L, F, n, k) for candidate ``lambdas``."""
        if lambdas is None:
            return self.base.predictions(factors, n_jobs=n_jobs, rows=rows)
        base = self.base
        rows = np.arange(len(self.targets)) if rows is None else np.asarray(rows, np.intp)
        logLs = self.counted_logs(lambdas, rows, loo=True)

        def solve(sums, f, factor, q, sub):
            coef, _, Mqs, _ = self._fits(sums, f, factor, q, [L[sub] for L in logLs],
                                         base.degree, base._mom)  # fmt: skip
            return (base._read_y(coef[:, :, 0]).swapaxes(0, 1),), Mqs

        (out,) = base._row_fits(base._mom, base.degree, factors, rows, solve, True, n_jobs,
                                cells=self._cells())  # fmt: skip
        out = np.moveaxis(out, 2, 0)  # (L, F, rows, k)
        for fit, logL in zip(out, logLs, strict=True):
            # No counted point in reach (a compact kernel): the nearest counted, as refits.
            empty = np.flatnonzero(np.isnan(fit[..., 0]).any(axis=0))
            if empty.size and base.fallback == "nearest":
                fill = self._nearest(rows[empty], logL[empty], loo=True)
                fit[:, empty] = np.where(np.isnan(fit[:, empty]), fill, fit[:, empty])
        return out

    def fits(self, factors, n_jobs=None, lambdas=None):
        """In-sample fits (F, n, k) and hat diagonal (F, n); (L, F, ...) for ``lambdas``.

        With ``lambdas`` every lambda vector comes from one grouped pass (the
        point itself included): ``H_ii`` is its attention weight
        ``w_i L(z_i, z_i) / sum_g L(z_i, g) S_ig`` (``K(0) = 1``) times
        ``e_1 . G^-1 e_1``, as in :meth:`skl_nw._smoothers._local_loo.LocalLeaveOneOut.fits`.
        """
        if lambdas is None:
            return self.base.fits(factors, n_jobs)
        base, n = self.base, len(self.targets)
        degree, rows = base.fit_degree, np.arange(n)
        mom = Moments(base.Z.shape[1], 2 * degree, degree)
        log_w = self.train.to_caller(self.train.log_w)
        logLs = self.counted_logs(lambdas, rows, loo=False)

        def solve(sums, f, factor, q, sub):
            coef, a, Mqs, weights = self._fits(sums, f, factor, q, [L[sub] for L in logLs],
                                               degree, mom)  # fmt: skip
            # Point i's attention weight: its cell's share (weights) times its own part of
            # that cell's sum, w_i K(0) / S_ic (the discrete factor cancels); 0 for a point
            # of no weight (in a cell of no weight: -inf - -inf).
            at, cell = np.arange(len(sub)), self.cell_of[sub]
            with np.errstate(invalid="ignore"):
                own = log_w[sub] - sums.shift[:, f] - sums.log_scale[at, f, 0, cell]
            share = np.where(np.isfinite(log_w[sub]), weights[:, at, cell] * np.exp(own), 0)
            fitted = base._read_y(coef[:, :, 0]).swapaxes(0, 1)
            return (fitted, (share * a[:, :, 0]).T), Mqs

        fitted, hat = base._row_fits(mom, degree, factors, None, solve, False, n_jobs,
                                     cells=self._cells())  # fmt: skip
        return np.moveaxis(fitted, 2, 0), np.moveaxis(hat, 2, 0)

    def _fits(self, sums, f: int, factor: float, q, logLs, degree: int, mom: Moments):
        """Fit cell sums at factor ``f`` under each of ``logLs``, in one solve.

        Returns ``coef`` (L, b, P, k), ``a`` (L, b, P), the moments about the
        queries (a list of L) and the cell weights (L, b, G).
        """
        parts = [_combine(mom, sums, f, logL, self.targets.shape[1]) for logL in logLs]
        M, B = mom.rescale(np.concatenate([p[0] for p in parts]),
                           np.concatenate([p[1] for p in parts]), factor)  # fmt: skip
        L = len(logLs)
        coef, a, Mq, _ = fit_local(mom, M, B, np.tile(q, (L, 1)), degree)
        shape = (L, len(q))
        return (coef.reshape(*shape, *coef.shape[1:]), a.reshape(*shape, *a.shape[1:]),
                np.split(Mq, L), np.stack([p[2] for p in parts]))  # fmt: skip

    def loss_grad(self, theta, rows, loss_fn, row_weights):
        """Leave-one-out loss at ``rows`` and its gradient in ``theta`` (n_features,)."""
        factors, lambdas, dlam = self._split(theta)
        tables = self.tables(lambdas)
        base = copy.copy(self.base)
        base.train = copy.copy(self.train)
        base.train.code_rows = np.hstack([t[self.train.codes[:, j]] for j, t in enumerate(tables)])
        loss, grad_h = base.loss_grad(np.log(factors), rows, loss_fn, row_weights)
        grad_lam = self._lambda_grad(factors, lambdas, rows, loss_fn, row_weights)
        grad = np.empty(len(self.mask))
        grad[~self.mask], grad[self.mask] = grad_h, grad_lam * dlam
        return loss, grad

    def _lambda_grad(self, factors, lambdas, rows, loss_fn, row_weights) -> np.ndarray:
        base, Y = self.base, self.base._Y
        k, degree, mom = Y.shape[1], base.degree, base._mom
        Z = base.Z / factors
        log_w = self.train.to_caller(self.train.log_w)
        cells = _engine.prepare_train(Z, log_w=log_w, groups=self.cell_of)
        sums = _engine.kernel_sums(
            Z[rows], cells, base.kernel, values=mom.values(Z, Y), grouped=True, exclude=rows,
            options=_engine.Options(rtol=base.rtol),
        )  # fmt: skip
        logL = self._counted(self._cell_log(self.tables(lambdas), rows), rows, loo=True)
        dtables = self.tables(lambdas, derivative=True)
        M, B, weights = _combine(mom, sums, 0, logL, k)
        q = Z[rows]
        coef, a, _, _ = fit_local(mom, M, B, q, degree)
        _, R = loss_fn(base._read_y(coef[:, 0]), rows)
        R = R * base._unit  # dP below is in the frame's units
        r = row_weights / row_weights.sum()
        gi, P = gram_index(q.shape[1], degree), npar(q.shape[1], degree)
        grad = np.empty(len(dtables))
        for j, table in enumerate(dtables):
            dlog = table[self.codes[rows, j]][:, self.cells[:, j]]  # (b, G)
            dS = np.einsum("bg,bgc->bc", weights * dlog, sums.scaled[:, 0, 0])
            Mj, Bj = mom.split(dS * sums.value_scale, k)
            Mq, Bq = mom.about(Mj, Bj, q)
            if degree == 0:
                dP = Bq[:, 0] - Mq[:, :1] * coef[:, 0]
            else:
                dP = np.einsum("mp,mpk->mk", a, Bq[:, :P] - Mq[:, gi] @ coef)
            grad[j] = np.einsum("m,mk,mk->", r, R, dP)
        return grad


def _combine(mom: Moments, sums, f: int, logL: np.ndarray, k: int):
    """Raw moments (weight-sum normalised) of ``sum_g L_g S_g``, and the cell weights.

    ``weights`` (b, G) are ``L_g exp(log_scale_g)`` over the total weight, so
    that ``weights @ scaled`` gives any cell-weighted sum on the same scale.
    """
    terms = sums.log_scale[:, f, 0] + logL
    top = terms.max(axis=1, keepdims=True)
    e = np.exp(terms - np.where(np.isfinite(top), top, 0.0))
    S = np.einsum("bg,bgc->bc", e, sums.scaled[:, f, 0])
    total = S[:, -1:]
    weights = e / total
    M, B = mom.split(S / total * sums.value_scale, k)
    return M, B, weights
