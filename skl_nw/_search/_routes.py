"""The routes of BandwidthSearchCV's one fit skeleton, as functions of the search's context.

``BandwidthSearchCV.fit`` validates, routes the metadata, builds the context
(:class:`~skl_nw._search._context.Context`) and takes exactly one route; each
returns a :class:`~skl_nw._search._context.Selection` that the skeleton records
and refits:

* :func:`closed_form` -- the leave-one-out loss without refits: merges repeated
  rows, resolves ``method="auto"`` and runs the grid
  (:func:`~skl_nw._search._grid.grid_loo`), L-BFGS-B or Adam
  (:mod:`~skl_nw._search._gradient`);
* :func:`cross_validated` -- GridSearchCV over the candidates
  (:func:`~skl_nw._search._grid.grid_cv`);
* :func:`pipeline` -- either of them for a pipeline's last step;
* the span (:func:`~skl_nw._search._span.fit_span`) and the predictive
  distribution's proper scores (:func:`~skl_nw._search._crps.fit_distribution`).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import validate_data

from .._smoothers._base import check_weights
from ._auto import CENTRED_FACTORS, resolve_method
from ._context import Selection, check_two_points
from ._gradient import lbfgs, sgd
from ._grid import grid_cv, grid_loo
from ._progress import Progress, _bandwidths, _say, announce
from ._results import rename_results
from ._routing import Routed, validate

__all__ = ["check_criterion", "closed_form", "cross_validated", "pipeline"]

_UNIT = {"grid": "candidates", "sgd": "epochs", "lbfgs": "iterations"}


def check_criterion(ctx, classifier: bool) -> None:
    """Raise where ``criterion`` does not go with the other parameters."""
    if ctx.criterion == "loo":
        return
    if classifier:
        raise ValueError(
            f"criterion={ctx.criterion!r} applies to regressors only; a classifier "
            "takes criterion='loo' (scored by scoring)."
        )
    if ctx.method not in ("grid", "auto") or not (isinstance(ctx.cv, str) and ctx.cv == "loo"):
        raise ValueError(
            f"criterion={ctx.criterion!r} needs method='grid' (or 'auto') and cv='loo' (an "
            f"in-sample criterion); got method={ctx.method!r}, cv={ctx.cv!r}."
        )
    if ctx.scoring is not None:
        raise ValueError(
            f"scoring applies to criterion='loo' only; got scoring={ctx.scoring!r} "
            f"with criterion={ctx.criterion!r}."
        )


def closed_form(ctx, X, y, w_nw, w_score) -> Selection:
    """Closed-form leave-one-out search (grid, SGD or L-BFGS-B) on validated data."""
    if (w_nw is None) != (w_score is None):
        raise ValueError(
            "sample_weight reaches "
            + ("the estimator's fit but not the scorer" if w_score is None else
               "the scorer but not the estimator's fit")
            + "; the closed-form leave-one-out (cv='loo', method='sgd' or 'lbfgs') weights "
            "its fits and its scores alike. Request it for both or for neither "
            "(set_fit_request and set_score_request on the estimator, set_score_request "
            "on a scorer), or pass an integer cv."
        )  # fmt: skip
    w = check_weights(w_nw, X)
    cats, _ = ctx.categories_of(X, w)
    Xu, yu, wu = ctx.merged(X, y, w)
    check_two_points(len(Xu), "Leave-one-out", "distinct training points")
    yu = ctx.scaled_targets(yu, wu)
    at_rule = clone(ctx.estimator).set_params  # the protocol object at the rule of thumb
    ctx.method_ = resolve_method(ctx, cats, lambda: at_rule(
        bandwidth=ctx.base_bandwidth(Xu, wu)).fit(Xu, yu, wu)._leave_one_out())  # fmt: skip
    ctx.progress = Progress(ctx.verbose)
    if ctx.method_ == "grid":
        selection = grid_loo(ctx, Xu, yu, wu, len(X))
    else:
        # The gradient passes run on brute force, whatever the estimator's algorithm.
        announce(ctx, len(X), Xu, wu, "brute force")
        selection = (sgd if ctx.method_ == "sgd" else lbfgs)(ctx, Xu, yu, wu)
    if ctx.verbose:
        _say(
            f"Done in {ctx.progress.elapsed():.1f} s ({selection.n_iter_} {_UNIT[ctx.method_]}): "
            f"bandwidth {_bandwidths(selection.best_params_['bandwidth'], ctx.verbose)}, "
            f"score {selection.best_score_:.6g}"
        )
    return selection


def cross_validated(ctx, X, y, routed: Routed, continuous) -> Selection:
    """GridSearchCV over the candidates of validated data (refits on every split)."""
    return grid_cv(ctx, X, y, _cv_candidates(ctx, X, y, check_weights(routed.nw, X)),
                   routed.search, continuous)  # fmt: skip


def _cv_candidates(ctx, X, y, w: np.ndarray) -> list[np.ndarray]:
    """Return the candidates of a cv other than "loo" (GridSearchCV's: refits per split)."""
    cats, _ = ctx.categories_of(X, w)
    if ctx.method == "auto" and ctx.bandwidths is None and cats is not None:
        # 40 x 7^J default candidates, each refitted per split, cannot finish:
        # a small grid around the leave-one-out optimum instead.
        return _centred_candidates(ctx, X, y, w)
    return ctx.candidates(X, w)


def _centred_candidates(ctx, X, y, w) -> list[np.ndarray]:
    """Return a small grid around the leave-one-out optimum (mixed data, cv other than "loo").

    L-BFGS-B finds the leave-one-out optimum (continuous bandwidths and
    lambdas); the candidates are :data:`CENTRED_FACTORS` times its continuous
    bandwidths crossed with three values of the lambdas: at most 15
    candidates, so 15 refits per split instead of 40 x 7^J.
    """
    inner = ctx.replace(method="lbfgs", cv="loo", verbose=0)
    h = closed_form(inner, X, y, w, w).best_params_["bandwidth"]
    cats, _ = ctx.categories_of(X, w)
    top = np.asarray(cats.max_lambdas(), dtype=float)
    lam = h[cats.mask]
    candidates = []
    for lambdas in (lam, lam / 2, (lam + top) / 2):
        for factor in CENTRED_FACTORS:
            c = h.copy()
            c[~cats.mask] *= factor
            c[cats.mask] = lambdas
            # No continuous feature (or a lambda at 0): some candidates coincide.
            if not any(np.array_equal(c, other) for other in candidates):
                candidates.append(c)
    return candidates


def pipeline(search, ctx, X, y, routed: Routed, closed: bool) -> Selection:
    """Search the bandwidth of a pipeline's last step (``closed``: by the closed form).

    The closed form does what ``make_pipeline(..., BandwidthSearchCV(step))``
    does: the preceding steps fitted once, the search on their output, the
    selection named ``<step>__bandwidth`` (the skeleton refits the pipeline).
    Otherwise GridSearchCV refits the preceding steps on every split.
    """
    pipe = ctx.estimator
    name, step = pipe.steps[-1]
    validate_data(search, X, skip_check_array=True)  # n_features_in_, feature_names_in_
    inner = ctx.replace(estimator=step)
    Xt = X if len(pipe) == 1 else clone(pipe[:-1]).fit_transform(X, y, **routed.pre)
    Xt, yt = validate(type(search)(step), step, Xt, y)
    if not closed:
        candidates = _cv_candidates(inner, Xt, yt, check_weights(routed.nw, Xt))
        return grid_cv(ctx, X, y, candidates, routed.search, inner.continuous_mask(Xt))
    selection = closed_form(inner, Xt, yt, routed.nw, routed.score)
    key = f"{name}__bandwidth"
    selection.best_params_ = {key: selection.best_params_["bandwidth"]}
    if selection.cv_results_ is not None:
        selection.cv_results_ = rename_results(selection.cv_results_, key)
    return selection
