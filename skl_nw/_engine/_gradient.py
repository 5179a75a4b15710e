"""The leave-one-out loss and its gradient in log bandwidths (per feature), for gradient descent.

The prediction at training row ``i`` pools every other training point,
``P_i = sum_k alpha_ik V_k`` with ``alpha_i = softmax_k(a_ik)`` and
``a_ik = log w_k + log K(s_ik)``, ``s_ik = sum_j (x_ij - x_kj)^2 / h_j^2``.
With ``R_i = dl_i/dP_i`` (from the loss) and ``g = d log K / ds``,

``dl_i / d log h_j = -2 sum_k c_ik (z_ij - z_kj)^2``,
``c_ik = alpha_ik g(s_ik) R_i . (V_k - P_i)``,

in scaled coordinates ``z = x / h``.  The sum over ``k`` expands into
matrix products (``z_i^2 sum_k c_ik + sum_k c_ik z_k^2 - 2 z_i sum_k c_ik z_k``),
so no (rows, n, d) tensor is formed.

The numpy pass takes the attention weights from the primitive's kernel block
(:func:`skl_nw._engine._dense.log_kernel_block`).  The compiled pass for
``log K = c s`` keeps passes of its own (predictions, then the gradient
terms, distances never stored): measured 3x faster than the numpy pass at
n = 800, d = 2 (``python -m benchmarks search --only statsmodels``, the "numpy
passes" column of docs/_static/benchmarks/search_times.csv).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._kernels import Kernel
from . import _dense
from ._chunks import single_threaded_blas
from ._dense import (
    UNDERFLOW,
    log_kernel_block,
    shifted_log_weights,
    softmax_rows,
    sq_distances,
)
from ._sums import unit_values
from ._train import TrainSet


def loo_loss_grad(
    train: TrainSet,
    kernel: Kernel,
    rows: np.ndarray,
    loss_fn: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    row_weights: np.ndarray,
    dtables: list[np.ndarray] | None = None,
):
    """Leave-one-out loss at training ``rows`` and its gradient in log bandwidths.

    Parameters
    ----------
    train : TrainSet
        Brute-force training set scaled by the current bandwidths (its values
        are pooled).
    kernel : Kernel
        The kernel record.
    rows : ndarray of shape (b,)
        Training rows (caller order) whose leave-one-out loss is evaluated.
    loss_fn : callable
        ``(P, rows) -> (losses (b,), dloss/dP (b, k))``, given the caller's rows.
    row_weights : ndarray of shape (b,)
        Weights of the rows in the loss, ``loss = sum_i r_i l_i / sum_i r_i``.
    dtables : list of ndarray, default=None
        With categorical features (``train.codes``): per feature, the (c, c)
        table of ``d log L / d lambda``; the gradient in each lambda,
        ``sum_ik e_ik dlogL(a_i, b_k)``, is then returned as well
        (``e_ik = r_i alpha_ik R_i . (V_k - P_i)``).

    Returns
    -------
    loss : float
        Weighted mean leave-one-out loss over ``rows``.
    grad : ndarray of shape (n_features,)
        Its gradient with respect to ``log h`` (continuous features).
    grad_lambda : ndarray of shape (n_categorical,)
        Only with ``dtables``: the gradient in each lambda.
    """
    stored = rows if train.inverse is None else train.inverse[rows]
    with single_threaded_blas():
        if dtables is not None:
            return _numpy_pass(train, kernel, stored, rows, loss_fn, row_weights, dtables)
        kernels = _dense.compiled()
        if kernels is not None and kernel.log_slope is not None:
            result = _compiled_pass(kernels, train, kernel.log_slope, stored, rows, loss_fn,
                                    row_weights)  # fmt: skip
            if result is not None:
                return result
        return _numpy_pass(train, kernel, stored, rows, loss_fn, row_weights)


def _numpy_pass(train, kernel, stored, rows, loss_fn, row_weights, dtables=None):
    Z, V = train.X, train.values
    Zb = Z[stored]
    S = sq_distances(Zb, train, kernel)
    D = None if train.codes is None else train.code_rows[stored] @ train.onehot.T
    B, _, _ = log_kernel_block(S, train.log_w, kernel, "nearest", stored, D)
    alpha = softmax_rows(B, train.log_w)
    P = alpha @ V
    losses, R = loss_fn(P, rows)
    r = row_weights / row_weights.sum()
    E = (R @ V.T) - np.einsum("ik,ik->i", R, P)[:, None]
    E *= alpha
    E *= r[:, None]
    G = kernel.dlog_profile(S)
    # At s = 0 every (z_ij - z_kj)^2 is 0: the term vanishes even where g does not
    # exist (kernels with a kink at 0), and a point outside the support has alpha = 0.
    G[(S == 0) | (alpha == 0)] = 0.0
    C = E * G
    row_sum = C.sum(axis=1)
    col_sum = C.sum(axis=0)
    cross = np.einsum("ij,ij->j", Zb, C @ Z)
    grad = -2.0 * (row_sum @ Zb**2 + col_sum @ Z**2 - 2.0 * cross)
    if dtables is None:
        return float(r @ losses), grad
    codes = train.codes
    grad_lambda = np.array([
        np.einsum("ik,ik->", E, table[codes[stored, j]][:, codes[:, j]])
        for j, table in enumerate(dtables)
    ])  # fmt: skip
    return float(r @ losses), grad, grad_lambda


def _compiled_pass(kernels, train, slope, stored, rows, loss_fn, row_weights):
    """:func:`loo_loss_grad` for ``log K = slope * s`` in two compiled passes.

    The first pass gives the predictions (weights ``w_k exp(slope s_ik)``,
    never stored), the loss gives ``R``, the second pass recomputes the
    weights and sums the gradient terms.  None if some row's weights all
    underflow (the caller's log-space path handles it).
    """
    V = train.values
    Zb = np.ascontiguousarray(train.X[stored])
    XT = np.ascontiguousarray(train.X.T)
    w = np.exp(shifted_log_weights(train.log_w))
    V_unit, scale = unit_values(V)
    WVT = np.ascontiguousarray((w[:, None] * V_unit).T)
    sums = np.empty((len(stored), 1, V.shape[1] + 1))
    own = np.asarray(stored, dtype=np.int64)
    kernels.exp_sums_chained(Zb, XT, np.array([slope]), np.zeros(1, bool), w, WVT, own, sums)
    numerators, denominators = sums[:, 0, :-1], sums[:, 0, -1]
    if denominators.min(initial=np.inf) < UNDERFLOW:
        return None
    P = numerators / denominators[:, None] * scale
    losses, R = loss_fn(P, rows)
    r = row_weights / row_weights.sum()
    grad = np.zeros(Zb.shape[1])
    RP = np.einsum("ik,ik->i", R, P)
    row_coef = r * slope / denominators
    kernels.loo_grad(Zb, XT, slope, w, np.ascontiguousarray(V.T), R, RP, own, row_coef, grad)
    return float(r @ losses), grad
