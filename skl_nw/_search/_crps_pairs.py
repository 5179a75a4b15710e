"""The Gaussian CRPS of the leave-one-out mixtures on the training targets, one ``h_y`` at a time.

Row ``r`` of the leave-one-out attention weights ``a`` (``a >= 0``, summing
to 1) scores its target ``y_r`` by
``sum_k a_k B(y_r - y_k) - 1/2 a^T P a`` with ``B(m) = E|m + h_y Z|`` and
``P_ik = g(y_i - y_k)``, ``g(m) = E|m + sqrt(2) h_y Z|``.  Neither ``B`` nor
``P`` depends on the bandwidth, so a search keeps them per ``h_y``.

The pair term costs a product with the (n, n) matrix ``P`` per row block:
O(n^3) per candidate.  ``g`` is entire, so on the targets' range ``P`` is a
polynomial interpolant in both arguments at ``M`` Chebyshev points ``t``:
``P ~ L G L^T`` with ``L_im`` the ``m``-th Lagrange basis polynomial at
``y_i`` (barycentric form) and ``G_ml = g(t_m - t_l)``, so that
``a^T P a ~ (a^T L) G (L^T a)``: O(n^2 M) per candidate.  The factor is
used only where every entry of ``L G L^T`` is within ``PAIR_TOL_ULPS`` ulps
of the largest ``|P|`` of its exact value (checked on all ``n^2`` entries
once per ``h_y``); since ``a >= 0`` sums to 1, each row's pair term then
differs by at most that much, the size of the dense product's own
rounding.  ``M`` grows with the range over ``h_y`` (about 48 points at the
rule of thumb on a benchmark of n = 500): small ``h_y`` keep the dense matrix.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf

from .._engine import single_threaded_blas

__all__ = ["PAIR_TOL_ULPS", "PairTerms", "abs_mean", "chebyshev_factor", "pair_matrix"]

_EPS = np.finfo(float).eps
#: The low-rank factor's largest entry error, in ulps of the largest pair term: below the
#: dense product's own rounding (up to n ulps of it), and reached with a few more points
#: than 3 per width (the fewest that pass, below).
PAIR_TOL_ULPS = 32
# First number of Chebyshev points tried: this many per sqrt(2) h_y of the targets'
# range, plus 8, a multiple of 8.  The fewest that pass the check were 3.0-3.4 per width
# plus 8 on normal, uniform, Student t(3) and offset targets (n = 500, h_y 0.05 to 1
# standard deviation); the check decides.
_POINTS_PER_WIDTH = 3.5
# Points tried grow by half up to this fraction of n and this number: the factor's
# products cost 2 n^2 M flops a candidate against the dense 2 n^3, and its check n^2 M
# once per h_y (n = 500: M = 48-104 where the selection scans h, 80-200 elsewhere;
# ``python -m benchmarks conditional``, selection).
_MAX_POINTS_FRACTION = 0.5
_MAX_POINTS = 1024
# Row blocks of a pair matrix's lower triangle (pair_matrix).
_TRIANGLE_BLOCKS = 8
# Columns of the dense pair matrix per block of the check, in bytes of n floats.
_BLOCK_BYTES = 2**26


def abs_mean(mu, s: float) -> np.ndarray:
    """``E|mu + s Z|`` for standard normal ``Z``: ``mu erf(mu / (s sqrt 2)) + 2 s phi(mu / s)``."""
    t = mu / s
    return mu * erf(t / np.sqrt(2.0)) + 2.0 * s * np.exp(-0.5 * t * t) / np.sqrt(2.0 * np.pi)


def pair_matrix(y: np.ndarray, s: float) -> np.ndarray:
    """``E|y_i - y_k + s Z|`` for every ``i, k``: (n, n), from its lower triangle.

    The value is even in ``y_i - y_k``: each block of rows takes the columns
    up to its end and is mirrored, about 56% of the entries evaluated.
    """
    n = len(y)
    out = np.empty((n, n))
    step = -(-n // _TRIANGLE_BLOCKS)
    for start in range(0, n, step):
        stop = min(start + step, n)
        block = abs_mean(y[start:stop, None] - y[:stop], s)
        out[start:stop, :stop] = block
        out[:start, start:stop] = block[:, :start].T
    return out


def chebyshev_factor(y: np.ndarray, s: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(L, G)`` with ``E|y_i - y_k + s Z| ~ (L G L^T)_ik``: (n, M) and (M, M).

    Chebyshev points of the first kind over ``[min y, max y]``; a target
    that falls on a point gets that point's basis row exactly.
    """
    lo, hi = float(y.min()), float(y.max())
    theta = np.pi * (2.0 * np.arange(points) + 1.0) / (2.0 * points)
    t = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(theta)
    bary = np.sin(theta) * (-1.0) ** np.arange(points)
    D = y[:, None] - t
    on_node = D == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        C = bary / D
    hit = on_node.any(axis=1)
    C[hit] = on_node[hit]
    C /= C.sum(axis=1, keepdims=True)
    return C, abs_mean(t[:, None] - t, s)


