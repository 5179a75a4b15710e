"""Full-batch quasi-Newton search of the log bandwidths (``BandwidthSearchCV(method="lbfgs")``).

The leave-one-out loss of every training row and its exact gradient in the
log bandwidths (the ``loss_grad`` of the leave-one-out protocol, over all
rows at once) go to scipy's L-BFGS-B: a deterministic, smooth objective of
a few parameters, which a quasi-Newton method minimises in a handful of
passes where minibatch Adam needs tens of epochs of noisy steps.

One pass over n rows is n^2 kernel evaluations: at n = 10^6 a single engine
call would hold the interpreter for minutes, deaf to Ctrl-C.  The pass runs
in chunks of rows (:class:`RowChunks`) sized to about :data:`CHUNK_SECONDS`
each, so a KeyboardInterrupt is raised between two of them and progress can
be reported within a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize
from sklearn import get_config

from .._engine import single_threaded_blas

__all__ = ["RowChunks", "minimise"]

# Each engine call of a pass covers about this many seconds of work (measured on the
# previous chunk): Ctrl-C is honoured, and progress reported, within about that time.
CHUNK_SECONDS = 0.5
# The first chunk's rows, before any timing; a chunk grows at most this much per step.
_FIRST_CHUNK = 64
_GROWTH = 4.0
# Bytes per (row, training point) pair that a numpy pass keeps at once (six to eight float64
# blocks: distances, log kernel, weights, their products): chunks stay in working_memory.
_PAIR_BYTES = 64


class RowChunks:
    """A pass of ``loss_grad`` over many rows, as a weighted sum of passes over chunks.

    The loss of the protocol is a weighted mean over its rows, so the pass
    over all rows is the sum of the chunks' losses and gradients, each
    weighted by its share of the row weights: the same value, up to rounding.

    Parameters
    ----------
    n_train : int
        Training points each row is scored against (bounds a chunk's memory).
    report : callable or None, default=None
        Called as ``report(done, total)`` after each chunk of a pass of more
        than one chunk.
    """

    def __init__(self, n_train: int, report: Callable[[int, int], None] | None = None):
        budget = get_config()["working_memory"] * 2**20
        self.limit = max(1, int(budget // (_PAIR_BYTES * max(n_train, 1))))
        self.size = min(_FIRST_CHUNK, self.limit)
        self.report = report

    def loss_grad(self, loo, theta, rows, loss_fn, weights) -> tuple[float, np.ndarray]:
        """``loo.loss_grad(theta, rows, loss_fn, weights)``, chunk by chunk."""
        n, total = len(rows), weights.sum()
        loss, grad, start = 0.0, 0.0, 0
        while start < n:
            stop = min(n, start + self.size)
            if start == 0 and stop == n:  # one call does it
                return loo.loss_grad(theta, rows, loss_fn, weights)
            began = time.perf_counter()
            part_loss, part_grad = loo.loss_grad(theta, rows[start:stop], loss_fn,
                                                 weights[start:stop])  # fmt: skip
            elapsed = time.perf_counter() - began
            share = weights[start:stop].sum() / total
            loss, grad = loss + share * part_loss, grad + share * np.asarray(part_grad)
            scaled = self.size * CHUNK_SECONDS / max(elapsed, 1e-6)
            self.size = int(np.clip(scaled, 1, min(self.limit, _GROWTH * self.size)))
            start = stop
            if self.report is not None:
                self.report(stop, n)
        return float(loss), grad


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
    chunks: RowChunks,
) -> tuple[np.ndarray, list[float], int, bool]:
    """Minimise the leave-one-out loss over ``theta`` (``size``,), starting from 0.

    Parameters
    ----------
    loo : LeaveOneOut protocol object
        Its ``loss_grad(theta, rows, loss_fn, row_weights)``.
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
    chunks : RowChunks
        Runs each pass over the rows in chunks.

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
        loss, grad = chunks.loss_grad(loo, theta[tie], rows, loss_fn, weights)
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
    # spin (measured once, see docs/benchmarks.md "Bandwidth search", "Tuned constants").
    with single_threaded_blas():
        result = minimize(objective, np.zeros(size), jac=True, method="L-BFGS-B",
                          bounds=bounds, options=options, callback=callback)  # fmt: skip
    return result.x, curve, int(result.nit), result.status != 1
