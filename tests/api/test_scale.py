"""Scale: what is equivariant in exact arithmetic is so in floating point, for any finite input.

Each result on ``X * factor`` (or ``y * factor``) is compared with the one on
the unscaled data, itself checked against the dense oracles of
``conftest.py`` elsewhere (and here, for the rule of thumb): squares of
numbers far from 1 (``1e200 ** 2``, ``1e-200 ** 2``) must never be formed.
"""

import itertools
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose

from conftest import naive_predict, naive_rule_of_thumb, naive_std, robust_line_residuals
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    rule_of_thumb,
    significance_test,
)

FACTORS = [1e-200, 1e-100, 1.0, 1e100, 1e200]
ESTIMATORS = {
    "nw": lambda: NadarayaWatsonRegressor(),
    "local_linear": lambda: LocalPolynomialRegressor(degree=1),
    "local_quadratic": lambda: LocalPolynomialRegressor(degree=2),
    # A span with bandwidth=1.0 (R's normalize=FALSE): the widths stay 1, the radii scale.
    "span_nw": lambda: NadarayaWatsonRegressor(span=0.4, bandwidth=1.0),
    "span_quadratic": lambda: LocalPolynomialRegressor(degree=2, span=0.5, bandwidth=1.0),
}


def _data(rng, n=80):
    X = rng.uniform(-1, 1, (n, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + rng.normal(0, 0.2, n)
    return X, y, rng.uniform(-0.9, 0.9, (7, 2))


def _results(est, Q) -> dict:
    """Everything a fitted regressor says at ``Q`` (the bandwidth from its rule of thumb)."""
    mean, std = est.predict(Q, return_std=True)
    return {
        "bandwidth": est.bandwidth_,
        "predict": est.predict(Q),
        "mean": mean,
        "std": std,
        "normal": est.predict_interval(Q),
        "bootstrap": est.predict_interval(Q, method="bootstrap", n_boot=49, random_state=0),
        "gradient": est.predict_gradient(Q),
    }


# How each result scales with X (power of the factor) and with y.
X_POWER = {"bandwidth": 1, "gradient": -1}
Y_POWER = {"bandwidth": 0}


def _assert_scaled(got: dict, base: dict, factor: float, powers: dict, default: int) -> None:
    for name, value in got.items():
        assert np.isfinite(value).all(), name
        expected = base[name] * factor ** powers.get(name, default)
        assert_allclose(value, expected, rtol=1e-10, atol=0, err_msg=name)


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_scaling_x_scales_the_bandwidth_and_the_gradient_only(rng, name, factor):
    X, y, Q = _data(rng)
    est = ESTIMATORS[name]()
    base = _results(est.fit(X, y), Q)
    got = _results(ESTIMATORS[name]().fit(X * factor, y), Q * factor)
    fixed = not isinstance(est.bandwidth, str)  # a given bandwidth does not scale
    _assert_scaled(got, base, factor, {**X_POWER, "bandwidth": 1 - fixed}, 0)


@pytest.mark.parametrize("name", ["span_nw", "span_quadratic"])
def test_a_refit_at_another_scale_is_a_fresh_fit(rng, name):
    X, y, Q = _data(rng)
    est = ESTIMATORS[name]().fit(X * 1e-250, y)
    got = _results(est.fit(X * 1e250, y), Q * 1e250)
    _assert_scaled(got, _results(ESTIMATORS[name]().fit(X * 1e250, y), Q * 1e250), 1.0, {}, 0)


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_scaling_y_scales_every_result_in_units_of_y(rng, name, factor):
    X, y, Q = _data(rng)
    base = _results(ESTIMATORS[name]().fit(X, y), Q)
    got = _results(ESTIMATORS[name]().fit(X, y * factor), Q)
    _assert_scaled(got, base, factor, Y_POWER, 1)


@pytest.mark.parametrize("offset", [2.0**20, -(2.0**30)])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_shifting_y_shifts_the_fits_and_nothing_else(rng, name, offset):
    # Dyadic data: y + offset is exact, so the fits may differ by their rounding at the
    # offset's size only.  The local polynomials' moments y t^g cancelled (1e-2 off a
    # local quadratic at an offset of 2^30, a million times that rounding).
    X, y, Q = _data(rng)
    X, y = np.round(X * 2**10) / 2**10, np.round(y * 2**20) / 2**20
    base = _results(ESTIMATORS[name]().fit(X, y), Q)
    got = _results(ESTIMATORS[name]().fit(X, y + offset), Q)
    shifted = {"predict", "mean", "normal", "bootstrap"}
    for key, value in got.items():
        want = base[key] + offset if key in shifted else base[key]
        assert_allclose(value, want, rtol=0, atol=64 * abs(offset) * 2**-52, err_msg=key)

    def search(t):
        est = BandwidthSearchCV(ESTIMATORS[name](), bandwidths=[0.3, 0.6])
        return est.fit(X, t).cv_results_["mean_test_score"]

    if ESTIMATORS[name]().span is None:
        assert_allclose(search(y + offset), search(y), rtol=1e-6)


@pytest.mark.parametrize("factor", FACTORS)
def test_std_of_huge_targets_matches_the_dense_oracle(rng, factor):
    X, y, Q = _data(rng)
    y = y + 3.0  # a centre away from 0 as well
    got = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y * factor).predict(Q, return_std=True)[1]
    assert_allclose(got / factor, naive_std(X, y, Q, 0.3), rtol=1e-10)


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_rule_of_thumb_is_equivariant(rng, rule, factor):
    # Uniform columns: the standard deviation is below IQR / 1.349, so an overflowing
    # (or underflowing) standard deviation would hand the choice to the IQR.
    X = rng.uniform(0, 1, (50, 2)) * [1.0, 5.0]
    w = rng.integers(0, 4, 50).astype(float)
    for weights in (None, w):
        want = naive_rule_of_thumb(X, rule, weights)
        assert_allclose(rule_of_thumb(X * factor, rule, weights) / factor, want, rtol=1e-12)
        shifted = X * factor + 3.0 * factor  # and off 0
        assert_allclose(rule_of_thumb(shifted, rule, weights) / factor, want, rtol=1e-10)


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("target", ["X", "y"])
@pytest.mark.parametrize(
    "make",
    [
        lambda f: NadarayaWatsonRegressor(bandwidth=[0.3 * f, 0.4 * f]),
        lambda f: LocalPolynomialRegressor(bandwidth=[0.5 * f, 0.6 * f]),
    ],
    ids=["nw", "local_linear"],
)
def test_significance_pvalue_is_scale_invariant(rng, make, target, factor):
    n = 60
    X = rng.uniform(-1, 1, (n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.5, n)
    fx, fy = (factor, 1.0) if target == "X" else (1.0, factor)
    base = significance_test(make(1.0), X, y, [1], n_boot=19, random_state=3)
    got = significance_test(make(fx), X * fx, y * fy, [1], n_boot=19, random_state=3)
    assert got.pvalue == base.pvalue
    assert base.pvalue < 1.0  # the case of the issue: every statistic 0 gave p = 1
    # The statistic in units of (y / x)^2, where that is a normal float.
    if abs(np.log10(fy) - np.log10(fx)) < 150:
        unit = (fy / fx) ** 2
        assert_allclose(got.statistic, base.statistic * unit, rtol=1e-9)
        assert_allclose(got.null_distribution, base.null_distribution * unit, rtol=1e-9)


def _weighted_local_fit(W, X, y, q, h, degree):
    """Fit and standard error of the weighted least-squares polynomial in ``(x - q) / h``.

    ``W`` the attention weights (summing to 1).  The residuals' mean square
    is that of ``y`` less its robust line (as documented; the same as of
    ``y`` where the fit keeps every slope).  A feature along which ``q``
    lies far from every point (``1e6`` bandwidths) is constant over the
    neighbourhood, so its powers are left out and its products with another
    feature are collinear with that feature: the fit drops to degree 1, in
    the other features (the solver drops whole degrees).
    """
    near = np.abs(q) / h < 1e6
    if not near.all():
        degree = min(degree, 1)
    T = (X[:, near] - q[near]) / h
    Phi = np.column_stack([
        np.prod(T[:, list(c)], axis=1)
        for p in range(degree + 1)
        for c in itertools.combinations_with_replacement(range(T.shape[1]), p)
    ])  # fmt: skip
    G = Phi.T @ (W[:, None] * Phi)
    beta = np.linalg.solve(G, Phi.T @ (W * y))
    weights = W * (Phi @ np.linalg.solve(G, np.eye(len(G))[0]))  # the equivalent kernel
    r = robust_line_residuals(X, y)
    sigma2 = W @ (r - Phi @ np.linalg.solve(G, Phi.T @ (W * r))) ** 2
    return beta[0], np.sqrt(sigma2 * (weights**2).sum())


@pytest.mark.parametrize("degree", [2, 3])
def test_far_queries_of_high_degree_fits_match_the_dense_fit(rng, degree):
    # Moments about q hold powers q^(2 degree), which overflowed: NaN for queries
    # beyond 1e77 bandwidths (degree 2) although such queries are accepted.
    X, y, _ = _data(rng, n=150)
    Q = np.array([[1e60, 0.1], [1e80, -0.2], [0.3, 1e104], [-1e140, 3e139], [0.2, -0.4]])
    h = 0.5
    est = LocalPolynomialRegressor(bandwidth=h, degree=degree).fit(X, y)
    mean, std = est.predict(Q, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    W = est._attention(Q, est.fallback, False)  # the engine's weights, even where they tie
    for i, q in enumerate(Q):
        want_mean, want_std = _weighted_local_fit(W[i], X, y, q, h, degree)
        assert_allclose(mean[i], want_mean, rtol=1e-8)
        assert_allclose(std[i], want_std, rtol=1e-7)
    assert_allclose(est.predict(Q), mean, rtol=1e-14)
    boot = est.predict_interval(Q, method="bootstrap", n_boot=29, random_state=0)
    assert np.isfinite(boot).all()
    assert ((boot[:, 0] <= mean + 1e-12) & (mean <= boot[:, 1] + 1e-12)).all()


SEARCHES = {
    "grid": {},
    "lbfgs": {"method": "lbfgs"},
    "sgd": {"method": "sgd", "max_iter": 5, "tol": None, "random_state": 0},
    "aicc": {"criterion": "aicc"},
    "gcv": {"criterion": "gcv"},
    "cv3": {"cv": 3},
}


@pytest.mark.parametrize("factor", [1e-200, 1e200])
@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("name", ["nw", "local_linear"])
def test_search_selects_the_same_bandwidth_whatever_the_scale_of_y(rng, name, search, factor):
    # The reference is the search on y itself; scores are in units of y (squared
    # errors scale by factor^2, AICc shifts by 2 log factor; beyond the float
    # range a squared error is -inf, as its true value is).
    X, y, _ = _data(rng, n=60)
    make = lambda: BandwidthSearchCV(ESTIMATORS[name](), **SEARCHES[search])  # noqa: E731
    expected, got = make().fit(X, y), make().fit(X, y * factor)
    # y / unit is not bit-identical across factors (factor is no power of two): the
    # gradient routes' iterates (Adam's epsilon, L-BFGS-B's tolerances) move by rounding.
    rtol = 1e-9 if search in ("sgd", "lbfgs") else 1e-12
    assert_allclose(got.bandwidth_, expected.bandwidth_, rtol=rtol)
    assert np.isfinite(got.best_score_) or got.best_score_ == -np.inf
    if search == "aicc":
        assert_allclose(got.best_score_, expected.best_score_ - 2 * np.log(factor), rtol=1e-12)
    elif factor < 1:  # factor^2 underflows: the squared error is 0 in floating point
        assert got.best_score_ == 0
    else:
        assert got.best_score_ == -np.inf


@pytest.mark.parametrize("factor", [2.0**-400, 2.0**300])
def test_search_scores_scale_exactly_by_a_power_of_two(rng, factor):
    X, y, _ = _data(rng, n=60)
    expected = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    got = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y * factor)
    assert_allclose(got.cv_results_["mean_test_score"],
                    expected.cv_results_["mean_test_score"] * factor**2, rtol=1e-13)  # fmt: skip


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_r2_score_does_not_depend_on_the_scale_of_y(rng, name, factor):
    X, y, _ = _data(rng)
    expected = ESTIMATORS[name]().fit(X, y).score(X, y)
    assert_allclose(ESTIMATORS[name]().fit(X, y * factor).score(X, y * factor), expected,
                    rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_summary_of_y_at_any_scale(rng, name, factor):
    # Squared residuals of y * 1e-200 underflowed (r2 1, AICc inf) and of y * 1e200
    # overflowed (r2 NaN): r2 is free of the scale, AICc moves by 2 log(factor).
    X, y, _ = _data(rng)
    base = ESTIMATORS[name]().fit(X, y).summary()
    got = ESTIMATORS[name]().fit(X, y * factor).summary()
    assert_allclose(got.r2, base.r2, rtol=1e-12)
    assert_allclose(got.aicc, base.aicc + 2 * np.log(factor), rtol=1e-12, atol=1e-10)
    assert_allclose(got.trace, base.trace, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "binned"])
@pytest.mark.parametrize("offset", [1e12, -3e15])
def test_inputs_far_from_zero_keep_their_digits(rng, offset, algorithm):
    # X / h rounded each coordinate at the offset's size before the data was centred:
    # relative errors of 6e-4 at h = 0.6 (h = 0.5 or 1 divide exactly, and hid it). The
    # inputs are now shifted by their mid-range first. Dense: the same data at 0 (the
    # subtraction of the offset is exact here).
    X = rng.normal(size=(200, 1)) + offset
    Q = np.linspace(-2.0, 2.0, 9)[:, None] + offset
    X0, Q0 = X - offset, Q - offset  # exact (Sterbenz): the same points at 0
    y = np.cos(X0[:, 0])
    h = 0.6
    got = NadarayaWatsonRegressor(h, algorithm=algorithm).fit(X, y).predict(Q)
    if algorithm == "binned":  # within binned_tol of the dense formula; the grid's at 0
        want = NadarayaWatsonRegressor(h, algorithm=algorithm).fit(X0, y).predict(Q0)
    else:
        want = naive_predict(X0, y, Q0, h)
    assert_allclose(got, want, rtol=1e-9)
    if algorithm != "binned":
        local = LocalPolynomialRegressor(h, algorithm=algorithm).fit(X, y).predict(Q)
        want = LocalPolynomialRegressor(h, algorithm=algorithm).fit(X0, y).predict(Q0)
        assert_allclose(local, want, rtol=1e-9)
        grad = NadarayaWatsonRegressor(h, algorithm=algorithm).fit(X, y).predict_gradient(Q)
        assert_allclose(grad, NadarayaWatsonRegressor(h).fit(X0, y).predict_gradient(Q0),
                        rtol=1e-9, atol=1e-12)  # fmt: skip


def test_weights_near_the_float_maximum(rng):
    # Sums of 120 weights of 1e308 pass the float maximum: score, summary()'s sigma^2,
    # R^2 and LOO MSE, Parzen's priors and densities were NaN. None depends on the
    # weights' scale: they are those of unit weights (n, their sum, is inf).
    from skl_nw import ParzenClassifier

    X = rng.normal(size=(120, 2))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=120)
    labels = (y > 0).astype(int)
    ones, big = np.ones(120), np.full(120, 1e308)
    reg = NadarayaWatsonRegressor(0.5)
    a, b = reg.fit(X, y, ones).summary(), reg.fit(X, y, big).summary()
    assert_allclose(reg.score(X, y, big), reg.fit(X, y, ones).score(X, y, ones), rtol=1e-12)
    for field in ("sigma2", "r2", "loo_mse"):
        assert_allclose(getattr(b, field), getattr(a, field), rtol=1e-12)
    clf = ParzenClassifier(0.5)
    want = clf.fit(X, labels, ones).score_samples(X[:5])
    prior = clf.class_prior_
    assert_allclose(clf.fit(X, labels, big).score_samples(X[:5]), want, rtol=1e-12)
    assert_allclose(clf.class_prior_, prior, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "binned"])
