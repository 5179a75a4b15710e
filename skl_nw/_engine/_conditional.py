"""Conditional distributions by query: each query's weights reduced over the ``y``-sorted rows.

:func:`sorted_mixture` returns a :class:`SortedMixture` where the compiled
kernels of ``_compiled_conditional`` apply (numba loaded, an exponential
``x`` kernel on continuous features, brute force at a fixed bandwidth, an
exponential ``y`` kernel), else None: the caller then takes the numpy path
(the engine's attention weights, reduced by blocks of rows), which gives the
same values to rounding.
"""

from __future__ import annotations

import numpy as np

from .._kernels import Kernel
from ._chunks import Options, budget, map_chunks
from ._loader import compiled
from ._sums import power_of_two
from ._train import TrainSet

__all__ = ["SortedMixture", "sorted_mixture", "taylor_cells"]

# Half-width of the Taylor cells in units of h_y (_compiled_cells.CELL_HALF, where
# the order and the error bound are chosen with it).
_CELL_HALF = 0.25
# Queries per call of a kernel: a few per worker for balance; each call holds two
# (n,) buffers, so memory does not grow with the chunk.
_CHUNK_QUERIES = 512


def sorted_mixture(train: TrainSet, kernel: Kernel, y: np.ndarray, y_kernel: Kernel,
                   order: np.ndarray | None = None):  # fmt: skip
    """Return a :class:`SortedMixture` of ``train`` and targets ``y`` (caller order), or None.

    ``order``: ``argsort(y, kind="stable")`` if the caller has it.
    """
    kernels = compiled()
    usable = (
        kernels is not None
        and kernel.log_slope is not None
        and y_kernel.log_slope is not None
        and not train.trees
        and train.neighbours is None
        and train.onehot is None
    )
    return SortedMixture(train, kernel, y, y_kernel, order) if usable else None


