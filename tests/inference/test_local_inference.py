"""Standard errors and intervals of LocalPolynomialRegressor against the dense oracle."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import t as student_t
from sklearn import config_context
from test_inference import bootstrap_t_oracle

import skl_nw._engine._local_fit as local_fit
from conftest import naive_local_poly_std, naive_weights
from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor, NadarayaWatsonRegressor
from skl_nw._inference._formulas import wild_multipliers

PATHS = ["brute", "kd_tree"]


def _data(rng, n=120, d=2, k=None):
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + X[:, -1] ** 2 + rng.normal(0, 0.1, n)
    if k is not None:
        y = np.column_stack([y] + [np.cos(2 * X[:, 0]) * (j + 2) for j in range(k - 1)])
    return X, y


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_std_equals_the_dense_equivalent_kernel(rng, degree, kernel, algorithm):
    X, y = _data(rng, k=2)
    w = rng.uniform(0.2, 3.0, len(X))
    Q = rng.uniform(0.05, 0.95, (20, 2))
    h = [0.5, 0.7]  # every compact neighbourhood well-posed
    reg = LocalPolynomialRegressor(h, kernel=kernel, degree=degree, algorithm=algorithm)
    mean, std = reg.fit(X, y, w).predict(Q, return_std=True)
    want_mean, want_std = naive_local_poly_std(X, y, Q, h, kernel, degree, w)
    assert mean.shape == std.shape == (20, 2)
    assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-10)
    assert_allclose(std, want_std, rtol=1e-7, atol=1e-10)
    mean, std = reg.fit(X, y[:, 0], w).predict(Q, return_std=True)
    assert mean.shape == std.shape == (20,)
    assert_allclose(mean, reg.predict(Q), rtol=1e-14)


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", ["gaussian", "tophat", "epanechnikov", "linear"])
def test_degree_zero_std_is_nadaraya_watson(rng, kernel, algorithm):
    X, y = _data(rng, k=2)
    Q = rng.uniform(-0.2, 1.2, (30, 2))
    params = {"bandwidth": [0.15, 0.3], "kernel": kernel, "algorithm": algorithm}
    nw = NadarayaWatsonRegressor(**params).fit(X, y).predict(Q, return_std=True)
    lp = LocalPolynomialRegressor(degree=0, **params).fit(X, y).predict(Q, return_std=True)
    assert_allclose(lp, nw, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
def test_std_integer_weights_equal_repeated_rows(rng, degree):
    X, y = _data(rng, n=60)
    w = rng.integers(1, 4, 60)
    Q = rng.uniform(0, 1, (15, 2))
    a = LocalPolynomialRegressor(0.4, degree=degree).fit(X, y, sample_weight=w)
    b = LocalPolynomialRegressor(0.4, degree=degree).fit(np.repeat(X, w, 0), np.repeat(y, w))
    assert_allclose(a.predict(Q, return_std=True), b.predict(Q, return_std=True), rtol=1e-9)


@pytest.mark.parametrize("degree", [1, 2])
def test_degenerate_neighbourhoods_give_finite_std(degree):
    # A compact kernel with few neighbours: the degree drops, down to one point (se 0)
    # and to no neighbour at all (the nearest point); far queries too.
    X = np.array([[0.0, 0.0], [0.05, 0.0], [0.1, 0.02], [1.0, 1.0], [3.0, 3.0], [3.1, 3.0]])
    y = np.array([1.0, 2.0, 1.5, 4.0, 0.0, 1.0])
    reg = LocalPolynomialRegressor(0.2, kernel="epanechnikov", degree=degree).fit(X, y)
    Q = np.array([[0.05, 0.01], [1.0, 1.0], [1.8, 1.8], [3.05, 3.0], [1e6, -1e6]])
    mean, std = reg.predict(Q, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std >= 0)
    assert_allclose(mean[1:3], [4.0, 4.0])
    assert_allclose(std[1:3], 0.0, atol=1e-12)  # one neighbour, the nearest: se = 0
    band = reg.predict_interval(Q, method="bootstrap", n_boot=20, random_state=0)
    assert np.all(np.isfinite(band))


def test_std_is_the_least_squares_standard_error_for_a_wide_bandwidth(rng):
    # h -> inf: ordinary least squares on [1, x]; sigma^2 is the mean squared residual.
    X = rng.uniform(0, 1, (200, 1))
    y = 1 + 2 * X[:, 0] + rng.normal(0, 0.3, 200)
    q = np.array([[0.3]])
    _, std = LocalPolynomialRegressor(bandwidth=1e4).fit(X, y).predict(q, return_std=True)
    Phi = np.column_stack([np.ones(200), X[:, 0]])
    beta, res, *_ = np.linalg.lstsq(Phi, y, rcond=None)
    e = np.array([1.0, 0.3])
    want = np.sqrt(res[0] / 200 * e @ np.linalg.inv(Phi.T @ Phi) @ e)
    assert_allclose(std, want, rtol=1e-6)


@pytest.mark.parametrize("k", [None, 2])
def test_interval_shapes_and_the_normal_interval(rng, k):
    X, y = _data(rng, k=k)
    reg = LocalPolynomialRegressor(0.3).fit(X, y)
    Q = rng.uniform(0, 1, (7, 2))
    mean, std = reg.predict(Q, return_std=True)
    for method in ("normal", "bootstrap"):
        band = reg.predict_interval(Q, alpha=0.1, method=method, n_boot=99, random_state=0)
        assert band.shape == mean.shape + (2,)
        assert np.all(band[..., 0] <= mean) and np.all(mean <= band[..., 1])
    band = reg.predict_interval(Q, alpha=0.1)
    # Student's t with the equivalent kernel's effective number of points less 3 coefficients.
    L = reg.attention_weights(Q)
    t = student_t.ppf(0.95, 1 / (L**2).sum(axis=1) - 3)
    t = t if k is None else t[:, None]
    assert_allclose(band[..., 1] - mean, t * std, rtol=1e-9)
    assert_allclose(mean - band[..., 0], t * std, rtol=1e-9)


@pytest.mark.parametrize("algorithm, kernel", [("brute", "gaussian"), ("kd_tree", "epanechnikov")])
@pytest.mark.parametrize("degree", [1, 2])
def test_bootstrap_is_reproducible_and_matches_explicit_refits(rng, degree, algorithm, kernel):
    X, y = _data(rng, n=50)
    w = rng.integers(1, 4, 50).astype(float)
    params = {"bandwidth": 0.5, "degree": degree, "kernel": kernel, "algorithm": algorithm}
    reg = LocalPolynomialRegressor(**params).fit(X, y, sample_weight=w)
    Q = rng.uniform(0.1, 0.9, (5, 2))
    a = reg.predict_interval(Q, method="bootstrap", n_boot=40, random_state=3)
    assert_array_equal(a, reg.predict_interval(Q, method="bootstrap", n_boot=40, random_state=3))
    V = wild_multipliers(np.random.RandomState(3), 50, 40, "rademacher")
    want = bootstrap_t_oracle(lambda: LocalPolynomialRegressor(**params), X, y, w, Q, V)
    assert_allclose(a, want, rtol=1e-9, atol=1e-9)
    robust = reg.predict_interval(Q, method="bootstrap", n_boot=40, random_state=3,
                                  bias_correction="robust")  # fmt: skip
    higher = LocalPolynomialRegressor(**{**params, "degree": {1: 2, 2: 4}[degree]}).fit(X, y, w)
    assert_allclose(robust, higher.predict_interval(Q, method="bootstrap", n_boot=40,
                                                    random_state=3), rtol=1e-12)  # fmt: skip


def test_extrapolation_warns(rng):
    X, y = _data(rng, n=60, d=1)
    reg = LocalPolynomialRegressor(bandwidth=0.1).fit(X, y)
    inside = np.vstack([X[[X[:, 0].argmin(), X[:, 0].argmax()]] + [[-0.09], [0.09]], [[0.5]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the training range itself is no extrapolation
        reg.predict(inside)
        reg.predict(X, return_std=True)
        NadarayaWatsonRegressor(bandwidth=0.1).fit(X, y).predict([[1.5]])
    for call in (reg.predict, reg.predict_interval, lambda Q: reg.predict(Q, return_std=True)):
        with pytest.warns(UserWarning, match="outside the range"):
            call([[1.5]])


def test_a_cross_validated_search_does_not_warn_about_its_held_out_folds(rng):
    # Sorted inputs and unshuffled folds: the first and last folds lie outside the
    # others' range, where the fit extrapolates; a search scores them silently.
    X = np.sort(rng.uniform(0, 1, (90, 1)), axis=0)
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.1, 90)
    fold_fit = LocalPolynomialRegressor(bandwidth=0.05).fit(X[30:], y[30:])
    with pytest.warns(UserWarning, match="outside the range"):
        fold_fit.predict(X[:30])  # what the search's first fold asks
    search = BandwidthSearchCV(LocalPolynomialRegressor(), bandwidths=[0.05, 0.1], cv=3)
    with warnings.catch_warnings(record=True) as caught:  # not "error": sklearn catches it
        warnings.simplefilter("always")
        search.fit(X, y)
    assert not [w for w in caught if "outside the range" in str(w.message)]
    with pytest.warns(UserWarning, match="outside the range"):
        search.predict([[1.5]])  # the user's own queries still warn


def test_bootstrap_std_tracks_the_normal_std_under_homoscedastic_noise(rng):
    X = rng.uniform(0, 1, (400, 1))
    y = rng.normal(0, 1, 400)
    reg = LocalPolynomialRegressor(bandwidth=0.1).fit(X, y)
    Q = np.linspace(0.05, 0.95, 5)[:, None]
    normal = np.diff(reg.predict_interval(Q), axis=-1)[:, 0]
    boot = np.diff(reg.predict_interval(Q, method="bootstrap", random_state=0), axis=-1)[:, 0]
    assert_allclose(boot, normal, rtol=0.25)


def test_blocks_and_chunks_change_nothing(rng, monkeypatch):
    X, y = _data(rng, n=200)
    Q = rng.uniform(0, 1, (60, 2))
    reg = LocalPolynomialRegressor(0.3, degree=2).fit(X, y)
    std = reg.predict(Q, return_std=True)
    band = reg.predict_interval(Q, method="bootstrap", n_boot=30, random_state=1)
    monkeypatch.setattr(local_fit, "_BLOCK_FLOATS", 3000)  # several blocks of queries
    with config_context(working_memory=0.05):  # several chunks of equivalent kernels
        assert_allclose(reg.predict(Q, return_std=True), std, rtol=1e-12, atol=1e-15)
        again = reg.predict_interval(Q, method="bootstrap", n_boot=30, random_state=1)
    assert_allclose(again, band, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("c", [1e-200, 1.0, 1e200])
def test_std_of_a_slope_resolved_below_rounding_is_the_same_on_every_path(c):
    # Five rows at 0, the others 5+ bandwidths out (relative weight 2e-9): the local
    # line's slope rests on them, its equivalent kernel amplifies them 1e8-fold, and
    # the sandwich a' G2 a was rounding (0, 1 or 6 by path and scale). It is then the
    # local constant's factor, sum alpha^2, with the line's residual variance (dense).
    X = np.array([0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0, -0.5, -1.0])[:, None]
    y = np.array([-1.05, 0.63, 0.13, 2.45, -0.03, -1.04, -0.01, 0.11, -0.78])
    q = np.array([[0.1486]])
    alpha = naive_weights(X, q, 0.1, "gaussian")[0]
    Phi = np.column_stack([np.ones(len(X)), X[:, 0] - q[0, 0]])
    root = np.sqrt(alpha)[:, None]
    beta = np.linalg.lstsq(root * Phi, root[:, 0] * y, rcond=None)[0]
    want = np.sqrt(alpha @ (y - Phi @ beta) ** 2 * (alpha**2).sum())
    for algorithm in ("brute", "kd_tree", "ball_tree"):
        reg = LocalPolynomialRegressor(0.1 * c, degree=1, algorithm=algorithm).fit(X * c, y)
        std = reg.predict(q * c, return_std=True)[1]
        assert_allclose(std, want, rtol=1e-6)
