"""The grid path: nearest-neighbour radii and kernel sums in two and three dimensions, compiled.

With a span (``_span``) and 2 or 3 continuous features, the counted rows are
sorted into the cells of a uniform grid (:class:`CellGrid`, a cell's side
about ``1 / _CELLS_PER_RADIUS`` of the ``k``-th nearest distance), and each
call's queries by the same cells (:class:`_CellOrder`), so that neighbouring
queries run together.  The compiled kernels (``_compiled_grid``) give each
query its exact ``k``-th nearest distance from the lines of cells around it
(no tree's heap of ``k`` entries) and its sums ``w_i K(|x_i - q| / r_q)^p
[V_i, 1]`` from the lines that meet its radius, a group of queries of one
cell at a time (one matrix product a piece of rows), for kernels of the form
``(1 - u^a)^b``.  Like the window path of one dimension it serves ungrouped
sums of powers 1 and 2 at the bandwidth itself, with or without a row left
out; anything else takes the other paths.
"""

from __future__ import annotations

import numpy as np

from . import _dense
from ._chunks import Options, budget, map_chunks
from ._loader import compiled
from ._window import chunked_sums

__all__ = ["CellGrid", "applies", "grid_radii", "grid_sums"]

# Dimensions the grid serves: the lines of cells about a query grow as (2 rho)^(d - 1).
DIMENSIONS = (2, 3)
# Queries per compiled call, in cell order (each worker thread takes whole chunks).
_CHUNK = 2048
# Queries per group of the sums (one cell's, at most this many): they share each line's
# rows in one matrix product.  CPU time of the sums at n = 2e4, k = 2000, d = 2 and 3:
# 32 and 64 alike (docs/benchmarks.md, "LOESS and LOWESS").
_GROUP = 64
# Cells per radius: a cell's side is about the k-th nearest distance over this (rows
# per cell k / (V_d c^d), V_d the unit ball's volume, at least _MIN_PER_CELL).  Finer
# cells fit the ball closer (fewer rows outside the radius read) but cost more lines
# per query (2c + 1 in 2-D, about pi c^2 in 3-D).  CPU time of the radii and sums at
# n = 2e4, k = 2000: 2-D 6 (4: 10 % slower, 8: the same), 3-D 3 (2: 1.2x, 4: 1.1x); see
# docs/benchmarks.md, "LOESS and LOWESS".
_CELLS_PER_RADIUS = {2: 6.0, 3: 3.0}
_MIN_PER_CELL = 4
_BALL = {2: np.pi, 3: 4.0 * np.pi / 3.0}  # the unit ball's volume


class CellGrid:
    """The counted rows (stored indices ``rows``) sorted by the cell of a uniform grid.

    ``X`` (their inputs in cell order), ``XT`` (the same by feature),
    ``starts`` (cell ``c`` holds ``X[starts[c]:starts[c + 1]]``), ``lower``
    (the grid's corner), ``side`` (a cell's side) and ``shape`` (cells per
    feature).
    """

    def __init__(self, X: np.ndarray, rows: np.ndarray, k: int):
        P = X[rows]
        n, d = P.shape
        lower = P.min(axis=0) if n else np.zeros(d)
        extent = (P.max(axis=0) - lower) if n else np.zeros(d)
        per_cell = k / (_BALL.get(d, 2.0**d) * _CELLS_PER_RADIUS.get(d, 1.0) ** d)
        cells = max(n / max(per_cell, _MIN_PER_CELL), 1.0)
        positive = extent[extent > 0]
        side = float(np.prod(positive) / cells) ** (1.0 / len(positive)) if positive.size else 1.0
        side = max(side, float(extent.max(initial=0.0)) / max(n, 1), np.finfo(float).tiny)
        shape = np.maximum(np.floor(extent / side).astype(np.int64) + 1, 1)
        self.lower, self.side, self.shape = lower.astype(float), side, shape
        flat = self.cells(P)
        by_cell = np.argsort(flat, kind="stable")
        self.rows = rows[by_cell]
        self.X = np.ascontiguousarray(P[by_cell])
        self.XT = np.ascontiguousarray(self.X.T)
        self.starts = np.searchsorted(flat[by_cell], np.arange(np.prod(shape) + 1))
        self.position = np.full(len(X), -1, dtype=np.int64)
        self.position[self.rows] = np.arange(len(self.rows))

    def cells(self, P: np.ndarray) -> np.ndarray:
        """Return the flat cell of each point (outside the grid: the nearest cell)."""
        if not len(P):
            return np.zeros(0, np.int64)
        index = np.floor((P - self.lower) / self.side)
        index = np.clip(np.nan_to_num(index), 0, self.shape - 1).astype(np.int64)
        return np.ravel_multi_index(index.T, self.shape)

    def start(self, k: int) -> float:
        """Return the first search radius, in cell sides: a ball of ``k`` rows on average.

        At the mean number of rows of the occupied cells, plus 10 % (the
        search grows it where the rows are sparser).
        """
        d = self.X.shape[1]
        occupied = max(int(np.count_nonzero(np.diff(self.starts))), 1)
        per_cell = max(len(self.rows) / occupied, 1.0)
        return 1.1 * (k / per_cell / _BALL[d]) ** (1.0 / d)

    def args(self):
        """Return the arrays the compiled kernels take after ``XT``."""
        return self.starts.astype(np.int64), self.lower, self.side, self.shape