class SortedMixture:
    """The training rows in the order of ``y``: keys, log weights and targets.

    Built once per fit (the caller keeps it); the Taylor cells of the last
    ``h_y`` asked are kept too.
    """

    def __init__(self, train: TrainSet, kernel: Kernel, y: np.ndarray, y_kernel: Kernel,
                 order: np.ndarray | None = None):  # fmt: skip
        if order is None:
            order = np.argsort(y, kind="stable")  # caller rows by y: ties as the numpy path
        stored = order if train.inverse is None else train.inverse[order]
        self.train = train
        self.position = np.empty(len(order), np.int64)  # caller row -> its place in y order
        self.position[order] = np.arange(len(order))
        self.XT = np.ascontiguousarray(train.X[stored].T)
        self.log_w = np.ascontiguousarray(train.log_w[stored])
        self.ys = np.ascontiguousarray(y[order], dtype=np.float64)
        # The kernels take the targets in units of a power of two near max |y| (exact):
        # 1 / h_y in them squares without overflow (h_y = 1e-161 of y overflowed).
        self.unit = float(power_of_two(np.abs(self.ys).max(initial=0.0)))
        self.scaled = self.ys / self.unit
        self.slope = float(kernel.log_slope)
        # G(u) = Phi(u sqrt(-2 c)) for log K(s) = c s: h_y in the units of Phi.
        self.y_unit = float(np.sqrt(-2.0 * y_kernel.log_slope))
        self._cells = (None, None)

    def _inv_h(self, h: float) -> float:
        """``1 / h_y`` in the units of ``Phi`` and of the scaled targets."""
        return self.y_unit * self.unit / h

    def cells(self, inv_h: float) -> tuple:
        """Return :func:`taylor_cells` of the scaled targets at ``inv_h`` (kept for the next)."""
        kept_inv_h, cells = self._cells
        if kept_inv_h != inv_h:
            cells = taylor_cells(self.scaled, inv_h)
            self._cells = (inv_h, cells)
        return cells

    def _map(self, Q: np.ndarray, width: int, run, options: Options) -> np.ndarray:
        workers, _ = budget(options)
        out = np.empty((len(Q), width))
        rows = max(1, min(_CHUNK_QUERIES, -(-len(Q) // max(workers, 1))))
        map_chunks(lambda chunk, Qc: run(chunk, np.ascontiguousarray(Qc), out[chunk]), Q,
                   self.train, rows, workers)  # fmt: skip
        return out

    def empirical_quantiles(self, Q: np.ndarray, taus: np.ndarray, options: Options):
        """Return ``quantile(y, taus, weights=alpha(q), method="inverted_cdf")`` per query."""
        kernels, taus = compiled(), np.ascontiguousarray(taus, dtype=np.float64)
        return self.unit * self._map(Q, len(taus), lambda _, Qc, out: kernels.empirical_quantiles(
            Qc, self.XT, self.log_w, self.slope, self.scaled, taus, out), options)  # fmt: skip

    def values(self, Q: np.ndarray, T: np.ndarray, h: float, pdf: bool, options: Options):
        """``F(t | q)`` (``pdf``: ``f(t | q)``) at ``T`` (k,) shared or (m, k) per query."""
        kernels, inv_h = compiled(), self._inv_h(h)
        T2 = np.ascontiguousarray(np.atleast_2d(T) / self.unit, dtype=np.float64)
        shared = T.ndim == 1
        from ._compiled_paired import paired_table  # numba is there: kernels is not None

        cells, paired = self.cells(inv_h), paired_table(pdf)

        def run(chunk, Qc, out):
            rows = T2 if shared else T2[chunk]
            kernels.mixture_values(Qc, self.XT, self.log_w, self.slope, self.scaled, cells,
                                   paired, rows, inv_h, pdf, out)  # fmt: skip

        out = self._map(Q, T2.shape[1], run, options)
        if pdf:
            return out / self.unit  # a density per scaled unit
        return out if T2.shape[1] == 1 else _monotone(out, T2)

    def loo_empirical_crps(self, options: Options) -> np.ndarray:
        """Leave-one-out CRPS of each training row's weighted empirical law (caller order): (n,).

        Row ``i`` is scored at ``y_i`` under the weights of ``x_i`` over the
        other rows (``i`` dropped by index); NaN where they all weigh 0.
        """
        kernels, n = compiled(), len(self.ys)
        workers, _ = budget(options)
        out = np.empty(n)
        rows = max(1, min(_CHUNK_QUERIES, -(-n // max(workers, 1))))

        def run(chunk, _):
            kernels.loo_empirical_crps(self.XT, self.log_w, self.slope, self.scaled,
                                       self.position[chunk], out[chunk])  # fmt: skip

        map_chunks(run, None, self.train, rows, workers)  # chunks of 0..n-1
        return out * self.unit

    def smoothed_quantiles(self, Q: np.ndarray, taus: np.ndarray, h: float, reach: float,
                           rtol: float, options: Options):  # fmt: skip
        """Roots of ``F(t | q) = tau`` per query (``taus`` ascending), to ``rtol h``."""
        kernels, taus = compiled(), np.ascontiguousarray(taus, dtype=np.float64)
        inv_h = self._inv_h(h)
        reach_units = reach * self.y_unit
        cells = self.cells(inv_h)
        return self.unit * self._map(Q, len(taus), lambda _, Qc, out: kernels.smoothed_quantiles(
            Qc, self.XT, self.log_w, self.slope, self.scaled, cells, taus, inv_h, reach_units,
            rtol, out), options)  # fmt: skip


def taylor_cells(ys: np.ndarray, inv_h: float):
    """Cut the sorted ``ys`` into cells of width ``2 CELL_HALF / inv_h``: ``(s, starts, centres)``.

    The cells are the non-empty ones of a grid from ``ys[0]``; row ``j`` of
    cell ``b`` (``starts[b] <= j < starts[b + 1]``) is ``ys[j] = centres[b] +
    s[j] / inv_h``, ``|s[j]| <= CELL_HALF`` (to rounding).  Where the grid
    would have more cells than a float counts exactly (``h_y`` below 1e-15 of
    the range), each distinct value is a cell (``s = 0``).

    Examples
    --------
    >>> s, starts, centres = taylor_cells(np.array([0.0, 0.1, 0.1, 2.0]), 1.0)
    >>> starts.tolist(), centres.tolist(), s.round(2).tolist()
    ([0, 3, 4], [0.25, 2.25], [-0.25, -0.15, -0.15, -0.25])
    """
    width = 2.0 * _CELL_HALF / inv_h
    grid = (ys - ys[0]) / width
    if grid[-1] < 2.0**52:
        ids = np.floor(grid)
        centres_of = ys[0] + (ids + 0.5) * width
    else:
        ids, centres_of = ys, ys
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ids)) + 1, [len(ys)]]).astype(np.int64)
    centres = np.ascontiguousarray(centres_of[starts[:-1]])
    s = (ys - np.repeat(centres, np.diff(starts))) * inv_h
    return np.ascontiguousarray(s), starts, centres


def _monotone(F: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``F`` made non-decreasing in ``T`` along each row (``T`` one row, or one per row).

    The kernels sum each ``t``'s window of rows separately, so two close
    ``t`` can round in different orders: an ulp's decrease, undone here (the
    exact ``F`` is non-decreasing in ``t``).
    """
    order = np.argsort(T, axis=1, kind="stable")
    if len(T) == 1:
        F[:, order[0]] = np.maximum.accumulate(F[:, order[0]], axis=1)
        return F
    sorted_F = np.maximum.accumulate(np.take_along_axis(F, order, axis=1), axis=1)
    np.put_along_axis(F, order, sorted_F, axis=1)
    return F
