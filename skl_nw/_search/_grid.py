"""The grid routes of BandwidthSearchCV: closed-form leave-one-out grid and GridSearchCV.

Functions of the search's context (:class:`~skl_nw._search._context.Context`).

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
from . import _mixed
from ._backend import _backend
from ._context import DEFAULT_FACTORS, Selection
from ._paths import robust, scoring_paths
from ._progress import announce, report_scores, say_extension
from ._results import edge_of, grid_results, warn_at_edge
from ._routing import fit_weighted
from ._scoring import _DefaultScorer

__all__ = ["grid_cv", "grid_loo", "loo_predictions"]

# Where the default grid's best is an end, it grows by this many multiples (the same
# 2^(1/4) step, a factor 4) at most EXTEND_BLOCKS times: up to 2^-11.5 and 2^10.25.
EXTEND_STEPS = 8
EXTEND_BLOCKS = 3
# On the exact path a grid of multiples of one bandwidth (one engine call) runs in up
# to _ROW_BLOCKS blocks of at least _MIN_BLOCK_ROWS training rows, so that a long pass
# can report its progress between them (whatever verbose is: the same calls either way).
_ROW_BLOCKS = 50
_MIN_BLOCK_ROWS = 2048


def loo_predictions(ctx, Xu, yu, wu, bandwidth) -> tuple:
    """Return the fitted estimator and its leave-one-out predictions (n, k) at ``bandwidth``."""
    (path,) = scoring_paths(ctx.estimator, Xu, yu, wu, bandwidth, np.ones(1), ctx.n_jobs, "loo")
    return path.fitted, _path_predictions(ctx, path, len(Xu))[0]


def _path_predictions(ctx, path, n: int) -> np.ndarray:
    """Leave-one-out predictions (F, n, k) of one path, in blocks of rows where it can.

    The blocks do not depend on ``verbose`` (progress never changes what is
    computed); between them, a long pass reports how far it has gone.
    """
    loo = path.fitted._leave_one_out()
    n_blocks = min(_ROW_BLOCKS, n // _MIN_BLOCK_ROWS) if path.by_rows else 1
    if n_blocks <= 1:
        return loo.predictions(path.factors, n_jobs=ctx.n_jobs)
    parts = []
    for block in np.array_split(np.arange(n), n_blocks):
        parts.append(loo.predictions(path.factors, n_jobs=ctx.n_jobs, rows=block))
        ctx.progress.update(block[-1] + 1, n, "training rows")
    return np.concatenate(parts, axis=1)


def _score_multiples(ctx, Xu, yu, wu, bandwidth, factors, n_samples=None):
    """Scores and per-row standard deviations of ``factor * bandwidth``, per factor.

    Each candidate is scored on the path :func:`scoring_paths` gives it
    (the binned grid or the exact path); ``n_samples`` given, the start line
    is printed once they are chosen.
    """
    start = time.perf_counter()
    paths = scoring_paths(ctx.estimator, Xu, yu, wu, bandwidth, factors, ctx.n_jobs,
                          ctx.criterion)  # fmt: skip
    if n_samples is not None:
        announce(ctx, n_samples, Xu, wu, " and ".join(p.backend for p in paths))
    scores = np.empty(len(factors))
    stds = np.full(len(factors), np.nan)
    for path in paths:
        if ctx.criterion != "loo":  # in-sample fits and hat diagonal of the protocol
            fits, hat = path.fitted._leave_one_out().fits(path.factors, n_jobs=ctx.n_jobs)
            middle = time.perf_counter()
            scores[path.part] = ctx.criterion_scores(fits, hat, yu, wu)
        else:
            P = _path_predictions(ctx, path, len(Xu))
            middle = time.perf_counter()
            scores[path.part] = [ctx.score(path.fitted, P_t, yu, wu) for P_t in P]
            stds[path.part] = [ctx.row_std(path.fitted, P_t, yu, wu) for P_t in P]
        ctx.grid_time[0] += middle - start
        start = time.perf_counter()
        ctx.grid_time[1] += start - middle
    return scores, stds


def grid_loo(ctx, Xu, yu, wu, n_samples: int) -> Selection:
    """Score the candidates by closed-form leave-one-out (or an in-sample criterion)."""
    cats, _ = ctx.categories_of(Xu, wu)
    if cats is not None and ctx.bandwidths is None and not robust(ctx.estimator):
        return _mixed_grid(ctx, Xu, yu, wu, n_samples, cats)
    if cats is None and ctx.bandwidths is None:
        return _default_grid(ctx, Xu, yu, wu, n_samples)
    candidates = ctx.candidates(Xu, wu)
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
        s, sd = _score_multiples(ctx, Xu, yu, wu, bandwidth, group_factors,
                                 n_samples if i == 0 else None)  # fmt: skip
        report_scores(ctx, candidates, len(scores), s)
        scores.extend(s)
        stds.extend(sd)
    return _record(ctx, candidates, np.array(scores), np.array(stds), cats)


def _default_grid(ctx, Xu, yu, wu, n_samples: int) -> Selection:
    """Score the default multiples of the rule of thumb; extend them past a best end."""
    base = ctx.base_bandwidth(Xu, wu)
    factors = DEFAULT_FACTORS
    scores, stds = _score_multiples(ctx, Xu, yu, wu, base, factors, n_samples)
    report_scores(ctx, [f * base for f in factors], 0, scores)
    step = 2.0 ** (np.arange(1, EXTEND_STEPS + 1) / 4)
    for _ in range(EXTEND_BLOCKS):
        best = int(np.argmax(scores))
        if 0 < best < len(factors) - 1:
            break
        upward = best == len(factors) - 1
        new = factors[-1] * step if upward else factors[0] / step[::-1]
        if ctx.verbose:
            say_extension("largest" if upward else "smallest", new, base)
        s, sd = _score_multiples(ctx, Xu, yu, wu, base, new)
        join = (lambda a, b: np.concatenate([a, b])) if upward else (
            lambda a, b: np.concatenate([b, a]))  # fmt: skip
        factors, scores, stds = join(factors, new), join(scores, s), join(stds, sd)
    return _record(ctx, [f * base for f in factors], scores, stds, None)


def _mixed_grid(ctx, Xu, yu, wu, n_samples: int, cats) -> Selection:
    """Score the default grid on mixed data: every lambda vector from one pass.

    Leave-one-out predictions, or in-sample fits and hat diagonals for the
    criteria, all from the per-cell sums of one pass (see Notes).
    """
    start = time.perf_counter()
    base = ctx.base_bandwidth(Xu, wu)
    candidates, grid = _mixed.candidates(cats, base, DEFAULT_FACTORS)
    scores, fitted = _mixed.grid_scores(ctx, Xu, yu, wu, base, DEFAULT_FACTORS, grid)
    ctx.grid_time[0] += time.perf_counter() - start
    announce(ctx, n_samples, Xu, wu, _backend(fitted))
    ctx.progress.update(len(candidates), len(candidates), "candidates")
    # The lambdas' pass scores the candidates in one go: no per-row spread kept.
    stds = np.full(len(candidates), np.nan)
    return _record(ctx, candidates, scores, stds, cats)


def _record(ctx, candidates: list, scores, stds, cats) -> Selection:
    """Return the grid's selection; warn if the best is an end of the grid."""
    if not np.isfinite(scores).any():
        raise ValueError(ctx.unscorable())
    best = int(np.argmax(scores))
    n = len(candidates)
    scores, stds = ctx.in_y_units(scores), ctx.in_y_units(stds)
    results = grid_results(
        candidates, scores, stds, np.full(n, ctx.grid_time[0] / n),
        np.full(n, ctx.grid_time[1] / n),
    )  # fmt: skip
    continuous = None if cats is None else ~cats.mask
    warn_at_edge(edge_of(candidates, best, continuous), ctx.bandwidths)
    return Selection(
        best_params_={"bandwidth": candidates[best]},
        best_score_=float(scores[best]),
        n_iter_=n,
        best_index_=best,
        cv_results_=results,
    )


