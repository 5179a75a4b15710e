"""BandwidthSearchCV's defaults: ``method="auto"``, ``per_feature="auto"`` and the grid's ends.

References: the explicit methods each default stands for, scikit-learn's
``GridSearchCV`` over the same candidates, explicit leave-one-out refits,
and ordinary least squares (the limit of a local linear fit as h grows).
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut, cross_val_predict
from sklearn.utils._param_validation import InvalidParameterError

from conftest import naive_rule_of_thumb
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)

MIXED = {"categorical_features": [1, 2]}


def _continuous(rng, n=80):
    X = rng.uniform(0, 4, (n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)


def _mixed(rng, n=60):
    """One continuous feature and two categorical ones (3 and 4 categories)."""
    x = rng.uniform(0, 3, n)
    u, v = rng.integers(0, 3, n), rng.integers(0, 4, n)
    y = np.sin(2 * x) + 0.5 * u + 0.1 * rng.normal(size=n)  # v is noise
    return np.column_stack([x, u, v]).astype(float), y


def _refit_loo_mse(est, X, y):
    P = cross_val_predict(est, X, y, cv=LeaveOneOut())
    return float(np.mean((P - y) ** 2))


# ---------------------------------------------------------------------------
# method="auto"
# ---------------------------------------------------------------------------


def test_auto_on_continuous_data_is_the_closed_form_grid(rng):
    X, y = _continuous(rng)
    auto = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    grid = BandwidthSearchCV(NadarayaWatsonRegressor(), method="grid").fit(X, y)
    assert auto.method_ == "grid"
    assert_allclose(auto.cv_results_["mean_test_score"], grid.cv_results_["mean_test_score"])
    assert_allclose(auto.bandwidth_, grid.bandwidth_)


def test_auto_on_categorical_data_is_lbfgs_and_beats_the_grid(rng):
    X, y = _mixed(rng)
    auto = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED)).fit(X, y)
    lbfgs = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="lbfgs").fit(X, y)
    grid = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="grid").fit(X, y)
    assert auto.method_ == "lbfgs" and grid.n_iter_ == 40 * 7 * 7 > 20 * auto.n_iter_
    assert_allclose(auto.bandwidth_, lbfgs.bandwidth_)
    # Its leave-one-out loss, by explicit refits, is no worse than the 1960-candidate grid's.
    refit = _refit_loo_mse(NadarayaWatsonRegressor(auto.bandwidth_, **MIXED), X, y)
    assert refit == pytest.approx(-auto.best_score_, rel=1e-8)
    assert refit <= -grid.best_score_ * (1 + 1e-3)


def test_auto_with_kfold_on_categorical_data_is_a_small_grid_like_gridsearchcv(rng):
    X, y = _mixed(rng, n=45)
    cv = KFold(3, shuffle=True, random_state=0)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), cv=cv).fit(X, y)
    candidates = [p["bandwidth"] for p in search.cv_results_["params"]]
    assert search.method_ == "grid" and len(candidates) == 15
    # Centred on the leave-one-out optimum: its bandwidths are one of the candidates.
    loo = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="lbfgs").fit(X, y)
    assert min(np.abs(h - loo.bandwidth_).max() for h in candidates) < 1e-12
    reference = GridSearchCV(
        NadarayaWatsonRegressor(**MIXED), {"bandwidth": candidates}, cv=cv,
        scoring="neg_mean_squared_error",
    ).fit(X, y)  # fmt: skip
    assert_allclose(search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"])
    assert_allclose(search.bandwidth_, reference.best_params_["bandwidth"])


def test_auto_keeps_the_grid_for_given_candidates_and_criteria(rng):
    X, y = _mixed(rng, n=30)
    given = [[0.3, 0.1, 0.2], [0.6, 0.1, 0.2], [0.5, 0.3, 0.4]]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), bandwidths=given).fit(X, y)
    assert search.method_ == "grid" and search.n_iter_ == 3
    Xc, yc = _continuous(rng)
    aicc = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="aicc").fit(Xc, yc)
    assert aicc.method_ == "grid"
    tophat = NadarayaWatsonRegressor(kernel="tophat", **MIXED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a coarse grid's end
        assert BandwidthSearchCV(tophat).fit(X, y).method_ == "grid"


def test_per_feature_auto_is_common_for_classifiers_per_feature_for_regressors(rng):
    X, y = _continuous(rng, n=90)
    X[:, 1] *= 30.0  # scales apart: a common multiple keeps their ratio
    labels = (y > 0).astype(int)
    parzen = BandwidthSearchCV(ParzenClassifier(), method="lbfgs").fit(X, labels)
    common = BandwidthSearchCV(ParzenClassifier(), method="lbfgs", per_feature=False)
    assert_allclose(parzen.bandwidth_, common.fit(X, labels).bandwidth_)
    ratio = parzen.bandwidth_ / naive_rule_of_thumb(X, "scott")
    assert_allclose(ratio, ratio[0], rtol=1e-10)
    nw = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y)
    per_feature = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs", per_feature=True)
    assert_allclose(nw.bandwidth_, per_feature.fit(X, y).bandwidth_)
    ratio = nw.bandwidth_ / naive_rule_of_thumb(X, "scott")
    assert abs(np.log(ratio[1] / ratio[0])) > 0.1  # learnt apart


@pytest.mark.parametrize(("param", "value"), [("method", "newton"), ("per_feature", "yes")])
def test_bad_method_or_per_feature_names_the_choices(rng, param, value):
    X, y = _continuous(rng, n=20)
    with pytest.raises(InvalidParameterError, match=f"'{param}'.*'auto'"):
        BandwidthSearchCV(NadarayaWatsonRegressor(), **{param: value}).fit(X, y)


# ---------------------------------------------------------------------------
# The best at an end of the grid
# ---------------------------------------------------------------------------


def test_default_grid_extends_past_its_end_then_warns():
    # The issue's case: a local linear fit of diabetes' BMI, whose leave-one-out loss
    # keeps falling as h grows (towards the least-squares line).
    X, y = load_diabetes(return_X_y=True)
    X = X[:, [2]]
    with pytest.warns(UserWarning, match="largest candidate of the default grid") as record:
        search = BandwidthSearchCV(LocalPolynomialRegressor()).fit(X, y)
    assert "bandwidths=" in str(record[0].message)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) > 40 and search.best_index_ == len(scores) - 1
    assert scores[-1] > scores[39]  # beyond the old grid's end, better still
    # Between the old end and the limit: ordinary least squares, by refits.
    ols = _refit_loo_mse(LinearRegression(), X, y)
    assert -scores[39] > -search.best_score_ > ols * (1 - 1e-3)


def test_interior_optimum_is_silent(rng):
    X, y = _continuous(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    assert 0 < search.best_index_ < len(search.cv_results_["params"]) - 1


@pytest.mark.parametrize("cv", ["loo", 3])
@pytest.mark.parametrize(
    ("grid", "end"), [([1.0, 2.0, 4.0], "smallest"), ([0.01, 0.02, 0.04], "largest")]
)
def test_given_grid_warns_at_either_end(rng, cv, grid, end):
    X, y = _continuous(rng, n=60)
    with pytest.warns(UserWarning, match=f"{end} candidate of the grid given as bandwidths"):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=grid, cv=cv).fit(X, y)
    assert search.best_params_["bandwidth"][0] == (grid[0] if end == "smallest" else grid[-1])
