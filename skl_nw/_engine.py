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
    "loo_loss_grad",
    "loo_pool",
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
# Worst admissible absolute rounding error of a squared distance (or of a log
# weight) computed by the BLAS expansion; beyond it the chunk uses direct
# differences.  An error e in a log weight is a relative error e in the weight.
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


def _log_attention_sq(
    S: np.ndarray,
    log_w: np.ndarray,
    kernel: Kernel,
    fallback: str,
    exclude: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised log attention from squared distances, and its row maxima.

    ``exclude`` (one training index per row) removes that point from the row
    *by index*, never by zero distance: the leave-one-out sums, in which a
    duplicate of the left-out point still counts.

    Rows where every weight is zero (a compact kernel with no training point
    inside its support) follow ``fallback``: "nearest" gives them the
    ``h -> 0`` limit, the weights of the nearest training point(s) with
    positive weight (ties share in proportion to their weights); "nan" leaves
    them empty, with a row maximum of ``-inf``, for the caller to turn into NaN.
    """
    A = kernel.log_profile(S)
    A += log_w
    rows = np.arange(len(S))
    if exclude is not None:
        A[rows, exclude] = -np.inf
    row_max = A.max(axis=1)
    empty = np.flatnonzero(row_max == -np.inf)
    if empty.size and fallback == "nearest":
        S_empty = S[empty]
        S_empty[:, log_w == -np.inf] = np.inf
        if exclude is not None:
            S_empty[np.arange(empty.size), exclude[empty]] = np.inf
        nearest = S_empty == S_empty.min(axis=1, keepdims=True)
        nearest &= np.isfinite(S_empty)  # a lone point has no neighbour at all
        A[empty] = np.where(nearest, log_w, -np.inf)
        row_max[empty] = A[empty].max(axis=1)
    return A, row_max


def _log_attention(
    Q: np.ndarray, train: TrainSet, log_w: np.ndarray, kernel: Kernel, fallback: str
) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised log attention of a chunk of centred queries, and its row maxima."""
    return _log_attention_sq(_sq_distances(Q, train, kernel), log_w, kernel, fallback)


def _softmax_rows(A: np.ndarray, row_max: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Turn log attention into normalised weights in place; flag empty rows.

    The largest term of each row is ``exp(0) = 1``, so no row sum is below 1:
    no ``0 / 0`` however small the bandwidth.
    """
    empty = row_max == -np.inf
    A -= np.where(empty, 0.0, row_max)[:, None]
    np.exp(A, out=A)
    A /= np.maximum(A.sum(axis=1), 1.0)[:, None]
    return A, empty


class _FoldedKeys:
    """Keys with the kernel and the weights folded in, for one GEMM per chunk.

    For a kernel with ``log K(s) = c s`` (``kernel.log_slope``), the log
    attention is ``c |q - x|^2 + log w = [-2c q, 1, c |q|^2] . [x, c |x|^2 + log w, 1]``:
    one matrix product gives it, always ``<= max log w`` (taken as 0), so the
    exponential cannot overflow and only rows whose every term underflows need
    the row-max shift.  Pooling is then three passes over a chunk (GEMM,
    in-place exp, GEMM against ``[V, 1]`` giving numerators and denominator)
    instead of seven.
    """

    def __init__(self, train: TrainSet, log_w: np.ndarray, V: np.ndarray, slope: float):
        self.train, self.slope = train, slope
        shifted = log_w - log_w.max()
        # A zero weight is -inf; BLAS may turn inf into NaN, exp(-1e300) is 0 as well.
        shifted = np.maximum(shifted, -1e300)
        self.keys = np.column_stack([train.X, slope * train.sq_norms + shifted, np.ones(len(V))])
        self.values = np.column_stack([V, np.ones(len(V))])

    def pooled_sums(self, Q: np.ndarray) -> np.ndarray | None:
        """``[sum_i a_i V_i, sum_i a_i]`` per query, or None if the GEMM could cancel."""
        q_sq = np.einsum("ij,ij->i", Q, Q)
        error = abs(self.slope) * (Q.shape[1] + 2) * _EPS
        if error * (q_sq.max(initial=0.0) + self.train.max_sq_norm) > _MAX_GEMM_ERROR:
            return None
        queries = np.column_stack([-2.0 * self.slope * Q, np.ones(len(Q)), self.slope * q_sq])
        A = queries @ self.keys.T
        np.exp(A, out=A)
        return A @ self.values


# Row sums below this have lost relative precision to subnormals: redo with a shift.
_UNDERFLOW = 1e-280


def _pool_rows(A: np.ndarray, row_max: np.ndarray, V: np.ndarray) -> np.ndarray:
    alpha, empty = _softmax_rows(A, row_max)
    pooled = alpha @ V
    pooled[empty] = np.nan
    return pooled


def _chunk_slices(m: int, n: int, n_jobs: int | None, working_memory: float | None):
    """Consecutive query slices whose temporaries fit the memory budget."""
    if m == 0:
        return []
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
    fn: Callable[[slice, np.ndarray], np.ndarray],
    Q: np.ndarray | None,
    train: TrainSet,
    out: np.ndarray,
    n_jobs: int | None,
    working_memory: float | None,
) -> np.ndarray:
    """Fill ``out[chunk] = fn(chunk, Q[chunk] - center)`` over query chunks, in threads.

    ``Q=None`` queries the (already centred) training points themselves.
    """
    m = train.n_samples if Q is None else Q.shape[0]
    slices = _chunk_slices(m, train.n_samples, n_jobs, working_memory)

    def run(batch):
        for chunk in batch:
            Qc = train.X[chunk] if Q is None else Q[chunk] - train.center
            out[chunk] = fn(chunk, Qc)

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
    folded = None if kernel.log_slope is None else _FoldedKeys(train, log_w, V, kernel.log_slope)

    def fn(chunk, Qc):
        sums = None if folded is None else folded.pooled_sums(Qc)
        if sums is None:
            return _pool_rows(*_log_attention(Qc, train, log_w, kernel, fallback), V)
        pooled = sums[:, :-1]
        denominator = sums[:, -1]
        redo = np.flatnonzero(denominator < _UNDERFLOW)
        pooled /= np.where(denominator < _UNDERFLOW, 1.0, denominator)[:, None]
        if redo.size:  # every weight underflowed: the log-space path, with the shift
            pooled[redo] = _pool_rows(*_log_attention(Qc[redo], train, log_w, kernel, fallback), V)
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

    def fn(chunk, Qc):
        alpha, empty = _softmax_rows(*_log_attention(Qc, train, log_w, kernel, fallback))
        alpha[empty] = np.nan
        return alpha

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

    def fn(chunk, Qc):
        A, _ = _log_attention(Qc, train, log_w, kernel, fallback)
        group_max = np.maximum.reduceat(A, starts, axis=1)
        shift = np.where(np.isfinite(group_max), group_max, 0.0)
        A -= np.repeat(shift, counts, axis=1)
        np.exp(A, out=A)
        sums = np.add.reduceat(A, starts, axis=1)
        with np.errstate(divide="ignore"):
            return np.log(sums) + shift

    out = np.empty((Q.shape[0], len(starts)))
    return _map_chunks(fn, Q, train, out, n_jobs, working_memory)


def loo_pool(
    train: TrainSet,
    log_w: np.ndarray,
    V: np.ndarray,
    kernel: Kernel,
    factors: np.ndarray,
    *,
    fallback: str = "nearest",
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """Closed-form leave-one-out pooling for several bandwidth multiples at once.

    With full-sample sums ``D_i = sum_k w_k K_ik`` and ``S_i = sum_k w_k K_ik V_k``
    the leave-one-out prediction is ``(S_i - w_i K(0) V_i) / (D_i - w_i K(0))``.
    It is computed without that subtraction (which cancels when the point's own
    term dominates): the point is removed from its row of log attention by
    index, then the softmax is taken as usual.  For bandwidth ``f * h`` the
    squared scaled distances are those at ``h`` divided by ``f^2``, so each
    chunk computes its distances once and only the kernel per multiple, as
    RidgeCV reuses one decomposition for every alpha.

    Parameters
    ----------
    train : TrainSet
        Training inputs scaled by the base bandwidth ``h``.
    log_w, V, kernel
        As for :func:`pool`.
    factors : ndarray of shape (n_factors,)
        Bandwidth multiples to evaluate.
    fallback, n_jobs, working_memory
        As for :func:`pool`.

    Returns
    -------
    ndarray of shape (n_factors, n, k)
        Leave-one-out pooled values at every training point, per multiple.
    """
    V = np.asarray(V, dtype=np.float64)
    factors = np.asarray(factors, dtype=np.float64)

    def fn(chunk, Qc):
        S = _sq_distances(Qc, train, kernel)
        exclude = np.arange(chunk.start, chunk.stop)
        pooled = np.empty((len(Qc), len(factors), V.shape[1]))
        for t, factor in enumerate(factors):
            A, row_max = _log_attention_sq(S / factor**2, log_w, kernel, fallback, exclude)
            pooled[:, t] = _pool_rows(A, row_max, V)
        return pooled

    out = np.empty((train.n_samples, len(factors), V.shape[1]))
    _map_chunks(fn, None, train, out, n_jobs, working_memory)
    return out.transpose(1, 0, 2)


def loo_loss_grad(
    train: TrainSet,
    log_w: np.ndarray,
    V: np.ndarray,
    kernel: Kernel,
    rows: np.ndarray,
    loss_fn: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    row_weights: np.ndarray,
) -> tuple[float, np.ndarray]:
    """Leave-one-out loss at training ``rows`` and its gradient in log bandwidths.

    The prediction at row ``i`` pools every other training point,
    ``P_i = sum_k alpha_ik V_k`` with ``alpha_i = softmax_k(a_ik)`` and
    ``a_ik = log w_k + log K(s_ik)``, ``s_ik = sum_j (x_ij - x_kj)^2 / h_j^2``.
    With ``R_i = dl_i/dP_i`` (from ``loss_fn``) and ``g = d log K / ds``,

    ``dl_i / d log h_j = -2 sum_k c_ik (z_ij - z_kj)^2``,
    ``c_ik = alpha_ik g(s_ik) R_i . (V_k - P_i)``,

    in scaled coordinates ``z = x / h``.  The sum over ``k`` expands into
    matrix products (``z_i^2 sum_k c_ik + sum_k c_ik z_k^2 - 2 z_i sum_k c_ik z_k``),
    so no (rows, n, d) tensor is formed.

    Parameters
    ----------
    train : TrainSet
        Training inputs scaled by the current bandwidths.
    log_w, V, kernel
        As for :func:`pool`.
    rows : ndarray of shape (b,)
        Training rows whose leave-one-out loss is evaluated (a minibatch).
    loss_fn : callable
        ``(P, rows) -> (losses (b,), dloss/dP (b, k))``.
    row_weights : ndarray of shape (b,)
        Weights of the rows in the loss, ``loss = sum_i r_i l_i / sum_i r_i``.

    Returns
    -------
    loss : float
        Weighted mean leave-one-out loss over ``rows``.
    grad : ndarray of shape (n_features,)
        Its gradient with respect to ``log h``.
    """
    Z = train.X
    Zb = Z[rows]
    S = _sq_distances(Zb, train, kernel)
    alpha, _ = _softmax_rows(*_log_attention_sq(S, log_w, kernel, "nearest", rows))
    P = alpha @ V
    losses, R = loss_fn(P, rows)
    r = row_weights / row_weights.sum()
    G = kernel.dlog_profile(S)
    # At s = 0 every (z_ij - z_kj)^2 is 0: the term vanishes even where g does not
    # exist (kernels with a kink at 0), and a point outside the support has alpha = 0.
    G[(S == 0) | (alpha == 0)] = 0.0
    C = alpha * G
    C *= (R @ V.T) - np.einsum("ik,ik->i", R, P)[:, None]
    C *= r[:, None]
    row_sum = C.sum(axis=1)
    col_sum = C.sum(axis=0)
    cross = np.einsum("ij,ij->j", Zb, C @ Z)
    grad = -2.0 * (row_sum @ Zb**2 + col_sum @ Z**2 - 2.0 * cross)
    return float(r @ losses), grad
