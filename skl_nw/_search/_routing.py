"""Where BandwidthSearchCV's inputs go: validation, the scorer, and the routing of sample_weight."""

from __future__ import annotations

import copy
import inspect
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from sklearn import config_context
from sklearn.base import clone, is_classifier
from sklearn.metrics import check_scoring
from sklearn.pipeline import Pipeline
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    get_routing_for_object,
    process_routing,
)
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import has_fit_parameter, validate_data

from .. import _categorical
from .._smoothers._base import _NWBase
from ._scoring import _DefaultScorer

__all__ = ["Routed", "fit_weighted", "get_scorer", "metadata_router", "route", "validate"]

_ESTIMATOR_ERROR = (
    "estimator must be a NadarayaWatsonRegressor, a ParzenClassifier, a "
    "LocalPolynomialRegressor, or a Pipeline whose last step is one of them; got {}. To "
    "tune a bandwidth after preprocessing, pass make_pipeline(StandardScaler(), "
    "NadarayaWatsonRegressor()) or put BandwidthSearchCV last in the pipeline."
)


def _nw_step(estimator):
    """Return the kernel estimator searched: ``estimator`` or its pipeline's last step.

    A Nadaraya–Watson regressor, a Parzen classifier or a local polynomial
    regressor; None when there is none (any other estimator, or a pipeline
    not ending in one).
    """
    if isinstance(estimator, Pipeline) and estimator.steps:
        estimator = estimator.steps[-1][1]
    return estimator if isinstance(estimator, _NWBase) else None


class Routed(NamedTuple):
    """Where ``fit``'s ``sample_weight`` goes."""

    fit: dict  # to the estimator's (or the pipeline's) fit
    search: dict  # to GridSearchCV.fit
    nw: np.ndarray | None  # the Nadaraya–Watson estimator's fit weights
    score: np.ndarray | None  # the scorer's weights
    pre: dict  # to the pipeline's preceding steps (fit_transform)


def validate(target, estimator, X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``X, y`` for ``estimator`` (``target`` records ``n_features_in_``)."""
    classifier = is_classifier(estimator)
    step = _nw_step(estimator)
    cats = _categorical.resolve(step, X) if step is not None else None
    _categorical.check_numeric(X, None if cats is None else cats.mask)
    if cats is not None:
        # Categorical features: the estimator encodes them; a DataFrame stays one.
        Xv, y = validate_data(target, X, y, dtype=None, ensure_all_finite=False,
                              multi_output=not classifier, y_numeric=not classifier)  # fmt: skip
        X = X if hasattr(X, "iloc") else Xv
    else:
        X, y = validate_data(
            target, X, y, dtype=np.float64, multi_output=not classifier, y_numeric=not classifier
        )
    if classifier:
        check_classification_targets(y)
    return X, y


def get_scorer(estimator, scoring):
    """Return the scorer of ``scoring`` (None: the default score of ``estimator``)."""
    if scoring is None:
        return _DefaultScorer(estimator)
    return check_scoring(estimator, scoring)


def route(search, sample_weight: ArrayLike | None) -> Routed:
    """Where ``sample_weight`` goes, with metadata routing on or off."""
    pipe = search.estimator if isinstance(search.estimator, Pipeline) else None
    given = {} if sample_weight is None else {"sample_weight": sample_weight}
    if not _routing_enabled():
        if pipe is None or sample_weight is None:
            return Routed(given, given, sample_weight, sample_weight, {})
        # Frequency weights: every step whose fit takes them gets them.
        pre = {
            f"{name}__sample_weight": sample_weight
            for name, step in pipe.steps[:-1]
            if step not in (None, "passthrough") and has_fit_parameter(step, "sample_weight")
        }
        fit = {**pre, f"{pipe.steps[-1][0]}__sample_weight": sample_weight}
        return Routed(fit, fit, sample_weight, sample_weight, pre)
    routed = process_routing(search, "fit", **given)
    fit, score = routed.estimator.fit, routed.scorer.score.get("sample_weight")
    if pipe is None:
        return Routed(fit, given, fit.get("sample_weight"), score, {})
    steps = process_routing(pipe, "fit", **fit)  # raises for steps with unset requests
    nw = steps[pipe.steps[-1][0]].fit.get("sample_weight")
    pre = {}
    if len(pipe) > 1:
        consumed = get_routing_for_object(pipe[:-1]).consumes("fit_transform", fit)
        pre = {key: value for key, value in fit.items() if key in consumed}
    return Routed(fit, given, nw, score, pre)


def fit_weighted(grid, X, y, params: dict):
    """Fit the GridSearchCV ``grid`` with ``params``, scoring the held-out folds as it fits.

    With metadata routing on, as routed.  Off, scikit-learn weights a
    pipeline's fits (``step__sample_weight``) but not its fold scores, and a
    bare estimator's scores from version 1.7 only: the weights then go through
    routing for this fit, on a clone whose fitting steps and score request
    them (a scorer that cannot request them is left as scikit-learn has it).
    """
    weights = next(iter(params.values()), None)
    scorer = grid.scoring
    if _routing_enabled() or weights is None or not _takes_weights(scorer):
        return grid.fit(X, y, **params)
    estimator = clone(grid.estimator)
    steps = estimator.steps if isinstance(estimator, Pipeline) else [(None, estimator)]
    with config_context(enable_metadata_routing=True):
        for _, step in steps:
            if step not in (None, "passthrough") and has_fit_parameter(step, "sample_weight"):
                step.set_fit_request(sample_weight=True)
        steps[-1][1].set_score_request(sample_weight=True)
        if isinstance(scorer, _DefaultScorer):
            scorer = copy.copy(scorer)
            scorer.estimator = estimator  # its requests are the estimator's
        else:
            scorer = copy.deepcopy(scorer).set_score_request(sample_weight=True)
        grid.set_params(estimator=estimator, scoring=scorer)
        return grid.fit(X, y, sample_weight=weights)


def _takes_weights(scorer) -> bool:
    """Whether ``scorer`` can request ``sample_weight`` and its metric takes them."""
    if isinstance(scorer, _DefaultScorer):
        return True
    metric = getattr(scorer, "_score_func", None)
    if metric is None or not hasattr(scorer, "set_score_request"):
        return False
    return names_sample_weight(metric)


def names_sample_weight(fn) -> bool:
    """Whether the callable ``fn`` has a ``sample_weight`` parameter (False: no signature)."""
    try:
        return "sample_weight" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to read: as scikit-learn leaves it
        return False


def metadata_router(search) -> MetadataRouter:
    """Return the search's metadata routing (see ``BandwidthSearchCV.get_metadata_routing``)."""
    router = MetadataRouter(owner=type(search).__name__)
    router.add(
        estimator=search.estimator,
        method_mapping=MethodMapping()
        .add(caller="fit", callee="fit")
        .add(caller="score", callee="score"),
    )
    router.add(
        scorer=get_scorer(search.estimator, search.scoring),
        method_mapping=MethodMapping().add(caller="fit", callee="score"),
    )
    return router