def usable(d: int) -> bool:
    """Whether a neighbour index in ``d`` dimensions is a grid (compiled kernels only)."""
    return d in DIMENSIONS and compiled() is not None


class _CellOrder:
    """The queries of one call in cell order: neighbours share the rows of their cells.

    ``order`` (positions by cell), ``cells`` (each sorted query's cell),
    ``Q`` / ``rows``: the queries, or the stored rows queried, in that order
    (what :func:`~skl_nw._engine._chunks.map_chunks` takes).
    """

    def __init__(self, Q, train, grid: CellGrid, rows):
        if Q is None:
            stored = np.arange(train.n_samples) if rows is None else rows
            P = train.X[stored]
        else:
            P = Q[:, : train.d] - train.center
        cells = grid.cells(P)
        self.order = np.argsort(cells, kind="stable")
        self.cells = cells[self.order]
        self.Q = None if Q is None else Q[self.order]
        self.rows = stored[self.order] if Q is None else None

    def restore(self, A: np.ndarray) -> np.ndarray:
        """Return ``A`` (rows in cell order) in the call's order."""
        out = np.empty_like(A)
        out[self.order] = A
        return out


def _groups(cells: np.ndarray) -> np.ndarray:
    """Bounds of the runs of equal ``cells``, cut to at most ``_GROUP`` queries each."""
    new = np.flatnonzero(np.diff(cells)) + 1
    first = np.concatenate([[0], new]).astype(np.int64)
    size = np.append(new, len(cells)) - first
    pieces = -(-size // _GROUP)
    within = np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    return np.append(np.repeat(first, pieces) + within * _GROUP, len(cells)).astype(np.int64)


def grid_radii(Q, train, grid: CellGrid, k: int, own, rows, options: Options) -> np.ndarray:
    """Return each query's ``k``-th nearest distance (``own``: stored rows left out).

    ``Q``, ``rows`` as :func:`skl_nw._engine._span.radii` takes them.
    """
    workers, _ = budget(options)
    sort = _CellOrder(Q, train, grid, rows)
    skip = np.full(len(sort.order), -1, np.int64) if own is None else grid.position[own][sort.order]
    start = grid.start(k)

    def block(chunk, Qc):
        out = np.empty(len(Qc))
        compiled().grid_radii(grid.XT, *grid.args(),
                              np.ascontiguousarray(train.split(Qc)[0]), skip[chunk], k, start,
                              out)  # fmt: skip
        return out

    out = np.empty(len(sort.order))
    map_chunks(block, sort.Q, train, _CHUNK, workers, out, sort.rows)
    return sort.restore(out)


def applies(plan, Q) -> bool:
    """Whether the grid path serves this :func:`kernel_sums` call."""
    train = plan.train
    index = train.neighbour_index
    return (
        plan.scale is not None
        and index is not None
        and index.grid is not None
        and train.codes is None
        and (Q is None or Q.shape[1] == train.d)
        and plan.kernel.power_form is not None
        and plan.groups is None
        and set(plan.powers) <= {1, 2}
        and plan.factors == (1.0,)
    )


def grid_sums(plan, Q, rows, options: Options = Options()):  # noqa: B008
    """``(shift, log_scale, scaled)`` of the sums (``_sums.KernelSums``), or None.

    None where some query's weight sum underflows or is empty: the caller then
    takes the general path, which handles those rows.
    """
    train, grid = plan.train, plan.train.neighbour_index.grid
    kernels = compiled()
    sort = _CellOrder(Q, train, grid, rows)
    own = plan.own(slice(None))
    skip = np.full(len(sort.order), -1, np.int64) if own is None else grid.position[own][sort.order]
    scale = plan.scale[sort.order]
    w = np.exp(_dense.shifted_log_weights(train.log_w))
    WV = np.column_stack([plan.V, np.ones(train.n_samples)])[grid.rows] * w[grid.rows, None]
    a, b = plan.kernel.power_form
    squares = 2 in plan.powers
    m, C = len(plan.scale), WV.shape[1]

    def block(chunk, Qc):
        out = np.empty((len(Qc), 2, C))
        kernels.grid_sums(grid.XT, WV, *grid.args(), np.ascontiguousarray(Qc), scale[chunk],
                          skip[chunk], _groups(sort.cells[chunk]), a, b, squares, out)  # fmt: skip
        return out

    sums = chunked_sums(block, plan, sort.Q, sort.rows, _CHUNK, (m, C), options)
    return None if sums is None else tuple(sort.restore(A) for A in sums)
