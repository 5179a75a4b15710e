"""Standard errors and intervals of a local polynomial fit: the hooks of the inference mixin.

A local polynomial fit is a linear smoother: at a query ``q`` it predicts
``sum_i l_i(q) y_i`` with the equivalent-kernel weights
``l_i(q) = w_i K_i phi(x_i - q) . a(q) / sum_j w_j K_j``, where
``a = G^-1 e_1`` solves the local problem (:func:`skl_nw._engine._local_fit.solve`,
its degree reduction included).  :class:`_LocalInferenceMixin` implements the
hooks of :class:`skl_nw._inference._methods._SmootherInferenceMixin` from the same
moment sums as ``predict``; the estimator provides ``_local``,
``_coefficients``, ``_fit_degree`` and ``_gradient``.
"""

from __future__ import annotations

import numpy as np
from sklearn import get_config

from .. import _engine
from .._engine import (
    Moments,
    blocks,
    fit_local_units,
    gram_index,
    monomials,
    npar,
    to_units,
    unit_exponents,
)
from .._smoothers._base import target_frame
from ._bands import warn_outside
from ._bootstrap import squared_weight_sums
from ._formulas import local_residual_variance, root_in_unit, sandwich_factor
from ._local_variance import line_std, noise_units, zero_lambda_cells
from ._methods import _FEW_COLUMNS, _SmootherInferenceMixin
from ._recentred import local_fits


