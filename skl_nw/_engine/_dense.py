"""The brute-force path: distances, log-kernel blocks, the folded GEMM and the exp sums.

Every function takes a chunk of centred queries against the whole stored
training set and returns arrays of the chunk's size; nothing here knows
trees, threads or estimators.
"""

from __future__ import annotations

import numpy as np

from .._kernels import Kernel
from ._chunks import chunk_rows
from ._discrete import left_out
from ._loader import compiled

_EPS = np.finfo(np.float64).eps
# Bytes of temporaries per (query, training point) pair in a chunk: the
# squared distances (8), the log kernel and its powers (16) and the
# temporaries of a log-profile (sqrt, cos, log: up to 24).
BYTES_PER_PAIR = 48
# Cap on pairs per chunk, so a chunk's arrays stay in cache (chunks of ~50 queries x
# 20k points beat larger ones; measured once, see docs/benchmarks.md "Dense engine",
# "Tuned constants").
MAX_CHUNK_PAIRS = 1 << 20
# The same for the fused compiled kernels, which write no (m, n) block: there each
# chunk's fixed Python steps count, and a larger cap only enlarges the log-space block
# of the rows a chunk redoes, those whose sums underflow (measured once, see
# docs/benchmarks.md "Dense engine", "Tuned constants").
MAX_FUSED_CHUNK_PAIRS = 1 << 22
# Worst admissible absolute rounding error of a squared distance (or of a log
# weight) computed by the BLAS expansion; beyond it the chunk uses direct
# differences.  An error e in a log weight is a relative error e in the weight.
MAX_GEMM_ERROR = 1e-12
# At most this many features, direct differences cost no more than a GEMM.
_DIRECT_MAX_FEATURES = 2
# Row sums below this have lost relative precision to subnormals: redo with a shift.
UNDERFLOW = 1e-280
# Above this many value columns the fused exp-and-sums kernels on a given log-weight
# block (exp_sums, exp_sums_coded) lose to the compiled exp followed by a BLAS product
# (measured once, before their tiles; see docs/benchmarks.md "Dense engine",
# "Tuned constants").
_FUSED_MAX_COLUMNS = 24
# A kernel value squared this many times in a row has a relative error of up to
# 2^6 times the exp's (measured: 3.2e-14): then a chain restarts with an exp.
MAX_SQUARINGS = 6
# From this many continuous features the compiled predict takes its log weights in
# register tiles (``_compiled_tiled``) instead of a one-pass dot product per row: up to
# d = 3 the one pass is as fast, from d = 4 it takes a pass per feature and the tiles
# win; see ``python -m benchmarks engine --only kernels``.
TILED_MIN_FEATURES = 4