def test_standard_errors_continue_into_subnormal_weights(rng, algorithm):
    # Sums of squared weights over squared sums scale as 1 / w: with subnormal weights
    # they overflowed, and the standard errors and intervals were NaN or inf. Uniform
    # weights 2^-1000 (normal) and 2^-1070 (subnormal): frequency weights, so the
    # local polynomial's errors grow by 2^35 and Nadaraya-Watson's stay 0 (the windows
    # hold less than one observation).
    X = rng.uniform(size=(60, 1))
    y = np.sin(4 * X[:, 0]) + 0.3 * rng.normal(size=60)
    Q = np.array([[0.3], [0.7]])
    normal, subnormal = np.full(60, 2.0**-1000), np.full(60, 2.0**-1070)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # weights summing below 2
        for estimator in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
            est = estimator(bandwidth=0.15, algorithm=algorithm)
            if estimator is LocalPolynomialRegressor and algorithm == "binned":
                continue
            a = est.fit(X, y, sample_weight=normal).predict(Q, return_std=True)[1]
            band_a = est.predict_interval(Q, method="bootstrap", n_boot=49, random_state=0)
            robust_a = est.predict_interval(Q, bias_correction="robust")
            b = est.fit(X, y, sample_weight=subnormal).predict(Q, return_std=True)[1]
            band_b = est.predict_interval(Q, method="bootstrap", n_boot=49, random_state=0)
            robust_b = est.predict_interval(Q, bias_correction="robust")
            assert np.all(np.isfinite(b)) and np.all(np.isfinite(band_b))
            assert np.all(np.isfinite(robust_b))
            grow = 2.0**35 if estimator is LocalPolynomialRegressor else 0.0
            assert_allclose(b, grow * a, rtol=1e-9)
            for lo_hi_a, lo_hi_b in ((band_a, band_b), (robust_a, robust_b)):
                width_a, width_b = np.diff(lo_hi_a, axis=1), np.diff(lo_hi_b, axis=1)
                assert_allclose(width_b, 2.0**35 * width_a, rtol=1e-9)
