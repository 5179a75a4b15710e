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

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.sparse import csr_matrix
from scipy.sparse import vstack as sparse_vstack
from scipy.special import logsumexp
from sklearn import get_config
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_even_slices
from sklearn.utils._chunking import get_chunk_n_rows
from threadpoolctl import ThreadpoolController

from ._kernels import Kernel

__all__ = [
    "attention",
    "choose_algorithm",
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
# of ~50 queries x 20k points beat chunks of hundreds or thousands of queries).
_MAX_CHUNK_PAIRS = 1 << 20
# Worst admissible absolute rounding error of a squared distance (or of a log
# weight) computed by the BLAS expansion; beyond it the chunk uses direct
# differences.  An error e in a log weight is a relative error e in the weight.
_MAX_GEMM_ERROR = 1e-12
# At most this many features, direct differences cost no more than a GEMM.
_DIRECT_MAX_FEATURES = 2
_TREES = {"kd_tree": KDTree, "ball_tree": BallTree}


class TrainSet:
    """Scaled, centred training inputs with what every chunk reuses.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Bandwidth-scaled training inputs.
    algorithm : {"brute", "kd_tree", "ball_tree"}, default="brute"
        Whether to build a scikit-learn tree over the inputs.
    leaf_size : int, default=40
        Leaf size of the tree.
    active : ndarray of bool of shape (n_samples,), default=None
        Rows that can carry weight (positive sample weight); only they enter
        the trees, so a neighbour search never returns a weightless point.
    groups : ndarray of int, default=None
        First row of each contiguous group (the classes of the classifier);
        each group gets its own tree, so each group's kernel sum is truncated
        relative to its own mass.  None: one group.
    tree_order : bool, default=False
        Store the rows of each group in its tree's leaf order (tree path only).

    Attributes
    ----------
    center : ndarray of shape (n_features,)
        Subtracted from training inputs and queries alike (distances are
        translation invariant, and centring keeps the BLAS expansion exact).
    X : ndarray of shape (n_samples, n_features)
        Centred inputs, rows in ``order``.
    order : ndarray of int of shape (n_samples,)
        Row ``i`` of ``X`` is input row ``order[i]`` (the identity unless
        ``tree_order``).
    sq_norms : ndarray of shape (n_samples,)
        Squared norms of the centred inputs.
    trees : list of _GroupTree
        One tree per group over its active rows; empty for brute force.
    """

    def __init__(
        self,
        X: np.ndarray,
        algorithm: str = "brute",
        leaf_size: int = 40,
        active: np.ndarray | None = None,
        groups: np.ndarray | None = None,
        tree_order: bool = False,
    ) -> None:
        self.center = X.mean(axis=0)
        X = X - self.center
        n = len(X)
        bounds = np.append([0] if groups is None else groups, n)
        active = np.ones(n, dtype=bool) if active is None else np.asarray(active)
        self.order = np.arange(n)
        if algorithm != "brute" and tree_order:
            self.order = _leaf_order(X, bounds, active, algorithm, leaf_size)
            X, active = X[self.order], active[self.order]
        self.X = np.ascontiguousarray(X)
        self.sq_norms = np.einsum("ij,ij->i", self.X, self.X)
        self.max_sq_norm = float(self.sq_norms.max()) if len(self.sq_norms) else 0.0
        self.trees = []
        if algorithm != "brute":
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                rows = np.arange(lo, hi)[active[lo:hi]]
                if len(rows):
                    self.trees.append(_GroupTree(self.X, rows, algorithm, leaf_size))

    @property
    def tree(self):
        """The trees (one per group) of the tree path, or None for brute force."""
        return [t.tree for t in self.trees] or None

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]


def _leaf_order(X, bounds, active, algorithm, leaf_size) -> np.ndarray:
    """Return a permutation that stores each group's active rows in its tree's leaf order.

    Points that are close in space are then close in memory: a radius query
    touches a few cache lines instead of one per neighbour, and so do the
    gathers of the neighbours' inputs, values and weights (measured at
    n = 1e6, d = 2: query_radius 1.8x faster).  Weightless rows follow.
    """
    order = np.arange(len(X))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rows = np.arange(lo, hi)
        keep = rows[active[lo:hi]]
        if len(keep) > 1:
            leaves = _TREES[algorithm](X[keep], leaf_size=leaf_size).get_arrays()[1]
            order[lo:hi] = np.concatenate([keep[leaves], rows[~active[lo:hi]]])
    return order


def prepare_train(
    X: np.ndarray,
    algorithm: str = "brute",
    leaf_size: int = 40,
    active: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    tree_order: bool = False,
) -> TrainSet:
    """Centre bandwidth-scaled training inputs once, at fit (and build the trees).

    ``tree_order=True`` lets the tree path store the rows in leaf order (see
    :func:`_leaf_order`): the caller must then reorder its values and weights
    by the returned set's ``order`` (groups keep their boundaries).
    """
    X = np.asarray(X, dtype=np.float64)
    return TrainSet(X, algorithm, leaf_size, active, groups, tree_order)


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
    return_shift: bool = False,
):
    """Unnormalised log attention from squared distances, and its row maxima.

    The log attention is relative: each row is shifted by the largest
    ``log K`` of a point of positive weight (see :func:`_shifted_log_kernel`);
    ``return_shift=True`` also returns that shift, for absolute log sums.

    ``exclude`` (one training index per row) removes that point from the row
    *by index*, never by zero distance: the leave-one-out sums, in which a
    duplicate of the left-out point still counts.

    Rows where every weight is zero (a compact kernel with no training point
    inside its support) follow ``fallback``: "nearest" gives them the
    ``h -> 0`` limit, the weights of the nearest training point(s) with
    positive weight (ties share in proportion to their weights); "nan" leaves
    them empty, with a row maximum of ``-inf``, for the caller to turn into NaN.
    """
    A, k_max = _shifted_log_kernel(S, log_w, kernel, exclude)
    A += log_w
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
    return (A, row_max, k_max) if return_shift else (A, row_max)


