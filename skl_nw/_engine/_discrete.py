"""The discrete kernels' factor of the weights, and which points it leaves out.

A query's categorical features come to the engine as log-kernel rows (see
:class:`~skl_nw._engine._train.TrainSet`): the log of its discrete kernel
to every category of each feature, so that a point's discrete log weight
is a sum of table lookups (:func:`discrete_block`, :func:`discrete_entries`).

``log 0`` (``lambda = 0``) is the finite ``LOG_ZERO`` there, one per
mismatch (an ordered feature's: one per step of the order), so that the
folded products stay free of ``-inf * 0``.  It must not act as a weight,
however small: a point counts only if its discrete log weight is within
``-LOG_ZERO / 2`` of the best that any point of positive weight has for that
query (:func:`left_out`), and the others get weight exactly 0.  So at
``lambda = 0`` a query whose categories some point shares sees only those
points, whether or not the continuous kernel reaches them (a compact
kernel's empty neighbourhood then takes its fallback among them, the
nearest of its own category, as one model per category would); a query
whose categories no point shares sees the points that differ in the fewest
(the ``lambda -> 0`` limit).  As a weight, ``LOG_ZERO`` would let a point of
another category in reach outweigh those of the query's own out of reach, or
one 14,000 Gaussian bandwidths nearer.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "LOG_ZERO", "best_discrete", "discrete_block", "discrete_entries", "left_out",
    "nearest_counted", "unmatched",
]  # fmt: skip

#: ``log 0`` of a discrete kernel (``lambda = 0``), taken as this finite value once per
#: mismatch (an ordered feature's ``lambda^|a - b|``: once per step of the order): it
#: keeps folded products free of ``-inf * 0 = NaN``, and :func:`left_out` keeps it from
#: acting as a weight.
LOG_ZERO = -1e8
# A point whose discrete log weight is this much below the row's best does not count
# (half a mismatch at lambda = 0: the finite parts of the logs are far smaller).
_MARGIN = 0.5 * LOG_ZERO


def discrete_block(Q: np.ndarray, train) -> np.ndarray | None:
    """``log`` of the discrete kernels' product between queries and stored points, or None.

    One matrix product: each query's log-kernel rows (see :class:`TrainSet`)
    against the points' one-hot codes.  Every entry is ``<= 0``.
    """
    _, A = train.split(Q)
    return None if A is None else A @ train.onehot.T


def discrete_entries(A: np.ndarray, train, row: np.ndarray, col: np.ndarray) -> np.ndarray:
    """``log`` of the discrete kernels' product at COO entries (see :func:`discrete_block`)."""
    D = np.zeros(len(row))
    for j, offset in enumerate(train.offsets):
        D += A[row, offset + train.codes[col, j]]
    return D


def best_discrete(A: np.ndarray, train, exclude=None) -> np.ndarray:
    """Each query's largest discrete log weight over the stored points of positive weight: (m,).

    From the cells (the distinct categories of those points); ``exclude`` (a
    stored index per query, or None) leaves that point out, and with it its
    cell where it is the cell's only point.
    """
    cells, cell_of, counts = train.cells()
    D = np.zeros((len(A), len(cells)))
    for j, offset in enumerate(train.offsets):
        D += A[:, offset + cells[:, j]]
    if exclude is not None:
        own = cell_of[exclude]
        alone = np.flatnonzero((own >= 0) & (counts[np.maximum(own, 0)] == 1))
        D[alone, own[alone]] = -np.inf
    return D.max(axis=1, initial=-np.inf)


def unmatched(A: np.ndarray, train) -> np.ndarray:
    """Return which queries (m,) no point of positive weight matches at ``lambda = 0``.

    Their kernel weights are all 0; the counted points are their ``lambda -> 0`` limit.
    """
    return best_discrete(A, train) < _MARGIN


def left_out(D: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Boolean mask of the entries of ``D`` (discrete log weights) whose point does not count.

    ``best`` the row's best (:func:`best_discrete`), broadcast against ``D``.
    """
    return D < best + _MARGIN


def nearest_counted(Q: np.ndarray, A: np.ndarray, train, best: np.ndarray, exclude=None):
    """``(row, col)`` of each query's nearest counted point(s) of positive weight (ties: all).

    ``best`` the queries' :func:`best_discrete`.  By direct differences, query
    by query: for the rows of a compact kernel's fallback whose nearest
    points of all do not count (few).
    """
    active = np.isfinite(train.log_w)
    every = np.arange(train.n_samples)
    rows, cols = [], []
    for i in range(len(Q)):
        S = ((train.X - Q[i]) ** 2).sum(axis=1)
        D = discrete_entries(A[i : i + 1], train, np.zeros_like(every), every)
        S[~active | left_out(D, best[i])] = np.inf
        if exclude is not None:
            S[exclude[i]] = np.inf
        tie = np.flatnonzero((S == S.min()) & np.isfinite(S))
        rows.append(np.full(len(tie), i))
        cols.append(tie)
    return np.concatenate(rows).astype(np.intp), np.concatenate(cols).astype(np.intp)
