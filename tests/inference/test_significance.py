"""The kernel significance test: its statistic, size and power at small n."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from conftest import naive_gradient
from skl_nw import (
    BandwidthSearchCV,
    KernelQuantileRegressor,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
    significance_test,
)

H = [0.3, 0.4]


def _sample(seed, n=60, effect=0.0):
    """``y = sin(2 x0) + effect * x1 + N(0, 0.5^2)``, x ~ U(-1, 1)^2: x1 matters iff effect != 0."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    return X, np.sin(2 * X[:, 0]) + effect * X[:, 1] + rng.normal(0, 0.5, n)


def _pvalues(effect, reps, residuals="wild-unrestricted"):
    reg = NadarayaWatsonRegressor(bandwidth=H)
    return np.array([
        significance_test(reg, *_sample(s, effect=effect), [1], n_boot=99, random_state=s,
                          residuals=residuals).pvalue
        for s in range(reps)
    ])  # fmt: skip


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_statistic_equals_the_dense_gradient(kernel):
    X, y = _sample(0, effect=0.5)
    reg = NadarayaWatsonRegressor(bandwidth=[0.5, 0.6], kernel=kernel)
    G = naive_gradient(X, y, X, [0.5, 0.6], kernel)
    for features in ([0], [1], [0, 1]):
        result = significance_test(reg, X, y, features, n_boot=19, random_state=0)
        assert_allclose(result.statistic, (G[:, features] ** 2).sum(1).mean(), rtol=1e-9)
        assert result.null_distribution.shape == (19,)
        assert result.pvalue == (1 + np.sum(result.null_distribution >= result.statistic)) / 20


def test_null_distribution_equals_explicit_bootstrap_refits():
    X, y = _sample(1, n=40)
    reg = NadarayaWatsonRegressor(bandwidth=H)
    result = significance_test(reg, X, y, [1], n_boot=5, random_state=7, residuals="iid")
    m0 = NadarayaWatsonRegressor(bandwidth=H[:1]).fit(X[:, :1], y).predict(X[:, :1])
    u = y - m0
    rs = np.random.RandomState(7)
    index = rs.randint(0, 40, (40, 5))
    for b in range(5):
        y_star = m0 + (u - u.mean())[index[:, b]]
        G = naive_gradient(X, y_star, X, H)
        assert_allclose(result.null_distribution[b], np.mean(G[:, 1] ** 2), rtol=1e-9)


@pytest.mark.parametrize("residuals", ["wild-unrestricted", "wild", "iid"])
def test_size_at_five_percent(residuals):
    # 200 replications under the null (x1 does not enter), n = 60, 99 bootstrap samples.
    rejected = np.mean(_pvalues(0.0, 200, residuals) <= 0.05)
    assert 0.02 <= rejected <= 0.09


def test_power_against_a_linear_effect():
    # Alternative: y = sin(2 x0) + 0.6 x1 + N(0, 0.5^2), n = 60, tested at 5%.
    assert np.mean(_pvalues(0.6, 50) <= 0.05) >= 0.8


def test_default_residuals_are_the_rescaled_unrestricted_ones():
    X, y = _sample(2, n=40, effect=0.8)
    reg = NadarayaWatsonRegressor(bandwidth=H)
    result = significance_test(reg, X, y, [1], n_boot=5, random_state=7)
    m0 = NadarayaWatsonRegressor(bandwidth=H[:1]).fit(X[:, :1], y).predict(X[:, :1])
    # The full fit's hat matrix by refits on the unit vectors (the oracle).
    Hat = NadarayaWatsonRegressor(bandwidth=H).fit(X, np.eye(40)).predict(X)
    e = y - Hat @ y
    u = e / np.sqrt(1 - 2 * np.diag(Hat) + (Hat**2).sum(axis=1))
    V = np.random.RandomState(7).standard_normal((40, 5))
    for b in range(5):
        G = naive_gradient(X, m0 + V[:, b] * u, X, H)
        assert_allclose(result.null_distribution[b], np.mean(G[:, 1] ** 2), rtol=1e-9)


