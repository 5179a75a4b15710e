"""The numeric engine: the only hot loop of the package.

Arrays in, arrays out; no estimator, no parameter validation.  Inputs are
already divided by the bandwidth (and centred, see :func:`prepare_train`):

* ``X`` (n, d) training inputs, the *keys*;
* ``log_w`` (n,) log sample weights (``-inf`` for a zero weight);
* ``Q`` (m, d) queries;
* ``V`` (n, k) values (targets, or one-hot labels).

For every query the unnormalised log attention of training point ``i`` is
``log w_i + log K(||q - x_i||^2)``.  The attention weights are its softmax,
computed with the row maximum subtracted (log-sum-exp), so a tiny bandwidth
gives the nearest training point(s) instead of ``0 / 0``.

Queries are processed in chunks whose temporaries fit scikit-learn's
``working_memory`` budget (and a cache-friendly cap), never an (m, n) matrix
at once.  A *chunk* is a set of consecutive query rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn import get_config
from sklearn.utils import gen_even_slices
from sklearn.utils._chunking import get_chunk_n_rows

from ._kernels import Kernel

__all__ = [
    "attention",
    "log_group_sums",
    "pool",
    "prepare_train",
]

_EPS = np.finfo(np.float64).eps
# Bytes of temporaries per (query, training point) pair in a chunk: the
# squared distances (8), the log attention (8) and the temporaries of a
# log-profile (sqrt, cos, log: up to 32).
_BYTES_PER_PAIR = 48
# Cap on pairs per chunk, so a chunk's arrays stay in cache (measured: chunks
# of ~100 queries x 20k points beat chunks of thousands of queries).
_MAX_CHUNK_PAIRS = 1 << 21
# Worst admissible absolute rounding error of a squared distance computed by
# the BLAS expansion; beyond it the chunk uses direct differences.
_MAX_GEMM_ERROR = 1e-12
# At most this many features, direct differences cost no more than a GEMM.
_DIRECT_MAX_FEATURES = 2


class TrainSet:
    """Scaled, centred training inputs with what every chunk reuses.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Bandwidth-scaled training inputs.

    Attributes
    ----------
    center : ndarray of shape (n_features,)
        Subtracted from training inputs and queries alike (distances are
        translation invariant, and centring keeps the BLAS expansion exact).
    X : ndarray of shape (n_samples, n_features)
        Centred inputs.
    sq_norms : ndarray of shape (n_samples,)
        Squared norms of the centred inputs.
    """

    def __init__(self, X: np.ndarray) -> None:
        self.center = X.mean(axis=0)
        self.X = np.ascontiguousarray(X - self.center)
        self.sq_norms = np.einsum("ij,ij->i", self.X, self.X)
        self.max_sq_norm = float(self.sq_norms.max()) if len(self.sq_norms) else 0.0

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]


def prepare_train(X: np.ndarray) -> TrainSet:
    """Centre bandwidth-scaled training inputs once, at fit."""
    return TrainSet(np.asarray(X, dtype=np.float64))


def _sq_distances(Q: np.ndarray, train: TrainSet, kernel: Kernel) -> np.ndarray:
    """Squared distances between centred queries ``Q`` and the training set.

    The BLAS expansion ``|q|^2 - 2 q.x + |x|^2`` has an absolute rounding
    error of about ``(d + 2) eps (|q|^2 + |x|^2)``; when that could exceed
    ``_MAX_GEMM_ERROR`` (data far from the centre in bandwidth units), or for
    so few features that it saves nothing, the chunk sums squared
    differences feature by feature instead (exact to rounding, no (m, n, d)
    tensor).  Kernels that are not smooth in ``s`` at 0 (``exact_near_zero``)
    also get their smallest distances recomputed directly.
    """
    X = train.X
    m, d = Q.shape
    q_sq = np.einsum("ij,ij->i", Q, Q)
    gemm_error = (d + 2) * _EPS * (float(q_sq.max(initial=0.0)) + train.max_sq_norm)
    if d <= _DIRECT_MAX_FEATURES or gemm_error > _MAX_GEMM_ERROR:
        S = np.zeros((m, X.shape[0]))
        diff = np.empty_like(S)
        for j in range(d):
            np.subtract(Q[:, j, None], X[None, :, j], out=diff)
            np.multiply(diff, diff, out=diff)
            S += diff
        return S
    S = Q @ X.T
    S *= -2.0
    S += q_sq[:, None]
    S += train.sq_norms[None, :]
    np.maximum(S, 0.0, out=S)
    if kernel.exact_near_zero:
        # sqrt(s + e) - sqrt(s) <= e / (2 sqrt(s)): exact below this s.
        rows, cols = np.nonzero(S < (gemm_error / 2e-12) ** 2)
        if rows.size:
            diff = Q[rows] - X[cols]
            S[rows, cols] = np.einsum("ij,ij->i", diff, diff)
    return S


def _log_attention(
    Q: np.ndarray, train: TrainSet, log_w: np.ndarray, kernel: Kernel, fallback: str
) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised log attention of a chunk, and its row maxima.

    Rows where every weight is zero (a compact kernel with no training point
    inside its support) follow ``fallback``: "nearest" gives them the
    ``h -> 0`` limit, the weights of the nearest training point(s) with
    positive weight (ties share in proportion to their weights); "nan" leaves
    them empty, with a row maximum of ``-inf``, for the caller to turn into NaN.
    """
    S = _sq_distances(Q, train, kernel)
    A = kernel.log_profile(S)
    A += log_w
    row_max = A.max(axis=1)
    empty = np.flatnonzero(row_max == -np.inf)
    if empty.size and fallback == "nearest":
        S_empty = S[empty]
        S_empty[:, log_w == -np.inf] = np.inf
        nearest = S_empty == S_empty.min(axis=1, keepdims=True)
        A[empty] = np.where(nearest, log_w, -np.inf)
        row_max[empty] = A[empty].max(axis=1)
    return A, row_max


