"""The gradient routes of BandwidthSearchCV: full-batch L-BFGS-B and minibatch Adam (SGD)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from . import _lbfgs
from ._auto import resolve_per_feature
from ._lbfgs import RowChunks
from ._scoring import _log_loss, _squared_error

# log-bandwidths may move this far from their start (e^40 ~ 2e17): unbounded in
# practice, yet every scaled coordinate stays finite.
_MAX_LOG_STEP = 40.0


class _Fitting:
    """The gradient routes of :class:`BandwidthSearchCV` (a mixin: it uses the search's methods)."""

    def _gradient_setup(self, Xu, yu, wu):
        """Return what the gradient methods share: protocol object, loss, ties, transform.

        ``tie``: which entry of theta each feature follows (one common one for
        the continuous features unless ``per_feature``; each categorical
        feature its own, its lambda's transform).
        """
        h0 = self._base_bandwidth(Xu, wu)
        loo = clone(self.estimator).set_params(bandwidth=h0).fit(Xu, yu, wu)._leave_one_out()
        V = loo.targets
        loss_fn = _log_loss(V) if is_classifier(self.estimator) else _squared_error(V)
        d = Xu.shape[1]
        cats, _ = self._categories_of(Xu)
        shared = np.zeros(d, np.intp) if cats is None else np.cumsum(cats.mask)
        tie = np.arange(d) if resolve_per_feature(self) else shared
        if cats is not None and not loo.takes_lambdas:
            raise ValueError(
                f"method={self.method_!r} does not learn the lambdas of "
                f"{type(self.estimator).__name__}'s categorical features; use method='grid', "
                "which scores a grid of them."
            )
        to_bandwidth = loo.bandwidth_at if loo.takes_lambdas else lambda t: h0 * np.exp(t)
        return loo, loss_fn, tie, to_bandwidth

    def _finish_gradient(self, Xu, yu, wu, bandwidth) -> np.ndarray:
        """Score the selected bandwidth (``best_score_``) and return it."""
        base, P = self._loo_predictions(Xu, yu, wu, bandwidth)
        self.best_score_ = float(self._in_y_units(self._score(base, P, yu, wu)))
        self.loss_curve_ = [self._loss_in_y_units(loss) for loss in self.loss_curve_]
        return bandwidth

    def _fit_lbfgs(self, Xu, yu, wu) -> np.ndarray:
        loo, loss_fn, tie, to_bandwidth = self._gradient_setup(Xu, yu, wu)
        theta, self.loss_curve_, self.n_iter_, converged = _lbfgs.minimise(
            loo, tie.max() + 1, tie, loss_fn, wu, max_iter=self.max_iter, tol=self.tol,
            bound=_MAX_LOG_STEP, chunks=RowChunks(len(Xu), self._report_rows),
            report=lambda it, loss, t: self._report_epoch(it, loss, to_bandwidth(t[tie])),
        )  # fmt: skip
        if not converged and self.tol is not None:
            warnings.warn(
                f"BandwidthSearchCV(method='lbfgs') reached max_iter={self.max_iter} "
                "before the loss stopped improving; increase max_iter.",
                ConvergenceWarning,
                stacklevel=3,
            )
        return self._finish_gradient(Xu, yu, wu, to_bandwidth(theta[tie]))

    def _fit_sgd(self, Xu, yu, wu) -> np.ndarray:
        rng = check_random_state(self.random_state)
        loo, loss_fn, tie, to_bandwidth = self._gradient_setup(Xu, yu, wu)
        n = len(Xu)
        batch = min(256, n) if self.batch_size == "auto" else min(self.batch_size, n)
        theta = np.zeros(tie.max() + 1)  # log(h / h0), or lambda's transform
        m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
        beta1, beta2, step = 0.9, 0.999, 0
        self.loss_curve_ = []
        best_loss, stall = np.inf, 0
        chunks = RowChunks(n)
        # Minibatches are drawn in training order: the same random_state gives
        # the same bandwidths on every algorithm.
        for epoch in range(1, self.max_iter + 1):
            order = rng.permutation(n)
            epoch_loss = 0.0
            for start in range(0, n, batch):
                rows = order[start : start + batch]
                loss, grad = chunks.loss_grad(loo, theta[tie], rows, loss_fn, wu[rows])
                epoch_loss += loss * wu[rows].sum()
                grad = np.bincount(tie, weights=grad, minlength=len(theta))
                step += 1
                m1 = beta1 * m1 + (1 - beta1) * grad
                m2 = beta2 * m2 + (1 - beta2) * grad**2
                update = (m1 / (1 - beta1**step)) / (np.sqrt(m2 / (1 - beta2**step)) + 1e-12)
                theta = np.clip(theta - self.learning_rate * update, -_MAX_LOG_STEP, _MAX_LOG_STEP)
            epoch_loss /= wu.sum()
            self.loss_curve_.append(epoch_loss)
            self._report_epoch(epoch, epoch_loss, to_bandwidth(theta[tie]))
            if self.tol is not None:
                stall = stall + 1 if epoch_loss > best_loss - self.tol * abs(best_loss) else 0
                best_loss = min(best_loss, epoch_loss)
                if stall >= self.n_iter_no_change:
                    break
        else:
            if self.tol is not None:
                warnings.warn(
                    f"BandwidthSearchCV(method='sgd') reached max_iter={self.max_iter} "
                    "before the loss stopped improving; increase max_iter.",
                    ConvergenceWarning,
                    stacklevel=3,
                )
        self.n_iter_ = epoch
        return self._finish_gradient(Xu, yu, wu, to_bandwidth(theta[tie]))
