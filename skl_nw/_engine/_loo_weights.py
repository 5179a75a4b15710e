"""Dense leave-one-out attention weights of training rows, in the order of their targets.

The selection by leave-one-out CRPS takes every training row's weights over
the others as one (m, n) block per chunk, to multiply by matrices of the
targets (``_search._crps_pairs``).  Where the compiled per-query mixtures
apply (:func:`sorted_mixture` is not None) :func:`sorted_loo_weights` writes
them in one compiled pass per row; the caller otherwise takes the general
attention weights (the same values to rounding).
"""

from __future__ import annotations

import numpy as np

from ._chunks import Options, budget, map_chunks
from ._conditional import SortedMixture

__all__ = ["sorted_loo_weights"]

# Rows per call of the kernel: a few per worker for balance (no buffer of its own).
_CHUNK_ROWS = 64


def sorted_loo_weights(mixture: SortedMixture, rows: np.ndarray, options: Options) -> np.ndarray:
    """Return the (len(rows), n) leave-one-out weights of the rows ``rows`` (positions in y order).

    Row ``r`` holds the normalised weights of the training rows, in the
    order of ``y``, for the query ``x`` of the row at position ``rows[r]``,
    that row left out by index; NaN where all the others weigh 0.
    """
    from ._compiled_loo import loo_weights

    rows = np.ascontiguousarray(rows, dtype=np.int64)
    out = np.empty((len(rows), mixture.XT.shape[1]))
    workers, _ = budget(options)

    def run(chunk, _):
        loo_weights(mixture.XT, mixture.log_w, mixture.slope, rows[chunk], out[chunk])

    size = max(1, min(_CHUNK_ROWS, -(-len(rows) // max(workers, 1))))
    # rows_of_train: the count of queries (the kernel reads its own from XT)
    map_chunks(run, None, mixture.train, size, workers, rows_of_train=rows)
    return out
