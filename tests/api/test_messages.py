"""Error messages name features as the user knows them.

With a DataFrame a feature is named by its column (``'region' (column 1)``),
without feature names by its index; a string column that is not declared
categorical is reported with the remedy (``categorical_features``), not with
pandas' "could not convert string to float".
"""

import re

import numpy as np
import pandas as pd
import pytest

from skl_nw import LocalPolynomialRegressor, NadarayaWatsonRegressor, ParzenClassifier

ESTIMATORS = [NadarayaWatsonRegressor, ParzenClassifier, LocalPolynomialRegressor]


def _frame(rng, n=40):
    """A continuous column, a region label (category dtype) and an ordered size."""
    return pd.DataFrame({
        "x": rng.normal(size=n),
        "region": pd.Categorical(rng.choice(["north", "south", "east"], n)),
        "size": pd.Categorical(
            rng.choice(["S", "M", "L"], n), categories=["S", "M", "L"], ordered=True
        ),
    })  # fmt: skip


def _target(estimator, rng, n=40):
    y = rng.normal(size=n)
    return y > 0 if estimator is ParzenClassifier else y


def _named(name, j):
    return re.escape(f"'{name}' (column {j})")


def test_feature_label_uses_the_name_when_there_is_one():
    from skl_nw._categorical import feature_label

    assert feature_label(1, ["x", "region"]) == "'region' (column 1)"
    assert feature_label(np.int64(1)) == "1"


@pytest.mark.parametrize("stage", ["fit", "predict"])
def test_missing_category_names_the_column(stage):
    rng = np.random.default_rng(0)
    X = _frame(rng)
    y = _target(NadarayaWatsonRegressor, rng)
    missing = X.copy()
    missing.loc[3, "region"] = np.nan
    est = NadarayaWatsonRegressor()
    message = "Categorical feature " + _named("region", 1) + " holds missing values"
    with pytest.raises(ValueError, match=message):
        est.fit(missing, y) if stage == "fit" else est.fit(X, y).predict(missing)
    # Without feature names the index names it, as before.
    codes = X.assign(region=X["region"].cat.codes.astype(float))[["x", "region"]].to_numpy()
    codes[3, 1] = np.nan
    with pytest.raises(ValueError, match="Categorical feature 1 holds missing values"):
        NadarayaWatsonRegressor(categorical_features=[1]).fit(codes, y)


def test_every_per_feature_error_names_the_column():
    rng = np.random.default_rng(1)
    X = _frame(rng)
    y = _target(NadarayaWatsonRegressor, rng)
    est = NadarayaWatsonRegressor().fit(X, y)
    # An unseen label of a declared order.
    wider = pd.Categorical(["XL"], categories=["S", "M", "L", "XL"], ordered=True)
    query = pd.DataFrame({"x": [0.0], "region": X["region"][:1].to_numpy(), "size": wider})
    query["region"] = query["region"].astype(X["region"].dtype)
    with pytest.raises(ValueError, match="Ordered feature " + _named("size", 2)):
        est.predict(query)
    # A lambda outside its kernel's range.
    with pytest.raises(ValueError, match="categorical feature " + _named("size", 2)):
        NadarayaWatsonRegressor(bandwidth=[0.5, 0.3, 1.0]).fit(X, y)
    # The binned path takes continuous features only: which are not.
    with pytest.raises(ValueError, match=_named("region", 1) + ", " + _named("size", 2)):
        NadarayaWatsonRegressor(algorithm="binned").fit(X, y)
    # Labels of mixed types cannot be sorted into categories.
    mixed = X.assign(region=pd.Series(["a", 1] * 20, dtype=object))
    with pytest.raises(ValueError, match="feature " + _named("region", 1) + " cannot be sorted"):
        NadarayaWatsonRegressor(categorical_features=["region"]).fit(mixed, y)
    # A NaN in a continuous feature, next to categorical ones.
    nan = X.assign(x=np.where(np.arange(len(X)) == 5, np.nan, X["x"]))
    with pytest.raises(ValueError, match="NaN or infinity in .*" + _named("x", 0)):
        est.predict(nan)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_string_column_names_it_and_the_remedy(estimator):
    rng = np.random.default_rng(2)
    X = _frame(rng).assign(region=lambda f: f["region"].astype(object))
    y = _target(estimator, rng)
    assert X["region"].dtype == object
    remedy = re.escape("categorical_features=['region']")
    with pytest.raises(ValueError, match=_named("region", 1) + ".*" + remedy) as info:
        estimator().fit(X, y)
    # The cause, with an offending value, and the remedy in one message.
    assert "could not convert string to float" in str(info.value)
    # Declared, the same column fits; at predict a string in a continuous column is named.
    est = estimator(categorical_features=["region"]).fit(X, y)
    assert est.is_categorical_.tolist() == [False, True, True]
    bad = X.assign(x=X["x"].astype(object).where(X.index != 4, "n/a"))
    with pytest.raises(ValueError, match=_named("x", 0) + ".*" + re.escape("=['x']")):
        est.predict(bad)


def test_string_columns_of_an_array_are_named_by_index():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=30), rng.choice(["a", "b"], 30)]).astype(object)
    y = rng.normal(size=30)
    with pytest.raises(ValueError, match=re.escape("feature(s) 1 (") + ".*" + re.escape("=[1]")):
        NadarayaWatsonRegressor().fit(X, y)
    # Numbers stored as objects are numbers: no error.
    numeric = X.copy()
    numeric[:, 1] = rng.normal(size=30)
    assert NadarayaWatsonRegressor().fit(numeric, y).predict(numeric).shape == (30,)


def _significance(X, y):
    from skl_nw import significance_test

    return significance_test(NadarayaWatsonRegressor(), X, y, [0], n_boot=9)


def _search(X, y):
    from skl_nw import BandwidthSearchCV

    return BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)


@pytest.mark.parametrize("call", [_significance, _search])
def test_functions_taking_an_estimator_name_an_undeclared_string_column(call):
    rng = np.random.default_rng(4)
    X = _frame(rng).assign(region=lambda f: f["region"].astype(object))[["x", "region"]]
    y = rng.normal(size=len(X))
    remedy = re.escape("categorical_features=['region']")
    with pytest.raises(ValueError, match=_named("region", 1) + ".*" + remedy):
        call(X, y)


@pytest.mark.parametrize("categorical", [None, [1]])
def test_a_1d_query_gets_scikit_learn_s_reshape_message(categorical):
    # With categorical features it read "X does not contain any features".
    X = np.column_stack([np.linspace(0, 1, 20), np.arange(20) % 3])
    reg = NadarayaWatsonRegressor(categorical_features=categorical).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="Expected 2D array, got 1D array instead"):
        reg.predict(X[0])
