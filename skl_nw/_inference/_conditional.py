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

from .. import _engine
from ._mixture import QUANTILE_RTOL, Mixture, Weights, check_y_kernel, grid_start, y_bandwidth_rule

__all__ = ["Y_RULES", "check_quantiles", "check_y_values"]

Y_RULES = ("scott", "silverman")
# The quantiles' first guesses: F and f pooled on 4 y values per y bandwidth (64 to
# 256: n = m = 2,000 took 3 Newton passes, not 5 at 64), reaching this many
# y bandwidths beyond the data (the Gaussian's G is 1e-19 there).
_GRID_NODES = (64, 256)
_NODES_PER_BANDWIDTH = 4
_GRID_REACH = 9.0
# Bytes of temporaries per (query, training row) of a chunk: weights, their
# sorted copy, one kernel block.
_BYTES_PER_PAIR = 32


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
            method="inverted_cdf")``; a level within rounding of a cumulative
            weight, as ``tau = 1`` where the last rows' weights are below eps
            of the total, may fall on either side of it, as the compiled
            kernels sum the weights by blocks); otherwise the smallest root of
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
            out = fused.smoothed_quantiles(Q, levels, mix.h, reach, QUANTILE_RTOL,
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
