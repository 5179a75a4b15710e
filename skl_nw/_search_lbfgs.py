"""Full-batch quasi-Newton search of the log bandwidths (``BandwidthSearchCV(method="lbfgs")``).

The leave-one-out loss of every training row and its exact gradient in the
log bandwidths (the ``loss_grad`` of the leave-one-out protocol, over all
rows at once) go to scipy's L-BFGS-B: a deterministic, smooth objective of
a few parameters, which a quasi-Newton method minimises in a handful of
passes where minibatch Adam needs tens of epochs of noisy steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

from ._engine._chunks import single_threaded_blas

__all__ = ["minimise"]


def minimise(
    loo,
    size: int,
    tie: np.ndarray,
    loss_fn: Callable,
    weights: np.ndarray,
    *,
    max_iter: int,
    tol: float | None,
    bound: float,
    report: Callable[[int, float, np.ndarray], None],
) -> tuple[np.ndarray, list[float], int, bool]:
    """Minimise the leave-one-out loss over ``theta`` (``size``,), starting from 0.

    Parameters
    ----------
    loo : LeaveOneOut protocol object
        Its ``loss_grad(log_factors, rows, loss_fn, row_weights)``.
    size : int
        Number of free parameters ``theta``.
    tie : ndarray of int of shape (n_features,)
        Which entry of ``theta`` each feature's log bandwidth multiple follows.
    loss_fn : callable
        Per-row loss and its derivative (see the protocol).
    weights : ndarray of shape (n_samples,)
        Row weights of the loss.
    max_iter : int
        Most L-BFGS iterations.
    tol : float or None
        Stop when an iteration lowers the loss by at most ``tol`` times the
        starting loss (None: run ``max_iter`` iterations).
    bound : float
        ``|theta| <= bound``.
    report : callable
        Called as ``report(iteration, loss, theta)`` after each iteration.

    Returns
    -------
    theta : ndarray of shape (size,)
    curve : list of float
        The loss after each iteration.
    n_iter : int
    converged : bool
        False when ``max_iter`` ran out first.
    """
    rows = np.arange(len(weights))
    scale = []  # the starting loss: the objective is divided by it (a relative tol)

    def objective(theta):
        loss, grad = loo.loss_grad(theta[tie], rows, loss_fn, weights)
        if not scale:
            scale.append(loss if loss > 0 else 1.0)
        grad = np.bincount(tie, weights=grad, minlength=size)
        return loss / scale[0], grad / scale[0]

    curve = []

    def callback(intermediate_result):
        curve.append(float(intermediate_result.fun * scale[0]))
        report(len(curve), curve[-1], intermediate_result.x)

    options = {"maxiter": max_iter, "ftol": 0.0 if tol is None else tol, "gtol": 0.0}
    bounds = [(-bound, bound)] * size
    # Small products only (a few parameters, a batch of local fits): BLAS threads would
    # spin (measured on a loaded 2-core machine: 3.5x the time).
    with single_threaded_blas():
        result = minimize(objective, np.zeros(size), jac=True, method="L-BFGS-B",
                          bounds=bounds, options=options, callback=callback)  # fmt: skip
    return result.x, curve, int(result.nit), result.status != 1