def _shifted_log_kernel(S, log_w, kernel, exclude=None):
    """``log K(S)`` minus its row maximum over points of positive weight, and that maximum.

    Adding ``log w`` to ``log K`` directly rounds ``log w`` away far from every
    point (``log K ~ -1e30``): tied nearest points then no longer share in
    proportion to their weights.  Shifting each row first (a constant per row,
    which the softmax ignores) keeps ``log w`` exact.  ``exclude`` removes one
    point per row by index (leave-one-out).
    """
    A = kernel.log_profile(S)
    if exclude is not None:
        A[np.arange(len(S)), exclude] = -np.inf
    active = np.isfinite(log_w)
    k_max = (A if active.all() else np.where(active, A, -np.inf)).max(axis=1)
    k_max = np.where(np.isfinite(k_max), k_max, 0.0)
    A -= k_max[:, None]
    return A, k_max


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
    in-place exp, then a matrix-vector product and row sum giving numerators
    and denominator) instead of seven; two with the compiled kernel, which
    takes the exp and the sums in one pass (:func:`_exp_sums`).
    """

    def __init__(self, train: TrainSet, log_w: np.ndarray, V: np.ndarray, slope: float):
        self.train, self.slope = train, slope
        shifted = _shifted_log_weights(log_w)
        self.keys = np.column_stack([train.X, slope * train.sq_norms + shifted, np.ones(len(V))])
        self.values = V

    def pooled_sums(self, Q: np.ndarray) -> np.ndarray | None:
        """``[sum_i a_i V_i, sum_i a_i]`` per query, or None if the GEMM could cancel."""
        q_sq = np.einsum("ij,ij->i", Q, Q)
        error = abs(self.slope) * (Q.shape[1] + 2) * _EPS
        if error * (q_sq.max(initial=0.0) + self.train.max_sq_norm) > _MAX_GEMM_ERROR:
            return None
        queries = np.column_stack([-2.0 * self.slope * Q, np.ones(len(Q)), self.slope * q_sq])
        return _exp_sums(queries @ self.keys.T, self.values)


# Row sums below this have lost relative precision to subnormals: redo with a shift.
_UNDERFLOW = 1e-280


@functools.cache
def _compiled():
    """Return the numba kernels (:mod:`skl_nw._compiled`), or None if absent or disabled."""
    if os.environ.get("SKL_NW_DISABLE_NUMBA", "") not in ("", "0"):
        return None
    try:
        from . import _compiled as compiled

        compiled.warm_up()  # compile (or load from the cache) here, not in worker threads
    except ImportError:  # numba is not installed (or does not support this numpy)
        return None
    except Exception as error:  # e.g. no writable cache directory, a failed compilation
        warnings.warn(
            f"skl_nw: numba is installed but its kernels failed to load ({error!r}); "
            "using the numpy passes (same results, slower).",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return compiled


def _exp_sums(
    A: np.ndarray,
    V: np.ndarray,
    *,
    slope: float = 1.0,
    offset: np.ndarray | None = None,
    own: np.ndarray | None = None,
) -> np.ndarray:
    """``[E @ V, E.sum(axis=1)]`` for ``E = exp(slope * A + offset)``, all of it ``<= 0``.

    ``own`` (one column per row) is left out of each row: leave-one-out by
    index.  The plain case (the folded predict) is one pass over ``A`` with the
    compiled kernel; otherwise numpy's passes (``A`` is then overwritten when
    ``slope == 1`` and there is no offset).
    """
    m, n = A.shape
    compiled = _compiled()
    if compiled is not None and slope == 1.0 and offset is None and own is None:
        sums = np.empty((m, V.shape[1] + 1))
        compiled.exp_sums(np.ascontiguousarray(A), np.ascontiguousarray(V.T), sums)
        return sums
    if slope != 1.0 or offset is not None:
        A = A * slope
        A += 0.0 if offset is None else offset
    if own is not None:
        A[np.arange(m), own] = -np.inf
    np.exp(A, out=A)
    return _weighted_sums(A, V)


def _exp_sums_slopes(
    Q: np.ndarray,
    train: TrainSet,
    XT: np.ndarray,
    V: np.ndarray,
    slopes: np.ndarray,
    offset: np.ndarray,
    own: np.ndarray,
    kernel: Kernel,
) -> np.ndarray:
    """:func:`_exp_sums` of ``slope * |q - x|^2 + offset`` for every slope: (m, n_slopes, k + 1).

    ``XT`` is ``train.X.T``, contiguous (made once by the caller).  Each chunk's
    squared distances serve every slope.  With the compiled kernel they are
    never stored, and a slope twice another one (the bandwidth divided by
    sqrt(2), as in the default grid of BandwidthSearchCV) squares that one's
    kernel values instead of taking an exp: one multiply per pair.
    """
    compiled = _compiled()
    if compiled is None:
        S = _sq_distances(Q, train, kernel)
        return np.stack([_exp_sums(S, V, slope=c, offset=offset, own=own) for c in slopes], axis=1)
    order, squares = _square_chains(slopes)
    w = np.exp(offset)
    WVT = np.ascontiguousarray((w[:, None] * V).T)
    sums = np.empty((Q.shape[0], len(slopes), V.shape[1] + 1))
    Q = np.ascontiguousarray(Q)
    compiled.exp_sums_chained(Q, XT, slopes[order], squares, w, WVT, own, sums)
    out = np.empty_like(sums)
    out[:, order] = sums
    return out


# A kernel value squared this many times in a row has a relative error of up to
# 2^6 times the exp's (measured: 3.2e-14): then a chain restarts with an exp.
_MAX_SQUARINGS = 6


def _square_chains(slopes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order the slopes in chains ``c, 2c, 4c, ...``; flag the members after the first."""
    left = list(np.argsort(np.abs(slopes), kind="stable"))
    order, squares = [], []
    while left:
        t = left.pop(0)
        order.append(t)
        squares.append(False)
        for _ in range(_MAX_SQUARINGS):
            target = 2.0 * slopes[t]
            match = next(
                (u for u in left if abs(slopes[u] - target) <= 4 * _EPS * abs(target)), None
            )
            if match is None:
                break
            left.remove(match)
            order.append(match)
            squares.append(True)
            t = match
    return np.array(order, dtype=np.intp), np.array(squares, dtype=np.bool_)