def grid_cv(ctx, X, y, candidates: list, params: dict, continuous) -> Selection:
    """GridSearchCV over ``candidates``; ``continuous`` masks the searched step's features."""
    step = ctx.estimator.steps[-1][0] if isinstance(ctx.estimator, Pipeline) else None
    if isinstance(ctx.scorer, _DefaultScorer) and not is_classifier(ctx.estimator):
        # The squared residuals in a unit near the spread of y (see scaled_targets).
        ctx.scaled_targets(np.asarray(y, dtype=float), np.ones(len(y)))
        ctx.scorer.unit = ctx.y_unit
    search = GridSearchCV(
        ctx.estimator,
        {"bandwidth" if step is None else f"{step}__bandwidth": candidates},
        scoring=ctx.scorer,
        cv=ctx.cv,
        n_jobs=ctx.n_jobs,
        verbose=ctx.verbose,
    )
    with warnings.catch_warnings():
        # A held-out fold beyond the training folds' range is scored as predicted:
        # the extrapolation warning speaks to a user's queries, not to the folds.
        warnings.filterwarnings("ignore", message=EXTRAPOLATING, category=UserWarning)
        fit_weighted(search, X, y, params)
    results = search.cv_results_
    for key in [k for k in results if k.endswith("_test_score") and k[:4] != "rank"]:
        results[key] = ctx.in_y_units(results[key])
    warn_at_edge(edge_of(candidates, search.best_index_, continuous), ctx.bandwidths)
    return Selection(
        best_params_=search.best_params_,
        best_score_=float(ctx.in_y_units(search.best_score_)),
        n_iter_=len(candidates),
        best_index_=search.best_index_,
        cv_results_=results,
        best_estimator_=search.best_estimator_,
    )
