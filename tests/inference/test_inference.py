"""Gradients, standard errors and intervals against finite differences and the dense oracle."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import t as student_t

from conftest import (
    naive_gradient,
    naive_local_linear,
    naive_local_poly_std,
    naive_predict,
    naive_std,
    naive_weights,
    robust_line_residuals,
)
from skl_nw import LocalPolynomialRegressor, NadarayaWatsonRegressor
from skl_nw._inference._bootstrap import bootstrap_t
from skl_nw._inference._formulas import sandwich_variance, wild_multipliers
from skl_nw._kernels import kernel_names

NAMES = kernel_names()
PATHS = ["brute", "kd_tree"]


def _data(rng, n=150, d=2, k=None):
    X = rng.uniform(0, 4, (n, d))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = f + rng.normal(0, 0.2, n)
    if k:
        y = np.column_stack([y * (c + 1) - c for c in range(k)])
    w = rng.uniform(0.5, 2.0, n)
    return X, y, w


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", NAMES)
@pytest.mark.parametrize("k", [None, 2])
def test_gradient_equals_finite_differences(rng, kernel, algorithm, k):
    X, y, w = _data(rng, k=k)
    reg = NadarayaWatsonRegressor(bandwidth=[0.7, 0.9], kernel=kernel, algorithm=algorithm)
    reg.fit(X, y, sample_weight=w)
    Q = rng.uniform(0.5, 3.5, (12, 2))
    G = reg.predict_gradient(Q)
    assert G.shape == ((12, 2) if k is None else (12, k, 2))
    eps = 1e-6
    fd = np.stack(
        [(reg.predict(Q + eps * e) - reg.predict(Q - eps * e)) / (2 * eps) for e in np.eye(2)],
        axis=-1,
    )
    assert_allclose(G, fd, rtol=1e-5, atol=1e-6)
    if k is None and kernel != "tophat":
        want = naive_gradient(X, y, Q, [0.7, 0.9], kernel, w)
        assert_allclose(G, want, rtol=1e-9, atol=1e-9)


def test_gradient_far_from_the_origin(rng):
    # Centred moments: data 1e4 bandwidths from the origin cost no precision.
    X = 1e3 + np.linspace(0, 4, 400)[:, None]
    reg = NadarayaWatsonRegressor(bandwidth=0.1).fit(X, 2.0 * X[:, 0] + np.sin(X[:, 0]))
    Q = 1e3 + np.array([[1.0], [2.0], [3.0]])
    eps = 1e-5
    fd = (reg.predict(Q + eps) - reg.predict(Q - eps)) / (2 * eps)
    assert_allclose(reg.predict_gradient(Q)[:, 0], fd, rtol=1e-5)


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", NAMES)
def test_std_equals_the_dense_formula(rng, kernel, algorithm):
    X, y, w = _data(rng, k=2)
    h = [0.8, 1.0]
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel, algorithm=algorithm)
    reg.fit(X, y, sample_weight=w)
    Q = rng.uniform(0.5, 3.5, (20, 2))
    mean, std = reg.predict(Q, return_std=True)
    assert mean.shape == std.shape == (20, 2)
    assert_allclose(mean, naive_predict(X, y, Q, h, kernel, w), rtol=1e-10)
    assert_allclose(std, naive_std(X, y, Q, h, kernel, w), rtol=1e-7, atol=1e-12)
    reg.fit(X, y[:, 0], sample_weight=w)
    mean, std = reg.predict(Q, return_std=True)
    assert mean.shape == std.shape == (20,)
    assert_allclose(mean, reg.predict(Q), rtol=1e-14)


def test_std_integer_weights_equal_repeated_rows(rng):
    X, y, _ = _data(rng, n=60)
    w = rng.integers(1, 4, 60)
    Q = rng.uniform(0, 4, (15, 2))
    a = NadarayaWatsonRegressor(bandwidth=0.6).fit(X, y, sample_weight=w)
    b = NadarayaWatsonRegressor(bandwidth=0.6).fit(np.repeat(X, w, 0), np.repeat(y, w))
    assert_allclose(a.predict(Q, return_std=True), b.predict(Q, return_std=True), rtol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_std_is_zero_with_one_effective_neighbour_and_finite_far_away(kernel):
    X = np.array([[0.0], [1.0], [50.0]])
    reg = NadarayaWatsonRegressor(bandwidth=0.1, kernel=kernel).fit(X, [1.0, 2.0, 3.0])
    mean, std = reg.predict([[0.0], [1e6], [-30.0]], return_std=True)
    assert np.all(np.isfinite(std)) and np.all(np.isfinite(mean))
    assert_allclose(std, 0.0, atol=1e-12)
    assert_allclose(mean, [1.0, 3.0, 1.0])


def test_std_of_a_window_its_line_interpolates_is_the_constants():
    # Three points in 2-D inside the compact support: the local line fits them exactly
    # (no residual degree of freedom), so the variance is the one about their mean, of
    # y less the data's robust line (its slope standing in for the window's).
    X = np.array([[0.0, 0.0], [0.3, 0.0], [0.0, 0.3], [5.0, 5.0]])
    y = np.array([1.0, 2.0, 4.0, 0.0])
    reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel="epanechnikov").fit(X, y)
    q = np.array([[0.1, 0.1]])
    mean, std = reg.predict(q, return_std=True)
    alpha = naive_weights(X, q, 1.0, "epanechnikov")[0]
    share = (alpha**2).sum()
    r = robust_line_residuals(X, y)
    sigma2 = alpha @ (r - alpha @ r) ** 2 / (1 - share)
    assert_allclose(std, np.sqrt(sigma2 * share), rtol=1e-9)
    assert std[0] > 0.01


@pytest.mark.parametrize("gap", [0.8, 1.0, 2.0, 3.0, 4.0])
def test_std_of_windows_with_fewer_than_d_plus_2_effective_points_is_the_constants(gap):
    # One point dominates the Gaussian window (the others ``gap`` bandwidths out): the
    # line's residual share is then of the order of its rounding, and the order of the
    # rows decided the standard error (0.009 or 2.8 on fuzzed data). With fewer than
    # d + 2 effective points the variance is the one about the constant (dense formula,
    # of y less the data's robust line), whatever the order; with more, the line's.
    X = np.array([[0.0], [gap], [-gap], [gap + 0.5]])
    y = np.array([1.0, -2.0, 3.0, 0.5])
    q = np.array([[0.0]])
    alpha = naive_weights(X, q, 1.0, "gaussian")[0]
    share = (alpha**2).sum()
    for order in ([0, 1, 2, 3], [3, 1, 0, 2], [2, 3, 1, 0]):
        reg = NadarayaWatsonRegressor(bandwidth=1.0).fit(X[order], y[order])
        std = reg.predict(q, return_std=True)[1]
        if 1 / share < 3:
            r = robust_line_residuals(X, y)
            sigma2 = alpha @ (r - alpha @ r) ** 2 / (1 - share)
            assert_allclose(std, np.sqrt(sigma2 * share), rtol=1e-9)
        else:
            assert_allclose(std, naive_std(X, y, q, 1.0), rtol=1e-9)


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_std_of_targets_far_above_their_noise_equals_the_dense_formula(rng, degree, algorithm):
    # The noise variance is formed from moments about the query, which cancelled by the
    # square of y's spread over its noise: y = 1e8 x + N(0, 1) came out 45% off, and
    # an outlier of 1e12 outside the window (no weight there) gave 0, through the mean
    # it moved. Dense: the residuals about the local fit of y itself.
    X = rng.uniform(0, 1, (300, 1))
    e = rng.normal(size=300)
    Q = np.linspace(0.1, 0.8, 8)[:, None]
    outlier = np.where(X[:, 0] == X[:, 0].max(), 1e12, 0.0)
    for y, kernel in ((1e8 * X[:, 0] + e, "gaussian"), (e + outlier, "epanechnikov")):
        reg = LocalPolynomialRegressor(0.1, kernel=kernel, degree=degree, algorithm=algorithm)
        std = reg.fit(X, y).predict(Q, return_std=True)[1]
        want = naive_local_poly_std(X, y, Q, 0.1, kernel, degree)[1]
        assert_allclose(std, want, rtol=1e-5)
        if degree == 0:
            nw = NadarayaWatsonRegressor(0.1, kernel=kernel, algorithm=algorithm).fit(X, y)
            assert_allclose(nw.predict(Q, return_std=True)[1], want, rtol=1e-5)


def test_std_where_a_line_fits_every_row_is_zero_whatever_the_weights():
    # Two distinct inputs: the robust line fits both exactly, its residuals are rounding,
    # and the bisquare weights of rounding (the median residual ~1e-17) dropped a row,
    # whose residual then passed for noise: se 0.6 for 0, and weights != repeated rows.
    X = np.array([[-0.27429162], [0.18643452], [0.18643452]])
    y = np.array([-1.91213943, 0.11621418, 0.11621418])
    Q = np.array([[0.3], [-1.2], [0.0]])
    for h in (0.05, 0.17, 0.5):
        reg = NadarayaWatsonRegressor(h)
        assert_allclose(reg.fit(X, y).predict(Q, return_std=True)[1], 0.0, atol=1e-13)
        weighted = reg.fit(X[:2], y[:2], sample_weight=[1.0, 2.0]).predict(Q, return_std=True)
        assert_allclose(weighted[1], 0.0, atol=1e-13)


def test_std_integer_weights_equal_repeated_rows_in_windows_of_the_constant():
    # Windows of fewer than d + 2 effective points take the constant's residuals of y less
    # the robust line, whose weighted median picked another row where integer weights came
    # back from their logs a few ulps off (3.0000000000000004): se 0.2% off the rows
    # repeated.
    X = np.array([[0.33], [0.41], [0.57], [0.51], [0.56], [0.57]])
    y = np.array([0.6, -1.28, 0.97, -1.13, -0.19, 0.89])
    counts = np.array([1, 1, 2, 3, 1, 2])
    Q = np.linspace(0.0, 1.0, 7)[:, None]
    reg = NadarayaWatsonRegressor(0.1, kernel="epanechnikov")
    weighted = reg.fit(X, y, sample_weight=counts.astype(float)).predict(Q, return_std=True)[1]
    repeated = reg.fit(np.repeat(X, counts, 0), np.repeat(y, counts)).predict(Q, return_std=True)[1]
    assert_allclose(weighted, repeated, rtol=1e-9, atol=1e-12)


def test_std_on_the_grid_does_not_move_with_a_line_added_to_y(rng):
    # Many queries take the binned noise variance from the grid's nodes: a local line
    # there absorbs any line added to y, as at a query (1e8 x: 45% off before).
    X = rng.uniform(0, 1, (2000, 1))
    e = rng.normal(size=2000)
    Q = rng.uniform(0.05, 0.95, (4000, 1))
    reg = NadarayaWatsonRegressor(0.05, algorithm="binned", binned_tol=1e-4)
    want = reg.fit(X, e).predict(Q, return_std=True)[1]
    for slope in (1e8, -3e10):
        std = reg.fit(X, slope * X[:, 0] + e).predict(Q, return_std=True)[1]
        assert_allclose(std, want, rtol=1e-5)


def test_std_is_sigma_over_root_n_for_a_wide_bandwidth(rng):
    # h -> inf: equal weights, the mean's se^2 = s^2 / n with s^2 the residual variance
    # of the least-squares line on n - 2 degrees of freedom (the local line's).
    y = rng.normal(size=200) + 2.0 * np.arange(200) / 200
    X = np.column_stack([np.arange(200) / 200])
    _, std = NadarayaWatsonRegressor(bandwidth=1e6).fit(X, y).predict([[0.5]], return_std=True)
    residuals = y - np.polyval(np.polyfit(X[:, 0], y, 1), X[:, 0])
    assert_allclose(std, np.sqrt(residuals @ residuals / 198 / 200), rtol=1e-8)
    # Where the local constant's variance includes the trend's spread:
    assert std[0] < 0.95 * np.std(y) / np.sqrt(200)


def test_sandwich_equals_the_dense_local_linear_variance(rng):
    X = rng.uniform(0, 4, (80, 1))
    y = np.sin(X[:, 0])
    Q = rng.uniform(0.5, 3.5, (10, 1))
    _, rows, G1, G2 = naive_local_linear(X, y, Q, 0.5)
    sigma2 = rng.uniform(0.5, 2.0, 10)
    # Var(l' y) = sigma^2 sum_i l_i^2 for independent errors of variance sigma^2.
    assert_allclose(sandwich_variance(G1, G2, sigma2), sigma2 * (rows**2).sum(1), rtol=1e-10)
    # p = 1 is the local-constant factor sum K^2 / (sum K)^2.
    g1, g2 = G1[:, :1, :1], G2[:, :1, :1]
    assert_allclose(sandwich_variance(g1, g2, sigma2[:, None])[:, 0],
                    sigma2 * g2[:, 0, 0] / g1[:, 0, 0] ** 2)  # fmt: skip


def test_wild_multipliers_have_mean_zero_and_unit_variance():
    rs = np.random.RandomState(0)
    for kind in ("rademacher", "mammen"):
        V = wild_multipliers(rs, 200_000, 1, kind)
        assert abs(V.mean()) < 0.01 and abs(V.var() - 1) < 0.01
        if kind == "mammen":
            assert abs((V**3).mean() - 1) < 0.03


def hat_by_refits(make, X, w, Q):
    """The smoother's weights by refits on the unit vectors: (L at Q, H at X), dense.

    ``make()`` an unfitted estimator; a fit on the identity's columns predicts
    column ``j`` of the weights (the fit is linear in y): an oracle that never
    calls the weights or the bootstrap code under test.
    """
    fitted = make().fit(X, np.eye(len(X)), sample_weight=w)
    return fitted.predict(Q), fitted.predict(X)


def bootstrap_t_oracle(make, X, y, w, Q, V, alpha=0.05, simultaneous=False):
    """The wild bootstrap-t interval written from the formulas with explicit refits."""
    L, H = hat_by_refits(make, X, w, Q)
    fit = make().fit(X, y, sample_weight=w)
    e = y - fit.predict(X)
    # Frequency weights: row i is w_i copies of noise sigma^2, each residual of variance
    # sigma^2 (1 - 2 H_ii / w_i + sum_j H_ij^2 / w_j); the bootstrap's rows (one multiplier
    # each) have noise sigma^2 / w_i and residual variance sigma^2 c_i / w_i.
    copy = 1 - 2 * np.diag(H) / w + (H**2) @ (1 / w)
    c = 1 - 2 * np.diag(H) + w * ((H**2) @ (1 / w))
    e_tilde = e / np.sqrt(w * copy)
    se = np.sqrt((L**2) @ e_tilde**2)
    Es = V * e_tilde[:, None]
    boot = make().fit(X, Es, sample_weight=w)  # the bootstrap fits' deviations
    R = (Es - boot.predict(X)) / np.sqrt(c)[:, None]
    T = np.abs(boot.predict(Q)) / np.sqrt((L**2) @ R**2)
    crit = np.quantile(T.max(axis=0) if simultaneous else T, 1 - alpha, axis=-1)
    mean = fit.predict(Q)
    return np.column_stack([mean - crit * se, mean + crit * se])


@pytest.mark.parametrize("k", [None, 2])
def test_interval_shapes_and_the_normal_interval(rng, k):
    X, y, _ = _data(rng, k=k)
    reg = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    Q = rng.uniform(0, 4, (7, 2))
    mean, std = reg.predict(Q, return_std=True)
    for method in ("normal", "bootstrap"):
        band = reg.predict_interval(Q, alpha=0.1, method=method, n_boot=99, random_state=0)
        assert band.shape == mean.shape + (2,)
        assert np.all(band[..., 0] <= mean) and np.all(mean <= band[..., 1])
    # Student's t with the effective number of points less the local line's 3 coefficients
    # (the noise variance's residuals are about it).  Levels below 2e-16 too: 1 - level / 2
    # rounds to 1 there, and the interval was infinite.
    alpha = naive_weights(X, Q, 0.5, "gaussian")
    for level in (0.1, 1e-17):
        band = reg.predict_interval(Q, alpha=level)
        t = student_t.isf(level / 2, 1 / (alpha**2).sum(axis=1) - 3)
        t = t if k is None else t[:, None]
        assert_allclose(band[..., 1] - mean, t * std, rtol=1e-9)
        assert_allclose(mean - band[..., 0], t * std, rtol=1e-9)


@pytest.mark.parametrize("simultaneous", [False, True])
def test_bootstrap_is_reproducible_and_matches_explicit_refits(rng, simultaneous):
    X, y, w = _data(rng, n=40)
    w = np.round(w)
    reg = NadarayaWatsonRegressor(bandwidth=0.6).fit(X, y, sample_weight=w)
    Q = rng.uniform(0, 4, (5, 2))
    kw = {"method": "bootstrap", "n_boot": 50, "random_state": 3, "simultaneous": simultaneous}
    a = reg.predict_interval(Q, **kw)
    assert_array_equal(a, reg.predict_interval(Q, **kw))
    V = wild_multipliers(np.random.RandomState(3), 40, 50, "rademacher")
    want = bootstrap_t_oracle(
        lambda: NadarayaWatsonRegressor(bandwidth=0.6), X, y, w, Q, V, simultaneous=simultaneous
    )
    assert_allclose(a, want, rtol=1e-9, atol=1e-9)


def test_bootstrap_standard_error_of_integer_weights_is_that_of_repeated_rows(rng):
    # The sandwich of the copies (each its own residual and multiplier), written out; the
    # critical value differs (one multiplier a row), the standard error must not.
    X, y, w = _data(rng, n=40)
    w = np.round(w) + 1
    Q = rng.uniform(0, 4, (5, 2))
    Xr, yr = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    make = lambda: NadarayaWatsonRegressor(bandwidth=0.3)  # noqa: E731
    L, H = hat_by_refits(make, Xr, np.ones(len(yr)), Q)
    e = yr - make().fit(Xr, yr).predict(Xr)
    want = np.sqrt((L**2) @ (e**2 / (1 - 2 * np.diag(H) + (H**2).sum(axis=1))))
    for fit in (make().fit(X, y, sample_weight=w), make().fit(Xr, yr)):
        Y, v = fit._targets()
        se = bootstrap_t(fit._weights, fit._queries(Q), fit._training_queries(), Y, v,
                         n_boot=9, rng=np.random.RandomState(0), multipliers="rademacher",
                         alpha=0.05, simultaneous=False, block_doubles=2**20)[1]  # fmt: skip
        assert_allclose(se[:, 0], want, rtol=1e-9)


def test_band_contains_the_pointwise_intervals(rng):
    X, y, _ = _data(rng, n=80)
    reg = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
    Q = rng.uniform(0.5, 3.5, (30, 2))
    kw = {"method": "bootstrap", "n_boot": 99, "random_state": 0}
    point = reg.predict_interval(Q, **kw)
    band = reg.predict_interval(Q, simultaneous=True, **kw)
    assert np.all(band[:, 0] <= point[:, 0]) and np.all(point[:, 1] <= band[:, 1])
    assert np.any(band[:, 1] - band[:, 0] > 1.2 * (point[:, 1] - point[:, 0]))


@pytest.mark.parametrize("method", ["normal", "bootstrap"])
def test_robust_bias_correction_is_the_local_quadratic_interval(rng, method):
    # rho = 1: the bias-corrected Nadaraya-Watson fit is the local quadratic fit (the next
    # even degree: the local linear one leaves the interior h^2 bias).
    X, y, w = _data(rng, n=80)
    Q = rng.uniform(1, 3, (6, 2))
    kw = {"method": method, "n_boot": 30, "random_state": 2}
    nw = NadarayaWatsonRegressor(bandwidth=1.2).fit(X, y, sample_weight=w)
    quad = LocalPolynomialRegressor(bandwidth=1.2, degree=2).fit(X, y, sample_weight=w)
    assert_allclose(
        nw.predict_interval(Q, bias_correction="robust", **kw),
        quad.predict_interval(Q, **kw),
        rtol=1e-9,
    )
    assert nw.get_params()["bandwidth"] == 1.2 and not hasattr(nw, "degree")


def test_zero_width_intervals_warn():
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    reg = NadarayaWatsonRegressor(bandwidth=0.5, kernel="epanechnikov").fit(X, [0, 1, 2, 3.0])
    with pytest.warns(UserWarning, match="zero-width"):
        band = reg.predict_interval([[10.1], [1.0]])
    assert band[0, 1] - band[0, 0] < 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NadarayaWatsonRegressor(bandwidth=2.0).fit(X, [0, 1, 2, 3.0]).predict_interval([[1.0]])


def test_bootstrap_std_tracks_the_normal_std_under_homoscedastic_noise(rng):
    X = rng.uniform(0, 1, (400, 1))
    y = rng.normal(0, 1, 400)  # a flat curve: no bias, local variance = residual variance
    reg = NadarayaWatsonRegressor(bandwidth=0.1).fit(X, y)
    Q = np.linspace(0.2, 0.8, 5)[:, None]
    normal = np.diff(reg.predict_interval(Q), axis=-1)[:, 0]
    boot = np.diff(reg.predict_interval(Q, method="bootstrap", random_state=0), axis=-1)[:, 0]
    assert_allclose(boot, normal, rtol=0.25)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"method": "basic"}, "method"),
        ({"n_boot": 0}, "n_boot"),
        ({"multipliers": "normal"}, "multipliers"),
        ({"simultaneous": True}, "simultaneous"),
        ({"simultaneous": "yes", "method": "bootstrap"}, "simultaneous"),
        ({"bias_correction": "undersmooth"}, "bias_correction"),
    ],
)
def test_interval_bad_arguments(rng, kwargs, match):
    X, y, _ = _data(rng, n=20)
    reg = NadarayaWatsonRegressor().fit(X, y)
    with pytest.raises(ValueError, match=match):
        reg.predict_interval(X[:2], **kwargs)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube"])
def test_bootstrap_draws_that_a_fit_takes_up_exactly_do_not_explode(rng, kernel):
    # Near an isolated pair of rows (a compact kernel), half the draws' bootstrap noise is
    # taken up by the fit exactly: se* = 0, whose rounding (1e-17) made T* ~ 1e16 and the
    # intervals +-1e12, the simultaneous band's everywhere, and unlike for 3 y.
    X = np.r_[np.linspace(0, 1, 60), [1.7, 1.77]][:, None]
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=62)
    Q = np.array([[0.5], [1.72], [1.75]])
    reg = NadarayaWatsonRegressor(0.2, kernel=kernel)
    kw = {"method": "bootstrap", "n_boot": 199, "random_state": 0}
    band = reg.fit(X, y).predict_interval(Q, **kw)
    assert np.all(np.diff(band, axis=1) < 0.1)  # y spreads over 2
    assert_allclose(reg.fit(X, 3 * y).predict_interval(Q, **kw) / 3, band, rtol=1e-9)
    point = reg.fit(X, y).predict_interval(Q[:1], **kw)
    whole = reg.predict_interval(Q, simultaneous=True, **kw)[0]
    assert whole[1] - whole[0] < 3 * (point[0, 1] - point[0, 0])
