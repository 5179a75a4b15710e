"""A learned metric: the leave-one-out loss of Nadaraya–Watson on ``Z = X W^T`` and its gradient.

Queries and keys share one projection ``W`` (r, d); the bandwidth is 1 (the
scale lives in ``W``).  The prediction at training row ``q`` pools every other
row, ``P_q = sum_i alpha_qi y_i`` with ``alpha_q = softmax_i(a_qi)``,
``a_qi = log w_i + log K(s_qi)``, ``s_qi = ||z_q - z_i||^2`` and the row's own
key removed *by index*.  With the loss ``L = sum_q r_q ||P_q - y_q||^2 / k``
(``r`` the normalised row weights, ``k`` the outputs), ``R_q = dL/dP_q`` and
``g = d log K / ds``:

``dL/da_qi = E_qi = alpha_qi R_q . (y_i - P_q)``, ``C_qi = E_qi g(s_qi)``,

``dL/dW = 2 sum_qi C_qi (z_q - z_i)(x_q - x_i)^T = G^T X``, where the gradient
in the coordinates, ``G = dL/dZ``, collects ``2 (sum_i C_qi) z_q - 2 C Z`` at
the queries and ``2 (sum_q C_qi) z_i - 2 C^T Z_q`` at the keys: two products
of a tile's (b, n) block with an (n, r) matrix, one (n, r) by (n, d) product at
the end.  A tile of queries holds a few (b, n) blocks; nothing (n, n) is ever
formed, and the memory beyond the data is ``O(n r + b n)``.

The blocks are the primitive's (:func:`skl_nw._engine._dense.sq_distances`,
:func:`~skl_nw._engine._dense.log_kernel_block`,
:func:`~skl_nw._engine._dense.softmax_rows`): the same log-space softmax as
every prediction, so no weight underflows to ``0 / 0``.
"""

from __future__ import annotations

import threading

import numpy as np

from .._kernels import Kernel
from ._chunks import Options, budget, chunk_rows, map_chunks, single_threaded_blas
from ._dense import (
    _EPS,
    MAX_CHUNK_PAIRS,
    MAX_FUSED_CHUNK_PAIRS,
    log_kernel_block,
    softmax_rows,
    sq_distances,
)
from ._loader import compiled
from ._train import TrainSet

__all__ = ["metric_loss_grad"]

# Largest admissible rounding error of a folded log weight (a relative error of the
# weight): the engine's MAX_GEMM_ERROR (1e-12) would send learned metrics whose points
# spread over ~25 bandwidths (|z|^2 ~ 600) to the general path, 2.5x slower; 1e-9 is
# still four orders below the optimisers' tolerances (and |z|^2 up to ~5e5).
MAX_FOLDED_ERROR = 1e-9
LOG_FLOOR = -600.0
# Bytes per (query, key) pair of a tile: the distances, the weights, the
# gradient terms and the kernel's temporaries (five float64 blocks).
_BYTES_PER_PAIR = 40


