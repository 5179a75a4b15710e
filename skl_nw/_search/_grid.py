"""The grid routes of BandwidthSearchCV: closed-form leave-one-out grid and GridSearchCV.

The default continuous grid grows where its best candidate is an end
(:data:`EXTEND_STEPS` more multiples at a time, at most :data:`EXTEND_BLOCKS`
times); any grid whose best candidate is still an end warns
(:func:`skl_nw._results.warn_at_edge`).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import is_classifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from .._inference._bands import EXTRAPOLATING
from .._inference._formulas import criterion_parts, infinite_criterion, negated_criterion
from . import _mixed
from ._backend import _backend
from ._candidates import DEFAULT_FACTORS
from ._paths import scoring_paths
from ._results import edge_of, grid_results, warn_at_edge
from ._scoring import _DefaultScorer

__all__ = ["_Grid"]

# Where the default grid's best is an end, it grows by this many multiples (the same
# 2^(1/4) step, a factor 4) at most EXTEND_BLOCKS times: up to 2^-11.5 and 2^10.25.
EXTEND_STEPS = 8
EXTEND_BLOCKS = 3
# On the exact path a grid of multiples of one bandwidth (one engine call) runs in up
# to _ROW_BLOCKS blocks of at least _MIN_BLOCK_ROWS training rows, so that a long pass
# can report its progress between them (whatever verbose is: the same calls either way).
_ROW_BLOCKS = 50
_MIN_BLOCK_ROWS = 2048


class _Grid:
    """The grid routes of :class:`BandwidthSearchCV` (a mixin: it uses the search's methods)."""

    def _loo_predictions(self, Xu, yu, wu, bandwidth) -> tuple:
        """Return the fitted estimator and its leave-one-out predictions (n, k) at ``bandwidth``."""
        (path,) = scoring_paths(self.estimator, Xu, yu, wu, bandwidth, np.ones(1), self.n_jobs,
                                "loo")  # fmt: skip
        return path.fitted, self._path_predictions(path, len(Xu))[0]

    def _path_predictions(self, path, n: int) -> np.ndarray:
        """Leave-one-out predictions (F, n, k) of one path, in blocks of rows where it can.

        The blocks do not depend on ``verbose`` (progress never changes what is
        computed); between them, a long pass reports how far it has gone.
        """
        loo = path.fitted._leave_one_out()
        n_blocks = min(_ROW_BLOCKS, n // _MIN_BLOCK_ROWS) if path.by_rows else 1
        if n_blocks <= 1:
            return loo.predictions(path.factors, n_jobs=self.n_jobs)
        parts = []
        for block in np.array_split(np.arange(n), n_blocks):
            parts.append(loo.predictions(path.factors, n_jobs=self.n_jobs, rows=block))
            self._progress.update(block[-1] + 1, n, "training rows")
        return np.concatenate(parts, axis=1)

    def _criterion_scores(self, fits, hat, yu, wu) -> np.ndarray:
        """Negated in-sample criterion per candidate; keeps its parts for an error message."""
        sigma2, trace, n = criterion_parts(fits, hat, yu.reshape(len(yu), -1), wu)
        self._criterion_terms.append((sigma2, trace, n))
        return negated_criterion(sigma2, trace, n, self.criterion)

    def _score_multiples(self, Xu, yu, wu, bandwidth, factors, announce=None):
        """Scores and per-row standard deviations of ``factor * bandwidth``, per factor.

        Each candidate is scored on the path :func:`scoring_paths` gives it
        (the binned grid or the exact path); ``announce`` (the number of
        samples) prints the start line once they are chosen.
        """
        start = time.perf_counter()
        paths = scoring_paths(self.estimator, Xu, yu, wu, bandwidth, factors, self.n_jobs,
                              self.criterion)  # fmt: skip
        if announce is not None:
            self._announce(announce, Xu, wu, " and ".join(p.backend for p in paths))
        scores = np.empty(len(factors))
        stds = np.full(len(factors), np.nan)
        for path in paths:
            if self.criterion != "loo":  # in-sample fits and hat diagonal of the protocol
                fits, hat = path.fitted._leave_one_out().fits(path.factors, n_jobs=self.n_jobs)
                middle = time.perf_counter()
                scores[path.part] = self._criterion_scores(fits, hat, yu, wu)
            else:
                P = self._path_predictions(path, len(Xu))
                middle = time.perf_counter()
                scores[path.part] = [self._score(path.fitted, P_t, yu, wu) for P_t in P]
                stds[path.part] = [self._row_std(path.fitted, P_t, yu, wu) for P_t in P]
            self._grid_time[0] += middle - start
            start = time.perf_counter()
            self._grid_time[1] += start - middle
        return scores, stds

    def _fit_grid_loo(self, Xu, yu, wu, n_samples: int) -> np.ndarray:
        cats, _ = self._categories_of(Xu)
        self._grid_time = [0.0, 0.0]  # seconds of predictions (fits) and of scoring
        self._criterion_terms = []  # (sigma^2, tr H, n) of each block of in-sample scores
        if cats is not None and self.bandwidths is None:
            return self._fit_grid_mixed(Xu, yu, wu, n_samples, cats)
        if cats is None and self.bandwidths is None:
            return self._fit_default_grid(Xu, yu, wu, n_samples)
        candidates = self._candidates(Xu, wu)
        first = candidates[0]
        # Multiples of one vector share each chunk's distances; a lambda is no multiple.
        factors = np.array([h[0] / first[0] for h in candidates])
        multiples = cats is None and all(
            np.allclose(h, f * first, rtol=1e-12, atol=0)
            for h, f in zip(candidates, factors, strict=True)
        )
        if multiples:
            groups = [(first, factors)]
        else:  # not multiples of one vector: distances per candidate
            groups = [(h, np.ones(1)) for h in candidates]
        scores, stds = [], []
        for i, (bandwidth, group_factors) in enumerate(groups):
            announce = n_samples if i == 0 else None
            s, sd = self._score_multiples(Xu, yu, wu, bandwidth, group_factors, announce)
            self._report_scores(candidates, len(scores), s)
            scores.extend(s)
            stds.extend(sd)
        return self._record_grid(candidates, np.array(scores), np.array(stds), cats)

    def _fit_default_grid(self, Xu, yu, wu, n_samples: int) -> np.ndarray:
        """Score the default multiples of the rule of thumb; extend them past a best end."""
        base = self._base_bandwidth(Xu, wu)
        factors = DEFAULT_FACTORS
        scores, stds = self._score_multiples(Xu, yu, wu, base, factors, n_samples)
        self._report_scores([f * base for f in factors], 0, scores)
        step = 2.0 ** (np.arange(1, EXTEND_STEPS + 1) / 4)
        for _ in range(EXTEND_BLOCKS):
            best = int(np.argmax(scores))
            if 0 < best < len(factors) - 1:
                break
            upward = best == len(factors) - 1
            new = factors[-1] * step if upward else factors[0] / step[::-1]
            if self.verbose:
                end = "largest" if upward else "smallest"
                self._say_extension(end, new, base)
            s, sd = self._score_multiples(Xu, yu, wu, base, new)
            join = (lambda a, b: np.concatenate([a, b])) if upward else (
                lambda a, b: np.concatenate([b, a]))  # fmt: skip
            factors, scores, stds = join(factors, new), join(scores, s), join(stds, sd)
        return self._record_grid([f * base for f in factors], scores, stds, None)

    def _fit_grid_mixed(self, Xu, yu, wu, n_samples: int, cats) -> np.ndarray:
        """Score the default grid on mixed data: every lambda vector from one pass.

        Leave-one-out predictions, or in-sample fits and hat diagonals for the
        criteria, all from the per-cell sums of one pass (see Notes).
        """
        start = time.perf_counter()
        base = self._base_bandwidth(Xu, wu)
        candidates, grid = _mixed.candidates(cats, base, DEFAULT_FACTORS)
        scores, fitted = _mixed.grid_scores(
            self, Xu, yu, wu, base, DEFAULT_FACTORS, grid, self._score
        )
        self._grid_time[0] += time.perf_counter() - start
        self._announce(n_samples, Xu, wu, _backend(fitted))
        self._progress.update(len(candidates), len(candidates), "candidates")
        # The lambdas' pass scores the candidates in one go: no per-row spread kept.
        stds = np.full(len(candidates), np.nan)
        return self._record_grid(candidates, scores, stds, cats)

    def _record_grid(self, candidates: list, scores, stds, cats) -> np.ndarray:
        """Set the grid's results; warn if the best is an end of the grid; return it."""
        if not np.isfinite(scores).any():
            raise ValueError(self._unscorable())
        self.best_index_ = int(np.argmax(scores))
        best = candidates[self.best_index_]
        n = len(candidates)
        scores, stds = self._in_y_units(scores), self._in_y_units(stds)
        self.cv_results_ = grid_results(
            candidates, scores, stds, np.full(n, self._grid_time[0] / n),
            np.full(n, self._grid_time[1] / n),
        )  # fmt: skip
        self.best_score_ = float(scores[self.best_index_])
        self.best_params_ = {"bandwidth": best}
        self.n_iter_ = n
        continuous = None if cats is None else ~cats.mask
        warn_at_edge(edge_of(candidates, self.best_index_, continuous), self.bandwidths)
        return best

    def _unscorable(self) -> str:
        """Why no candidate has a finite score (the error message)."""
        if self.criterion != "loo":
            sigma2, trace, n = zip(*self._criterion_terms, strict=True)
            return infinite_criterion(np.concatenate(sigma2), np.concatenate(trace), n[0],
                                      self.criterion)  # fmt: skip
        return (
            "No candidate bandwidth could be scored: with fallback='nan' every candidate "
            "left some training point without a neighbour."
        )

    def _fit_grid_cv(self, X, y, candidates: list, params: dict, continuous) -> None:
        """GridSearchCV over ``candidates``; ``continuous`` masks the searched step's features."""
        step = self.estimator.steps[-1][0] if isinstance(self.estimator, Pipeline) else None
        if isinstance(self._scorer, _DefaultScorer) and not is_classifier(self.estimator):
            # The squared residuals in a unit near the spread of y (see _scaled_targets).
            self._scaled_targets(np.asarray(y, dtype=float), np.ones(len(y)))
            self._scorer.unit = self._y_unit
        search = GridSearchCV(
            self.estimator,
            {"bandwidth" if step is None else f"{step}__bandwidth": candidates},
            scoring=self._scorer,
            cv=self.cv,
            n_jobs=self.n_jobs,
            verbose=self.verbose,
        )
        with warnings.catch_warnings():
            # A held-out fold beyond the training folds' range is scored as predicted:
            # the extrapolation warning speaks to a user's queries, not to the folds.
            warnings.filterwarnings("ignore", message=EXTRAPOLATING, category=UserWarning)
            search.fit(X, y, **params)
        for name in (
            "cv_results_",
            "best_estimator_",
            "best_score_",
            "best_params_",
            "best_index_",
        ):
            setattr(self, name, getattr(search, name))
        scores = [k for k in self.cv_results_ if k.endswith("_test_score") and k[:4] != "rank"]
        for key in scores:
            self.cv_results_[key] = self._in_y_units(self.cv_results_[key])
        self.best_score_ = float(self._in_y_units(self.best_score_))
        self.n_iter_ = len(candidates)
        self.method_ = "grid"
        warn_at_edge(edge_of(candidates, self.best_index_, continuous), self.bandwidths)
