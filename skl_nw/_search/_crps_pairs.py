"""The Gaussian CRPS of the leave-one-out mixtures on the training targets, one ``h_y`` at a time.

Row ``r`` of the leave-one-out attention weights ``a`` (``a >= 0``, summing
to 1) scores its target ``y_r`` by
``sum_k a_k B(y_r - y_k) - 1/2 a^T P a`` with ``B(m) = E|m + h_y Z|`` and
``P_ik = g(y_i - y_k)``, ``g(m) = E|m + s Z|``, ``s = sqrt(2) h_y``.  Neither
``B`` nor ``P`` depends on the bandwidth, so a search keeps them per ``h_y``.

The dense pair term costs a product with the (n, n) matrix ``P`` per row
block: O(n^3) per candidate.  Two cheaper forms of ``P`` replace it, each
within ``PAIR_TOL_ULPS`` ulps of the largest ``|P|`` on every entry by a
bound proved before any entry is computed; since ``a >= 0`` sums to 1, each
row's pair term is then within as much, the size of the dense product's own
rounding.  The one with fewer flops is taken:

- A piecewise Chebyshev factor (larger ``h_y``).  ``g`` is entire: on ``p``
  equal pieces of the targets' range, each with ``M`` Chebyshev points,
  ``P ~ L G L^T`` with ``L`` block diagonal (row ``i``'s Lagrange basis on its
  piece, barycentric form) and ``G`` the ``g`` of the points' differences, so
  ``a^T P a ~ (a^T L) G (L^T a)``: O(n^2 M) per candidate.  ``M`` is the
  fewest points for which the interpolation error of ``x -> g(x - c)`` on a
  piece, ``4 K rho^(1 - M) / (rho - 1)`` for ``|g| <= K`` on the Bernstein
  ellipse ``E_rho`` of the piece (Trefethen, *Approximation Theory and
  Approximation Practice*, Thm 8.2; the same for points of the first kind, by
  their aliasing), times ``1 + Lambda_M`` for the second argument
  (``Lambda_M <= 2/pi log(M + 1) + 1``, the Lebesgue constant), is within the
  tolerance: ``|erf(w)| <= 1 + exp(Im(w)^2)`` bounds ``K``.
- A band (smaller ``h_y``).  ``g(m) = |m| + c(m)`` with ``c > 0`` decreasing in
  ``|m|``: ``a^T |y_i - y_k| a`` in O(n) per row in sorted order, ``c`` kept
  where it exceeds the tolerance (blocks of sorted rows against the columns
  within the cut), every dropped entry below it.

The rounding of either form is not in the bound: it is that of the stable
barycentric formula and of the products, a few ulps (the tests hold every
entry of the factor within the tolerance of the direct formula).  ``B`` is
kept as an (n, n) matrix (its entries beyond the cut ``|y_i - y_k|``), or,
for an ``h_y`` scored at few bandwidths, interpolated at the factor's
points, chosen for the bound at ``h_y`` itself (``B``'s ``s``, the smaller).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dtrmm
from scipy.special import erf, erfc

from .._engine import single_threaded_blas

__all__ = [
    "PAIR_TOL_ULPS",
    "PairTerms",
    "abs_excess",
    "abs_mean",
    "chebyshev_factor",
    "chebyshev_points",
    "band_cut",
    "pair_matrix",
    "pair_tol",
]

_EPS = np.finfo(float).eps
_ROOT_2_OVER_PI = np.sqrt(2.0 / np.pi)
#: The forms' largest entry error, in ulps of the largest pair term: below the dense
#: product's own rounding (up to n ulps of it).
PAIR_TOL_ULPS = 32
# The factor's points (all pieces) are bounded by this fraction of n and this number: its
# products cost n^2 M multiply-adds a candidate against the dense n^3.
_MAX_POINTS_FRACTION = 0.5
_MAX_POINTS = 1024
# Pieces of the targets' range tried for the factor: more pieces, fewer points each
# (A @ L costs n^2 M) but a larger G (the (n, p M) @ (p M, p M) product); the flop
# count chooses (n = 500: 4 at the rule's h_y and where the joint search scans h; 3 to 6
# time alike there, one piece 1.4-1.7x slower; ``python -m benchmarks conditional``).
_MAX_PIECES = 4
# The band's |y_i - y_k| part costs about 7 passes over the (m, n) rows (cumsum,
# products, the row sums): as many multiply-adds as a factor of this many columns
# (0.1 ms a pass against 0.55 ms for M = 48 on n = 500, one BLAS thread).
_BAND_PASS_COLUMNS = 64
# Sorted rows per block of the band (each against the columns from it to the cut): wider
# blocks take more columns beyond the cut, narrower ones thinner products; 64 at n = 500
# (``python -m benchmarks conditional``, the selection's three smallest h_y).
_BAND_ROWS = 64
# The band's blocks are kept up to this many bytes, else rebuilt at each call.
_BAND_BYTES = 2**26
# Row blocks of a pair matrix's lower triangle (pair_matrix).
_TRIANGLE_BLOCKS = 8
# The Bernstein ellipses tried (chebyshev_points): rho - 1 from 1e-4 to 100.
_RHO = 1.0 + np.geomspace(1e-4, 1e2, 400)
_RHO_A, _RHO_B = 0.5 * (_RHO + 1.0 / _RHO), 0.5 * (_RHO - 1.0 / _RHO)
_LOG_RHO, _LOG_RHO_1 = np.log(_RHO), np.log(_RHO - 1.0)


def abs_mean(mu, s: float) -> np.ndarray:
    """``E|mu + s Z|`` for standard normal ``Z``: ``mu erf(u) + s sqrt(2/pi) exp(-u^2)``.

    ``u = mu / (s sqrt 2)``; in place on two temporaries of the size of ``mu``.
    """
    mu = np.asarray(mu, dtype=float)
    u, out = _scaled_and(erf, mu, s)
    out += _density_term(u, s)
    return out


def abs_excess(mu, s: float) -> np.ndarray:
    """``E|mu + s Z| - |mu|``: ``s sqrt(2/pi) exp(-u^2) - |mu| erfc(|u|)``, positive, even.

    Decreasing in ``|mu|`` (its derivative is ``-2 Phi(-|mu| / s)``); no
    cancellation against ``|mu|``.
    """
    u, out = _scaled_and(erfc, np.abs(np.asarray(mu, dtype=float)), s)
    u = _density_term(u, s)
    u -= out
    return u


def _scaled_and(special, m: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Return ``u = m / (s sqrt 2)`` and ``m special(u)``, two new arrays."""
    u = np.multiply(m, 1.0 / (s * np.sqrt(2.0)), out=np.empty_like(m))
    out = special(u, out=np.empty_like(m))
    out *= m
    return u, out