def metric_loss_grad(
    X: np.ndarray,
    W: np.ndarray,
    Y: np.ndarray,
    kernel: Kernel,
    *,
    log_w: np.ndarray | None = None,
    rows: np.ndarray | None = None,
    row_log_w: np.ndarray | None = None,
    grad: bool = True,
    options: Options = Options(),  # noqa: B008 - frozen
) -> tuple[float, np.ndarray | None]:
    """Leave-one-out loss of the queries ``rows`` against every key, and ``dL/dW``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training inputs (the keys; the queries are the rows ``rows``),
        best centred by the caller: the gradient is ``G^T X``, whose terms
        cancel exactly only in exact arithmetic (``sum_i G_i = 0``).
    W : ndarray of shape (r, d)
        The projection: coordinates ``Z = X W^T``, bandwidth 1.
    Y : ndarray of shape (n, k)
        Targets (pooled values).
    kernel : Kernel
        The kernel record (its ``log_profile`` and ``dlog_profile``).
    log_w : ndarray of shape (n,), default=None
        Log sample weights (``-inf`` for 0): each key's weight in the
        softmax and each query's weight in the loss.  None: all 0.
    rows : ndarray of int, default=None
        The query rows (all if None): a minibatch of the stochastic path.
    row_log_w : ndarray of shape (n,), default=None
        Log weights of the rows in the loss, when they differ from the
        keys' (held-out rows: queries of weight ``w``, keys of weight 0).
    grad : bool, default=True
        False: the loss only (held-out checks), gradient None.
    options : Options
        Memory budget and worker threads.

    Returns
    -------
    loss : float
        ``sum_q r_q ||P_q - y_q||^2 / (k sum_q r_q)`` over ``rows``.
    grad : ndarray of shape (r, d) or None
    """
    n = len(X)
    log_w = np.zeros(n) if log_w is None else log_w
    rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp)
    row_log_w = (log_w if row_log_w is None else row_log_w)[rows]
    if not np.isfinite(row_log_w).any():  # every query weighs 0
        return 0.0, np.zeros_like(W) if grad else None
    r = np.exp(row_log_w - row_log_w.max())
    r /= r.sum() * Y.shape[1]
    # One group, brute force: the stored order is the caller's.  Thin products
    # (r columns): one BLAS thread is faster (measured 3.5 ms against 13-60 ms at
    # n = 65,000, d = 20, r = 2 on 2 busy cores).
    with single_threaded_blas():
        train = TrainSet(X @ W.T, log_w=log_w, values=Y)
    Z = train.X
    folded = _folded_keys(train, kernel)
    G = np.zeros_like(Z) if grad else None
    losses = np.zeros(1)
    lock = threading.Lock()
    workers, mib = budget(options)
    fused = None if folded is None else _fused_arrays(train, folded)
    Z1 = None if fused is not None else np.hstack([Z, np.ones((n, 1))])
    # The compiled tile holds no (b, n) block: larger tiles, fewer key-side additions.
    pairs = MAX_CHUNK_PAIRS if fused is None else MAX_FUSED_CHUNK_PAIRS
    tile = min(chunk_rows(_BYTES_PER_PAIR * n, mib), max(1, pairs // n))

    def run(chunk, Zq):
        own = rows[chunk]
        if fused is not None:
            Gq, Gk = np.zeros_like(Zq), np.zeros((Zq.shape[1], n if grad else 0))
            loss = fused[0](Zq, own, *fused[1:], r[chunk], kernel.log_slope, grad, Gq, Gk)
            Gk = Gk.T
        else:
            loss, Gq, Gk = _numpy_tile(Zq, own, train, kernel, folded, r[chunk], grad, Z1)
        with lock:
            losses[0] += loss
            if grad:
                G[own] += Gq  # rows are distinct
                G[:] += Gk

    map_chunks(run, None, train, tile, workers, rows_of_train=rows)
    if not grad:
        return float(losses[0]), None
    with single_threaded_blas():
        return float(losses[0]), 2.0 * (G.T @ X)


def _fused_arrays(train, keys) -> tuple | None:
    """Return the compiled tile and its feature-major arrays, or None without numba."""
    if compiled() is None:
        return None
    from ._compiled_mlkr import mlkr_tile

    arrays = (keys, train.X, train.values)
    return (mlkr_tile, *(np.ascontiguousarray(a.T) for a in arrays))


def _numpy_tile(Zq, own, train, kernel, folded, r, grad, Z1):
    """Loss and gradient terms of a tile by numpy passes: (loss, query side, key side)."""
    if folded is None:
        loss, C = _tile(Zq, own, train, kernel, r, grad)
    else:
        loss, C = _folded_tile(Zq, own, train, folded, kernel.log_slope, r, grad)
    if C is None:
        return loss, None, None
    CZ = C @ Z1  # C @ Z and the row sums in one product
    Gq = CZ[:, -1:] * Zq - CZ[:, :-1]
    CZ = C.T @ np.hstack([Zq, np.ones((len(Zq), 1))])
    return loss, Gq, CZ[:, -1:] * train.X - CZ[:, :-1]


def _folded_keys(train, kernel) -> np.ndarray | None:
    """For ``log K = c s`` and positive weights: keys ``[-2 c z_i, c |z_i|^2 + log w_i]``.

    Then ``[z_q, 1] . key_i = log w_i + log K(s_qi) - c |z_q|^2``, the log
    weight up to a constant of the row (which the softmax ignores): one
    product gives a tile's log weights (a zero weight's ``-inf`` gives a
    zero weight).  None (the general path) for other kernels, fewer than two
    keys of positive weight, or coordinates so far from their centre that
    the product's rounding error could exceed ``MAX_FOLDED_ERROR``
    (:func:`~skl_nw._engine._dense.sq_distances` then takes over).
    """
    c = kernel.log_slope
    if c is None or np.isfinite(train.log_w).sum() < 2:  # some query might have no key
        return None
    r = train.X.shape[1]
    if (r + 2) * _EPS * abs(c) * 4.0 * train.max_sq_norm > MAX_FOLDED_ERROR:
        return None
    return np.hstack([-2.0 * c * train.X, (c * train.sq_norms + train.log_w)[:, None]])


def _folded_tile(Zq, own, train, keys, slope, r, grad):
    """:func:`_tile` for ``log K = slope * s``: one product, no distances, ``g = slope``."""
    B = np.hstack([Zq, np.ones((len(Zq), 1))]) @ keys.T
    B[np.arange(len(Zq)), own] = -np.inf
    B -= B.max(axis=1)[:, None]
    # Weights below exp(LOG_FLOOR) count as exp(LOG_FLOOR): at most n 1e-261 against
    # the row's largest weight, 1, and no subnormal products (2.3x slower).
    np.maximum(B, LOG_FLOOR, out=B)
    e = np.exp(B, out=B)
    e[np.arange(len(Zq)), own] = 0.0
    inactive = ~np.isfinite(train.log_w)  # zero weights (held-out rows): no keys
    if inactive.any():
        e[:, inactive] = 0.0
    Y = train.values
    sums = e @ np.hstack([Y, np.ones((len(Y), 1))])
    total = sums[:, -1:]
    P = sums[:, :-1] / total
    residual = P - Y[own]
    loss = float(r @ np.einsum("ik,ik->i", residual, residual))
    if not grad:
        return loss, None
    # E = alpha (R . y_i - R . P) with alpha = e / total and g = slope folded into R.
    R = (2.0 * slope) * r[:, None] * residual / total
    C = R @ Y.T
    C -= np.einsum("ik,ik->i", R, P)[:, None]
    C *= e
    return loss, C


def _tile(Zq, own, train, kernel, r, grad):
    """Loss of a tile of queries and, with ``grad``, its (b, n) block ``C``."""
    S = sq_distances(Zq, train, kernel)
    B, _, _ = log_kernel_block(S, train.log_w, kernel, "nearest", own)
    alpha = softmax_rows(B, train.log_w)
    P = alpha @ train.values
    residual = P - train.values[own]
    loss = float(r @ np.einsum("ik,ik->i", residual, residual))
    if not grad:
        return loss, None
    R = 2.0 * r[:, None] * residual
    E = R @ train.values.T
    E -= np.einsum("ik,ik->i", R, P)[:, None]
    E *= alpha
    g = kernel.dlog_profile(S)
    # At s = 0 the factor z_q - z_i is 0 (g may not exist there: a kink at 0);
    # a key outside a compact support has alpha = 0.
    g[(S == 0) | (alpha == 0)] = 0.0
    E *= g
    return loss, E