def test_power_grows_with_the_effect_under_the_defaults():
    # The setting: n = 60, y = s x0 + N(0, 0.5^2), local linear at its default
    # bandwidth; the restricted residuals ("wild") stalled near 0.45 here.
    def power(s, reps=40):
        rng = np.random.default_rng(5)
        hits = 0
        for r in range(reps):
            X = rng.uniform(0, 1, (60, 2))
            y = s * X[:, 0] + rng.normal(0, 0.5, 60)
            hits += significance_test(LocalPolynomialRegressor(), X, y, [0], n_boot=99,
                                      random_state=r).pvalue <= 0.05  # fmt: skip
        return hits / reps

    assert power(20.0) >= 0.9 and power(100.0) >= 0.9


def test_tophat_statistic_of_zero_warns():
    X, y = _sample(3, effect=2.0)
    reg = NadarayaWatsonRegressor(bandwidth=H, kernel="tophat")
    with pytest.warns(UserWarning, match="statistic is 0"):
        assert significance_test(reg, X, y, [1], n_boot=9, random_state=0).pvalue == 1.0


def test_all_features_and_dataframe_names():
    pd = pytest.importorskip("pandas")
    X, y = _sample(2, effect=1.0)
    frame = pd.DataFrame(X, columns=["a", "b"])
    reg = NadarayaWatsonRegressor(bandwidth=H)
    by_name = significance_test(reg, frame, y, ["b"], n_boot=29, random_state=0)
    by_index = significance_test(reg, X, y, [1], n_boot=29, random_state=0)
    assert_allclose(by_name.statistic, by_index.statistic, rtol=1e-12)
    assert_allclose(by_name.null_distribution, by_index.null_distribution, rtol=1e-12)
    both = significance_test(reg, X, y, [0, 1], n_boot=29, random_state=0)  # null: the mean
    assert both.pvalue == 1 / 30


@pytest.mark.parametrize(
    "estimator, features, kwargs, match",
    [
        (ParzenClassifier(), [0], {}, "predict_gradient"),
        (BandwidthSearchCV(NadarayaWatsonRegressor()), [0], {}, "predict_gradient"),
        (NadarayaWatsonRegressor(), [], {}, "at least one"),
        (NadarayaWatsonRegressor(), [2], {}, "column indices"),
        (NadarayaWatsonRegressor(), ["a"], {}, "column name"),
        (NadarayaWatsonRegressor(), [0, 0], {}, "repeat"),
        (NadarayaWatsonRegressor(), [0], {"n_boot": 0}, "n_boot"),
        (NadarayaWatsonRegressor(), [0], {"residuals": "pairs"}, "residuals"),
        # robustness weights depend on y: not a linear smoother (a 2-D y error before)
        (LocalPolynomialRegressor(robust_iterations=2), [0], {}, "takes a linear smoother"),
        (KernelQuantileRegressor(0.9), [0], {}, "predict_gradient"),
    ],
)
def test_bad_arguments_raise(estimator, features, kwargs, match):
    X, y = _sample(3, n=20)
    with pytest.raises(ValueError, match=match):
        significance_test(estimator, X, y, features, **kwargs)