def dense_chunk_rows(
    n: int, budget_mib: float, fused_m: int | None = None, workers: int = 1
) -> int:
    """Rows per brute-force chunk: within the budget, and small enough for the cache.

    ``fused_m``: the ``m`` queries go to a fused kernel (``MAX_FUSED_CHUNK_PAIRS``),
    split in at least one chunk per worker.
    """
    rows = chunk_rows(BYTES_PER_PAIR * max(n, 1), budget_mib)
    if fused_m is None:
        return max(1, min(rows, MAX_CHUNK_PAIRS // max(n, 1)))
    per_worker = -(-fused_m // max(workers, 1))
    return max(1, min(rows, MAX_FUSED_CHUNK_PAIRS // max(n, 1), per_worker))


def sq_distances(Q: np.ndarray, train, kernel: Kernel, relative: bool = False) -> np.ndarray:
    """Squared distances between centred queries ``Q`` and the stored training inputs.

    With the compiled kernels, from ``TILED_MIN_FEATURES`` features, direct
    differences in register tiles (exact to rounding; faster than a GEMM of
    inner dimension 4-16, level with it beyond: ``python -m benchmarks engine
    --only paths``, Parzen).  Otherwise the BLAS expansion
    ``|q|^2 - 2 q.x + |x|^2``, whose absolute rounding error is about
    ``(d + 2) eps (|q|^2 + |x|^2)``; when that could exceed
    ``MAX_GEMM_ERROR`` (data far from the centre in bandwidth units), or for
    so few features that it saves nothing, the chunk sums squared
    differences feature by feature instead (exact to rounding, no (m, n, d)
    tensor).  Kernels that are not smooth in ``s`` at 0 (``exact_near_zero``)
    also get their smallest distances recomputed directly, and so, with
    ``relative``, does every distance whose relative error could pass
    ``MAX_GEMM_ERROR`` (a span divides them by each query's radius, which is 0
    on top of repeated rows and tiny beside them).
    """
    X = train.X
    Q = Q[:, : train.d]
    m, d = Q.shape
    kernels = compiled()
    if kernels is not None and d >= TILED_MIN_FEATURES:
        S = np.empty((m, X.shape[0]))
        kernels.sq_distances_tiled(pad_features(Q), padded_columns(train), S)
        return S
    q_sq = np.einsum("ij,ij->i", Q, Q)
    gemm_error = (d + 2) * _EPS * (float(q_sq.max(initial=0.0)) + train.max_sq_norm)
    if d <= _DIRECT_MAX_FEATURES or gemm_error > MAX_GEMM_ERROR:
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
    # sqrt(s + e) - sqrt(s) <= e / (2 sqrt(s)): exact below this s.
    below = (gemm_error / 2e-12) ** 2 if kernel.exact_near_zero else 0.0
    if relative:
        below = max(below, gemm_error / MAX_GEMM_ERROR)
    if below > 0.0:
        rows, cols = np.nonzero(S < below)
        if rows.size:
            diff = Q[rows] - X[cols]
            S[rows, cols] = np.einsum("ij,ij->i", diff, diff)
    return S


def log_kernel_block(S, log_w, kernel, fallback, exclude=None, D=None):
    """``B = log K(S) + D - shift`` per row, with the fallback applied to empty rows.

    ``D`` (optional) is the log of the discrete kernels
    (:func:`~skl_nw._engine._discrete.discrete_block`); the points it leaves
    out (:func:`~skl_nw._engine._discrete.left_out`) get ``B = -inf``.

    ``shift`` is each row's largest ``log K`` over points of positive weight
    (0 where there is none), so ``B <= 0`` there: adding ``log w`` to ``B``
    keeps ``log w`` exact even far from every point (``log K ~ -1e30``), where
    adding it to ``log K`` directly would round it away.  ``exclude`` (one
    stored index per row) removes that point *by index*, never by zero
    distance: the leave-one-out sums, in which a duplicate still counts.

    A row is *empty* when no point of positive weight has ``K > 0`` (a
    compact kernel's support holds none).  ``fallback="nearest"`` gives it
    the ``h -> 0`` limit: ``B = 0`` at the nearest point(s) of positive
    weight, ``-inf`` elsewhere, so ties share in proportion to their
    weights; ``"nan"`` leaves it empty (every sum 0) for the caller.

    Returns
    -------
    B : ndarray of shape (m, n)
    shift : ndarray of shape (m,)
    empty : ndarray of int
        The empty rows.
    """
    B = kernel.log_profile(S)
    active = np.isfinite(log_w)
    out = None
    if D is not None:
        B += D
        Dc = D if active.all() else np.where(active, D, -np.inf)
        if exclude is not None:
            Dc = Dc.copy() if Dc is D else Dc
            Dc[np.arange(len(S)), exclude] = -np.inf
        out = left_out(D, Dc.max(axis=1, keepdims=True, initial=-np.inf))
        B[out] = -np.inf
    if exclude is not None:
        B[np.arange(len(S)), exclude] = -np.inf
    shift = (B if active.all() else np.where(active, B, -np.inf)).max(axis=1)
    empty = np.flatnonzero(~np.isfinite(shift))
    shift[empty] = 0.0
    B -= shift[:, None]
    if empty.size and fallback == "nearest":
        N = nearest_block(S[empty], log_w, None if exclude is None else exclude[empty],
                          None if out is None else out[empty])  # fmt: skip
        if D is not None:  # the nearest point(s), weighted by their discrete kernels
            N += D[empty]
            N -= np.max(N, axis=1, initial=-np.inf, keepdims=True).clip(min=-1e300)
        B[empty] = N
    return B, shift, empty


def nearest_block(S: np.ndarray, log_w: np.ndarray, exclude=None, left=None) -> np.ndarray:
    """Return the ``h -> 0`` limit of a log-kernel block: 0 at the nearest point(s), else -inf.

    Only points of positive weight count, and not ``exclude`` (by index) nor
    those ``left`` (a boolean block) leaves out; ties all get 0, so they
    share in proportion to their weights.
    """
    S = S.copy()
    S[:, ~np.isfinite(log_w)] = np.inf
    if left is not None:
        S[left] = np.inf
    if exclude is not None:
        S[np.arange(len(S)), exclude] = np.inf
    nearest = S == S.min(axis=1, keepdims=True)
    nearest &= np.isfinite(S)  # a lone point has no neighbour at all
    return np.where(nearest, 0.0, -np.inf)


def softmax_rows(B: np.ndarray, log_w: np.ndarray) -> np.ndarray:
    """Attention weights from a log-kernel block, in place: ``softmax(B + log w)`` per row.

    The largest term of each row is ``exp(0) = 1``, so no row sum is below 1:
    no ``0 / 0`` however small the bandwidth.  An empty row (``fallback="nan"``)
    stays all zeros.
    """
    B += log_w
    r = B.max(axis=1)
    B -= np.where(np.isfinite(r), r, 0.0)[:, None]
    np.exp(B, out=B)
    B /= np.maximum(B.sum(axis=1), 1.0)[:, None]
    return B


def block_sums(T: np.ndarray, V: np.ndarray, starts: np.ndarray, mult: np.ndarray | None = None):
    """Log-scaled sums of ``exp(T)`` per group: ``(log_scale (m, G), scaled (m, G, k + 1))``.

    ``sum_{i in g} exp(T_i) [V_i, 1] = exp(log_scale_g) * scaled_g``, with
    ``log_scale_g`` the group's largest ``T`` (``-inf`` if the group's sum is
    exactly 0), so that the largest term of a non-empty group is
    ``exp(0) = 1``: no sum underflows however far the query.  ``mult``
    multiplies the terms after the exponential (a kernel derivative).  ``T``
    is overwritten.
    """
    m, n = T.shape
    k, G = V.shape[1], len(starts)
    if G == 1:
        r = T.max(axis=1)
        T -= np.where(np.isfinite(r), r, 0.0)[:, None]
        np.exp(T, out=T)
        if mult is not None:
            T *= mult
        return r[:, None], weighted_sums(T, V)[:, None, :]
    r = np.maximum.reduceat(T, starts, axis=1)
    T -= np.repeat(np.where(np.isfinite(r), r, 0.0), np.diff(np.append(starts, n)), axis=1)
    np.exp(T, out=T)
    if mult is not None:
        T *= mult
    scaled = np.empty((m, G, k + 1))
    scaled[:, :, k] = np.add.reduceat(T, starts, axis=1)
    if k:
        for g, (lo, hi) in enumerate(zip(starts, np.append(starts[1:], n), strict=True)):
            scaled[:, g, :k] = T[:, lo:hi] @ V[lo:hi]
    return r, scaled


def weighted_sums(A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Return ``[A @ V, A.sum(axis=1)]``, numerators and denominators.

    For one output a matrix-vector product and a row sum beat one matrix
    product against ``[V, 1]`` (measured once, see docs/benchmarks.md "Dense engine",
    "Tuned constants").
    """
    sums = np.empty((A.shape[0], V.shape[1] + 1))
    sums[:, :-1] = A @ V
    sums[:, -1] = A.sum(axis=1)
    return sums


def gemm_exact(slope: float, d: int, sq_norms: float | np.ndarray) -> bool | np.ndarray:
    """Whether the folded product's rounding stays within ``MAX_GEMM_ERROR``.

    The expansion ``|q|^2 - 2 q.x + |x|^2`` over ``d`` features, times the
    kernel's ``slope``, rounds to about ``|slope| (d + 2) eps sq_norms`` in a
    log weight, with ``sq_norms`` the largest squared query norm plus the
    largest training one (bandwidth units, about the training centre); an
    array of them gives one verdict each.
    """
    return abs(slope) * (d + 2) * _EPS * sq_norms <= MAX_GEMM_ERROR


def shifted_log_weights(log_w: np.ndarray) -> np.ndarray:
    """``log w - max log w`` (so every log weight is <= 0), with -inf as -1e300.

    BLAS may turn an infinity into NaN; ``exp(-1e300)`` is 0 just the same.
    """
    return np.maximum(log_w - log_w.max(), -1e300)


def padded_columns(train) -> np.ndarray:
    """``pad_features(train.X).T``, contiguous: made once per training set and kept on it.

    Kept with the ``X`` it came from: a set copied with new inputs
    (``TrainSet.rescaled``) makes its own.
    """
    cached = getattr(train, "_padded_columns", None)
    if cached is None or cached[0] is not train.X:
        cached = (train.X, np.ascontiguousarray(pad_features(train.X).T))
        train._padded_columns = cached
    return cached[1]


def pad_features(A: np.ndarray) -> np.ndarray:
    """Return ``A`` with zero columns appended up to a multiple of four (the tiled unit)."""
    pad = -A.shape[1] % 4
    if pad == 0:
        return np.ascontiguousarray(A)
    return np.ascontiguousarray(np.column_stack([A, np.zeros((len(A), pad))]))


def exp_sums(A, V, *, slope=1.0, offset=None, own=None) -> np.ndarray:
    """``[E @ V, E.sum(axis=1)]`` for ``E = exp(slope * A + offset)``, all of it ``<= 0``.

    ``own`` (one column per row) is left out of each row: leave-one-out by
    index.  The plain case (the folded predict) is one pass over ``A`` with the
    compiled kernel; otherwise numpy's passes (``A`` is then overwritten when
    ``slope == 1`` and there is no offset).
    """
    m, n = A.shape
    kernels = compiled()
    if kernels is not None and slope == 1.0 and offset is None and own is None:
        A = np.ascontiguousarray(A)
        if V.shape[1] > _FUSED_MAX_COLUMNS:  # the compiled exp, then BLAS for the columns
            kernels.exp_inplace(A.reshape(-1))
            return weighted_sums(A, V)
        sums = np.empty((m, V.shape[1] + 1))
        kernels.exp_sums(A, np.ascontiguousarray(V.T), sums)
        return sums
    if slope != 1.0 or offset is not None:
        A = A * slope
        A += 0.0 if offset is None else offset
    if own is not None:
        A[np.arange(m), own] = -np.inf
    np.exp(A, out=A)
    return weighted_sums(A, V)


def exp_into(S: np.ndarray, slope: float, out: np.ndarray) -> np.ndarray:
    """``out = exp(slope * S)`` for ``slope * S <= 0`` (the compiled exp where present)."""
    np.multiply(S, slope, out=out)
    kernels = compiled()
    if kernels is None or not out.flags.c_contiguous:
        return np.exp(out, out=out)
    kernels.exp_inplace(out.reshape(-1))
    return out


def exp_sums_slopes(Q, train, XT, V, slopes, offset, own, kernel) -> np.ndarray:
    """:func:`exp_sums` of ``slope * |q - x|^2 + offset`` for every slope: (m, n_slopes, k + 1).

    ``XT`` is ``train.X.T``, contiguous (made once by the caller).  Each chunk's
    squared distances serve every slope.  With the compiled kernel they are
    never stored, and a slope twice another one (the bandwidth divided by
    sqrt(2), as in the default grid of BandwidthSearchCV, or the square of a
    kernel value) squares that one's kernel values instead of taking an exp.
    """
    kernels = compiled()
    if kernels is None:
        S = sq_distances(Q, train, kernel)
        return np.stack([exp_sums(S, V, slope=c, offset=offset, own=own) for c in slopes], axis=1)
    order, squares = square_chains(slopes)
    own = np.full(len(Q), -1, dtype=np.intp) if own is None else own
    w = np.exp(offset)
    WVT = np.ascontiguousarray((w[:, None] * V).T)
    sums = np.empty((Q.shape[0], len(slopes), V.shape[1] + 1))
    Q = np.ascontiguousarray(Q)
    kernels.exp_sums_chained(Q, XT, slopes[order], squares, w, WVT, own, sums)
    out = np.empty_like(sums)
    out[:, order] = sums
    return out


def square_chains(slopes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order the slopes in chains ``c, 2c, 4c, ...``; flag the members after the first."""
    left = list(np.argsort(np.abs(slopes), kind="stable"))
    order, squares = [], []
    while left:
        t = left.pop(0)
        order.append(t)
        squares.append(False)
        for _ in range(MAX_SQUARINGS):
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
