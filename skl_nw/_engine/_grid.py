"""The grid path: nearest-neighbour radii and kernel sums in two and three dimensions, compiled.

With a span (``_span``) and 2 or 3 continuous features, the counted rows are
sorted into the cells of a uniform grid (:class:`CellGrid`, about
``k / 4^d`` rows a cell, so a query's ``k`` nearest lie within a few cells).
The compiled kernels (``_compiled_grid``) give each query its exact ``k``-th
nearest distance from the cells around it (no tree's heap of ``k`` entries)
and its sums ``w_i K(|x_i - q| / r_q)^p [V_i, 1]`` from the cells that meet
its radius, for kernels of the form ``(1 - u^a)^b``.  Like the window path
of one dimension it serves ungrouped sums of powers 1 and 2 at the bandwidth
itself, with or without a row left out; anything else takes the other paths.
"""

from __future__ import annotations

import numpy as np

from . import _dense
from ._chunks import Options
from ._loader import compiled
from ._window import chunked_sums

__all__ = ["CellGrid", "applies", "grid_radii", "grid_sums"]

# Dimensions the grid serves: the cells around a query grow as 7^d.
DIMENSIONS = (2, 3)
# Queries per compiled call (each worker thread takes whole chunks).
_CHUNK = 2048
# Rows per cell: k / 4^d, at least _MIN_PER_CELL: the radius search then reads
# about 2.5 k rows (the cells within 3 of the query's) and the sums about 2 k.
# Measured at n = 2e4, k = 2000, d = 2: 3^d 3.6 s, 4^d 2.6 s, 5^d 2.5 s a fit and
# predict (python -m benchmarks loess; finer cells cost more cells per query in 3-D).
_MIN_PER_CELL = 4


class CellGrid:
    """The counted rows (stored indices ``rows``) sorted by the cell of a uniform grid.

    ``X`` (their inputs in cell order), ``starts`` (cell ``c`` holds
    ``X[starts[c]:starts[c + 1]]``), ``lower`` (the grid's corner), ``side``
    (a cell's side) and ``shape`` (cells per feature).
    """

    def __init__(self, X: np.ndarray, rows: np.ndarray, k: int):
        P = X[rows]
        n, d = P.shape
        lower = P.min(axis=0) if n else np.zeros(d)
        extent = (P.max(axis=0) - lower) if n else np.zeros(d)
        cells = max(n / max(k / 4.0**d, _MIN_PER_CELL), 1.0)
        positive = extent[extent > 0]
        side = float(np.prod(positive) / cells) ** (1.0 / len(positive)) if positive.size else 1.0
        side = max(side, float(extent.max(initial=0.0)) / max(n, 1), np.finfo(float).tiny)
        shape = np.maximum(np.floor(extent / side).astype(np.int64) + 1, 1)
        index = np.minimum(np.floor((P - lower) / side).astype(np.int64), shape - 1)
        flat = np.ravel_multi_index(index.T, shape) if n else np.zeros(0, np.int64)
        by_cell = np.argsort(flat, kind="stable")
        self.rows = rows[by_cell]
        self.X = np.ascontiguousarray(P[by_cell])
        self.starts = np.searchsorted(flat[by_cell], np.arange(np.prod(shape) + 1))
        self.lower, self.side, self.shape = lower.astype(float), side, shape
        self.position = np.full(len(X), -1, dtype=np.int64)
        self.position[self.rows] = np.arange(len(self.rows))

    def start(self, k: int) -> float:
        """Return the first search radius, in cell sides: a ball of ``k`` rows on average.

        At the mean number of rows of the occupied cells, plus 10 % (the
        search grows it where the rows are sparser).
        """
        d = self.X.shape[1]
        occupied = max(int(np.count_nonzero(np.diff(self.starts))), 1)
        per_cell = max(len(self.rows) / occupied, 1.0)
        ball = np.pi if d == 2 else 4.0 * np.pi / 3.0  # the unit ball's volume (d = 2, 3)
        return 1.1 * (k / per_cell / ball) ** (1.0 / d)

    def args(self):
        """Return the arrays the compiled kernels take after ``X``."""
        return self.starts.astype(np.int64), self.lower, self.side, self.shape


def usable(d: int) -> bool:
    """Whether a neighbour index in ``d`` dimensions is a grid (compiled kernels only)."""
    return d in DIMENSIONS and compiled() is not None


def grid_radii(Q: np.ndarray, grid: CellGrid, k: int, own) -> np.ndarray:
    """Return each query's ``k``-th nearest distance (``own``: stored rows left out)."""
    skip = np.full(len(Q), -1, np.int64) if own is None else grid.position[own]
    out = np.empty(len(Q))
    compiled().grid_radii(grid.X, *grid.args(), np.ascontiguousarray(Q), skip, k, grid.start(k),
                          out)  # fmt: skip
    return out


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
    own = plan.own(slice(None))
    own = None if own is None else grid.position[own]
    w = np.exp(_dense.shifted_log_weights(train.log_w))
    WV = np.column_stack([plan.V, np.ones(train.n_samples)])[grid.rows] * w[grid.rows, None]
    a, b = plan.kernel.power_form
    squares = 2 in plan.powers
    m, C = len(plan.scale), WV.shape[1]

    def block(chunk, Qc):
        skip = np.full(len(Qc), -1, np.int64) if own is None else own[chunk]
        out = np.empty((len(Qc), 2, C))
        kernels.grid_sums(grid.X, WV, *grid.args(), np.ascontiguousarray(Qc),
                          plan.scale[chunk], skip, a, b, squares, out)  # fmt: skip
        return out

    return chunked_sums(block, plan, Q, rows, _CHUNK, (m, C), options)
