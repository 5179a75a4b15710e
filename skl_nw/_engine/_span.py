"""Nearest-neighbour bandwidths (LOESS's span): each query's radius, its k-th nearest row.

A training set with a neighbour count (:meth:`TrainSet.with_neighbours`) gives
every query ``q`` its own bandwidth multiple ``r_q``: the distance, in the
bandwidth-scaled metric, from ``q`` to its ``k``-th nearest training row of
positive weight, times ``enlarge`` (LOESS's enlargement of the farthest row's
distance when the span exceeds 1).  The primitive then divides each query's
squared distances by ``r_q^2`` (:func:`divide`), on every path: the kernel's
scale at ``q`` adapts to the local density of the rows.

Rows are counted, not weights (as R's ``loess`` and statsmodels' ``lowess``
count), and a row that a query leaves out by index does not count: the
leave-one-out radius of row ``i`` is its ``k``-th nearest among the others.
``r_q = 0`` (``q`` sits on ``k`` or more rows) leaves weight only to the rows
at ``q`` itself.

In one dimension the ``k`` nearest rows of a sorted sample are a window of
``k`` consecutive rows: the best window's start is one binary search
(``x_j + x_(j+k) >= 2 q``), exact and ``O(log n)`` per query.  In two and
three dimensions the compiled cell grid of ``_grid`` gives it (the cells
around the query), in more a KD-tree over the counted rows (a
k-nearest-neighbour query, in chunks of the memory budget), whatever the path
of the sums.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import KDTree

from . import _grid, _tree
from ._chunks import Options, budget, map_chunks

__all__ = [
    "NeighbourIndex",
    "check_no_span",
    "common_multiples",
    "divide",
    "per_own_bandwidth",
    "radii",
    "scaled_nearest",
    "tree_chunk_rows",
]

# Bytes per (query, neighbour) entry of a tree's k-nearest-neighbour query
# (distance, index, the heap's copy and the partition's).
# In two features or more, squared distances over r^2 within this of 1 are the k-th
# row's (or its ties'): on the kernel's edge, whatever the rounding of the two
# distances (the radius's and the pair's, summed by different passes) made of them;
# only the tophat is not 0 there.  In one, both are the same |x - q|: exact.  The
# compiled grid holds its own copy (_compiled_grid._EDGE), in the sources whose
# digest decides when its cached machine code is stale.
EDGE = 64 * np.finfo(np.float64).eps
_BYTES_PER_ENTRY = 40
_MAX_CHUNK = 4096


def common_multiples(train, factors) -> np.ndarray:
    """Return the bandwidth multiples a leave-one-out protocol computes ``factors`` at.

    With a span a common multiple of the bandwidth changes nothing: each
    query's radius is a distance in the metric the bandwidth defines, so it
    scales with it.  The leave-one-out of the fit at ``factor * bandwidth``
    is then the fit's own, for every factor (the span is selected instead).
    """
    factors = np.asarray(factors, dtype=np.float64)
    return factors if train.neighbours is None else np.ones_like(factors)


def check_no_span(train) -> None:
    """Raise where a leave-one-out gradient in the bandwidths is asked of a span's fit."""
    if train.neighbours is not None:
        raise ValueError(
            "The leave-one-out gradient in the log bandwidths is not defined with a span "
            "(each radius moves with the metric, by jumps between neighbours): select the "
            "span from a grid (BandwidthSearchCV(spans=...)) instead."
        )


def divide(S: np.ndarray, r: np.ndarray, d: int) -> np.ndarray:
    """``S / r^2`` row by row (``S`` (m, n) or COO values with ``r`` per entry), in place.

    ``0`` where ``S = 0`` (a row at the query itself, also when ``r = 0``),
    ``inf`` where ``S > 0 = r``; in ``d > 1`` features 1 within ``EDGE`` of
    it (the k-th row).
    """
    r2 = np.square(r)
    if S.ndim == 2:
        r2 = r2[:, None]
    zero = S == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(S, r2, out=S)
    S[zero] = 0.0
    if d > 1:
        S[np.abs(S - 1.0) <= EDGE] = 1.0
    return S


class NeighbourIndex:
    """The rows that count towards the ``k`` nearest (stored order), indexed for the search.

    Sorted coordinates in one dimension, a grid of cells in two and three
    (compiled, ``_grid``), a KD-tree otherwise (whatever the backend of the
    sums: the radius is exact either way).
    """

    def __init__(self, X: np.ndarray, counted: np.ndarray, k: int, enlarge: float):
        self.k, self.enlarge = int(k), float(enlarge)
        self.mask = counted
        self.rows = np.flatnonzero(counted)
        self.x, self.tree, self.grid = None, None, None
        if X.shape[1] == 1:  # ``order``: the counted rows by their input (the window path's)
            self.order = self.rows[np.argsort(X[self.rows, 0], kind="stable")]
            self.x = X[self.order, 0]
        elif _grid.usable(X.shape[1]):
            self.grid = _grid.CellGrid(X, self.rows, self.k)
        else:
            self.tree = KDTree(X[self.rows])

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.grid is not None and not _grid.usable(self.grid.X.shape[1]):
            # Pickled with the compiled kernels, loaded without: a KD-tree of the same rows.
            self.tree = KDTree(self.grid.X[self.grid.position[self.rows]])
            self.grid = None