def _categorical_sample(seed, n=60, effect=0.0):
    """``y = sin(2 x) + effect [z = 1] + N(0, 0.5^2)``, z uniform on 3 categories."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(-1, 1, n), rng.integers(0, 3, n)
    X = np.column_stack([x, z]).astype(float)
    return X, np.sin(2 * x) + effect * (z == 1) + rng.normal(0, 0.5, n)


def _categorical_pvalues(effect, reps):
    reg = NadarayaWatsonRegressor(bandwidth=[0.3, 0.3], categorical_features=[1])
    return np.array([
        significance_test(reg, *_categorical_sample(s, effect=effect), [1], n_boot=99,
                          random_state=s).pvalue
        for s in range(reps)
    ])  # fmt: skip


def test_categorical_statistic_equals_the_dense_differences():
    X, y = _categorical_sample(0, effect=0.5)
    reg = NadarayaWatsonRegressor(bandwidth=[0.4, 0.2], categorical_features=[1])
    result = significance_test(reg, X, y, [1], n_boot=9, random_state=0)

    # m(x, z = l) by the dense formula: Gaussian times Aitchison–Aitken (c = 3).
    def m(z):
        K = np.exp(-0.5 * ((X[:, None, 0] - X[None, :, 0]) / 0.4) ** 2)
        K *= np.where(z[:, None] == X[None, :, 1], 0.8, 0.1)
        return K @ y / K.sum(axis=1)

    base = m(X[:, 1])
    expected = sum(np.mean((m(np.full(len(X), level)) - base) ** 2) for level in range(3))
    assert_allclose(result.statistic, expected, rtol=1e-9)
    # Continuous and categorical features tested together add their parts.
    both = significance_test(reg, X, y, [0, 1], n_boot=9, random_state=0).statistic
    G = significance_test(reg, X, y, [0], n_boot=9, random_state=0).statistic
    assert_allclose(both, G + expected, rtol=1e-9)


@pytest.mark.slow
def test_categorical_size_and_power():
    # 200 null replications (z does not enter) and 50 under y += 0.8 [z = 1], n = 60.
    rejected = np.mean(_categorical_pvalues(0.0, 200) <= 0.05)
    assert 0.02 <= rejected <= 0.09
    assert np.mean(_categorical_pvalues(0.8, 50) <= 0.05) >= 0.8


def test_categorical_features_of_a_dataframe():
    pd = pytest.importorskip("pandas")
    X, y = _categorical_sample(2, effect=1.0)
    frame = pd.DataFrame(
        {"x": X[:, 0], "z": pd.Categorical(np.array(list("abc"))[X[:, 1].astype(int)])}
    )
    reg = NadarayaWatsonRegressor(bandwidth=[0.3, 0.3])
    result = significance_test(reg, frame, y, ["z"], n_boot=49, random_state=0)
    assert result.pvalue <= 0.05


@pytest.mark.parametrize("ordered", [False, True])
def test_declared_categories_no_row_has_stay_in_the_refits(ordered):
    # The refits took integer codes and learnt the categories again: a declared category
    # no row has was lost, so lambda = 0.7 (valid for 4 categories, not 3) raised, the
    # unordered kernel's lambda / (c - 1) changed T (0.094 against 0.169), and an
    # ordered feature's positions 0, 2 became 0, 1. T is the fitted estimator's own:
    # the mean squared change of its fit when the category is set to each declared one.
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    x, z = rng.uniform(-1, 1, 120), rng.integers(0, 3, 120)
    y = np.sin(2 * x) + 0.5 * (z == 1) + rng.normal(0, 0.2, 120)
    labels = ["lo", "mid", "hi", "top"] if not ordered else ["lo", "mid", "hi"]
    used = np.array(["lo", "mid", "hi"] if not ordered else ["lo", "hi", "hi"])
    dtype = pd.CategoricalDtype(labels, ordered=ordered)
    frame = pd.DataFrame({"x": x, "z": pd.Series(used[z], dtype=dtype)})
    reg = NadarayaWatsonRegressor(bandwidth=[0.3, 0.7 if not ordered else 0.5])
    fitted = reg.fit(frame, y)
    base = fitted.predict(frame)
    want = sum(
        ((fitted.predict(frame.assign(z=pd.Series([c] * 120, dtype=dtype))) - base) ** 2).mean()
        for c in labels
    )
    result = significance_test(reg, frame, y, ["z"], n_boot=19, random_state=0)
    assert_allclose(result.statistic, want, rtol=1e-12)
    result = significance_test(reg, frame, y, ["x"], n_boot=19, random_state=0)
    assert_allclose(
        result.statistic, (fitted.predict_gradient(frame)[:, 0] ** 2).mean(), rtol=1e-12
    )