def _chunk_slices(m: int, n: int, n_jobs: int | None, working_memory: float | None):
    """Consecutive query slices whose temporaries fit the memory budget."""
    workers = effective_n_jobs(n_jobs)
    if working_memory is None:
        working_memory = get_config()["working_memory"]
    budget = working_memory / workers
    rows = get_chunk_n_rows(
        row_bytes=_BYTES_PER_PAIR * max(n, 1), max_n_rows=m, working_memory=budget
    )
    rows = max(1, min(rows, _MAX_CHUNK_PAIRS // max(n, 1)))
    return [slice(start, min(start + rows, m)) for start in range(0, m, rows)]


def _map_chunks(
    fn: Callable[[np.ndarray], np.ndarray],
    Q: np.ndarray,
    train: TrainSet,
    out: np.ndarray,
    n_jobs: int | None,
    working_memory: float | None,
) -> np.ndarray:
    """Fill ``out[chunk] = fn(Q[chunk] - center)`` over query chunks, in threads."""
    m = Q.shape[0]
    slices = _chunk_slices(m, train.n_samples, n_jobs, working_memory)

    def run(batch):
        for chunk in batch:
            out[chunk] = fn(Q[chunk] - train.center)

    workers = min(effective_n_jobs(n_jobs), len(slices))
    if workers <= 1:
        run(slices)
    else:
        batches = [slices[s] for s in gen_even_slices(len(slices), workers)]
        Parallel(n_jobs=workers, prefer="threads")(delayed(run)(b) for b in batches)
    return out


def pool(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    V: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """Attention pooling ``sum_i alpha_i(q) V_i`` for every query.

    Returns
    -------
    ndarray of shape (m, k)
        Pooled values; rows are NaN only for ``fallback="nan"`` queries that
        have no training point inside a compact kernel's support.
    """
    V = np.asarray(V, dtype=np.float64)

    def fn(Qc):
        A, row_max = _log_attention(Qc, train, log_w, kernel, fallback)
        empty = row_max == -np.inf
        row_max[empty] = 0.0
        A -= row_max[:, None]
        np.exp(A, out=A)
        pooled = A @ V
        pooled /= A.sum(axis=1)[:, None]  # >= 1 where not empty: the max term is exp(0)
        pooled[empty] = np.nan
        return pooled

    out = np.empty((Q.shape[0], V.shape[1]))
    return _map_chunks(fn, Q, train, out, n_jobs, working_memory)


def attention(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """Return the (m, n) matrix of normalised attention weights (rows sum to 1).

    The output itself is (m, n); the temporaries stay within the budget.
    """

    def fn(Qc):
        A, row_max = _log_attention(Qc, train, log_w, kernel, fallback)
        empty = row_max == -np.inf
        row_max[empty] = 0.0
        A -= row_max[:, None]
        np.exp(A, out=A)
        A /= A.sum(axis=1)[:, None]
        A[empty] = np.nan
        return A

    out = np.empty((Q.shape[0], train.n_samples))
    return _map_chunks(fn, Q, train, out, n_jobs, working_memory)


def log_group_sums(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    starts: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """``log sum_{i in g} w_i K_i(q)`` for contiguous groups of training rows.

    Training rows must be sorted by group; ``starts`` holds the first row of
    each (non-empty) group.  Each group is shifted by its own maximum, so a
    group far from the query keeps a finite log-sum instead of underflowing
    to ``-inf``; the result is ``-inf`` only where the sum is exactly zero
    (no point of the group inside a compact kernel's support).

    Returns
    -------
    ndarray of shape (m, n_groups)
    """
    starts = np.asarray(starts, dtype=np.intp)
    counts = np.diff(np.append(starts, train.n_samples))

    def fn(Qc):
        A, _ = _log_attention(Qc, train, log_w, kernel, fallback)
        group_max = np.maximum.reduceat(A, starts, axis=1)
        finite = np.isfinite(group_max)
        shift = np.where(finite, group_max, 0.0)
        A -= np.repeat(shift, counts, axis=1)
        np.exp(A, out=A)
        sums = np.add.reduceat(A, starts, axis=1)
        with np.errstate(divide="ignore"):
            return np.log(sums) + shift

    out = np.empty((Q.shape[0], len(starts)))
    return _map_chunks(fn, Q, train, out, n_jobs, working_memory)
