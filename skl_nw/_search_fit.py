"""The fitting routes of BandwidthSearchCV: closed-form grid, GridSearchCV, SGD."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import rankdata
from sklearn.base import clone, is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils import check_random_state

from . import _search_lbfgs, _search_mixed
from ._inference import criterion_scores
from ._search_support import _backend, _log_loss, _squared_error, loo_base

# Default grid: multiples of the per-feature rule of thumb, log-spaced.
# 40 log-spaced multiples from 2^-5.5 = 0.022 to 2^4.25 = 19: a step of 2^(1/4),
# so every other candidate is the bandwidth over sqrt(2), whose Gaussian kernel
# values are the squares of the previous ones (the engine reuses them).
_DEFAULT_FACTORS = 2.0 ** (np.arange(-22, 18) / 4)
# log-bandwidths may move this far from their start (e^40 ~ 2e17): unbounded in
# practice, yet every scaled coordinate stays finite.
_MAX_LOG_STEP = 40.0
# With verbose, a grid of multiples of one bandwidth (one engine call) runs in this many
# blocks of rows, so that progress lines can come between them.
_ROW_BLOCKS = 50


class _Fitting:
    """The routes of :class:`BandwidthSearchCV` (a mixin: it uses the search's own methods)."""

    def _loo_predictions(self, Xu, yu, wu, base_bandwidth, factors, announce=None, rows=False):
        """Leave-one-out predictions for ``factor * base_bandwidth``, rows in training order.

        ``announce`` (the number of samples) prints the start line once the
        backend is chosen; ``rows=True`` computes the rows in blocks and
        reports the progress between them (verbose only: one engine call is
        otherwise one step).
        """
        base = loo_base(self.estimator, Xu, yu, wu, base_bandwidth, factors, self.n_jobs)
        if announce is not None:
            self._announce(announce, Xu, wu, _backend(base))
        loo = base._leave_one_out()
        if not (rows and self.verbose):
            return base, loo.predictions(factors, n_jobs=self.n_jobs)
        blocks = np.array_split(np.arange(len(Xu)), min(len(Xu), _ROW_BLOCKS))
        parts = []
        for block in blocks:
            parts.append(loo.predictions(factors, n_jobs=self.n_jobs, rows=block))
            self._progress.update(block[-1] + 1, len(Xu), "training rows")
        return base, np.concatenate(parts, axis=1)

    def _fit_grid_loo(self, Xu, yu, wu, n_samples: int) -> np.ndarray:
        cats, _ = self._categories_of(Xu)
        if cats is not None and self.bandwidths is None and self.criterion == "loo":
            return self._fit_grid_mixed(Xu, yu, wu, n_samples, cats)
        candidates = self._candidates(Xu, wu)
        first = candidates[0]
        # Multiples of one vector share each chunk's distances; a lambda is no multiple.
        multiples = cats is None
        if multiples:
            factors = np.array([h[0] / first[0] for h in candidates])
            multiples = all(
                np.allclose(h, f * first, rtol=1e-12, atol=0)
                for h, f in zip(candidates, factors, strict=True)
            )
        if multiples:
            groups = [(first, factors, np.arange(len(candidates)))]
        else:  # not multiples of one vector: distances per candidate
            groups = [(h, np.ones(1), np.array([t])) for t, h in enumerate(candidates)]
        scores = np.empty(len(candidates))
        for i, (base_bandwidth, group_factors, index) in enumerate(
            self._progress_groups(groups, candidates, scores)
        ):
            announce = n_samples if i == 0 else None
            if self.criterion != "loo":  # in-sample fits and hat diagonal of the protocol
                base = loo_base(self.estimator, Xu, yu, wu, base_bandwidth, group_factors,
                                self.n_jobs)  # fmt: skip
                if announce is not None:
                    self._announce(announce, Xu, wu, _backend(base))
                fits, hat = base._leave_one_out().fits(group_factors, n_jobs=self.n_jobs)
                Y = yu.reshape(len(yu), -1)
                scores[index] = criterion_scores(fits, hat, Y, wu, self.criterion)
                continue
            base, P = self._loo_predictions(
                Xu, yu, wu, base_bandwidth, group_factors, announce, rows=len(groups) == 1
            )
            for t, P_t in zip(index, P, strict=True):
                scores[t] = self._score(base, P_t, yu, wu)
        return self._record_grid(candidates, scores)

    def _fit_grid_mixed(self, Xu, yu, wu, n_samples: int, cats) -> np.ndarray:
        """Score the default grid on mixed data: every lambda vector from one pass (see Notes)."""
        base = self._base_bandwidth(Xu, wu)
        candidates, grid = _search_mixed.candidates(cats, base, _DEFAULT_FACTORS)
        scores, fitted = _search_mixed.grid_scores(
            self, Xu, yu, wu, base, _DEFAULT_FACTORS, grid, self._score
        )
        self._announce(n_samples, Xu, wu, _backend(fitted))
        self._progress.update(len(candidates), len(candidates), "candidates")
        return self._record_grid(candidates, scores)

    def _record_grid(self, candidates: list, scores: np.ndarray) -> np.ndarray:
        """Set the grid's results; return the best candidate."""
        if not np.isfinite(scores).any():
            raise ValueError(
                "No candidate bandwidth could be scored: with fallback='nan' every candidate "
                "left some training point without a neighbour."
            )
        self.best_index_ = int(np.argmax(scores))
        best = candidates[self.best_index_]
        params = [{"bandwidth": h} for h in candidates]
        self.cv_results_ = {
            "params": params,
            "param_bandwidth": np.ma.MaskedArray(
                np.empty(len(candidates), dtype=object), mask=False
            ),
            "mean_test_score": scores,
            "rank_test_score": rankdata(-scores, method="min").astype(np.int32),
        }
        self.cv_results_["param_bandwidth"][:] = candidates
        self.best_score_ = float(scores[self.best_index_])
        self.best_params_ = {"bandwidth": best}
        self.n_iter_ = len(candidates)
        return best

    def _fit_grid_cv(self, X, y, candidates: list[np.ndarray], params: dict) -> None:
        step = self.estimator.steps[-1][0] if isinstance(self.estimator, Pipeline) else None
        search = GridSearchCV(
            self.estimator,
            {"bandwidth" if step is None else f"{step}__bandwidth": candidates},
            scoring=self._scorer,
            cv=self.cv,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        search.fit(X, y, **params)
        for name in (
            "cv_results_",
            "best_estimator_",
            "best_score_",
            "best_params_",
            "best_index_",
        ):
            setattr(self, name, getattr(search, name))
        self.n_iter_ = len(candidates)

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
        tie = np.arange(d) if self.per_feature else shared
        if cats is not None and not _search_mixed.takes_lambdas(loo):
            raise ValueError(
                f"method={self.method!r} does not learn the lambdas of "
                f"{type(self.estimator).__name__}'s categorical features; use method='grid', "
                "which scores a grid of them."
            )
        to_bandwidth = getattr(loo, "bandwidth_at", lambda t: h0 * np.exp(t))
        return loo, loss_fn, tie, to_bandwidth

    def _finish_gradient(self, Xu, yu, wu, bandwidth) -> np.ndarray:
        """Score the selected bandwidth (``best_score_``) and return it."""
        base, P = self._loo_predictions(Xu, yu, wu, bandwidth, np.ones(1))
        self.best_score_ = self._score(base, P[0], yu, wu)
        return bandwidth

    def _fit_lbfgs(self, Xu, yu, wu) -> np.ndarray:
        loo, loss_fn, tie, to_bandwidth = self._gradient_setup(Xu, yu, wu)
        theta, self.loss_curve_, self.n_iter_, converged = _search_lbfgs.minimise(
            loo, tie.max() + 1, tie, loss_fn, wu, max_iter=self.max_iter, tol=self.tol,
            bound=_MAX_LOG_STEP,
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
        # Minibatches are drawn in training order: the same random_state gives
        # the same bandwidths on every algorithm.
        for epoch in range(1, self.max_iter + 1):
            order = rng.permutation(n)
            epoch_loss = 0.0
            for start in range(0, n, batch):
                rows = order[start : start + batch]
                loss, grad = loo.loss_grad(theta[tie], rows, loss_fn, wu[rows])
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