class PairTerms:
    """The matrices of one ``h_y > 0`` on the sorted training targets ``y``.

    Parameters
    ----------
    y : ndarray of shape (n,)
        The training targets, sorted.
    h : float
        The y bandwidth.
    matrix : callable, optional
        ``matrix(s)`` returns the (n, n) matrix ``E|y_i - y_k + s Z|``, or
        None where it does not fit in memory (then ``B`` is built for each
        row block and ``P`` by column blocks).  A search shares one that
        keeps them: ``sqrt(2) h_y`` of one grid value is the next one's
        ``h_y``, so ``P`` of one is ``B`` of the next.  Default: built here.
    """

    def __init__(self, y: np.ndarray, h: float, matrix=None):
        self.y, self.h, self.s = y, h, np.sqrt(2.0) * h
        self.matrix = matrix if matrix is not None else (lambda s: pair_matrix(y, s))
        self.factor = self._low_rank()
        self.nbytes = sum(a.nbytes for a in self.factor or ())

    def _low_rank(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Return the first verified factor of ``P`` tried, or None (the dense route)."""
        y, n = self.y, len(self.y)
        span = float(y.max() - y.min()) if n else 0.0
        if not span > 0:
            return None
        guess = _POINTS_PER_WIDTH * span / self.s + 8
        if not guess <= _MAX_POINTS:
            return None
        points = int(8 * np.ceil(guess / 8))
        while points <= min(_MAX_POINTS, _MAX_POINTS_FRACTION * n):
            L, G = chebyshev_factor(y, self.s, points)
            with single_threaded_blas():  # thin products: BLAS threads only spin
                error, largest = self._error(L, G)
            if error <= PAIR_TOL_ULPS * _EPS * largest:
                return L, G
            points += points // 2
        return None

    def _error(self, L: np.ndarray, G: np.ndarray) -> tuple[float, float]:
        """Largest ``|L G L^T - P|`` over all entries, and largest ``|P|``, by column blocks."""
        LG, error, largest = L @ G, 0.0, 0.0
        for cols, P in self._blocks(self.matrix(self.s)):
            error = max(error, float(np.abs(LG @ L[cols].T - P).max()))
            largest = max(largest, float(np.abs(P).max()))
        return error, largest

    def _blocks(self, P: np.ndarray | None):
        """Column blocks of ``P``: one where it is kept, else ``n`` times a block in memory."""
        n = len(self.y)
        step = n if P is not None else max(1, _BLOCK_BYTES // (8 * n))
        for start in range(0, n, step):
            cols = slice(start, start + step)
            yield cols, (P[:, cols] if P is not None else abs_mean(self.y[:, None] - self.y[cols],
                                                                    self.s))  # fmt: skip

    def crps(self, A: np.ndarray, rows) -> np.ndarray:
        """CRPS of the mixtures ``A`` (m, n) of the rows ``rows`` of ``y`` at their targets: (m,).

        ``rows``: a slice or indices into ``y``; the columns of ``A`` are in the order of ``y``.
        One BLAS thread: the products are thin (the factor), or a few per
        candidate where threads of a loaded machine spin (4x slower on 2
        shared cores, ``python -m benchmarks conditional``).
        """
        y = self.y
        B = self.matrix(self.h)
        near = B[rows] if B is not None else abs_mean(y[rows][:, None] - y, self.h)
        out = np.einsum("ij,ij->i", A, near)
        with single_threaded_blas():
            if self.factor is not None:
                L, G = self.factor
                AL = A @ L
                return out - 0.5 * np.einsum("ij,ij->i", AL @ G, AL)
            for cols, P in self._blocks(self.matrix(self.s)):
                out -= 0.5 * np.einsum("ij,ij->i", A @ P, A[:, cols])
        return out