class _LocalInferenceMixin(_SmootherInferenceMixin):
    """The hooks of :class:`_SmootherInferenceMixin` for a local polynomial fit."""

    def _targets(self) -> tuple[np.ndarray, np.ndarray]:
        """Training targets (n, k) and sample weights (n,), caller order."""
        train = self._exact_train()
        return train.to_caller(train.values), np.exp(train.to_caller(train.log_w))

    def _training_queries(self) -> np.ndarray:
        """Return the scaled training inputs, caller order (the in-sample queries)."""
        train = self._exact_train()
        return train.to_caller(train.queries()) + train.query_center

    def _weights(self, Q: np.ndarray) -> np.ndarray:
        """Dense equivalent-kernel weights of a few scaled queries: (m, n), training order."""
        return self._equivalent_kernel(Q, sparse=False)

    def _variance_factor(self, Q: np.ndarray) -> np.ndarray:
        """``sum_i l_i(q)^2 / w_i`` per scaled query (CSR equivalent kernels on trees)."""
        _, w = self._targets()
        return squared_weight_sums(self._equivalent_kernel, Q, w)

    def _local_degree(self) -> int:
        return self._fit_degree()

    def _n_local_params(self) -> int:
        """Coefficients of the local fit the noise variance is estimated about (a line at 0)."""
        return npar(self._exact_train().d, max(self._fit_degree(), 1))

    def _check_extrapolation(self, Q: np.ndarray) -> None:
        """Warn about queries outside the training range of a continuous feature (degree >= 1)."""
        d = self._exact_train().d
        warn_outside(Q[:, :d], self._training_queries()[:, :d], self._fit_degree())

    def _smooth(self, Q: np.ndarray | None, V: np.ndarray) -> np.ndarray:
        """Apply the smoother to value columns ``V`` (n, c): (m, c); Q=None: training points."""
        Q = self._training_queries() if Q is None else Q
        if V.shape[1] <= _FEW_COLUMNS:
            return self._coefficients(Q, V)[:, 0]
        # Many columns (bootstrap replicates): the equivalent-kernel weights of a
        # chunk of queries times V, one BLAS product, instead of moments per column.
        n = V.shape[0]
        rows = max(1, int(get_config()["working_memory"] * 2**20 // (16 * max(n, 1))))
        out = np.empty((len(Q), V.shape[1]))
        for start in range(0, len(Q), rows):
            out[start : start + rows] = self._equivalent_kernel(Q[start : start + rows]) @ V
        return out

    def _equivalent_kernel(self, Q: np.ndarray, sparse: bool | None = None):
        """Weights ``l_i(q)`` of each query on each training point: (m, n), CSR on trees.

        The attention weights ``w_i K_i / D`` times the fitted polynomial
        ``a . phi(x_i - q)``, written in raw monomials of the centred training
        inputs (``phi(z - q) = T phi(z)``: the expansion of the moment sums).
        ``sparse`` None: CSR on the tree paths.  The dense product is taken
        in place by blocks of rows, so the memory is that of the attention weights.
        """
        train = self._exact_train()
        d = train.d
        degree = self._fit_degree()
        mom = Moments(d, 2 * degree, degree)
        k = train.values.shape[1]
        a_raw = np.empty((len(Q), npar(d, degree)))
        for block, q, sums in self._local(Q, mom):
            # In the query's units (far queries: no overflow), then back to raw monomials.
            _, a, _, _, e = fit_local_units(mom, *mom.read(sums, 0, 0, k), q, degree)
            a = np.einsum("mab,ma->mb", mom.yshift.matrix(np.ldexp(q, -e)), a)
            a_raw[block] = np.ldexp(a, -unit_exponents(e, d, degree))
        Phi = monomials(train.to_caller(train.X), degree)
        sparse = bool(train.trees) if sparse is None else sparse
        L = _engine.attention(Q, train, self._kernel, sparse=sparse,
                              fallback=self.fallback, options=self._options())  # fmt: skip
        if not sparse:
            for rows in blocks(len(Q), train.n_samples):
                L[rows] *= a_raw[rows] @ Phi.T
            return L
        _scale_entries(L, a_raw, Phi)
        return L

    def _mean_std(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fit and pointwise standard error at the scaled queries: two (m, k) arrays.

        One pass of kernel powers 1 and 2 over the value columns of the fit of
        ``[Y, Z]`` and ``Z^2``, ``Z`` the targets less a robust line,
        standardised (:func:`~skl_nw._inference._local_variance.noise_units`:
        a local fit's residuals do not depend on the line, and moments of
        ``Z`` do not cancel; the squares neither overflow nor underflow).
        The fit of ``Y`` is ``predict``'s; the variance is in units of ``Z``,
        and fits are solved in the query's
        units (:func:`skl_nw._engine._local_fit.fit_local_units`), so that queries far
        from the data do not overflow.
        """
        Y, w = self._targets()
        k, d = Y.shape[1], self._exact_train().d
        # sigma^2 in units of Z, Y less a robust line, standardised (its squares neither
        # overflow nor underflow, nor do its moments cancel); the fit from Y, as predict's.
        Z, scale = noise_units(Y, w, self._backend.inputs(), zero_lambda_cells(self))
        origin = np.zeros(k)
        degree = self._fit_degree()
        mom = Moments(d, 2 * degree, degree)
        gi, P = gram_index(d, degree), npar(d, degree)
        if degree == 0 or d == 0:  # Nadaraya–Watson: the noise variance about a local line
            mean, std = line_std(self, Q, Z, Y)
            return mean, scale * std
        centre, unit = target_frame(Y)  # y + 1e9: no cancellation, y ~ 1e308: no overflow
        E = self._exact_train().weight_exponent()
        values = np.column_stack([(Y - centre) / unit, Z])

        def solve(q, sums):
            # Every moment and coefficient in the query's units (far queries: no overflow).
            coef, a, Mq, Bq, e = fit_local_units(mom, *mom.read(sums, 0, 0, 2 * k), q, degree)
            second = Moments.columns(sums, 0, 0)[:, -1 - k : -1]
            sigma2 = local_residual_variance(
                Mq[:, gi], Bq[:, :P, k:], second, coef[:, :, k:], origin
            )
            # sum w K^2 t^g / D^2 in the weights' unit 2^E (subnormal weights: no overflow)
            M2, _, qe = to_units(mom, mom.read(sums, 0, 1, 2 * k, E)[0], None, q, e)
            M2 = mom.shift(M2, qe)
            with np.errstate(over="ignore"):  # a fit beyond the float range
                fit = coef[:, 0, :k] * unit + centre
            std = root_in_unit(sandwich_factor(a, M2[:, gi])[:, None] * sigma2, E)
            # in bandwidth units, as lost_digits reads them
            return (fit, std), np.ldexp(Mq, unit_exponents(e, d, mom.top)[:, : Mq.shape[1]])

        mean, std = local_fits(self, Q, mom, degree, solve, (1, 2), values, Z**2)
        return mean, scale * std


def _scale_entries(L, a_raw: np.ndarray, Phi: np.ndarray) -> None:
    """Multiply each stored entry ``(q, i)`` of the CSR ``L`` by ``a_raw[q] . Phi[i]``, in place.

    By blocks of rows, so the (entries, P) temporaries stay within the block budget.
    """
    per_row = max(1, L.nnz // max(L.shape[0], 1)) * 2 * Phi.shape[1]
    for rows in blocks(L.shape[0], per_row):
        lo, hi = L.indptr[rows.start], L.indptr[rows.stop]
        counts = np.diff(L.indptr[rows.start : rows.stop + 1])
        owner = np.repeat(np.arange(rows.start, rows.stop), counts)
        L.data[lo:hi] *= np.einsum("ep,ep->e", a_raw[owner], Phi[L.indices[lo:hi]])
