"""Conditional distributions from the attention weights: ``F(y | x)``, ``f(y | x)``, quantiles.

The attention weights of a query are a probability distribution over the
training rows, so they define a predictive distribution of ``y``: the
mixture ``F(y | x) = sum_i alpha_i(x) G((y - y_i) / h_y)`` of the ``y``
kernel's integrated profile ``G`` (the step ``1{y_i <= y}`` for
``h_y = 0``, the weighted empirical distribution).  Nothing here sums
kernels: on a shared grid of ``y`` values ``F`` is the engine's pooling of
the value columns ``G((y_j - y_i) / h_y)``, and per-query values use the
engine's attention weights, a chunk of queries at a time.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse import issparse

from .. import _engine
from .._kernels import KERNELS, get_kernel
from .._smoothers._base import _weighted_scale, rule_factor

__all__ = ["Mixture", "y_bandwidth_rule"]

Y_RULES = ("scott", "silverman")
# Newton steps of the smoothed quantiles stop below this many y bandwidths.
_QUANTILE_RTOL = 1e-11
_MAX_ITER = 200
# The quantiles' first guesses: F and f pooled on 4 y values per y bandwidth (64 to
# 256: n = m = 2,000 took 3 Newton passes, not 5 at 64), reaching this many
# y bandwidths beyond the data (the Gaussian's G is 1e-19 there).
_GRID_NODES = (64, 256)
_NODES_PER_BANDWIDTH = 4
_GRID_REACH = 9.0
# Newton steps on the cubic Hermite interpolant of F in the grid cell of each root.
_HERMITE_STEPS = 4
# Weights sorted and cumulated per block of rows: this many (16 MiB).
_BLOCK_ELEMENTS = 2**21
# Bytes of temporaries per (query, training row) of a chunk: weights, their
# sorted copy, one kernel block.
_BYTES_PER_PAIR = 32


def y_bandwidth_rule(y: np.ndarray, w: np.ndarray, n_continuous: int, rule: str) -> float:
    """Return the rule of thumb of ``h_y``: the joint density's, on ``d + 1`` columns.

    ``scale(y) n^(-1 / (d + 5))`` (Scott) or ``scale(y) (n (d + 3) / 4)^(-1 / (d + 5))``
    (Silverman), ``scale = min(std, IQR / 1.349)`` with frequency weights and
    ``d`` the continuous features: the rate of a conditional density estimate
    in ``d`` dimensions, as statsmodels' ``normal_reference`` gives it.  A
    constant ``y`` gets 0: its distribution is that point, in any units.
    """
    support = y[w > 0]
    if support.min() == support.max():
        return 0.0
    return float(_weighted_scale(y, w) * rule_factor(w, n_continuous + 1, rule))


def check_y_kernel(name: str):
    """Return the record of ``y_kernel``; an error naming the valid ones if it has no ``G``."""
    kernel = get_kernel(name)
    if kernel.integrated_profile is None:
        valid = sorted(n for n, k in KERNELS.items() if k.integrated_profile is not None)
        raise ValueError(f"y_kernel={name!r} has no integrated profile; valid y_kernels: {valid}.")
    return kernel


class Mixture:
    """The ``y`` side of the predictive distributions: training targets, ``h_y``, ``G``."""

    def __init__(self, y: np.ndarray, h: float, kernel) -> None:
        self.y, self.h, self.kernel = y, float(h), kernel
        self.order = np.argsort(y, kind="stable")
        self.sorted = y[self.order]
        self.log_norm = kernel.log_normalizer(1)

    def __getstate__(self) -> dict:  # the engine's sorted copy of the rows: rebuilt, not pickled
        return {key: v for key, v in self.__dict__.items() if key != "_fused"}

    def fused(self, train, kernel):
        """Return the engine's per-query mixture over ``train`` (None: the numpy path), kept.

        Built on first use; again if ``train`` or the ``x`` kernel is another object.
        """
        kept = getattr(self, "_fused", None)
        if kept is None or kept[0] is not train or kept[1] is not kernel:
            fused = _engine.sorted_mixture(train, kernel, self.y, self.kernel, self.order)
            kept = self._fused = (train, kernel, fused)
        return kept[2]

    def cdf_terms(self, d: np.ndarray) -> np.ndarray:
        """``G(d / h_y)`` of differences ``d = y - y_i`` (the step ``1{d >= 0}`` at ``h_y = 0``)."""
        if self.h == 0:
            return (d >= 0).astype(float)
        return self.kernel.integrated_profile(d / self.h)

    def pdf_terms(self, d: np.ndarray) -> np.ndarray:
        """``K_{h_y}(d) = c K(|d| / h_y) / h_y``, the normalised ``y`` kernel."""
        u = d / self.h
        return self.kernel.profile(u * u) * (np.exp(self.log_norm) / self.h)

    def bracket(self) -> tuple[float, float]:
        """``y`` values below and above which ``F = 0`` and ``F = 1`` (to underflow)."""
        reach = 1.0 if self.kernel.compact else 40.0  # G(-40) < 1e-17 for both tails
        return self.sorted[0] - reach * self.h, self.sorted[-1] + reach * self.h


class Weights:
    """A chunk of attention weights (dense rows or CSR), and what the mixtures need of it."""

    def __init__(self, A, mix: Mixture) -> None:
        self.mix = mix
        if issparse(A):
            A = A.tocsr()
            counts = np.diff(A.indptr)
            row = np.repeat(np.arange(A.shape[0]), counts)
            rank = np.empty(len(mix.y), np.intp)
            rank[mix.order] = np.arange(len(mix.y))
            perm = np.lexsort((rank[A.indices], row))
            width = max(int(counts.max()) if len(counts) else 0, 1)
            pos = np.arange(len(perm)) - A.indptr[row]
            self.sorted_w = np.zeros((A.shape[0], width))
            self.sorted_y = np.full((A.shape[0], width), mix.sorted[-1])
            self.sorted_w[row, pos] = A.data[perm]
            self.sorted_y[row, pos] = mix.y[A.indices[perm]]
            self.count = counts
            self.row, self.col, self.data = row, A.indices, A.data
            self.dense = None
        else:
            self.dense = A
            self.sorted_w = None  # sorted a block of rows at a time (empirical_quantiles)
            self.sorted_y = None
            self.count = np.full(len(A), A.shape[1])

    def expect(self, T: np.ndarray, *terms, active=None) -> list[np.ndarray]:
        """``sum_i alpha_i term(T[:, j] - y_i)`` for each of ``terms``: (mc, k) arrays.

        ``active`` (a boolean (mc, k) mask) computes those entries only (the
        others are NaN); the differences are formed once for every term.
        """
        outs = [np.full(T.shape, np.nan) for _ in terms]
        y = self.mix.y
        for j in range(T.shape[1]):
            rows = None if active is None else np.flatnonzero(active[:, j])
            if rows is not None and not len(rows):
                continue
            if self.dense is not None:
                rows = np.arange(len(T)) if rows is None else rows
                # Blocks of rows small enough to be reused by the allocator.
                size = max(1, _BLOCK_ELEMENTS // max(len(y), 1))
                for start in range(0, len(rows), size):
                    r = rows[start : start + size]
                    A, D = self.dense[r], T[r, j, None] - y
                    for out, term in zip(outs, terms, strict=True):
                        out[r, j] = np.einsum("ij,ij->i", A, term(D))
            else:
                keep = slice(None) if rows is None else np.isin(self.row, rows)
                row, D = self.row[keep], T[self.row[keep], j] - y[self.col[keep]]
                for out, term in zip(outs, terms, strict=True):
                    sums = np.bincount(row, self.data[keep] * term(D), minlength=len(T))
                    if rows is None:
                        out[:, j] = sums
                    else:
                        out[rows, j] = sums[rows]
        return outs

    def empirical_quantiles(self, taus: np.ndarray) -> np.ndarray:
        """Weighted inverted-CDF quantiles: the smallest ``y_i`` whose weight sum reaches ``tau``.

        numpy's ``quantile(y, tau, weights=alpha, method="inverted_cdf")``,
        computed as numpy does (cumulative sums in ``y`` order, normalised by
        the last); NaN for a NaN row (``fallback="nan"``).
        """
        m = len(self.count)
        width = self.dense.shape[1] if self.dense is not None else self.sorted_w.shape[1]
        out = np.empty((m, len(taus)))
        # Blocks of rows that stay in cache, with buffers reused from block to block.
        size = max(1, _BLOCK_ELEMENTS // max(width, 1))
        C, hit, zero = (
            np.empty((size, width)),
            np.empty((size, width), bool),
            np.empty((size, width), bool),
        )
        for start in range(0, m, size):
            rows = np.arange(start, min(start + size, m))
            c, h, z = C[: len(rows)], hit[: len(rows)], zero[: len(rows)]
            if self.dense is not None:
                np.take(self.dense[rows[0] : rows[-1] + 1], self.mix.order, axis=1, out=c)
            else:
                c[...] = self.sorted_w[rows]
            np.cumsum(c, axis=1, out=c)
            total = c[:, -1:].copy()
            with np.errstate(invalid="ignore", divide="ignore"):
                c /= total
            np.equal(c, 0.0, out=z)
            last = np.maximum(self.count[rows] - 1, 0)
            for j, tau in enumerate(taus):
                np.less(c, tau, out=h)
                h |= z
                index = np.minimum(np.count_nonzero(h, axis=1), last)
                if self.sorted_y is None:
                    out[rows, j] = self.mix.sorted[index]
                else:
                    out[rows, j] = self.sorted_y[rows, index]
            out[rows[~(total[:, 0] > 0)]] = np.nan
        return out

    def smoothed_quantiles(self, taus: np.ndarray, start=None) -> np.ndarray:
        """Roots of ``F(y | x) = tau``: safeguarded Newton over the whole (mc, q) array.

        Starts at ``start = (T, lo, hi)`` (a first guess inside a bracket
        ``F(lo) < tau <= F(hi)``), else at the weighted empirical quantile
        inside the whole data's bracket; bisects where a Newton step leaves
        the bracket (or the density is 0), so that the smallest root is found.
        """
        mix = self.mix
        low, high = mix.bracket()
        if start is None:
            T = self.empirical_quantiles(taus)
            lo, hi = np.full(T.shape, low), np.full(T.shape, high)
        else:
            T, lo, hi = (a.copy() for a in start)
        tol = _QUANTILE_RTOL * mix.h
        nan = np.isnan(T)
        T[nan] = 0.5 * (low + high)
        done = np.zeros(T.shape, bool)
        for _ in range(_MAX_ITER):
            F, f = self.expect(T, mix.cdf_terms, mix.pdf_terms, active=~done)
            below = F < taus
            lo, hi = np.where(below, T, lo), np.where(below, hi, T)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # f ~ 0: bisects
                step = (F - taus) / f
            small = np.abs(step) <= tol  # converged: a step within rounding of T
            new = T - step
            bad = ~small & ~((new > lo) & (new < hi))
            new = np.where(bad, 0.5 * (lo + hi), new)
            T = np.where(done, T, new)
            done |= small | (hi - lo <= tol)
            if done.all():
                break
        T[nan] = np.nan
        return T


class _ConditionalMixin:
    """``predict_cdf``, ``predict_pdf`` and ``predict_quantiles`` of a 1-D regression fit."""

    def _fit_distribution(self, y: np.ndarray, w: np.ndarray) -> None:
        """Resolve ``y_bandwidth_`` and keep the targets' order (1-D ``y`` only)."""
        self._y_kernel = check_y_kernel(self.y_kernel)
        if y.ndim != 1:
            self.y_bandwidth_ = None
            return
        if isinstance(self.y_bandwidth, str):
            n_cont = int((~self.is_categorical_).sum())
            h = y_bandwidth_rule(y, w, n_cont, self.y_bandwidth)
        else:
            h = float(self.y_bandwidth)
        self.y_bandwidth_ = h
        self._mixture = Mixture(y, h, self._y_kernel)

    def _distribution(self, X: ArrayLike):
        Q = self._queries(X)
        if getattr(self, "y_bandwidth_", None) is None:
            raise ValueError(
                "Conditional distributions need a 1-D y; this estimator was fitted on a "
                "2-D y. Fit one estimator per target column."
            )
        return Q, self._mixture

    def predict_cdf(self, X: ArrayLike, y_values: ArrayLike) -> np.ndarray:
        """Conditional distribution function ``F(y | x) = sum_i alpha_i(x) G((y - y_i) / h_y)``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y_values : array-like of shape (k,) or (n_queries, k)
            The ``y`` values: one grid shared by every query, or ``k`` values
            per query (``(n_queries, 1)`` pairs each query with one value).

        Returns
        -------
        ndarray of shape (n_queries, k)
            Non-decreasing in ``y``, in [0, 1]; ``G`` is the integrated
            profile of ``y_kernel`` (the step ``1{y_i <= y}`` when
            ``y_bandwidth_ = 0``).  NaN rows where ``fallback="nan"`` leaves a
            query empty.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> reg = NadarayaWatsonRegressor(0.2, y_bandwidth=0.1).fit(X, X[:, 0])
        >>> reg.predict_cdf([[0.5]], [0.0, 0.5, 1.0]).round(3)
        array([[0.009, 0.5  , 0.991]])
        """
        Q, mix = self._distribution(X)
        # A ratio of sums may round a hair past 1 (or below 0 by cancellation): clip.
        return np.clip(self._expect(Q, y_values, mix.cdf_terms), 0.0, 1.0)

    def predict_pdf(self, X: ArrayLike, y_values: ArrayLike) -> np.ndarray:
        """Conditional density ``f(y | x) = sum_i alpha_i(x) K_{h_y}(y - y_i)``.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y_values : array-like of shape (k,) or (n_queries, k)
            A shared grid, or values per query (as :meth:`predict_cdf`).

        Returns
        -------
        ndarray of shape (n_queries, k)
            Non-negative; integrates to 1 over ``y`` for every query.

        Raises
        ------
        ValueError
            If ``y_bandwidth_ = 0``: the weighted empirical distribution has
            no density.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> reg = NadarayaWatsonRegressor(0.2, y_bandwidth=0.1).fit(X, X[:, 0])
        >>> reg.predict_pdf([[0.5]], [0.5]).round(3)
        array([[1.799]])
        """
        Q, mix = self._distribution(X)
        if mix.h == 0:
            raise ValueError(
                "predict_pdf needs y_bandwidth > 0: with y_bandwidth=0 the predictive "
                "distribution is the weighted empirical one, which has no density."
            )
        return self._expect(Q, y_values, mix.pdf_terms, pdf=True)

    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike) -> np.ndarray:
        """Conditional quantiles: the inverse of :meth:`predict_cdf` at each level.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        quantiles : float or array-like of shape (q,)
            Levels ``tau``: in [0, 1] when ``y_bandwidth_ = 0``, in (0, 1)
            otherwise (the smoothed distribution's 0 and 1 quantiles are
            infinite for kernels of infinite support).

        Returns
        -------
        ndarray of shape (n_queries, q)
            ``y_bandwidth_ = 0``: the smallest ``y_i`` whose weighted CDF
            reaches ``tau`` (numpy's ``quantile(y, tau, weights=alpha,
            method="inverted_cdf")``); otherwise the smallest root of
            ``F(y | x) = tau``, to ``1e-11 y_bandwidth_``.  Non-decreasing in
            ``tau`` (levels in any order; no crossing by construction).

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0, 1, 20)[:, None]
        >>> reg = NadarayaWatsonRegressor(0.2, y_bandwidth=0.1).fit(X, X[:, 0])
        >>> reg.predict_quantiles([[0.5]], [0.1, 0.5, 0.9]).round(3)
        array([[0.218, 0.5  , 0.782]])
        """
        Q, mix = self._distribution(X)
        taus = check_quantiles(quantiles, open_interval=mix.h > 0)
        order = np.argsort(taus, kind="stable")
        levels = taus[order]
        fused = self._fused(mix)
        if fused is not None and mix.h == 0:
            out = fused.empirical_quantiles(Q, levels, self._options())
        elif fused is not None:
            reach = (mix.bracket()[1] - mix.sorted[-1]) / mix.h
            out = fused.smoothed_quantiles(Q, levels, mix.h, reach, _QUANTILE_RTOL,
                                           self._options())  # fmt: skip
        else:
            out = self._weighted_quantiles(Q, mix, levels)
        # Roots found to a tolerance: no crossing, by construction.
        out = np.fmax.accumulate(out, axis=1)
        result = np.empty_like(out)
        result[:, order] = out
        return result

    def _weighted_quantiles(self, Q: np.ndarray, mix: Mixture, levels: np.ndarray):
        """Quantiles at ascending ``levels`` from chunks of attention weights (the numpy path)."""
        out = np.empty((len(Q), len(levels)))
        grid = F_grid = None
        if mix.h > 0:  # a first guess and a bracket from F pooled on a shared grid
            low, high = mix.bracket()
            reach = min(_GRID_REACH, (mix.sorted[0] - low) / mix.h)
            lo, hi = mix.sorted[0] - reach * mix.h, mix.sorted[-1] + reach * mix.h
            nodes = int(np.clip(_NODES_PER_BANDWIDTH * (hi - lo) / mix.h, *_GRID_NODES))
            grid = np.linspace(lo, hi, nodes)
            F_grid = self._grid_expect(Q, grid, mix.cdf_terms)
            f_grid = self._grid_expect(Q, grid, mix.pdf_terms)
        for rows, weights in self._weight_chunks(Q, mix):
            if mix.h == 0:
                out[rows] = weights.empirical_quantiles(levels)
            else:
                start = grid_start(F_grid[rows], f_grid[rows], grid, levels, mix.bracket())
                out[rows] = weights.smoothed_quantiles(levels, start)
        return out

    def _fused(self, mix: Mixture):
        """Return the engine's compiled per-query mixture of this fit, or None (the numpy path)."""
        return mix.fused(self._exact_train(), self._kernel)

    def _expect(self, Q: np.ndarray, y_values, terms, pdf: bool = False) -> np.ndarray:
        T = check_y_values(y_values, len(Q))
        mix = self._mixture
        fused = self._fused(mix) if mix.h > 0 else None
        if fused is not None:
            return fused.values(Q, T, mix.h, pdf, self._options())
        if T.ndim == 1:
            return self._grid_expect(Q, T, terms)
        out = np.empty(T.shape)
        for rows, weights in self._weight_chunks(Q, self._mixture):
            out[rows] = weights.expect(T[rows], terms)[0]
        return out

    def _grid_expect(self, Q: np.ndarray, t: np.ndarray, terms) -> np.ndarray:
        """Pool the value columns ``terms(t_j - y_i)``, a memory-sized block of them at a time."""
        train, y = self._exact_train(), self._mixture.y
        options = self._options()
        workers, mib = _engine.budget(options)
        block = max(1, int(mib * 2**20 / (4 * 8 * max(len(y), 1))))
        out = np.empty((len(Q), len(t)))
        for start in range(0, len(t), block):
            V = terms(t[None, start : start + block] - y[:, None])
            out[:, start : start + block] = _engine.pool(
                Q, train, self._kernel, values=V, fallback=self.fallback, options=options
            )
        return out

    def _weight_chunks(self, Q: np.ndarray, mix: Mixture):
        """Yield ``(rows, Weights)`` for chunks of queries whose weights fit the budget."""
        train = self._exact_train()
        options = self._options()
        workers, mib = _engine.budget(options)
        size = max(1, int(workers * mib * 2**20 / (_BYTES_PER_PAIR * max(train.n_samples, 1))))
        for start in range(0, len(Q), size):
            rows = slice(start, min(start + size, len(Q)))
            A = _engine.attention(Q[rows], train, self._kernel, fallback=self.fallback,
                                  sparse=bool(train.trees), options=options)  # fmt: skip
            yield rows, Weights(A, mix)


