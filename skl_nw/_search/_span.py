"""Span selection (LOESS): the search's route when the estimator has a ``span``.

With a nearest-neighbour span, a common multiple of the bandwidth changes
nothing (each radius scales with it): the span is what the search selects,
the bandwidth (the metric's shape) stays the estimator's.  Each candidate is
one fit, then its closed-form leave-one-out predictions (row ``i`` left out:
its ``k``-th neighbour is taken among the other rows) or its in-sample fits
and the trace of its smoother for ``criterion="aicc"`` / ``"gcv"`` (as R's
fANCOVA ``loess.as`` selects a span).  With robustness iterations, each
candidate is scored at its final robustness weights (its fitted smoother).
Any ``cv`` but "loo" is GridSearchCV's over ``span``.  Rows are never merged
here (merged duplicates would count as one row towards the span).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from .._engine import npar
from .._smoothers._base import check_weights
from ._context import Selection, check_two_points
from ._progress import Progress, _say
from ._results import caller_level, grid_results, rename_results
from ._routing import fit_weighted

__all__ = ["DEFAULT_SPANS", "candidate_spans", "fit_span", "selects_span"]

#: The default spans: 2^(k/4) from 1/32 to 1 (21 candidates), those that give each
#: local fit more rows than its coefficients (and at least 5) kept.
DEFAULT_SPANS = 2.0 ** (np.arange(-20, 1) / 4)


def selects_span(step) -> bool:
    """Whether the search selects ``span``: its (last) estimator has one set."""
    return getattr(step, "span", None) is not None


def check_spans(search, step) -> None:
    """Raise when ``spans`` is given for an estimator without a span; return None."""
    if search.spans is not None and not selects_span(step):
        raise ValueError(
            f"spans={search.spans!r} needs an estimator with a span to select; "
            f"{type(step).__name__} has span=None. Set span (any value: the search replaces "
            "it), or leave spans=None to select the bandwidth."
        )


def candidate_spans(ctx, n: int, d: int) -> np.ndarray:
    """Return the given ``spans``, or the default ones that leave each fit enough rows."""
    if ctx.spans is not None:
        spans = np.asarray(ctx.spans, dtype=float).ravel()
        if spans.size == 0 or not np.all(np.isfinite(spans) & (spans > 0)):
            raise ValueError(f"spans must be positive finite numbers; got {ctx.spans!r}.")
        return spans
    degree = getattr(ctx.estimator, "degree", 0)
    need = max(5, npar(d, degree) + 1)  # more rows than a local polynomial's coefficients
    spans = DEFAULT_SPANS[np.floor(DEFAULT_SPANS * n) >= need]
    return spans if spans.size else DEFAULT_SPANS[-1:]


def fit_span(ctx, X, y, routed, loo_cv: bool) -> Selection:
    """Select the span (closed form, or GridSearchCV for another ``cv``)."""
    if hasattr(ctx.estimator, "steps"):
        raise ValueError(
            "Span selection takes the estimator itself, not a pipeline: put the preceding "
            "steps outside, make_pipeline(scaler, BandwidthSearchCV(estimator))."
        )
    if ctx.method not in ("grid", "auto"):
        raise ValueError(
            f"method={ctx.method!r} learns bandwidths by gradients; a span is selected "
            "from a grid: use method='grid' or 'auto' (or span=None to learn bandwidths)."
        )
    spans = candidate_spans(ctx, len(X), X.shape[1])
    if not loo_cv:
        grid = GridSearchCV(ctx.estimator, {"span": list(spans)}, scoring=ctx.scorer,
                            cv=ctx.cv, n_jobs=ctx.n_jobs, verbose=ctx.verbose)  # fmt: skip
        fit_weighted(grid, X, y, routed.search)
        return Selection(
            best_params_=grid.best_params_, best_score_=grid.best_score_,
            n_iter_=len(spans), best_index_=grid.best_index_, cv_results_=grid.cv_results_,
            span_=grid.best_params_["span"], best_estimator_=grid.best_estimator_,
        )  # fmt: skip
    w = check_weights(routed.nw, X)
    check_two_points(np.count_nonzero(w), "Leave-one-out")
    yu = ctx.scaled_targets(np.asarray(y), w)
    ctx.progress = Progress(ctx.verbose)
    if ctx.verbose:
        what = "closed-form leave-one-out" if ctx.criterion == "loo" else ctx.criterion
        _say(f"{len(X)} samples, {X.shape[1]} features: {len(spans)} spans scored by {what}")
    scores, stds, times = _score_spans(ctx, X, yu, w, routed.nw, spans)
    if not np.isfinite(scores).any():
        raise ValueError(ctx.unscorable())
    best = int(np.argmax(scores))
    scores, stds = ctx.in_y_units(scores), ctx.in_y_units(stds)
    results = grid_results(list(spans), scores, stds, times[:, 0], times[:, 1])
    if best == 0 and len(spans) > 1:
        warnings.warn(
            f"The selected span {spans[0]:g} is the smallest candidate: the score may still "
            "improve below it. Pass smaller spans (spans=[...]).",
            UserWarning,
            stacklevel=caller_level(),
        )
    if ctx.verbose:
        _say(f"Done in {ctx.progress.elapsed():.1f} s ({len(spans)} spans): span "
             f"{spans[best]:.4g}, score {scores[best]:.6g}")  # fmt: skip
    return Selection(
        best_params_={"span": float(spans[best])}, best_score_=float(scores[best]),
        n_iter_=len(spans), best_index_=best, cv_results_=rename_results(results, "span"),
        span_=float(spans[best]),
    )  # fmt: skip


def _score_spans(ctx, X, yu, w, w_fit, spans):
    """Scores, per-row spreads and (fit, score) seconds of each candidate span."""
    scores, stds = np.empty(len(spans)), np.full(len(spans), np.nan)
    times = np.zeros((len(spans), 2))
    for t, span in enumerate(spans):
        start = time.perf_counter()
        fitted = clone(ctx.estimator).set_params(span=float(span))
        fitted.fit(X, yu, sample_weight=w_fit)
        loo = fitted._leave_one_out()
        if ctx.criterion != "loo":
            fits, hat = loo.fits((1.0,), n_jobs=ctx.n_jobs)
            middle = time.perf_counter()
            scores[t] = ctx.criterion_scores(fits, hat, yu, w)[0]
        else:
            P = loo.predictions((1.0,), n_jobs=ctx.n_jobs)[0]
            middle = time.perf_counter()
            scores[t] = ctx.score(fitted, P, yu, w)
            stds[t] = ctx.row_std(fitted, P, yu, w)
        times[t] = middle - start, time.perf_counter() - middle
        if ctx.verbose >= 2:
            _say(f"span {t + 1}/{len(spans)}: {span:.4g}, "
                 f"score {ctx.in_y_units(scores[t]):.6g}")  # fmt: skip
        ctx.progress.update(t + 1, len(spans), "spans")
    return scores, stds, times
