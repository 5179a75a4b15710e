"""BandwidthSearchCV's plumbing: input checks, scorer, metadata routing and pipelines."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
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
from .._smoothers._base import _NWBase, check_weights
from ._results import rename_results
from ._scoring import _DefaultScorer

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


class _Routed(NamedTuple):
    """Where ``fit``'s ``sample_weight`` goes."""

    fit: dict  # to the estimator's (or the pipeline's) fit
    search: dict  # to GridSearchCV.fit
    nw: np.ndarray | None  # the Nadaraya–Watson estimator's fit weights
    score: np.ndarray | None  # the scorer's weights
    pre: dict  # to the pipeline's preceding steps (fit_transform)


class _Plumbing:
    """The parts of BandwidthSearchCV between its parameters and the search itself."""

    def _check_criterion(self, classifier: bool) -> None:
        if self.criterion == "loo":
            return
        if classifier:
            raise ValueError(
                f"criterion={self.criterion!r} applies to regressors only; a classifier "
                "takes criterion='loo' (scored by scoring)."
            )
        if self.method not in ("grid", "auto") or not (
            isinstance(self.cv, str) and self.cv == "loo"
        ):
            raise ValueError(
                f"criterion={self.criterion!r} needs method='grid' (or 'auto') and cv='loo' (an "
                f"in-sample criterion); got method={self.method!r}, cv={self.cv!r}."
            )
        if self.scoring is not None:
            raise ValueError(
                f"scoring applies to criterion='loo' only; got scoring={self.scoring!r} "
                f"with criterion={self.criterion!r}."
            )

    def _validate(self, X: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        classifier = is_classifier(self.estimator)
        step = _nw_step(self.estimator)
        cats = _categorical.resolve(step, X) if step is not None else None
        _categorical.check_numeric(X, None if cats is None else cats.mask)
        if cats is not None:
            # Categorical features: the estimator encodes them; a DataFrame stays one.
            Xv, y = validate_data(self, X, y, dtype=None, ensure_all_finite=False,
                                  multi_output=not classifier)  # fmt: skip
            X = X if hasattr(X, "iloc") else Xv
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, multi_output=not classifier)
        if classifier:
            check_classification_targets(y)
        return X, y

    def _get_scorer(self):
        if self.scoring is None:
            return _DefaultScorer(self.estimator)
        return check_scoring(self.estimator, self.scoring)

    def _route(self, sample_weight: ArrayLike | None) -> _Routed:
        """Where ``sample_weight`` goes, with metadata routing on or off."""
        pipe = self.estimator if isinstance(self.estimator, Pipeline) else None
        given = {} if sample_weight is None else {"sample_weight": sample_weight}
        if not _routing_enabled():
            if pipe is None or sample_weight is None:
                return _Routed(given, given, sample_weight, sample_weight, {})
            # Frequency weights: every step whose fit takes them gets them.
            pre = {
                f"{name}__sample_weight": sample_weight
                for name, step in pipe.steps[:-1]
                if step not in (None, "passthrough") and has_fit_parameter(step, "sample_weight")
            }
            fit = {**pre, f"{pipe.steps[-1][0]}__sample_weight": sample_weight}
            return _Routed(fit, fit, sample_weight, sample_weight, pre)
        routed = process_routing(self, "fit", **given)
        fit, score = routed.estimator.fit, routed.scorer.score.get("sample_weight")
        if pipe is None:
            return _Routed(fit, given, fit.get("sample_weight"), score, {})
        steps = process_routing(pipe, "fit", **fit)  # raises for steps with unset requests
        nw = steps[pipe.steps[-1][0]].fit.get("sample_weight")
        pre = {}
        if len(pipe) > 1:
            consumed = get_routing_for_object(pipe[:-1]).consumes("fit_transform", fit)
            pre = {key: value for key, value in fit.items() if key in consumed}
        return _Routed(fit, given, nw, score, pre)

    def _fit_pipeline(self, X, y, routed: _Routed, closed_form: bool) -> None:
        """Search the bandwidth of a pipeline's last step, then refit the pipeline."""
        pipe = self.estimator
        name, step = pipe.steps[-1]
        key = f"{name}__bandwidth"
        validate_data(self, X, skip_check_array=True)  # n_features_in_, feature_names_in_
        inner = type(self)(**{**self.get_params(deep=False), "estimator": step})
        Xt = X if len(pipe) == 1 else clone(pipe[:-1]).fit_transform(X, y, **routed.pre)
        Xt, yt = inner._validate(Xt, y)
        if not closed_form:  # preceding steps refitted on every split
            inner._scorer = inner._get_scorer()
            candidates = inner._cv_candidates(Xt, yt, check_weights(routed.nw, Xt))
            self._fit_grid_cv(X, y, candidates, routed.search, inner._continuous_mask(Xt))
            return
        # What make_pipeline(..., BandwidthSearchCV(step)) does: the preceding
        # steps fitted once, the search on their output.
        inner._scorer = inner._get_scorer()
        bandwidth = inner._search(Xt, yt, routed.nw, routed.score)
        for attr in ("best_score_", "n_iter_", "loss_curve_", "best_index_", "method_"):
            if hasattr(inner, attr):
                setattr(self, attr, getattr(inner, attr))
        if hasattr(inner, "best_params_"):
            self.best_params_ = {key: inner.best_params_["bandwidth"]}
            self.cv_results_ = rename_results(inner.cv_results_, key)
        self.best_estimator_ = clone(pipe).set_params(**{key: bandwidth})
        self.best_estimator_.fit(X, y, **routed.fit)

    def get_metadata_routing(self) -> MetadataRouter:
        """Get the metadata routing of this object.

        ``fit``'s metadata goes to the estimator's ``fit`` and to the scorer
        (the default scorer asks for what the estimator's ``score`` asks for),
        ``score``'s to the estimator's ``score``.

        Returns
        -------
        routing : MetadataRouter
            The routing information.
        """
        router = MetadataRouter(owner=type(self).__name__)
        router.add(
            estimator=self.estimator,
            method_mapping=MethodMapping()
            .add(caller="fit", callee="fit")
            .add(caller="score", callee="score"),
        )
        router.add(
            scorer=self._get_scorer(),
            method_mapping=MethodMapping().add(caller="fit", callee="score"),
        )
        return router