def grid_start(F, f, grid: np.ndarray, taus: np.ndarray, bracket) -> tuple:
    """First guesses and brackets of the roots of ``F = tau`` from ``F`` and ``f`` on a grid.

    The bracket is the grid cell where ``F`` crosses ``tau`` (the whole
    ``bracket`` beyond the grid's ends); the guess is the root of the cubic
    Hermite interpolant of ``F`` in the cell (values and slopes at its ends),
    found by a few Newton steps kept inside the cell.  Three (m, q) arrays.
    """
    k = np.count_nonzero(F[:, None, :] < taus[None, :, None], axis=2)  # (m, q)
    K = len(grid)
    rows = np.arange(len(F))[:, None]
    below, above = np.maximum(k - 1, 0), np.minimum(k, K - 1)
    inner = (k > 0) & (k < K)
    lo = np.where(k > 0, grid[below], bracket[0])
    hi = np.where(k < K, grid[above], bracket[1])
    F0, F1 = np.where(k > 0, F[rows, below], 0.0), np.where(k < K, F[rows, above], 1.0)
    width = hi - lo
    d0, d1 = (np.where(inner, f[rows, i] * width, 0.0) for i in (below, above))
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.nan_to_num(np.clip((taus - F0) / (F1 - F0), 0.0, 1.0), nan=0.5)
        for _ in range(_HERMITE_STEPS):
            s2, s3 = s * s, s * s * s
            p = (2 * s3 - 3 * s2 + 1) * F0 + (s3 - 2 * s2 + s) * d0 \
                + (3 * s2 - 2 * s3) * F1 + (s3 - s2) * d1  # fmt: skip
            dp = (6 * s2 - 6 * s) * (F0 - F1) + (3 * s2 - 4 * s + 1) * d0 + (3 * s2 - 2 * s) * d1
            step = np.where(inner & (dp > 0), (p - taus) / dp, 0.0)
            s = np.clip(s - np.nan_to_num(step), 0.0, 1.0)
    T = lo + s * width
    T[np.isnan(F).any(axis=1)] = np.nan  # fallback="nan": an empty query stays NaN
    return T, lo, hi


def check_quantiles(quantiles, open_interval: bool) -> np.ndarray:
    """Quantile levels as a 1-D float array; an error naming the valid range."""
    taus = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    if taus.ndim != 1 or taus.size == 0:
        raise ValueError(f"quantiles must be a float or a 1-D array of floats; got {quantiles!r}.")
    ok = (taus > 0) & (taus < 1) if open_interval else (taus >= 0) & (taus <= 1)
    if not ok.all():
        valid = "in (0, 1) when y_bandwidth > 0" if open_interval else "in [0, 1]"
        raise ValueError(f"quantiles must be {valid}; got {taus[~ok][:5]}.")
    return taus


def check_y_values(y_values, m: int) -> np.ndarray:
    """``y_values`` as (k,) or (m, k) finite floats; an error naming the accepted shapes."""
    T = np.asarray(y_values, dtype=np.float64)
    if T.ndim == 0:
        T = T.reshape(1)
    if not (T.ndim == 1 or (T.ndim == 2 and T.shape[0] == m)):
        raise ValueError(
            f"y_values must have shape (k,) or (n_queries, k) = ({m}, k); got shape {T.shape}."
        )
    if not np.isfinite(T).all():
        raise ValueError("y_values must be finite.")
    return T
