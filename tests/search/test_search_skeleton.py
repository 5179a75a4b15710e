"""BandwidthSearchCV as one fit skeleton: every route's selection refits the best estimator."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_nw import (
    BandwidthSearchCV,
    KernelQuantileRegressor,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._search._delegation import _Delegation

MIXED = {"categorical_features": [1]}
ROUTES = {
    "grid": (NadarayaWatsonRegressor(), {}),
    "given grid": (NadarayaWatsonRegressor(), {"bandwidths": [0.05, 0.1, 0.2]}),
    "aicc": (LocalPolynomialRegressor(), {"criterion": "aicc"}),
    "lbfgs": (LocalPolynomialRegressor(), {"method": "lbfgs", "max_iter": 5}),
    "sgd": (ParzenClassifier(), {"method": "sgd", "max_iter": 3, "random_state": 0}),
    "mixed grid": (NadarayaWatsonRegressor(**MIXED), {"method": "grid"}),
    "mixed auto": (NadarayaWatsonRegressor(**MIXED), {}),
    "mixed cv": (NadarayaWatsonRegressor(**MIXED), {"cv": 3}),
    "cv": (NadarayaWatsonRegressor(), {"cv": 3}),
    "pipeline loo": (make_pipeline(StandardScaler(), NadarayaWatsonRegressor()), {}),
    "pipeline lbfgs": (
        make_pipeline(StandardScaler(), NadarayaWatsonRegressor()),
        {"method": "lbfgs", "max_iter": 5},
    ),
    "pipeline cv": (make_pipeline(StandardScaler(), NadarayaWatsonRegressor()), {"cv": 3}),
    "span": (LocalPolynomialRegressor(kernel="tricube", span=0.5), {"spans": [0.3, 0.6]}),
    "span cv": (
        LocalPolynomialRegressor(kernel="tricube", span=0.5),
        {"spans": [0.3, 0.6], "cv": 3},
    ),
    "crps": (NadarayaWatsonRegressor(), {"criterion": "crps", "bandwidths": [0.1, 0.2]}),
    "pinball": (
        KernelQuantileRegressor(quantile=0.3),
        {"criterion": "pinball", "bandwidths": [0.1, 0.2]},
    ),
}


def _data(rng, estimator):
    X = rng.uniform(0, 1, (90, 2))
    X[:, 1] = rng.integers(0, 3, 90)
    y = np.sin(4 * X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.2, 90)
    if isinstance(estimator, ParzenClassifier):
        y = (y > np.median(y)).astype(int)
    return X, y


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_selects_the_parameters_of_its_best_estimator(rng, route):
    estimator, params = ROUTES[route]
    X, y = _data(rng, estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (UserWarning, ConvergenceWarning))
        search = BandwidthSearchCV(estimator, **params).fit(X, y)
        refit = clone(estimator).set_params(**search.best_params_).fit(X, y)
    assert_allclose(search.predict(X[:20]), refit.predict(X[:20]), rtol=1e-12, atol=0)
    step = search.best_estimator_
    step = step.steps[-1][1] if hasattr(step, "steps") else step
    assert_allclose(search.bandwidth_, step.bandwidth_, rtol=0, atol=0)
    assert np.isfinite(search.best_score_) and search.n_iter_ >= 1
    assert search.method_ in ("grid", "sgd", "lbfgs")
    assert (search.span_ is None) == (getattr(estimator, "span", None) is None)


def test_the_search_is_a_skeleton_over_route_functions_not_mixins():
    # The routes are functions of a context: the class keeps only its public forwarders.
    bases = [c for c in BandwidthSearchCV.__mro__ if c.__module__.startswith("skl_nw")]
    assert bases == [BandwidthSearchCV, _Delegation]


def test_a_fitted_search_keeps_no_route_state(rng):
    X, y = _data(rng, NadarayaWatsonRegressor())
    for params in ({}, {"method": "lbfgs", "max_iter": 3}, {"cv": 3}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            search = BandwidthSearchCV(NadarayaWatsonRegressor(), **params).fit(X, y)
        assert [k for k in vars(search) if k.startswith("_")] == []


def test_warnings_name_the_line_that_called_fit(rng):
    X, y = _data(rng, NadarayaWatsonRegressor())
    searches = [
        BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", max_iter=2),
        BandwidthSearchCV(make_pipeline(StandardScaler(), NadarayaWatsonRegressor()),
                          method="lbfgs", max_iter=1),
        BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[1e-3, 2e-3]),
        BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", cv=3, max_iter=2),
    ]  # fmt: skip
    for search in searches:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search.fit(X, y)
        assert caught, search
        assert {w.filename for w in caught} == {__file__}, [str(w.message) for w in caught]


class _Tagged(BandwidthSearchCV):
    """A subclass with a parameter of its own (the context reads only the search's)."""

    _parameter_constraints = {**BandwidthSearchCV._parameter_constraints, "tag": [str]}

    def __init__(self, estimator, *, tag="a", method="auto", cv="loo"):
        super().__init__(estimator, method=method, cv=cv)
        self.tag = tag


def test_a_subclass_with_its_own_parameter_searches_as_the_search(rng):
    X, y = _data(rng, NadarayaWatsonRegressor())
    got = _Tagged(NadarayaWatsonRegressor(), tag="b").fit(X, y)
    want = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    assert_allclose(got.bandwidth_, want.bandwidth_, rtol=0, atol=0)
    assert got.get_params()["tag"] == "b"
