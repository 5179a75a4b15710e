"""Mixtures of the ``y`` kernel under attention weights: the numerics of the conditional laws.

:class:`Mixture` holds the ``y`` side (training targets, ``h_y``, the kernel's
integrated profile ``G``); :class:`Weights` a chunk of attention weights and
what the mixtures need of it (expectations of ``G`` and its derivative,
weighted empirical and smoothed quantiles); :func:`grid_start` the
quantiles' first guesses from ``F`` and ``f`` pooled on a grid.  The
estimators' methods are in :mod:`skl_nw._inference._conditional`.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import issparse

from .. import _engine
from .._kernels import KERNELS, get_kernel
from .._smoothers._base import _weighted_scale, rule_factor

__all__ = [
    "QUANTILE_RTOL",
    "Mixture",
    "Weights",
    "check_y_kernel",
    "grid_start",
    "y_bandwidth_rule",
]

# Newton steps of the smoothed quantiles stop below this many y bandwidths.
QUANTILE_RTOL = 1e-11
_MAX_ITER = 200
# Newton steps on the cubic Hermite interpolant of F in the grid cell of each root.
_HERMITE_STEPS = 4
# Levels below this take Newton steps on log F (as the compiled roots below their TAIL).
_LOG_NEWTON_BELOW = 1e-3
# Weights sorted and cumulated per block of rows: this many (16 MiB).
_BLOCK_ELEMENTS = 2**21


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
        reach = 1.0 if self.kernel.compact else _tail_reach(self.kernel)
        return self.sorted[0] - reach * self.h, self.sorted[-1] + reach * self.h


def _tail_reach(kernel) -> float:
    """Bandwidths beyond which the kernel's ``G(-u)`` underflows to 0 (``1 - G(u)`` too).

    40 for the Gaussian; doubled while ``G`` is above 0 there (the exponential's
    ``e^-u / 2`` reaches 0 at 745), so that levels down to the smallest floats
    lie inside the bracket.
    """
    reach = 40.0
    while kernel.integrated_profile(np.array(-reach)) > 0:
        reach *= 2
    return reach


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
        tol = QUANTILE_RTOL * mix.h
        nan = np.isnan(T)
        T[nan] = 0.5 * (low + high)
        done = np.zeros(T.shape, bool)
        for _ in range(_MAX_ITER):
            F, f = self.expect(T, mix.cdf_terms, mix.pdf_terms, active=~done)
            below = F < taus
            lo, hi = np.where(below, T, lo), np.where(below, hi, T)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # f ~ 0: bisects
                step = (F - taus) / f
                # Far tails (F falls by hundreds of decades, a Newton step on it moves
                # about h / |u|): Newton on log F, near linear there.
                log_step = (np.log(F) - np.log(taus)) * F / f
                # A compact kernel's edge, where F ~ (T - edge)^(b + 1): a step within
                # rounding of T while F is decades off tau (3e-15 h_y above the edge, F
                # 1e-58 for tau = 1e-20) is no root; it bisects.
                stalled = np.abs(np.log(F) - np.log(taus)) > 1.0
            step = np.where((taus < _LOG_NEWTON_BELOW) & (F > 0) & (f > 0), log_step, step)
            small = np.abs(step) <= tol  # converged: a step within rounding of T
            stalled &= small
            small &= ~stalled
            new = T - step
            bad = (~small & ~((new > lo) & (new < hi))) | stalled
            new = np.where(bad, 0.5 * (lo + hi), new)
            T = np.where(done, T, new)
            done |= small | (hi - lo <= tol)
            if done.all():
                break
        T[nan] = np.nan
        return T


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
