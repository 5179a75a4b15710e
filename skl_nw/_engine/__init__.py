"""The numeric engine: the only hot loops of the package.

Arrays in, arrays out; no estimator, no parameter names, no validation.
Inputs are already divided by the bandwidth.  The training side lives in a
:class:`TrainSet` (keys, log weights, values, groups, in an order of the
engine's own); every operation takes and returns arrays in the caller's row
order.

Module map:

* ``_sums``: the primitive, :func:`kernel_sums` (kernel-weighted moment sums
  ``sum_i w_i K(u_i)^p V_i`` in a log-scaled safe form, per bandwidth factor,
  power and group, with leave-one-out by index), and the chunk dispatch;
  ``_plan`` what the chunks of one call share: its fast paths, and a chunk's
  sums from kernel values or log-kernel terms;
* ``_dense``: the brute-force path (distances, kernel blocks, exp sums and
  square chains); ``_folded`` its folded GEMM (keys with the kernel and the
  weights folded in); ``_screen`` the integer screen of its direct sums on
  AVX-512 VNNI (``_compiled_screen`` its kernels, LLVM IR through numba),
  which skips the pairs far below their row's largest weight by a rigorous
  bound; ``_discrete`` the categorical features' factor
  of the weights and the points it leaves out (``lambda = 0``);
* ``_loader``: :func:`compiled`, the optional numba kernels or None:
  ``_compiled`` (dense), ``_compiled_tiled`` (register tiles from 4
  features), ``_compiled_exp`` (the exponential), ``_compiled_binned``,
  ``_compiled_local`` (the local solve's twin), ``_compiled_mlkr`` (a tile of
  the learned metric's loss);
* ``_tree``: the tree path (neighbourhoods, radius bounds, COO sums;
  ``_compiled_coo`` their compiled passes over the entries);
* ``_span``: nearest-neighbour bandwidths (LOESS's span), each query's
  radius from its k-th nearest row; ``_window`` the window path of
  one-dimensional spans (``_compiled_window`` its block moments and loop);
  ``_grid`` the cell grid of spans in two and three dimensions
  (``_compiled_grid`` its radii and sums);
* ``_binned``: the binned path (linear binning, convolution, interpolation),
  ``_binned_convolve`` its stencils and convolutions, ``_binned_loo`` its
  leave-one-out, ``_binned_direct`` and ``_binned_offsets`` the node
  moments of local fits, ``_binned_local`` the binned local polynomial fit;
* ``_local_fit``: local polynomial fits from moment sums (basis, shifts,
  blocks), ``_local_solve`` their floored solve;
* ``_train``: :class:`TrainSet`; ``_chunks``: memory budget, threads, BLAS;
* ``_auto``: the rule of ``algorithm="auto"``; ``_gradient``: the
  leave-one-out loss gradient of gradient descent; ``_mixed``: leave-one-out
  with categorical features, every lambda in one pass; ``_mlkr``: the
  leave-one-out loss of a learned projection ``W`` and its gradient, by
  query tiles;
* ``_conditional``: :func:`sorted_mixture`, the conditional distributions'
  per-query reductions over the ``y``-sorted rows (``_compiled_conditional``
  its kernels, over the Taylor cells of ``_compiled_cells``, their polynomials
  tabulated for one value a query in ``_compiled_paired``, and the normal
  distribution function of ``_compiled_phi``); ``_loo_weights``:
  :func:`sorted_loo_weights`, the dense leave-one-out weight rows of the CRPS
  selection in that order (``_compiled_loo`` its kernel);
* ``_protocol``: :class:`LeaveOneOutProtocol`, what the search asks of a
  fitted estimator.

The operations below are thin layers over :func:`kernel_sums`.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse import vstack as sparse_vstack

from .._kernels import Kernel
from . import _dense, _discrete, _span, _tree
from ._auto import choose_algorithm, neighbour_fraction
from ._binned import MAX_FEATURES, BinnedSums, grid_step, make_grid, margin_radius
from ._binned_convolve import GridSizeError, check_grid_size, grid_fits
from ._binned_local import BinnedLocalFit
from ._binned_loo import loo_pool as binned_loo_pool
from ._chunks import Options, budget, single_threaded_blas
from ._conditional import SortedMixture, sorted_mixture
from ._discrete import LOG_ZERO
from ._gradient import loo_loss_grad
from ._loader import compiled
from ._local_fit import (
    LOST_DIGITS,
    Moments,
    blocks,
    cancelled,
    exponents,
    fit_local,
    fit_local_units,
    gram_index,
    monomials,
    npar,
    position,
    solve,
    to_units,
    unit_exponents,
    usable_degree,
)
from ._loo_weights import sorted_loo_weights
from ._mixed import MixedLeaveOneOut
from ._mlkr import metric_loss_grad
from ._protocol import LeaveOneOutProtocol, LossFn, MixedLeaveOneOutProtocol
from ._span import check_no_span, common_multiples
from ._sums import KernelSums, kernel_sums, power_of_two, run_chunks
from ._train import TrainSet, prepare_train

__all__ = [
    "LOG_ZERO",
    "MAX_FEATURES",
    "BinnedLocalFit",
    "GridSizeError",
    "check_no_span",
    "common_multiples",
    "BinnedSums",
    "KernelSums",
    "LeaveOneOut",
    "LeaveOneOutProtocol",
    "LossFn",
    "MixedLeaveOneOut",
    "MixedLeaveOneOutProtocol",
    "Moments",
    "Options",
    "SortedMixture",
    "TrainSet",
    "attention",
    "binned_loo_pool",
    "blocks",
    "check_grid_size",
    "choose_algorithm",
    "class_log_sums",
    "compiled",
    "exponents",
    "fit_local",
    "fit_local_units",
    "gram_index",
    "grid_fits",
    "grid_step",
    "hat_diagonal",
    "kernel_sums",
    "loo_loss_grad",
    "loo_pool",
    "lost_digits",
    "make_grid",
    "margin_radius",
    "metric_loss_grad",
    "monomials",
    "neighbour_fraction",
    "npar",
    "pool",
    "position",
    "power_of_two",
    "prepare_train",
    "reach",
    "single_threaded_blas",
    "solve",
    "sorted_loo_weights",
    "sorted_mixture",
    "to_units",
    "unit_exponents",
    "usable_degree",
]


def pool(Q, train: TrainSet, kernel: Kernel, *, values=None, fallback="nearest",
         options: Options = Options()) -> np.ndarray:  # noqa: B008  # fmt: skip
    """Attention pooling ``sum_i alpha_i(q) V_i`` at every query: (m, k).

    ``alpha_i(q) = w_i K(u_i) / sum_j w_j K(u_j)``, the ratio of two columns of
    :func:`kernel_sums`.  Rows are NaN only for ``fallback="nan"`` queries
    with no training point inside a compact kernel's support.
    """
    sums = kernel_sums(Q, train, kernel, values=values, fallback=fallback, options=options)
    return sums.ratios()[:, 0]


def loo_pool(train: TrainSet, kernel: Kernel, factors, *, values=None, rows=None,
             fallback="nearest", options: Options = Options()) -> np.ndarray:  # noqa: B008  # fmt: skip
    """Closed-form leave-one-out pooling for several bandwidth multiples at once: (F, n, k).

    With full-sample sums ``D_i = sum_k w_k K_ik`` and ``S_i = sum_k w_k K_ik V_k``
    the leave-one-out prediction is ``(S_i - w_i K(0) V_i) / (D_i - w_i K(0))``.
    It is computed without that subtraction (which cancels when the point's
    own term dominates): :func:`kernel_sums` drops the point from its own sums
    by index.  For bandwidth ``f * h`` the squared scaled distances are those
    at ``h`` divided by ``f^2``, so each chunk computes its distances (or its
    tree neighbourhoods, at the widest ``f``) once for every multiple, as
    RidgeCV reuses one decomposition for every alpha.  ``rows`` (caller
    order) computes only those training rows' predictions.
    """
    sums = kernel_sums(None, train, kernel, values=values, factors=factors, loo=True,
                       rows=rows, fallback=fallback, options=options)  # fmt: skip
    return sums.ratios().transpose(1, 0, 2)


def class_log_sums(Q, train: TrainSet, kernel: Kernel, *, relative: bool = False,
                   fallback="nearest", options: Options = Options()) -> np.ndarray:  # noqa: B008  # fmt: skip
    """``log sum_{i in g} w_i K_i(q)`` for each group of ``train``: (m, n_groups).

    ``relative=True`` leaves out a constant per query (the largest ``log K``
    of the row): what normalised probabilities need, and exact where the
    absolute value (``~ -1e30`` far from every point) would round the
    differences between groups away.  Each group has its own log scale, so a
    group far from the query keeps a finite log sum; ``-inf`` only where the
    sum is exactly zero: no point of the group in a compact kernel's support,
    or (absolute sums) no point of positive weight that shares the query's
    categories at ``lambda = 0``, whose relative sums are their limit.
    """
    none = np.empty((train.n_samples, 0))
    sums = kernel_sums(Q, train, kernel, values=none, grouped=True, fallback=fallback,
                       options=options)  # fmt: skip
    with np.errstate(divide="ignore"):
        L = sums.log_scale[:, 0, 0] + np.log(sums.scaled[:, 0, 0, :, 0])
    if relative:
        return L
    L = L + sums.shift[:, :1]
    A = None if Q is None else train.split(Q)[1]
    if A is not None:
        L[_discrete.unmatched(A, train)] = -np.inf
    return L


def attention(Q, train: TrainSet, kernel: Kernel, *, fallback="nearest", sparse=False,
              options: Options = Options(), own=None):  # noqa: B008  # fmt: skip
    """Return the (m, n) attention weights, columns in the caller's training order.

    Dense (an ndarray) unless ``sparse=True`` (a CSR matrix of the non-zero
    weights), whatever the path; NaN rows where ``fallback="nan"`` leaves a
    query empty.  The kernel blocks are those of :func:`kernel_sums`, before
    their reduction.  A dense result larger than the memory budget raises a
    MemoryError before any work.  ``own`` (m,) drops training row ``own[j]``
    (caller order) from query ``j`` by index: the leave-one-out weights (the
    fallback then takes the nearest other row); not with a span.
    """
    m, n = Q.shape[0], train.n_samples
    if not sparse:
        _check_dense_fits(m, n, options)
    scale = None if train.neighbours is None else _span.radii(Q, train, options=options)
    if own is not None and scale is not None:
        raise ValueError("leave-one-out attention weights (own) are not defined with a span.")
    drop = None if own is None else (own if train.inverse is None else train.inverse[own])

    def dense(chunk, Qc):
        S = _dense.sq_distances(Qc, train, kernel, relative=scale is not None)
        if drop is not None:
            S[np.arange(len(Qc)), drop[chunk]] = np.inf
        if scale is not None:
            _span.divide(S, scale[chunk], train.d)
        D = _discrete.discrete_block(Qc, train)
        B, _, _ = _dense.log_kernel_block(S, train.log_w, kernel, fallback, D=D)
        alpha = _dense.softmax_rows(B, train.log_w)
        alpha[alpha.sum(axis=1) == 0] = np.nan
        return csr_matrix(alpha) if sparse else alpha

    def tree(chunk, Qc, margins):
        exclude = None if drop is None else drop[chunk]  # the query's own row, by index
        # Its radius is that of the other rows: the own row's mass would narrow it.
        nb = _tree.Neighbours(Qc, train, kernel, margins, (1.0,), exclude=exclude,
                              scale=None if scale is None else scale[chunk])  # fmt: skip
        row, col, s = nb.at(1.0)
        row, col, b, _, _ = _tree.log_kernel_entries(Qc, train, kernel, row, col, s, fallback,
                                                     exclude=exclude)  # fmt: skip
        b += train.log_w[col]
        r = np.full(len(Qc), -np.inf)
        np.maximum.at(r, row, b)
        e = np.exp(b - np.where(np.isfinite(r), r, 0.0)[row])
        with np.errstate(invalid="ignore"):  # rows of no weight (fallback="nan"): NaN below
            e /= np.bincount(row, weights=e, minlength=len(Qc))[row]
        alpha = csr_matrix((e, (row, col)), shape=(len(Qc), n))
        if not sparse:
            alpha = alpha.toarray()
            alpha[~np.isfinite(r)] = np.nan
        elif (~np.isfinite(r)).any():
            alpha = alpha.tolil()
            alpha[np.flatnonzero(~np.isfinite(r))] = np.nan
            alpha = alpha.tocsr()
        return alpha

    if sparse:
        blocks = run_chunks(Q, train, kernel, options, dense=dense, tree=tree)
        A = sparse_vstack(blocks, format="csr") if blocks else csr_matrix((0, n))
        return A if train.inverse is None else A[:, train.inverse]
    A = run_chunks(Q, train, kernel, options, dense=dense, tree=tree, out=np.empty((m, n)))
    return train.to_caller(A, axis=1)


def lost_digits(mom, Mq, Q, q, train: TrainSet, degree: int, options: Options) -> np.ndarray:
    """Which local fits' moments lost most digits to the expansion about ``q``: (m,) bool.

    :func:`cancelled` flags them from their moments.  Where the window's
    variance is itself lost to rounding (a window of one point looks the
    same), a flag counts only if even the kernel's reach (the span's radius,
    else a bandwidth), which bounds the variance, gives ``eps (|q| /
    reach)^(2p)`` above ``LOST_DIGITS``.
    """
    flagged, resolved = cancelled(mom, Mq, q, degree)
    unsure = flagged & ~resolved
    if unsure.any():
        ratio = (q[unsure] ** 2).sum(axis=1) / np.square(reach(Q[unsure], train, options))
        flagged[unsure] = np.finfo(float).eps * ratio**degree > LOST_DIGITS
    return flagged


def reach(Q, train: TrainSet, options: Options = Options()) -> np.ndarray:  # noqa: B008
    """Each query's kernel scale in bandwidth units: the span's radius, else 1: (m,)."""
    if train.neighbours is None:
        return np.ones(len(Q))
    return _span.radii(Q, train, options=options)


def _check_dense_fits(m: int, n: int, options: Options) -> None:
    workers, mib = budget(options)
    need = m * n * 8 / 2**20
    if need > workers * mib:
        raise MemoryError(
            f"The dense attention matrix of {m} queries x {n} training points needs "
            f"{need:,.0f} MiB, more than working_memory ({workers * mib:,.0f} MiB). Pass "
            "sparse=True for a CSR matrix of the non-zero weights, predict fewer queries at "
            "a time, or raise the budget with sklearn.config_context(working_memory=...)."
        )


def hat_diagonal(sums, log_w: np.ndarray) -> np.ndarray:
    """``H_ii = w_i K(0) / sum_j w_j K_ij`` of in-sample sums (``Q=None``): (n, F).

    The weight of training point ``i`` in its own fit (``K(0) = 1``), from
    sums of power 1 at every factor; ``log_w`` in the sums' row order.
    """
    den = sums.scaled[:, :, 0, 0, -1]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        H = np.exp(log_w[:, None] - sums.shift - sums.log_scale[:, :, 0, 0]) / den
    return np.where(np.isfinite(log_w)[:, None], H, 0.0)


class LeaveOneOut:
    """The leave-one-out protocol (:class:`LeaveOneOutProtocol`) of the pooling estimators.

    It serves Nadaraya–Watson and Parzen fits: its predictions are
    :func:`loo_pool`, its gradient :func:`loo_loss_grad`, its hat diagonal
    ``w_i K(0) / sum_j w_j K_ij``.
    """

    takes_lambdas = False

    def __init__(self, train: TrainSet, kernel: Kernel, fallback: str, rtol: float):
        self.train, self.kernel, self.fallback, self.rtol = train, kernel, fallback, rtol
        self.targets = train.to_caller(train.values)

    def predictions(self, factors, n_jobs=None, rows=None) -> np.ndarray:
        """Leave-one-out predictions at the training points, per bandwidth multiple."""
        options = Options(rtol=self.rtol, n_jobs=n_jobs)
        factors = _span.common_multiples(self.train, factors)
        return loo_pool(self.train, self.kernel, factors, rows=rows, fallback=self.fallback,
                        options=options)  # fmt: skip

    def fits(self, factors, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """In-sample fitted values (F, n, k) and hat diagonal (F, n), per bandwidth multiple."""
        factors = _span.common_multiples(self.train, factors)
        sums = kernel_sums(None, self.train, self.kernel, factors=factors, fallback=self.fallback,
                           options=Options(rtol=self.rtol, n_jobs=n_jobs))  # fmt: skip
        hat = hat_diagonal(sums, self.train.to_caller(self.train.self_log_weights()))
        return sums.ratios().transpose(1, 0, 2), hat.T

    def loss_grad(
        self,
        theta: np.ndarray,
        rows: np.ndarray,
        loss_fn: LossFn,
        row_weights: np.ndarray,
    ) -> tuple[float, np.ndarray]:
        """Leave-one-out loss and gradient at bandwidths ``exp(theta) * bandwidth_``."""
        _span.check_no_span(self.train)
        train = self.train.rescaled(np.exp(theta))
        return loo_loss_grad(train, self.kernel, rows, loss_fn, row_weights)
