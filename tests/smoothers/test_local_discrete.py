"""Local polynomial fits without continuous features: the discrete-kernel weighted mean.

With categorical or ordered features only, the local polynomial has the
constant alone, so every fit is the weighted mean ``sum_i L_i y_i / sum_i L_i``
of :class:`NadarayaWatsonRegressor`.  The oracle: the discrete kernels
written out densely (Wang–van Ryzin and Aitchison–Aitken).
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    significance_test,
)


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n)]).astype(float)
    y = X[:, 0] + 0.5 * (X[:, 1] == 2) + rng.normal(0, 0.3, n)
    return X, y


def _dense_weights(Xq, X, lam_ordered, lam_cat=None):
    """Wang–van Ryzin on column 0 (positions = values 0..3), Aitchison–Aitken on column 1."""
    dist = np.abs(Xq[:, None, 0] - X[None, :, 0])
    W = np.where(dist == 0, 1 - lam_ordered, (1 - lam_ordered) / 2 * lam_ordered**dist)
    if lam_cat is not None:
        W = W * np.where(Xq[:, None, 1] == X[None, :, 1], 1 - lam_cat, lam_cat / 2)
    return W


def _dense_fit(W, y):
    mean = W @ y / W.sum(axis=1)
    alpha = W / W.sum(axis=1, keepdims=True)
    # The local line is the constant (no continuous feature): the weighted residual
    # mean square over its expectation per unit noise variance, 1 - sum alpha^2.
    share = (alpha**2).sum(axis=1)
    sigma2 = (alpha * (y[None, :] - mean[:, None]) ** 2).sum(axis=1) / (1 - share)
    return mean, np.sqrt(sigma2 * share)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_ordered_only_is_the_weighted_mean(degree):
    X, y = _data()
    X1 = X[:, :1]
    Q = np.array([[0.0], [1.0], [3.0], [2.0]])
    lp = LocalPolynomialRegressor(bandwidth=[0.2], degree=degree, ordered_features=[0])
    lp.fit(X1, y)
    nw = NadarayaWatsonRegressor(bandwidth=[0.2], ordered_features=[0]).fit(X1, y)
    mean, std = _dense_fit(_dense_weights(Q, X1, 0.2), y)
    np.testing.assert_allclose(lp.predict(Q), mean, rtol=1e-12)
    np.testing.assert_allclose(lp.predict(Q), nw.predict(Q), rtol=1e-12, atol=1e-12)
    got_mean, got_std = lp.predict(Q, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_std, std, rtol=1e-10)
    np.testing.assert_allclose(lp.predict_interval(Q), nw.predict_interval(Q), rtol=1e-12)
    boot = {"method": "bootstrap", "n_boot": 50, "random_state": 0}
    np.testing.assert_allclose(
        lp.predict_interval(Q, **boot), nw.predict_interval(Q, **boot), rtol=1e-10
    )


def test_categorical_and_ordered_only_multi_output():
    X, y = _data(seed=1)
    Y = np.column_stack([y, y**2])
    Q = np.array([[0.0, 0.0], [3.0, 2.0], [1.0, 1.0]])
    lp = LocalPolynomialRegressor(bandwidth=[0.3, 0.4], categorical_features=[1],
                                  ordered_features=[0]).fit(X, Y)  # fmt: skip
    W = _dense_weights(Q, X, 0.3, 0.4)
    np.testing.assert_allclose(lp.predict(Q), W @ Y / W.sum(axis=1, keepdims=True), rtol=1e-12)
    # The gradient is in the continuous features only: none here.
    assert lp.predict_gradient(Q).shape == (3, 2, 0)
    assert LocalPolynomialRegressor(bandwidth=[0.3, 0.4], ordered_features=[0, 1]).fit(
        X, y
    ).predict_gradient(Q).shape == (3, 0)


@pytest.mark.filterwarnings("ignore:The selected bandwidth is the")  # a grid edge, on purpose
def test_ordered_only_leave_one_out_search():
    X, y = _data(seed=2)
    X1 = X[:, :1]
    grid = [[0.05], [0.3], [0.6], [0.9]]
    est = LocalPolynomialRegressor(ordered_features=[0])
    search = BandwidthSearchCV(est, bandwidths=grid).fit(X1, y)
    expected = []
    for (lam,) in grid:
        W = _dense_weights(X1, X1, lam)
        np.fill_diagonal(W, 0.0)  # the point removed by index
        expected.append(-np.mean((y - W @ y / W.sum(axis=1)) ** 2))
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-10)
    nw = BandwidthSearchCV(NadarayaWatsonRegressor(ordered_features=[0]), bandwidths=grid)
    assert search.best_index_ == nw.fit(X1, y).best_index_


def test_significance_of_the_last_continuous_feature():
    rng = np.random.default_rng(3)
    n = 80
    X = np.column_stack([rng.uniform(0, 1, n), rng.integers(0, 3, n)])
    y = np.sin(3 * X[:, 0]) + X[:, 1] + rng.normal(0, 0.2, n)
    est = LocalPolynomialRegressor(bandwidth=[0.2, 0.3], categorical_features=[1])
    result = significance_test(est, X, y, [0], n_boot=39, random_state=0)
    fitted = est.fit(X, y)
    statistic = np.mean(fitted.predict_gradient(X)[:, 0] ** 2)
    np.testing.assert_allclose(result.statistic, statistic, rtol=1e-10)
    assert np.all(np.isfinite(result.null_distribution))
    count = np.sum(result.null_distribution >= result.statistic)
    assert result.pvalue == (1 + count) / 40
    assert result.pvalue <= 0.05  # the feature drives y


@pytest.mark.filterwarnings("ignore:The selected bandwidth is the")  # a grid edge, on purpose
def test_ordered_only_gradient_search_and_summary_are_nadaraya_watsons():
    X, y = _data(n=80, seed=4)
    X1 = X[:, :1]
    lp, nw = (
        BandwidthSearchCV(E(ordered_features=[0]), method="lbfgs", max_iter=30).fit(X1, y)
        for E in (LocalPolynomialRegressor, NadarayaWatsonRegressor)
    )
    assert_allclose(lp.bandwidth_, nw.bandwidth_, rtol=1e-8)
    a, b = (s.best_estimator_.summary() for s in (lp, nw))
    for name in ("trace", "sigma2", "r2", "loo_mse", "aicc", "gcv"):
        assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-10, err_msg=name)
    # The dense oracle: H = the discrete-kernel weights, normalised.
    W = _dense_weights(X1, X1, lp.bandwidth_[0])
    H = W / W.sum(axis=1, keepdims=True)
    assert_allclose(a.trace, np.trace(H), rtol=1e-10)
    assert_allclose(a.sigma2, np.mean((y - H @ y) ** 2), rtol=1e-10)