def radii(Q, train, own=None, rows=None, options: Options = Options()) -> np.ndarray:  # noqa: B008
    """Each query's radius ``r_q`` (see the module docstring): (m,).

    ``Q`` as :func:`skl_nw._engine.kernel_sums` takes it (None: the stored
    training rows ``rows``, all if None); ``own`` the stored index of the row
    each query leaves out (None: none).
    """
    index = train.neighbour_index
    workers, mib = budget(options)
    if index.x is not None:
        chunk = 1 << 16
        fn = lambda c, Qc: _window_radii(Qc[:, 0], index, train, None if own is None else own[c])  # noqa: E731
    elif index.grid is not None:  # in cell order: chunks of its own
        return _grid.grid_radii(Q, train, index.grid, index.k, own, rows, options) * index.enlarge
    else:
        kk = min(index.k + (own is not None), len(index.rows))
        chunk = int(np.clip(mib * 2**20 / (max(kk, 1) * _BYTES_PER_ENTRY), 1, _MAX_CHUNK))
        fn = lambda c, Qc: _tree_radii(Qc, index, train, None if own is None else own[c])  # noqa: E731
    out = np.empty(_count(Q, train, rows))
    return map_chunks(fn, Q, train, chunk, workers, out, rows) * index.enlarge


def _count(Q, train, rows) -> int:
    if Q is not None:
        return len(Q)
    return train.n_samples if rows is None else len(rows)


def _kth(D: np.ndarray, k: int) -> np.ndarray:
    """Return each row's ``k``-th smallest entry (the largest finite, or 0, if fewer are finite)."""
    top = min(k, D.shape[1]) - 1
    out = np.partition(D, top, axis=1)[:, top] if top >= 0 else np.zeros(len(D))
    short = ~np.isfinite(out)
    if short.any():
        out[short] = np.max(np.where(np.isfinite(D[short]), D[short], 0.0), axis=1, initial=0.0)
    return out


def tree_chunk_rows(train, kernel, mib: float) -> int:
    """Rows per tree chunk with nearest-neighbour radii: about ``k`` entries per compact query."""
    k, enlarge = train.neighbours
    n = train.n_samples
    count = min(k * max(enlarge, 1.0) ** train.d, n) if kernel.compact else n
    per_neighbour = _tree.BYTES_PER_NEIGHBOUR + _tree.BYTES_PER_NEIGHBOUR_FEATURE * train.d
    return int(np.clip(mib * 2**20 / per_neighbour / 2 / max(count, 1.0), 1, _MAX_CHUNK))


def scaled_nearest(d: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Nearest distances ``d / r`` (0 where both are 0, inf where only ``r`` is)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(r > 0, d / np.where(r > 0, r, 1.0), np.where(d > 0, np.inf, 0.0))


def _tree_radii(Qc, index: NeighbourIndex, train, own) -> np.ndarray:
    Q = train.split(Qc)[0]
    kk = min(index.k + (own is not None), len(index.rows))
    if kk == 0:
        return np.zeros(len(Q))
    dist, ind = index.tree.query(Q, k=kk)
    if own is not None:
        dist[index.rows[ind] == own[:, None]] = np.inf
    return _kth(dist, index.k)


def _window_radii(q: np.ndarray, index: NeighbourIndex, train, own) -> np.ndarray:
    """Return the ``k``-th nearest distance in the sorted 1-D sample, by the best window.

    Windows ``[j, j + k)``: ``j`` is better than ``j + 1`` when
    ``q - x_j <= x_(j+k) - q``; ``x_j + x_(j+k)`` grows with ``j``, so the
    best start is a binary search (and its neighbours, against rounding).
    With a row left out (``own``): the ``k + 1``-th nearest when that row is
    among the ``k`` nearest, else the ``k``-th.
    """
    x, k = index.x, index.k
    n = len(x)
    if n == 0:
        return np.zeros(len(q))
    kth = _best_window(q, x, min(k, n))
    if own is None:
        return kth
    # A row that does not count is not among x: leaving it out changes nothing.
    d_own = np.where(index.mask[own], np.abs(train.X[own, 0] - q), np.inf)
    wider = _best_window(q, x, min(k + 1, n))
    return np.where(d_own <= kth, wider, kth)


def _best_window(q: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    n = len(x)
    if k >= n:
        return np.maximum(np.abs(q - x[0]), np.abs(x[-1] - q))
    mids = x[: n - k] + x[k:]
    j = np.searchsorted(mids, 2.0 * q)
    best = np.full(len(q), np.inf)
    for start in (j - 1, j, j + 1):
        s = np.clip(start, 0, n - k)
        best = np.minimum(best, np.maximum(np.abs(q - x[s]), np.abs(x[s + k - 1] - q)))
    return best


def per_own_bandwidth(scaled: np.ndarray, powers: tuple, r: np.ndarray) -> None:
    """Turn the ``"ds"`` sums (``dK/ds``, ``s`` in radii) into units of the bandwidth, in place.

    ``s_h = r^2 s`` in bandwidths, so ``dK/ds_h = dK/ds / r^2`` (the radius held
    fixed: a derivative in the query moves the kernel, not its neighbourhood);
    0 where ``r = 0`` (the locally constant limit).
    """
    for t, p in enumerate(powers):
        if p == "ds":
            with np.errstate(divide="ignore", invalid="ignore"):
                scaled[:, :, t] *= np.where(r > 0, 1.0 / np.square(np.where(r > 0, r, 1.0)), 0.0)[
                    :, None, None, None
                ]
