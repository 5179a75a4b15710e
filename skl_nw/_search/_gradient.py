"""The gradient routes of BandwidthSearchCV: full-batch L-BFGS-B and minibatch Adam (SGD).

Functions of the search's context (:class:`~skl_nw._search._context.Context`).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from . import _lbfgs
from ._auto import resolve_per_feature
from ._context import Selection
from ._grid import loo_predictions
from ._lbfgs import RowChunks
from ._progress import report_epoch, report_rows
from ._results import caller_level
from ._scoring import _log_loss, _squared_error

# log-bandwidths may move this far from their start (e^40 ~ 2e17): unbounded in
# practice, yet every scaled coordinate stays finite.
_MAX_LOG_STEP = 40.0

__all__ = ["lbfgs", "sgd"]


def _setup(ctx, Xu, yu, wu):
    """Return what the gradient methods share: protocol object, loss, ties, transform.

    ``tie``: which entry of theta each feature follows (one common one for
    the continuous features unless ``per_feature``; each categorical
    feature its own, its lambda's transform).
    """
    h0 = ctx.base_bandwidth(Xu, wu)
    loo = clone(ctx.estimator).set_params(bandwidth=h0).fit(Xu, yu, wu)._leave_one_out()
    V = loo.targets
    loss_fn = _log_loss(V) if is_classifier(ctx.estimator) else _squared_error(V)
    d = Xu.shape[1]
    cats, _ = ctx.categories_of(Xu, wu)
    shared = np.zeros(d, np.intp) if cats is None else np.cumsum(cats.mask)
    tie = np.arange(d) if resolve_per_feature(ctx) else shared
    if cats is not None and not loo.takes_lambdas:
        raise ValueError(
            f"method={ctx.method_!r} does not learn the lambdas of "
            f"{type(ctx.estimator).__name__}'s categorical features; use method='grid', "
            "which scores a grid of them."
        )
    to_bandwidth = loo.bandwidth_at if loo.takes_lambdas else lambda t: h0 * np.exp(t)
    return loo, loss_fn, tie, to_bandwidth


def _finish(ctx, Xu, yu, wu, bandwidth, curve: list, n_iter: int) -> Selection:
    """Return the selection at ``bandwidth``, scored (``best_score_``) in the units of y."""
    base, P = loo_predictions(ctx, Xu, yu, wu, bandwidth)
    return Selection(
        best_params_={"bandwidth": bandwidth},
        best_score_=float(ctx.in_y_units(ctx.score(base, P, yu, wu))),
        n_iter_=n_iter,
        method_=ctx.method_,
        loss_curve_=[ctx.loss_in_y_units(loss) for loss in curve],
    )


def _unconverged(ctx) -> None:
    warnings.warn(
        f"BandwidthSearchCV(method={ctx.method_!r}) reached max_iter={ctx.max_iter} "
        "before the loss stopped improving; increase max_iter.",
        ConvergenceWarning,
        stacklevel=caller_level(),
    )


def lbfgs(ctx, Xu, yu, wu) -> Selection:
    """Minimise the leave-one-out loss by L-BFGS-B from the rule of thumb."""
    loo, loss_fn, tie, to_bandwidth = _setup(ctx, Xu, yu, wu)
    theta, curve, n_iter, converged = _lbfgs.minimise(
        loo, tie.max() + 1, tie, loss_fn, wu, max_iter=ctx.max_iter, tol=ctx.tol,
        bound=_MAX_LOG_STEP,
        chunks=RowChunks(len(Xu), lambda done, total: report_rows(ctx, done, total)),
        report=lambda it, loss, t: report_epoch(ctx, it, loss, to_bandwidth(t[tie])),
    )  # fmt: skip
    if not converged and ctx.tol is not None:
        _unconverged(ctx)
    return _finish(ctx, Xu, yu, wu, to_bandwidth(theta[tie]), curve, n_iter)


def sgd(ctx, Xu, yu, wu) -> Selection:
    """Minimise the leave-one-out loss by minibatch Adam from the rule of thumb."""
    rng = check_random_state(ctx.random_state)
    loo, loss_fn, tie, to_bandwidth = _setup(ctx, Xu, yu, wu)
    n = len(Xu)
    batch = min(256, n) if ctx.batch_size == "auto" else min(ctx.batch_size, n)
    theta = np.zeros(tie.max() + 1)  # log(h / h0), or lambda's transform
    m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
    beta1, beta2, step = 0.9, 0.999, 0
    curve = []
    best_loss, stall = np.inf, 0
    kept, kept_loss = theta, np.inf  # where the epoch of the lowest running loss began
    chunks = RowChunks(n)
    # Minibatches are drawn in training order: the same random_state gives
    # the same bandwidths on every algorithm.
    for epoch in range(1, ctx.max_iter + 1):
        order = rng.permutation(n)
        epoch_loss, began = 0.0, theta
        for start in range(0, n, batch):
            rows = order[start : start + batch]
            loss, grad = chunks.loss_grad(loo, theta[tie], rows, loss_fn, wu[rows])
            epoch_loss += loss * wu[rows].sum()
            grad = np.bincount(tie, weights=grad, minlength=len(theta))
            step += 1
            m1 = beta1 * m1 + (1 - beta1) * grad
            m2 = beta2 * m2 + (1 - beta2) * grad**2
            update = (m1 / (1 - beta1**step)) / (np.sqrt(m2 / (1 - beta2**step)) + 1e-12)
            theta = np.clip(theta - ctx.learning_rate * update, -_MAX_LOG_STEP, _MAX_LOG_STEP)
        epoch_loss /= wu.sum()
        curve.append(epoch_loss)
        if epoch_loss < kept_loss:  # (one minibatch an epoch: the loss at ``began``)
            kept, kept_loss = began, epoch_loss
        report_epoch(ctx, epoch, epoch_loss, to_bandwidth(theta[tie]))
        if ctx.tol is not None:
            stall = stall + 1 if epoch_loss > best_loss - ctx.tol * abs(best_loss) else 0
            best_loss = min(best_loss, epoch_loss)
            if stall >= ctx.n_iter_no_change:
                break
    else:
        if ctx.tol is not None:
            _unconverged(ctx)
    theta = _lower(lambda t: chunks.loss_grad(loo, t[tie], np.arange(n), loss_fn, wu)[0],
                   theta, kept)  # fmt: skip
    return _finish(ctx, Xu, yu, wu, to_bandwidth(theta[tie]), curve, epoch)


def _lower(loss, last: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Return the last iterate or the kept one, whichever has the lower leave-one-out loss.

    Adam's steps can leave a rugged loss's valley late (a compact kernel's
    local fits: 0.21 to 120 in one epoch, then a stall): the kept iterate is
    scored on every row, as the last one is, not by its epoch's running loss.
    """
    if np.array_equal(last, kept):
        return last
    return kept if loss(kept) < loss(last) else last