def _density_term(u: np.ndarray, s: float) -> np.ndarray:
    """``s sqrt(2/pi) exp(-u^2)``, in place on ``u`` (returned)."""
    with np.errstate(over="ignore"):  # u^2 beyond the floats: exp(-inf) = 0
        np.square(u, out=u)
    np.negative(u, out=u)
    np.exp(u, out=u)
    u *= s * _ROOT_2_OVER_PI
    return u


def pair_matrix(y: np.ndarray, s: float, tol: float = 0.0) -> np.ndarray:
    """``E|y_i - y_k + s Z|`` for every ``i, k`` of sorted ``y``: (n, n), from its lower triangle.

    The value is even in ``y_i - y_k``: each block of rows takes the columns
    up to its end and is mirrored.  ``tol > 0``: the entries beyond the
    :func:`band_cut` take ``|y_i - y_k|`` (within ``tol`` of their value, no
    special function evaluated).
    """
    n = len(y)
    out = np.empty((n, n))
    cut = band_cut(s, tol) if tol > 0 else np.inf
    step = -(-n // _TRIANGLE_BLOCKS)
    for start in range(0, n, step):
        stop = min(start + step, n)
        near = min(int(np.searchsorted(y, y[start] - cut, side="left")), start)
        block = out[start:stop, :stop]
        np.subtract(y[start:stop, None], y[:near], out=block[:, :near])  # y sorted: >= 0
        block[:, near:] = abs_mean(y[start:stop, None] - y[near:stop], s)
        out[:start, start:stop] = block[:, :start].T
    return out


def pair_tol(y: np.ndarray, s: float) -> float:
    """``PAIR_TOL_ULPS`` ulps of the largest ``E|y_i - y_k + s Z|`` (at the largest ``|m|``)."""
    return PAIR_TOL_ULPS * _EPS * float(abs_mean(y[-1] - y[0], s)) if len(y) else 0.0


def band_cut(s: float, tol: float) -> float:
    """Smallest ``m`` on a grid of ``s / 100`` with ``E|m + s Z| - |m| <= tol``, or inf."""
    below = _EXCESS_GRID * s <= tol  # the excess is s times a function of m / s
    return float(_CUT_GRID[np.argmax(below)] * s) if below.any() else np.inf


def chebyshev_points(span: float, s: float, pieces: int, tol: float) -> int:
    """Fewest Chebyshev points per piece for which the factor's entries are within ``tol``.

    ``pieces`` equal pieces of a range ``span``; the bound of the module's
    docstring, minimised over the ellipse parameter ``rho`` (a grid of it).
    """
    R = 0.5 * span / pieces  # a piece's half-width
    far = span - R  # largest distance from a piece's centre to a target
    a, b = _RHO_A, _RHO_B
    if not R / s < 1e100:  # far beyond any count of points tried
        return _MAX_POINTS + 1
    log_e = 0.5 * (R * b / s) ** 2  # log |exp(-z^2 / (2 s^2))| on the ellipse (scale first)
    size = np.log(np.hypot(R * a + far, R * b))
    log_k = np.logaddexp(size + np.logaddexp(0.0, log_e), np.log(s * _ROOT_2_OVER_PI) + log_e)
    points = _MAX_POINTS
    for _ in range(2):  # Lambda at the most points tried, then at the count it gave (fewer)
        lebesgue = 2.0 / np.pi * np.log(points + 1.0) + 1.0
        log_bound = np.log(4.0 * (1.0 + lebesgue)) + log_k - _LOG_RHO_1
        points = max(2, int(np.ceil(1.0 + ((log_bound - np.log(tol)) / _LOG_RHO).min())))
    return points


def chebyshev_factor(y: np.ndarray, s: float, points: int, pieces: int = 1):
    """Return ``(starts, L, G)``: ``E|y_i - y_k + s Z| ~ (L G L^T)_ik`` with ``L`` block diagonal.

    ``y`` sorted; ``pieces`` equal pieces of ``[min y, max y]`` with
    ``points`` Chebyshev points of the first kind each.  ``L`` (n, points)
    holds row ``i``'s basis on its piece, rows ``starts[q]:starts[q + 1]``
    in piece ``q`` (its block of columns ``q * points`` onwards); ``G``
    (pieces * points, pieces * points).  A target on a point gets that
    point's basis row exactly.
    """
    starts, L, t = _lagrange_rows(y, points, pieces)
    return starts, L, abs_mean(t[:, None] - t, s)


def _lagrange_rows(y: np.ndarray, points: int, pieces: int):
    """Return ``(starts, L, nodes)`` of :func:`chebyshev_factor` (``nodes`` piece by piece)."""
    lo, hi = float(y[0]), float(y[-1])
    edges = lo + (hi - lo) * np.arange(pieces + 1) / pieces
    edges[-1] = hi  # the last target inside its piece, not an ulp beyond
    starts = np.searchsorted(y, edges, side="left")
    starts[0], starts[-1] = 0, len(y)
    theta = np.pi * (2.0 * np.arange(points) + 1.0) / (2.0 * points)
    bary = np.sin(theta) * (-1.0) ** np.arange(points)
    nodes, L = [], np.empty((len(y), points))
    for q in range(pieces):
        t = 0.5 * (edges[q] + edges[q + 1]) + 0.5 * (edges[q + 1] - edges[q]) * np.cos(theta)
        nodes.append(t)
        D = y[starts[q] : starts[q + 1], None] - t
        on_node = D == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            C = bary / D
        hit = on_node.any(axis=1)
        C[hit] = on_node[hit]
        L[starts[q] : starts[q + 1]] = C / C.sum(axis=1, keepdims=True)
    return starts, L, np.concatenate(nodes)


class PairTerms:
    """The pair terms of one ``h_y > 0`` on the sorted training targets ``y``.

    Parameters
    ----------
    y : ndarray of shape (n,)
        The training targets, sorted.
    h : float
        The y bandwidth.
    matrix : callable, optional
        ``matrix(s)`` returns the (n, n) matrix ``E|y_i - y_k + s Z|``, or
        None where it does not fit in memory (then ``B`` is built for each
        row block).  A search shares one that keeps them.  Default: built here.
    few : bool, default=False
        Scored at few bandwidths: where a factor holds at ``s = h`` (``B``'s,
        the stricter), the near term too comes from its points, and ``B`` is
        not built.

    Attributes
    ----------
    factor : tuple or None
        ``(starts, L, T)``: the pieces' first rows, the block diagonal basis
        (n, M) and ``T = 2 triu(G) - diag(G)`` (upper triangular).
    near : ndarray or None
        ``G`` of ``B`` at the factor's points (``few``).
    band : list of ndarray or None
        The kept blocks of the band (where no factor is taken).
    """

    def __init__(self, y: np.ndarray, h: float, matrix=None, few: bool = False):
        self.y, self.h, self.s = y, h, np.sqrt(2.0) * h
        if matrix is None:
            matrix = lambda s: pair_matrix(y, s, pair_tol(y, s))  # noqa: E731
        self.matrix = matrix
        self.tol = pair_tol(y, self.s)
        self.factor, self.band, self.near = None, None, None
        self.blocks = _band_blocks(y, band_cut(self.s, self.tol))
        size = sum((b.stop - b.start) * (r.stop - r.start) for b, r in self.blocks)
        n = len(y)
        band_cost = n * size + _BAND_PASS_COLUMNS * n * n
        near = few and self._factor(h, pair_tol(y, h), np.inf)  # B from the same points
        if not near and not self._factor(self.s, self.tol, band_cost) and 8 * size <= _BAND_BYTES:
            self.band = [_band_matrix(y, self.s, b, r) for b, r in self.blocks]
        parts = self.factor or self.band or ()
        self.nbytes = sum(a.nbytes for a in parts if isinstance(a, np.ndarray))

    def _factor(self, s: float, tol: float, rival: float) -> bool:
        """Keep the cheapest piecewise factor within ``tol`` at ``s`` if it costs below ``rival``.

        The cost in multiply-adds a candidate: ``A @ L``, then ``T`` (half of
        ``G``), and with ``near`` its own ``G`` (whole).
        """
        y, n = self.y, len(self.y)
        span = float(y[-1] - y[0]) if n else 0.0
        best = (rival, 0, 0)
        for pieces in range(1, _MAX_PIECES + 1) if span > 0 else ():
            M = chebyshev_points(span, s, pieces, tol)
            if pieces * M <= min(_MAX_POINTS, _MAX_POINTS_FRACTION * n):
                cost = n * n * M + n * (pieces * M) ** 2 * (3 if s == self.h else 1) // 2
                best = min(best, (cost, pieces, M), key=lambda c: c[0])
        if not best[1]:
            return False
        starts, L, t = _lagrange_rows(y, best[2], best[1])
        G = abs_mean(t[:, None] - t, self.s)
        # a^T G a = a^T T a with T upper triangular: half the flops of G (trmm).
        self.factor = (starts, L, np.asfortranarray(np.triu(G, 1) * 2.0 + np.diag(np.diag(G))))
        if s == self.h:  # the points hold B (the smaller s): its G too
            self.near = abs_mean(t[:, None] - t, self.h)
        return True

    def crps(self, A: np.ndarray, rows) -> np.ndarray:
        """CRPS of the mixtures ``A`` (m, n) of the rows ``rows`` of ``y`` at their targets: (m,).

        ``rows``: a slice or indices into ``y``; the columns of ``A`` are in the order of ``y``.
        One BLAS thread: the products are thin, or a few per candidate where
        threads of a loaded machine spin (4x slower on 2 shared cores,
        ``python -m benchmarks conditional``).
        """
        y = self.y
        if self.near is not None:
            with single_threaded_blas():
                return self._factor_crps(A, rows)
        B = self.matrix(self.h)
        near = B[rows] if B is not None else abs_mean(y[rows][:, None] - y, self.h)
        out = np.einsum("ij,ij->i", A, near)
        with single_threaded_blas():
            if self.factor is not None:
                AL = _basis_sums(A, *self.factor[:2])
                return out - 0.5 * np.einsum("ij,ij->i", dtrmm(1.0, self.factor[2], AL, side=1), AL)
            out -= _abs_half_pairs(A, y)
            band = self.band or (_band_matrix(y, self.s, b, r) for b, r in self.blocks)
            for (b, r), C in zip(self.blocks, band, strict=True):
                out -= 0.5 * np.einsum("ij,ij->i", A[:, b] @ C, A[:, r])
        return out

    def _factor_crps(self, A: np.ndarray, rows) -> np.ndarray:
        """Both terms from the factor: ``near_r = L_r G_B (L^T a)``, pairs ``(a^T L) T (L^T a)``."""
        starts, L, T = self.factor
        AL = _basis_sums(A, starts, L)
        pairs = np.einsum("ij,ij->i", dtrmm(1.0, T, AL, side=1), AL)
        M, places = L.shape[1], np.arange(len(self.y))[rows]
        piece = np.searchsorted(starts, places, side="right") - 1
        NG = np.ascontiguousarray(AL @ self.near).reshape(len(A), -1, M)
        near = np.einsum("ij,ij->i", NG[np.arange(len(A)), piece], L[places])
        return near - 0.5 * pairs


def _basis_sums(A: np.ndarray, starts: np.ndarray, L: np.ndarray) -> np.ndarray:
    """Return ``A @ L`` for the block diagonal ``L`` of :func:`chebyshev_factor`: (m, p M)."""
    M = L.shape[1]
    AL = np.empty((len(A), M * (len(starts) - 1)), order="F")
    for q in range(len(starts) - 1):
        rows = slice(starts[q], starts[q + 1])
        np.matmul(A[:, rows], L[rows], out=AL[:, q * M : (q + 1) * M])
    return AL


def _abs_half_pairs(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``1/2 sum_jk a_j a_k |y_j - y_k|`` per row of ``A``, columns in sorted ``y`` order.

    ``sum_k a_k y_k (2 C_k - a_k - S)`` with ``C`` the cumulative weights and
    ``S`` their total (the identity holds for any total); ``y`` centred, the
    sum is invariant to a shift.
    """
    C = np.cumsum(A, axis=1)
    total = C[:, -1:].copy()
    C *= 2.0
    C -= A
    C -= total
    C *= y - y[len(y) // 2]
    return np.einsum("ij,ij->i", A, C)


def _band_blocks(y: np.ndarray, cut: float) -> list[tuple[slice, slice]]:
    """``(block, right)`` slices: blocks of sorted rows, columns from each to the band's end.

    ``right`` runs from the block's start to the last column within ``cut``
    of it.  Every ``k >= start`` with ``|y_i - y_k| <= cut`` for a row ``i`` of the
    block is among them (``y`` sorted); the columns before the block are the
    earlier blocks' (the matrix is symmetric).
    """
    n, out = len(y), []
    for start in range(0, n, _BAND_ROWS):
        stop = min(start + _BAND_ROWS, n)
        hi = int(np.searchsorted(y, y[stop - 1] + cut, side="right"))
        out.append((slice(start, stop), slice(start, max(hi, stop))))
    return out


def _band_matrix(y: np.ndarray, s: float, block: slice, right: slice) -> np.ndarray:
    """``c(y_i - y_k)`` for ``i`` in ``block``, ``k`` in ``right``; doubled beyond the block.

    ``sum_ik a_i C_ik a_k`` over the whole band is the sum over the blocks of
    ``a_block^T (this) a_right``: each pair off the diagonal blocks once, twice.
    """
    C = abs_excess(y[block, None] - y[right], s)
    C[:, block.stop - block.start :] *= 2.0
    return C


# E|m + Z| - |m| on a grid of m (band_cut scales it by s): 0 beyond 40.
_CUT_GRID = np.arange(0.0, 40.0, 0.01)
_EXCESS_GRID = abs_excess(_CUT_GRID, 1.0)
