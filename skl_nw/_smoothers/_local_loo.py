"""Leave-one-out of a local polynomial fit: the search protocol object (closed form and SGD)."""

from __future__ import annotations

import numpy as np

from .. import _engine
from .._engine import Moments, exponents, fit_local, lost_digits, position, usable_degree
from .._inference._recentred import recentre
from .._kernels import Kernel
from ._base import target_frame

__all__ = ["LocalLeaveOneOut"]


class LocalLeaveOneOut:
    """Leave-one-out predictions and loss gradient of a local polynomial fit (the search protocol).

    The interface of :class:`skl_nw._engine.LeaveOneOutProtocol`.  The leave-one-out
    fit at training row ``i`` is the local fit of moment sums from which the
    engine drops row ``i`` by index: the exact refit without ``i`` (the
    treatment of a degenerate local problem included), computed at once
    for every row and bandwidth multiple.  Where the local problem stays
    well-posed it equals the linear-smoother identity
    ``y_i - yhat_(-i) = (y_i - yhat_i) / (1 - H_ii)``, computed without its
    cancellation as ``H_ii -> 1``.
    """

    takes_lambdas = False

    def __init__(self, train, kernel: Kernel, degree: int, rtol: float, fallback: str = "nearest"):
        d = train.X.shape[1]
        n_points = int(np.isfinite(train.log_w).sum())
        self.fit_degree = usable_degree(degree, d, n_points)
        # A refit without one row has one point of positive weight fewer.
        degree = usable_degree(degree, d, n_points - 1)
        self.train, self.kernel, self.degree, self.rtol = train, kernel, degree, rtol
        self.fallback = fallback
        self.targets = train.to_caller(train.values)
        # Fitted in the targets' frame (y + 1e9: no cancellation), read back by read_y.
        self._centre, self._unit = target_frame(self.targets)
        self._Y = (self.targets - self._centre) / self._unit
        self.Z = train.to_caller(train.X)
        self._mom = Moments(d, 2 * degree, degree)
        self._dmom = Moments(d, 2 * degree + 2, degree + 2)
        # Where sum w K' t_j^2 z^(a + b) (and z^a y) read the raw moments of two more
        # degrees: t_j^2 = z_j^2 - 2 q_j z_j + q_j^2 (see loss_grad).
        basis = exponents(d, degree)
        pair = basis[:, None, :] + basis[None, :, :]
        unit = np.eye(d, dtype=np.intp)
        top, ytop = 2 * degree + 2, degree + 2
        self._plain = [
            np.array([position(d, top, pair + s * unit[j]).reshape(pair.shape[:2])
                      for j in range(d)], np.intp).reshape(d, *pair.shape[:2])
            for s in (0, 1, 2)
        ]  # fmt: skip
        self._y = [np.array([position(d, ytop, basis + s * unit[j]) for j in range(d)],
                            np.intp).reshape(d, len(basis))
                   for s in (0, 1, 2)]  # fmt: skip

    def predictions(self, factors, n_jobs=None, rows=None) -> np.ndarray:
        """Leave-one-out predictions per bandwidth multiple: (F, n, k), or (F, len(rows), k).

        ``rows`` (caller order) computes only those training rows' predictions
        (the progress blocks and the backend probe of the search).
        """
        mom, k = self._mom, self.targets.shape[1]

        def solve(sums, f, factor, q, sub):
            M, B = mom.rescale(*mom.read(sums, f, 0, k), factor)
            coef, _, Mq, _ = fit_local(mom, M, B, q, self.degree)
            return (self._read_y(coef[:, 0]),), [Mq]

        (out,) = self._row_fits(mom, self.degree, factors, rows, solve, True, n_jobs)
        return out

    def fits(self, factors, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """In-sample fits (F, n, k) and hat diagonal (F, n), per bandwidth multiple.

        ``H_ii = l_i(x_i)``, point ``i``'s equivalent-kernel weight in its own
        fit: its attention weight ``w_i K(0) L(z_i, z_i) / sum_j w_j K_ij L_ij``
        times ``e_1 . G^-1 e_1``, the fitted polynomial's value at ``x_i``.
        """
        k, degree = self.targets.shape[1], self.fit_degree
        mom = Moments(self.Z.shape[1], 2 * degree, degree)
        log_w = self.train.to_caller(self.train.self_log_weights())

        def solve(sums, f, factor, q, sub):
            own = _engine.hat_diagonal(sums, log_w[sub])[:, f]
            M, B = mom.rescale(*mom.read(sums, f, 0, k), factor)
            coef, a, Mq, _ = fit_local(mom, M, B, q, degree)
            return (self._read_y(coef[:, 0]), own * a[:, 0]), [Mq]

        return self._row_fits(mom, degree, factors, None, solve, False, n_jobs)

    def _row_fits(self, mom, degree, factors, rows, solve, loo: bool, n_jobs,
                  cells=None) -> list:  # fmt: skip
        """Run ``solve(sums, f, factor, q, sub) -> (parts, Mqs)`` at training rows, per factor.

        ``rows`` (caller order; None: all), their fits without themselves if
        ``loo``; ``parts`` are (len(sub), ...) arrays, gathered into (F,
        len(rows), ...); ``Mqs`` a list of the fits' moments about the rows.
        Fits whose moments lost their digits to the expansion about the row
        (in any of ``Mqs``) are refitted about origins of their own
        (:func:`skl_nw._inference._recentred.recentre`), as predictions are.
        ``cells``: sums by group of this training set (the categorical
        lambdas' pass), not over the fit's own.
        """
        train, Y = self.train if cells is None else cells, self._Y
        rows = np.arange(len(Y)) if rows is None else np.asarray(rows, dtype=np.intp)
        factors = np.asarray(_engine.common_multiples(self.train, factors), dtype=np.float64)
        options = _engine.Options(rtol=self.rtol, n_jobs=n_jobs)
        Z, out = self.Z[rows], []

        def sweep(sub, fs, origin) -> list[np.ndarray]:
            """Fit rows ``sub`` at factors ``fs`` about ``origin``; return each factor's flags."""
            sums = _engine.kernel_sums(
                None, train, self.kernel, values=mom.values(self.Z - origin, Y),
                factors=factors[fs], grouped=cells is not None, loo=loo, rows=rows[sub],
                fallback=self.fallback, options=options,
            )  # fmt: skip
            flags, Q = [], queries(sub)
            for i, f in enumerate(fs):
                q = (Z[sub] - origin) / factors[f]
                parts, Mqs = solve(sums, i, factors[f], q, sub)
                if not out:
                    out.extend(np.empty((len(factors), len(rows), *p.shape[1:])) for p in parts)
                for whole, part in zip(out, parts, strict=True):
                    whole[f, sub] = part
                flags.append(np.any([lost_digits(mom, Mq, Q, q, train, degree, options)
                                     for Mq in Mqs], axis=0))  # fmt: skip
            return flags

        def queries(sub) -> np.ndarray:  # the rows as the engine takes queries
            return train.queries(train.inverse_rows(rows[sub])) + train.query_center

        flagged = np.array(sweep(np.arange(len(rows)), np.arange(len(factors)), np.zeros(train.d)))
        # One refit a group for every factor that flagged a row: groups as narrow as the
        # smallest such factor's windows need (fewer passes than a set of groups a factor).
        fs = np.flatnonzero(flagged.any(axis=1))
        if fs.size:
            least = factors[fs].min()

            def refit(sub, origin):  # at the multiples that flagged one of these rows
                mine = np.flatnonzero(flagged[:, sub].any(axis=1))
                return sub[np.any(sweep(sub, mine, origin), axis=0)]

            reach = lambda sub: least * _engine.reach(queries(sub), train, options)  # noqa: E731
            recentre(np.flatnonzero(flagged.any(axis=0)), Z, reach, degree, train.n_samples,
                     refit, once=True)  # fmt: skip
        return out

    def loss_grad(
        self,
        theta: np.ndarray,
        rows: np.ndarray,
        loss_fn: _engine.LossFn,
        row_weights: np.ndarray,
    ) -> tuple[float, np.ndarray]:
        """Leave-one-out loss at ``rows`` and its gradient in the log bandwidth multiples.

        With weights ``W_k = w_k K(s_k)``, the fit ``a . b`` (``a = G^-1 e_1``)
        moves by ``dm / d log h_j = sum_k dW_k/d log h_j (phi_k . a) r_k``
        (``r_k`` the local residual) and ``dW_k / d log h_j = -2 w_k K'(s_k) t_kj^2``:
        raw moments of ``w K'`` (the engine's ``"ds"`` sums) of two more
        degrees, contracted with the fitted polynomials written in raw
        monomials (so only the fit's own moments are moved to the query).
        Exact for the degree each query is fitted at (it is piecewise
        constant in the bandwidths).
        """
        _engine.check_no_span(self.train)
        factors = np.exp(theta)
        train = self.train.rescaled(factors)
        Z, Y, rows = self.Z / factors, self._Y, np.asarray(rows, dtype=np.intp)
        options, out = _engine.Options(rtol=self.rtol), []

        def part(sub, origin) -> np.ndarray:
            """Fit rows ``sub`` about ``origin``; return which lost their digits."""
            Q = train.queries(train.inverse_rows(rows[sub]))
            sums = _engine.kernel_sums(
                Q, train, self.kernel, values=self._dmom.values(Z - origin, Y),
                powers=(1, "ds"), exclude=rows[sub], options=options,
            )  # fmt: skip
            q = Z[rows[sub]] - origin
            coef, dP, Mq = self._moves(sums, q, Y.shape[1])
            if not out:
                out.extend(np.empty((len(rows), *x.shape[1:])) for x in (coef, dP))
            out[0][sub], out[1][sub] = coef, dP
            return lost_digits(self._mom, Mq, Q, q, train, self.degree, options)

        flags = part(np.arange(len(rows)), np.zeros(train.d))
        refit = lambda sub, origin: sub[part(sub, origin)]  # noqa: E731
        reach = lambda sub: np.ones(len(sub))  # noqa: E731 - no span: a bandwidth
        recentre(np.flatnonzero(flags), Z[rows], reach, self.degree, train.n_samples, refit,
                 once=True)  # fmt: skip
        coef, dP = out
        losses, R = loss_fn(self._read_y(coef[:, 0]), rows)
        r = row_weights / row_weights.sum()
        return float(r @ losses), -2.0 * np.einsum("m,mk,mjk->j", r, R, dP * self._unit)

    def _read_y(self, fits: np.ndarray) -> np.ndarray:
        """Fits (..., k) of the targets' frame in the targets' units."""
        with np.errstate(over="ignore"):  # a fit beyond the float range
            return fits * self._unit + self._centre

    def _moves(self, sums, q: np.ndarray, k: int) -> tuple:
        """Local fits at ``q`` and ``dm / d log h_j`` (m, d, k); the moments about ``q``."""
        dmom, mom = self._dmom, self._mom
        M, B = dmom.read(sums, 0, 0, k)
        coef, a, Mq, _ = fit_local(mom, M[:, : mom.n_plain], B[:, : mom.n_y], q, self.degree)
        # The fitted polynomials in raw monomials: phi(z - q) . a = phi(z) . (T^T a).
        T = mom.yshift.matrix(q)
        a_raw = np.einsum("mab,ma->mb", T, a)
        coef_raw = np.einsum("mab,mak->mbk", T, coef)
        Md, Bd = dmom.read(sums, 0, 1, k)
        dP = np.empty((len(q), q.shape[1], k))
        for j in range(q.shape[1]):
            qj = q[:, j, None, None]
            N = Md[:, self._plain[2][j]] - 2 * qj * Md[:, self._plain[1][j]]
            N += qj**2 * Md[:, self._plain[0][0]]
            By = Bd[:, self._y[2][j]] - 2 * qj * Bd[:, self._y[1][j]] + qj**2 * Bd[:, self._y[0][0]]
            dP[:, j] = np.einsum("ma,mak->mk", a_raw, By - N @ coef_raw)
        return coef, dP, Mq