def _weighted_sums(A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Return ``[A @ V, A.sum(axis=1)]``, numerators and denominators.

    For one output a matrix-vector product and a row sum beat one matrix
    product against ``[V, 1]`` (measured: 0.30 vs 0.52 ns per pair).
    """
    sums = np.empty((A.shape[0], V.shape[1] + 1))
    sums[:, :-1] = A @ V
    sums[:, -1] = A.sum(axis=1)
    return sums


def _normalise_sums(sums: np.ndarray, redo: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``[numerators, denominator]`` -> pooled values; rows that underflowed go to ``redo``."""
    pooled, denominator = sums[:, :-1], sums[:, -1]
    underflow = denominator < _UNDERFLOW
    pooled /= np.where(underflow, 1.0, denominator)[:, None]
    rows = np.flatnonzero(underflow)
    if rows.size:  # every weight underflowed: the log-space path, with the row-max shift
        pooled[rows] = redo(rows)
    return pooled


def _unit_values(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``V / scale`` with ``|V / scale| <= 2`` per column, and the ``scale``.

    The pooled sums ``sum_i a_i V_i`` add up to n terms with ``a_i <= 1``
    before they are normalised: values near the float64 maximum would overflow
    to inf.  Powers of two scale exactly, so results are otherwise unchanged.
    """
    V = np.asarray(V, dtype=np.float64)
    _, exponent = np.frexp(np.abs(V).max(axis=0, initial=0.0))
    scale = np.ldexp(1.0, exponent - 1)
    return V / scale, scale


def _shifted_log_weights(log_w: np.ndarray) -> np.ndarray:
    """``log w - max log w`` (so every log weight is <= 0), with -inf as -1e300.

    BLAS may turn an infinity into NaN; ``exp(-1e300)`` is 0 just the same.
    """
    return np.maximum(log_w - log_w.max(), -1e300)


def _pool_rows(A: np.ndarray, row_max: np.ndarray, V: np.ndarray) -> np.ndarray:
    alpha, empty = _softmax_rows(A, row_max)
    pooled = alpha @ V
    pooled[empty] = np.nan
    return pooled


def _budget(n_jobs: int | None, working_memory: float | None) -> tuple[int, float]:
    """Worker count and the memory budget of each, in MiB."""
    workers = effective_n_jobs(n_jobs)
    if working_memory is None:
        working_memory = get_config()["working_memory"]
    return workers, working_memory / workers


def _dense_chunk_rows(n: int, budget_mib: float) -> int:
    """Rows per brute-force chunk: within the budget, and small enough for the cache."""
    rows = get_chunk_n_rows(row_bytes=_BYTES_PER_PAIR * max(n, 1), working_memory=budget_mib)
    return max(1, min(rows, _MAX_CHUNK_PAIRS // max(n, 1)))


def _map_chunks(
    fn: Callable[[slice, np.ndarray], object],
    Q: np.ndarray | None,
    train: TrainSet,
    rows: int,
    workers: int,
    out: np.ndarray | None = None,
) -> list | np.ndarray:
    """Apply ``fn(chunk, Q[chunk] - center)`` over chunks of ``rows`` queries, in threads.

    ``Q=None`` queries the (already centred) training points themselves.  The
    results fill ``out[chunk]`` if given, else come back as a list in order.
    BLAS runs single-threaded inside: the products of a chunk are thin (inner
    dimension d + 2) and short, and BLAS threads would spin against the
    exponential pass and against our own worker threads for the cores.
    """
    m = train.n_samples if Q is None else Q.shape[0]
    slices = [slice(start, min(start + rows, m)) for start in range(0, m, rows)]
    results = [None] * len(slices)

    def run(indices):
        for i in indices:
            chunk = slices[i]
            Qc = train.X[chunk] if Q is None else Q[chunk] - train.center
            results[i] = fn(chunk, Qc)
            if out is not None:
                out[chunk] = results[i]
                results[i] = None

    workers = min(workers, len(slices))
    with _single_threaded_blas():
        if workers <= 1:
            run(range(len(slices)))
        else:
            batches = [range(len(slices))[s] for s in gen_even_slices(len(slices), workers)]
            # run() fills shared arrays: threads, whatever the active joblib backend.
            Parallel(n_jobs=workers, prefer="threads", require="sharedmem")(
                delayed(run)(b) for b in batches
            )
    return results if out is None else out


@functools.cache
def _blas_controller() -> ThreadpoolController:
    """One controller for the process (building one scans the loaded libraries)."""
    return ThreadpoolController()


# The BLAS thread count is process-wide.  Calls that overlap (predict from several
# user threads) must not each set and restore it: a call starting while another
# holds the limit would record 1 as the "original" count and restore it for good,
# leaving BLAS single-threaded for the rest of the process.  Only the call that
# finds no limit in place sets it, and restores it when it leaves.
_blas_lock = threading.Lock()
_blas_limited = [False]


@contextlib.contextmanager
def _single_threaded_blas():
    with _blas_lock:
        first = not _blas_limited[0]
        _blas_limited[0] = True
    if not first:
        yield
        return
    try:
        with _blas_controller().limit(limits=1, user_api="blas"):
            yield
    finally:
        with _blas_lock:
            _blas_limited[0] = False


def _run(Q, train, log_w, kernel, options, *, tree, dense, out=None, factor=1.0):
    """Map ``tree(chunk, Qc, margins)`` or ``dense(chunk, Qc)`` over query chunks.

    The one dispatch between the tree and the brute-force paths: chunk sizes
    come from the memory budget (``options``: rtol, n_jobs, working_memory),
    for trees from the neighbour counts of a probe of the queries (at bandwidth
    multiple ``factor``, the widest a caller will use).
    """
    rtol, n_jobs, working_memory = options
    workers, budget = _budget(n_jobs, working_memory)
    if not train.trees:
        rows = _dense_chunk_rows(train.n_samples, budget)
        return _map_chunks(dense, Q, train, rows, workers, out)
    margins = _tree_margins(train, log_w, rtol)
    source = train.X if Q is None else Q
    probe = source[:: max(1, len(source) // _PROBE_QUERIES)][:_PROBE_QUERIES]
    probe = probe if Q is None else probe - train.center
    rows = _tree_chunk_rows(probe, train, log_w, kernel, margins, budget, factor)
    return _map_chunks(functools.partial(tree, margins=margins), Q, train, rows, workers, out)


# ----------------------------------------------------------------- tree path
# Bytes per neighbour on the tree path: index, row id, squared distance, log
# weight, weight (8 each) and the COO sums' temporaries, plus the two gathered
# rows of d features (query and training point) of the distance computation.
_BYTES_PER_NEIGHBOUR = 64
_BYTES_PER_NEIGHBOUR_FEATURE = 16
# Queries whose neighbour counts size the tree path's chunks.
_PROBE_QUERIES = 256
_MAX_TREE_CHUNK = 4096


def _lengths(arrays: np.ndarray) -> np.ndarray:
    """Lengths of the arrays of an object array (as ``query_radius`` returns)."""
    return np.fromiter(map(len, arrays), dtype=np.intp, count=len(arrays))


class _GroupTree:
    """A scikit-learn tree over some training rows (one group, e.g. one class)."""

    def __init__(self, X: np.ndarray, rows: np.ndarray, algorithm: str, leaf_size: int):
        self.rows = rows
        self.tree = _TREES[algorithm](X[rows], leaf_size=leaf_size)

    def nearest(self, Q: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
        """Distance to the nearest point, skipping ``exclude`` (by index); inf if none."""
        k = min(1 if exclude is None else 2, len(self.rows))
        dist, ind = self.tree.query(Q, k=k)
        if exclude is None:
            return dist[:, 0]
        other = self.rows[ind] != exclude[:, None]
        d_nn = dist[np.arange(len(Q)), np.argmax(other, axis=1)]
        return np.where(other.any(axis=1), d_nn, np.inf)

    def within(self, Q: np.ndarray, radius: np.ndarray):
        """``(row, col)`` of every point within ``radius`` of each query.

        Without distances: query_radius is a sixth faster without them, and
        concatenating a second array per query costs more than recomputing
        the squared distances of the pairs (:func:`_pair_sq_distances`).
        """
        ind = self.tree.query_radius(Q, radius)
        row = np.repeat(np.arange(len(Q)), _lengths(ind))
        if not len(Q):
            return row, np.empty(0, np.intp)
        return row, self.rows[np.concatenate(ind)]


def _concat(parts):
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _pair_sq_distances(Q: np.ndarray, X: np.ndarray, row: np.ndarray, col: np.ndarray):
    """``|Q[row] - X[col]|^2`` per pair, by direct differences.

    ``np.take`` along axis 0 gathers whole rows (one cache miss per training
    point, and measured 2.5x faster than fancy indexing ``X[col]``).
    """
    diff = np.take(Q, row, axis=0)
    diff -= np.take(X, col, axis=0)
    return np.einsum("ij,ij->i", diff, diff)


def _tree_margins(train: TrainSet, log_w: np.ndarray, rtol: float) -> list[float]:
    """Per tree, ``log(rtol) + log(smallest weight) - log(total weight)`` of its points.

    Everything of a tree outside radius ``r`` weighs at most ``W K(r^2)`` (``W``
    its total weight) and its included mass is at least the nearest point's own
    term ``w_min K(s_nn)``: stopping where ``log K(r^2) = log K(s_nn) + margin``
    keeps the excluded mass below ``rtol`` times the included one, tree by tree
    (so each class of the classifier keeps its own log-probability).
    """
    return [_log_margin(log_w[t.rows], rtol) for t in train.trees]


def _log_margin(log_w: np.ndarray, rtol: float) -> float:
    """``log(rtol) + log(smallest positive weight) - log(total weight)`` of these points."""
    positive = log_w[np.isfinite(log_w)]
    with np.errstate(divide="ignore"):
        return float(np.log(rtol) + positive.min() - logsumexp(positive))


def _tree_radius(Q, tree, kernel, margin, factor=1.0, exclude=None) -> np.ndarray:
    """Search radius of each query in one tree (see :func:`_tree_log_attention`)."""
    m = len(Q)
    if kernel.compact:
        return np.full(m, factor * kernel.support)
    if margin == -np.inf:  # rtol = 0: every point
        return np.full(m, np.inf)
    d_nn = tree.nearest(Q, exclude)
    s_nn = np.where(np.isfinite(d_nn), d_nn / factor, 0.0) ** 2
    level = kernel.log_profile(s_nn) + margin
    radius = factor * np.sqrt(kernel.log_profile_inverse(level))
    # Far from every point (s_nn >> |margin|) the margin is lost to rounding
    # and the radius is d_nn itself, which query_radius may round below the
    # nearest point's distance: always reach a hair past the nearest point.
    return np.maximum(radius, np.where(np.isfinite(d_nn), d_nn * (1 + 1e-9), 0.0))


def _tree_neighbours(Q, train, kernel, margins, factor=1.0, exclude=None):
    """Return ``(row, col, s)``: every training point within each query's radius.

    ``s`` is the squared distance in units of ``factor`` times the tree's
    bandwidth; :func:`_tree_log_attention` describes the radius.
    """
    parts = [
        tree.within(Q, _tree_radius(Q, tree, kernel, margin, factor, exclude))
        for tree, margin in zip(train.trees, margins, strict=True)
    ]
    row, col = _concat(parts)
    if exclude is not None:
        keep = col != exclude[row]
        row, col = row[keep], col[keep]
    s = _pair_sq_distances(Q, train.X, row, col)
    s /= factor * factor
    return row, col, s


def _tree_log_attention(
    Q, train, log_w, kernel, fallback, margins, factor=1.0, exclude=None, return_shift=False
):
    """Sparse log attention of a chunk: ``(row, col, a, row_max)`` in COO form.

    As on the brute path, ``a`` is relative to each row's largest ``log K``
    (returned last with ``return_shift=True``), so that ``log w`` is not
    rounded away far from every point.

    The search radius, for bandwidths ``factor`` times the tree's, is the
    kernel's support for compact kernels (exact).  For infinite support it is
    chosen per query and per tree from the query's nearest neighbour in that
    tree and the tree's margin (see :func:`_tree_margins`), so the excluded mass
    is at most ``rtol`` times the included one and the prediction moves by at
    most ``rtol * (max y - min y)``.  ``exclude`` drops one training index per
    row (leave-one-out), and empty rows follow ``fallback`` as on the brute path.
    """
    m = len(Q)
    row, col, s = _tree_neighbours(Q, train, kernel, margins, factor, exclude)
    a = kernel.log_profile(s)
    k_max = np.full(m, -np.inf)
    np.maximum.at(k_max, row, a)
    k_max = np.where(np.isfinite(k_max), k_max, 0.0)
    a -= k_max[row]
    a += log_w[col]
    row_max = np.full(m, -np.inf)
    np.maximum.at(row_max, row, a)
    empty = np.flatnonzero(row_max == -np.inf)
    if empty.size and fallback == "nearest":
        Qe = Q[empty]
        ex = None if exclude is None else exclude[empty]
        d_nn = np.min([tree.nearest(Qe, ex) for tree in train.trees], axis=0)
        found = np.isfinite(d_nn)
        # query and query_radius may round a distance differently: search a hair
        # wider, then keep the points at the smallest distance returned.
        radius = np.where(found, d_nn * (1 + 1e-9) + 1e-300, 0.0)
        e_row, e_col = _concat([tree.within(Qe, radius) for tree in train.trees])
        e_sq = _pair_sq_distances(Qe, train.X, e_row, e_col)
        if ex is not None:
            e_sq[e_col == ex[e_row]] = np.inf
        nearest = np.full(len(Qe), np.inf)
        np.minimum.at(nearest, e_row, e_sq)
        tie = (e_sq == nearest[e_row]) & np.isfinite(e_sq)
        e_row, e_col = empty[e_row[tie]], e_col[tie]
        row, col = np.concatenate([row, e_row]), np.concatenate([col, e_col])
        a = np.concatenate([a, log_w[e_col]])
        np.maximum.at(row_max, e_row, log_w[e_col])
    return (row, col, a, row_max, k_max) if return_shift else (row, col, a, row_max)


def _coo_exp(row, a, row_max):
    """``exp(a - row_max)`` per entry; empty rows (max -inf) contribute nothing."""
    return np.exp(a - np.where(np.isfinite(row_max), row_max, 0.0)[row])


def _coo_sums(row, col, e, V, m):
    """Return ``[sum e V, sum e]`` per row from COO entries: the sparse ``_weighted_sums``.

    Straight from the entries: building a sparse matrix would sort them first
    (measured: a tenth of a tree predict at n = 1e6).  A bincount of no entries
    at all comes back as integers, hence the cast.
    """
    Vc = np.take(V, col, axis=0)
    columns = [np.bincount(row, weights=e * Vc[:, j], minlength=m) for j in range(V.shape[1])]
    columns.append(np.bincount(row, weights=e, minlength=m))
    return np.column_stack(columns).astype(np.float64, copy=False)


def _tree_pool_rows(row, col, a, row_max, V):
    sums = _coo_sums(row, col, _coo_exp(row, a, row_max), V, len(row_max))
    pooled, denominator = sums[:, :-1], sums[:, -1]
    empty = row_max == -np.inf
    pooled /= np.where(empty, 1.0, denominator)[:, None]
    pooled[empty] = np.nan
    return pooled


def _tree_group_rows(row, col, a, row_max, groups, n_groups):
    m = len(row_max)
    key = row * n_groups + groups[col]
    group_max = np.full(m * n_groups, -np.inf)
    np.maximum.at(group_max, key, a)
    shift = np.where(np.isfinite(group_max), group_max, 0.0)
    sums = np.bincount(key, weights=np.exp(a - shift[key]), minlength=m * n_groups)
    with np.errstate(divide="ignore"):
        return (np.log(sums) + shift).reshape(m, n_groups)


def _tree_chunk_rows(probe, train, log_w, kernel, margins, budget_mib, factor=1.0) -> int:
    """Rows per tree chunk: the probed neighbour count fills at most half the budget.

    The probe only counts (``query_radius(count_only=True)``: no neighbour
    lists).  A chunk of queries with many more neighbours than the probe can
    exceed the budget; it never holds more than ``rows * n_active`` entries.
    """
    count = sum(
        tree.tree.query_radius(
            probe, _tree_radius(probe, tree, kernel, margin, factor), count_only=True
        ).sum()
        for tree, margin in zip(train.trees, margins, strict=True)
    )
    mean_count = max(count / max(len(probe), 1), 1.0)
    per_neighbour = _BYTES_PER_NEIGHBOUR + _BYTES_PER_NEIGHBOUR_FEATURE * train.X.shape[1]
    entries = budget_mib * 2**20 / per_neighbour / 2
    return int(np.clip(entries / mean_count, 1, _MAX_TREE_CHUNK))


# ------------------------------------------------------ choice of algorithm
# The rules of algorithm="auto", in one place.  Crossovers measured on the
# project's 2-core machine over 240 configurations (d in 1..12, n in 1e3..1e5,
# epanechnikov and gaussian, 1-10% of the data per neighbourhood):
# benchmarks/bench_trees.py, table in docs/benchmarks.md.  With these rules no
# configuration was more than 1.5x slower than the better of brute and tree.
# The smallest n measured: below it brute force takes well under a millisecond
# per thousand queries, whatever a tree would save.
_TREE_MIN_SAMPLES = 1_000
# A tree pays while a query's neighbourhood (the kernel's support, or the
# truncation radius of an infinite-support kernel) holds at most this share of
# the data; the share shrinks with the dimension, and beyond 12 features (not
# measured) a radius query visits most leaves.
_TREE_MAX_FRACTION = {5: 0.15, 8: 0.07, 12: 0.03}
# Ball trees beat KD-trees in 236 of the 240 configurations (median 1.29x).
_TREE = "ball_tree"
# Probe: queries from this many training rows, against at most this many keys.
_PROBE_ROWS = 64
_PROBE_KEYS = 16_384


def neighbour_fraction(X: np.ndarray, log_w: np.ndarray, kernel: Kernel, rtol: float) -> float:
    """Mean share of the training set inside a query's tree-path radius.

    Probed by brute force from up to 64 evenly spaced training rows taken as
    queries (each leaving itself out, as a fresh query would) against at most
    16,384 evenly spaced training rows, so the probe's memory is bounded.
    """
    n = len(X)
    keys = np.unique(np.linspace(0, n - 1, min(_PROBE_KEYS, n)).astype(np.intp))
    rows = keys[np.unique(np.linspace(0, len(keys) - 1, min(_PROBE_ROWS, n)).astype(np.intp))]
    train = TrainSet(X[keys])
    with _single_threaded_blas():
        S = _sq_distances(X[rows] - train.center, train, kernel)
    S[np.arange(len(rows)), np.searchsorted(keys, rows)] = np.inf
    if kernel.compact:
        radius_sq = np.full(len(rows), kernel.support**2)
    else:
        level = kernel.log_profile(S.min(axis=1)) + _log_margin(log_w, rtol)
        radius_sq = kernel.log_profile_inverse(level)
    return float(np.mean(S <= radius_sq[:, None]))


def _folds(train: TrainSet, kernel: Kernel) -> bool:
    """Whether brute force will take the folded single-GEMM path (see ``_FoldedKeys``).

    Queries are not known at fit: the 99th percentile of the training norms
    stands for theirs.  Folded, brute force costs about 2 ns per pair, so it
    wins over a tree for every neighbourhood size measured.
    """
    if kernel.log_slope is None or not train.n_samples:
        return False
    typical = float(np.percentile(train.sq_norms, 99))
    error = abs(kernel.log_slope) * (train.X.shape[1] + 2) * _EPS
    return error * (train.max_sq_norm + typical) <= _MAX_GEMM_ERROR


def choose_algorithm(X: np.ndarray, log_w: np.ndarray, kernel: Kernel, rtol: float) -> str:
    """Resolve algorithm="auto" for bandwidth-scaled training inputs ``X``."""
    n, d = X.shape
    limits = [share for max_d, share in _TREE_MAX_FRACTION.items() if d <= max_d]
    if n < _TREE_MIN_SAMPLES or not limits or _folds(TrainSet(X), kernel):
        return "brute"
    if neighbour_fraction(X, log_w, kernel, rtol) > limits[0]:
        return "brute"
    return _TREE


def pool(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    V: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    rtol: float = 1e-16,
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """Attention pooling ``sum_i alpha_i(q) V_i`` for every query.

    ``rtol`` bounds the truncation of infinite-support kernels on the tree
    path (see :func:`_tree_log_attention`); brute force is exact.

    Returns
    -------
    ndarray of shape (m, k)
        Pooled values; rows are NaN only for ``fallback="nan"`` queries that
        have no training point inside a compact kernel's support.
    """
    V, scale = _unit_values(V)
    folded = None
    if kernel.log_slope is not None and not train.trees:
        folded = _FoldedKeys(train, log_w, V, kernel.log_slope)

    # Compact kernels on the tree path sum in linear space: K <= 1 and weights
    # scaled to at most 1 cannot overflow, and a row whose sum underflows (or
    # is empty) is redone in log space.  Saves the log, the two row maxima and
    # the exp per neighbour (measured: a sixth of a tree predict at n = 1e6).
    weights = np.exp(_shifted_log_weights(log_w)) if kernel.compact else None

    def tree(chunk, Qc, margins):
        def log_space(r):
            rows = _tree_log_attention(Qc[r], train, log_w, kernel, fallback, margins)
            return _tree_pool_rows(*rows, V)

        if weights is None:
            return log_space(slice(None))
        row, col, s = _tree_neighbours(Qc, train, kernel, margins)
        e = kernel.profile(s)
        e *= np.take(weights, col)
        return _normalise_sums(_coo_sums(row, col, e, V, len(Qc)), log_space)

    def dense(chunk, Qc):
        sums = None if folded is None else folded.pooled_sums(Qc)
        if sums is None:
            return _pool_rows(*_log_attention(Qc, train, log_w, kernel, fallback), V)
        return _normalise_sums(
            sums, lambda r: _pool_rows(*_log_attention(Qc[r], train, log_w, kernel, fallback), V)
        )

    out = np.empty((Q.shape[0], V.shape[1]))
    options = (rtol, n_jobs, working_memory)
    return _run(Q, train, log_w, kernel, options, tree=tree, dense=dense, out=out) * scale


def attention(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    rtol: float = 1e-16,
    n_jobs: int | None = None,
    working_memory: float | None = None,
):
    """Return the (m, n) matrix of normalised attention weights (rows sum to 1).

    Dense on the brute path, a CSR matrix on the tree path; NaN rows where
    ``fallback="nan"`` leaves a query empty, on both.
    The temporaries stay within the budget; the output itself is the answer.
    """
    m, n = Q.shape[0], train.n_samples

    def tree(chunk, Qc, margins):
        row, col, a, row_max = _tree_log_attention(Qc, train, log_w, kernel, fallback, margins)
        e = _coo_exp(row, a, row_max)
        denominator = np.bincount(row, weights=e, minlength=len(Qc))
        e /= np.where(denominator > 0, denominator, 1.0)[row]
        empty = np.flatnonzero(row_max == -np.inf)
        if empty.size:  # fallback="nan": NaN rows, as on the brute path
            row = np.concatenate([row, np.repeat(empty, n)])
            col = np.concatenate([col, np.tile(np.arange(n), empty.size)])
            e = np.concatenate([e, np.full(empty.size * n, np.nan)])
        return csr_matrix((e, (row, col)), shape=(len(Qc), n))

    def dense(chunk, Qc):
        alpha, empty = _softmax_rows(*_log_attention(Qc, train, log_w, kernel, fallback))
        alpha[empty] = np.nan
        return alpha

    options = (rtol, n_jobs, working_memory)
    if not train.trees:
        out = np.empty((m, n))
        return _run(Q, train, log_w, kernel, options, tree=tree, dense=dense, out=out)
    blocks = _run(Q, train, log_w, kernel, options, tree=tree, dense=dense)
    return sparse_vstack(blocks, format="csr") if blocks else csr_matrix((0, n))


def log_group_sums(
    Q: np.ndarray,
    train: TrainSet,
    log_w: np.ndarray,
    starts: np.ndarray,
    kernel: Kernel,
    *,
    fallback: str = "nearest",
    rtol: float = 1e-16,
    n_jobs: int | None = None,
    working_memory: float | None = None,
    relative: bool = False,
) -> np.ndarray:
    """``log sum_{i in g} w_i K_i(q)`` for contiguous groups of training rows.

    ``relative=True`` leaves out a constant per query (the largest ``log K``
    of the row): what normalised probabilities need, and exact where the
    absolute value (``~ -1e30`` far from every point) would round the
    differences between groups away.

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
    groups = np.repeat(np.arange(len(starts)), counts)

    def tree(chunk, Qc, margins):
        *rows, k_max = _tree_log_attention(
            Qc, train, log_w, kernel, fallback, margins, return_shift=True
        )
        sums = _tree_group_rows(*rows, groups, len(starts))
        return sums if relative else sums + k_max[:, None]

    def dense(chunk, Qc):
        S = _sq_distances(Qc, train, kernel)
        A, _, k_max = _log_attention_sq(S, log_w, kernel, fallback, return_shift=True)
        group_max = np.maximum.reduceat(A, starts, axis=1)
        shift = np.where(np.isfinite(group_max), group_max, 0.0)
        A -= np.repeat(shift, counts, axis=1)
        np.exp(A, out=A)
        sums = np.add.reduceat(A, starts, axis=1)
        with np.errstate(divide="ignore"):
            log_sums = np.log(sums) + shift
        return log_sums if relative else log_sums + k_max[:, None]

    out = np.empty((Q.shape[0], len(starts)))
    options = (rtol, n_jobs, working_memory)
    return _run(Q, train, log_w, kernel, options, tree=tree, dense=dense, out=out)


def loo_pool(
    train: TrainSet,
    log_w: np.ndarray,
    V: np.ndarray,
    kernel: Kernel,
    factors: np.ndarray,
    *,
    fallback: str = "nearest",
    rtol: float = 1e-16,
    n_jobs: int | None = None,
    working_memory: float | None = None,
) -> np.ndarray:
    """Closed-form leave-one-out pooling for several bandwidth multiples at once.

    With full-sample sums ``D_i = sum_k w_k K_ik`` and ``S_i = sum_k w_k K_ik V_k``
    the leave-one-out prediction is ``(S_i - w_i K(0) V_i) / (D_i - w_i K(0))``.
    It is computed without that subtraction (which cancels when the point's own
    term dominates): the point is removed from its row of log attention by
    index, then the softmax is taken as usual.  On the brute path, for
    bandwidth ``f * h`` the squared scaled distances are those at ``h`` divided
    by ``f^2``, so each chunk computes its distances once and only the kernel
    per multiple, as RidgeCV reuses one decomposition for every alpha.  On the
    tree path each multiple has its own radius query.

    Parameters
    ----------
    train : TrainSet
        Training inputs scaled by the base bandwidth ``h``.
    log_w, V, kernel
        As for :func:`pool`.
    factors : ndarray of shape (n_factors,)
        Bandwidth multiples to evaluate.
    fallback, rtol, n_jobs, working_memory
        As for :func:`pool`.

    Returns
    -------
    ndarray of shape (n_factors, n, k)
        Leave-one-out pooled values at every training point, per multiple.
    """
    V, scale = _unit_values(V)
    factors = np.asarray(factors, dtype=np.float64)
    slope = kernel.log_slope
    shifted = _shifted_log_weights(log_w)
    XT = np.ascontiguousarray(train.X.T)

    def tree(chunk, Qc, margins):
        exclude = np.arange(chunk.start, chunk.stop)
        pooled = np.empty((len(Qc), len(factors), V.shape[1]))
        for t, factor in enumerate(factors):
            rows = _tree_log_attention(Qc, train, log_w, kernel, fallback, margins, factor, exclude)
            pooled[:, t] = _tree_pool_rows(*rows, V)
        return pooled

    def dense(chunk, Qc):
        exclude = np.arange(chunk.start, chunk.stop)
        pooled = np.empty((len(Qc), len(factors), V.shape[1]))
        # log K = c s: the log weights are one multiply-add, at most 0.
        sums = None
        if slope is not None:
            slopes = slope / factors**2
            sums = _exp_sums_slopes(Qc, train, XT, V, slopes, shifted, exclude, kernel)
        S = functools.cache(lambda: _sq_distances(Qc, train, kernel))  # only if needed
        for t, factor in enumerate(factors):

            def general(r, factor=factor):
                A_r, max_r = _log_attention_sq(
                    S()[r] / factor**2, log_w, kernel, fallback, exclude[r]
                )
                return _pool_rows(A_r, max_r, V)

            if sums is None:
                pooled[:, t] = general(slice(None))
            else:
                pooled[:, t] = _normalise_sums(sums[:, t], general)
        return pooled

    out = np.empty((train.n_samples, len(factors), V.shape[1]))
    options = (rtol, n_jobs, working_memory)
    _run(None, train, log_w, kernel, options, tree=tree, dense=dense, out=out,
         factor=factors.max(initial=1.0))  # fmt: skip
    return out.transpose(1, 0, 2) * scale


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
    with _single_threaded_blas():
        return _loo_loss_grad(train, log_w, V, kernel, rows, loss_fn, row_weights)


def _loo_loss_grad(train, log_w, V, kernel, rows, loss_fn, row_weights):
    compiled = _compiled()
    if compiled is not None and kernel.log_slope is not None:
        result = _loo_loss_grad_compiled(
            compiled, train, log_w, V, kernel.log_slope, rows, loss_fn, row_weights
        )
        if result is not None:
            return result
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


def _loo_loss_grad_compiled(compiled, train, log_w, V, slope, rows, loss_fn, row_weights):
    """:func:`_loo_loss_grad` for ``log K = slope * s`` in two compiled passes.

    The first pass gives the predictions (weights ``w_k exp(slope s_ik)``,
    never stored), the loss gives ``R``, the second pass recomputes the
    weights and sums the gradient terms.  None if some row's weights all
    underflow (the caller's log-space path handles it).
    """
    Zb = np.ascontiguousarray(train.X[rows])
    XT = np.ascontiguousarray(train.X.T)
    w = np.exp(_shifted_log_weights(log_w))
    V_unit, scale = _unit_values(V)
    WVT = np.ascontiguousarray((w[:, None] * V_unit).T)
    sums = np.empty((len(rows), 1, V.shape[1] + 1))
    compiled.exp_sums_chained(Zb, XT, np.array([slope]), np.zeros(1, bool), w, WVT, rows, sums)
    numerators, denominators = sums[:, 0, :-1], sums[:, 0, -1]
    if denominators.min(initial=np.inf) < _UNDERFLOW:
        return None
    P = numerators / denominators[:, None] * scale
    losses, R = loss_fn(P, rows)
    r = row_weights / row_weights.sum()
    grad = np.zeros(Zb.shape[1])
    RP = np.einsum("ik,ik->i", R, P)
    row_coef = r * slope / denominators
    compiled.loo_grad(Zb, XT, slope, w, np.ascontiguousarray(V.T), R, RP, rows, row_coef, grad)
    return float(r @ losses), grad
