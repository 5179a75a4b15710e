"""Conditional distributions, quantiles and their selection, against independent references."""

import warnings

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr
from sklearn.metrics import d2_pinball_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_nw import (
    BandwidthSearchCV,
    KernelQuantileRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
    significance_test,
)
from skl_nw._kernels import kernel_names

TAUS = np.array([0.05, 0.3, 0.5, 0.77, 0.95])


def _data(n=80, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(X[:, 0]) + (0.2 + 0.3 * np.abs(X[:, 0])) * rng.normal(size=n)
    return X, y, rng


def _statsmodels():
    return pytest.importorskip("statsmodels.nonparametric.kernel_density")


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' random-state notice
@pytest.mark.parametrize("indep_type", ["cc", "cu", "co"])
def test_pdf_and_cdf_equal_statsmodels(indep_type):
    sm = _statsmodels()
    X, y, rng = _data(60)
    h, hy = np.array([0.5, 0.7]), 0.3
    cats = None
    if indep_type[1] != "c":
        X[:, 1] = rng.integers(0, 4, size=len(X))
        h[1] = 0.3  # lambda
        cats = [1]
    reg = NadarayaWatsonRegressor(
        h, y_bandwidth=hy, categorical_features=cats,
        ordered_features=[1] if indep_type == "co" else None,
    ).fit(X, y)  # fmt: skip
    Xq, yq = X[:15] + np.array([0.1, 0.0]), rng.normal(size=15)
    kde = sm.KDEMultivariateConditional(
        endog=[y], exog=[X[:, 0], X[:, 1]], dep_type="c", indep_type=indep_type, bw=[hy, *h]
    )
    pdf = kde.pdf(endog_predict=yq, exog_predict=Xq)
    cdf = kde.cdf(endog_predict=yq, exog_predict=Xq)
    np.testing.assert_allclose(reg.predict_pdf(Xq, yq[:, None])[:, 0], pdf, rtol=0, atol=1e-8)
    np.testing.assert_allclose(reg.predict_cdf(Xq, yq[:, None])[:, 0], cdf, rtol=0, atol=1e-8)


@pytest.mark.parametrize("algorithm,kernel", [("brute", "gaussian"), ("kd_tree", "epanechnikov")])
def test_empirical_quantiles_are_numpys_weighted_inverted_cdf(algorithm, kernel):
    X, y, rng = _data(90)
    y[:10] = y[10:20]  # ties
    reg = NadarayaWatsonRegressor(0.6, kernel=kernel, algorithm=algorithm, y_bandwidth=0)
    reg.fit(X, y, sample_weight=rng.uniform(0.5, 2, len(y)))
    Xq = rng.uniform(-2, 2, size=(25, 2))
    taus = np.concatenate([[0.0, 1.0], TAUS, rng.uniform(size=5)])
    A = reg.attention_weights(Xq)
    ref = np.array([np.quantile(y, taus, weights=a, method="inverted_cdf") for a in A])
    np.testing.assert_array_equal(reg.predict_quantiles(Xq, taus), ref)


@pytest.mark.parametrize("y_kernel", kernel_names())
def test_cdf_pdf_quantiles_are_one_distribution(y_kernel):
    X, y, rng = _data(70)
    reg = NadarayaWatsonRegressor(0.5, y_bandwidth=0.25, y_kernel=y_kernel).fit(X, y)
    Xq = rng.uniform(-2, 2, size=(6, 2))
    grid = np.linspace(y.min() - 12, y.max() + 12, 40001)
    F, f = reg.predict_cdf(Xq, grid), reg.predict_pdf(Xq, grid)
    assert (np.diff(F, axis=1) >= 0).all() and (F >= 0).all() and (F <= 1).all()
    np.testing.assert_allclose(F[:, [0, -1]], [[0, 1]] * 6, atol=1e-12)
    # The tophat's density jumps: the trapezoid rule is then good to a grid step.
    tol = 2e-3 if y_kernel == "tophat" else 1e-6
    np.testing.assert_allclose(integrate.trapezoid(f, grid, axis=1), 1, atol=tol)
    # F is the integral of f (cumulative trapezoid against the CDF itself).
    cum = integrate.cumulative_trapezoid(f, grid, axis=1, initial=0)
    np.testing.assert_allclose(cum, F, atol=max(tol, 1e-5))
    Q = reg.predict_quantiles(Xq, TAUS)
    assert (np.diff(Q, axis=1) >= 0).all()
    np.testing.assert_allclose(reg.predict_cdf(Xq, Q), np.tile(TAUS, (6, 1)), atol=1e-9)


def test_dense_mixture_formula_and_shared_grid():
    X, y, rng = _data(50)
    reg = NadarayaWatsonRegressor([0.4, 0.8], y_bandwidth=0.2).fit(X, y)
    Xq, grid = rng.uniform(-2, 2, size=(7, 2)), np.linspace(-2, 2, 9)
    # The mixture written out: Gaussian weights in x, normal CDF / density in y.
    S = (((Xq[:, None] - X[None]) / [0.4, 0.8]) ** 2).sum(-1)
    alpha = np.exp(-0.5 * S)
    alpha /= alpha.sum(1, keepdims=True)
    Z = (grid[None, :, None] - y[None, None]) / 0.2
    np.testing.assert_allclose(reg.predict_cdf(Xq, grid), (alpha[:, None] * ndtr(Z)).sum(-1),
                               atol=1e-13)  # fmt: skip
    pdf = (alpha[:, None] * np.exp(-0.5 * Z**2)).sum(-1) / (0.2 * np.sqrt(2 * np.pi))
    np.testing.assert_allclose(reg.predict_pdf(Xq, grid), pdf, atol=1e-12)
    per_query = np.tile(grid, (7, 1))
    np.testing.assert_allclose(reg.predict_cdf(Xq, per_query), reg.predict_cdf(Xq, grid),
                               atol=1e-14)  # fmt: skip


@pytest.mark.parametrize("y_bandwidth", [0.0, 0.3])
def test_integer_weights_are_repeated_rows_and_tree_is_brute(y_bandwidth):
    X, y, rng = _data(40)
    counts = rng.integers(1, 4, size=len(y))
    Xq, grid = rng.uniform(-2, 2, size=(9, 2)), np.linspace(-2, 2, 7)
    a = NadarayaWatsonRegressor(0.5, y_bandwidth=y_bandwidth, algorithm="brute")
    b = NadarayaWatsonRegressor(0.5, y_bandwidth=y_bandwidth, algorithm="ball_tree")
    a.fit(X, y, sample_weight=counts)
    b.fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_allclose(b.predict_cdf(Xq, grid), a.predict_cdf(Xq, grid), atol=1e-12)
    np.testing.assert_allclose(b.predict_quantiles(Xq, TAUS), a.predict_quantiles(Xq, TAUS),
                               atol=1e-9)  # fmt: skip
    # Rules of thumb take frequency weights too.
    r1 = NadarayaWatsonRegressor().fit(X, y, sample_weight=counts)
    r2 = NadarayaWatsonRegressor().fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert r1.y_bandwidth_ == pytest.approx(r2.y_bandwidth_, rel=1e-12)


def test_mean_unchanged_and_binned_fit():
    X, y, _ = _data(200, d=1)
    base = NadarayaWatsonRegressor(0.3).fit(X, y).predict(X[:20])
    other = NadarayaWatsonRegressor(0.3, y_bandwidth=0, y_kernel="cosine").fit(X, y)
    np.testing.assert_array_equal(other.predict(X[:20]), base)
    binned = NadarayaWatsonRegressor(0.3, algorithm="binned", y_bandwidth=0.2).fit(X, y)
    brute = NadarayaWatsonRegressor(0.3, algorithm="brute", y_bandwidth=0.2).fit(X, y)
    np.testing.assert_allclose(binned.predict_quantiles(X[:20], TAUS),
                               brute.predict_quantiles(X[:20], TAUS), atol=1e-9)  # fmt: skip


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_fallback_nan_and_nearest(algorithm):
    # The tree path warned "invalid value encountered in divide" for the empty rows.
    X, y, _ = _data(30, d=1)
    far = [[100.0], [0.0]]
    nan = NadarayaWatsonRegressor(0.2, kernel="tophat", fallback="nan", y_bandwidth=0.1,
                                  algorithm=algorithm).fit(X, y)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cdf = nan.predict_cdf(far, [[0.0], [0.0]])
        quantiles = nan.predict_quantiles(far, [0.5])
    assert np.isnan(cdf[0]).all() and np.isnan(quantiles[0]).all()
    assert np.isfinite(cdf[1]).all() and np.isfinite(quantiles[1]).all()
    near = NadarayaWatsonRegressor(0.2, kernel="tophat", y_bandwidth=0).fit(X, y)
    assert near.predict_quantiles(far, [0.5])[0, 0] == y[np.argmax(X[:, 0])]


def test_errors_name_the_parameter():
    X, y, _ = _data(20)
    reg = NadarayaWatsonRegressor(y_bandwidth=0).fit(X, y)
    with pytest.raises(ValueError, match="y_bandwidth > 0"):
        reg.predict_pdf(X, [0.0])
    with pytest.raises(ValueError, match=r"quantiles must be in \[0, 1\]"):
        reg.predict_quantiles(X, [1.5])
    with pytest.raises(ValueError, match=r"quantiles must be in \(0, 1\)"):
        NadarayaWatsonRegressor().fit(X, y).predict_quantiles(X, [0.0])
    with pytest.raises(ValueError, match="y_values must have shape"):
        reg.predict_cdf(X, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="1-D y"):
        NadarayaWatsonRegressor().fit(X, np.c_[y, y]).predict_cdf(X, [0.0])
    with pytest.raises(ValueError, match="y_kernel"):
        NadarayaWatsonRegressor(y_kernel="nope").fit(X, y)
    with pytest.raises(ValueError, match="quantile"):
        KernelQuantileRegressor([0.5, 2.0]).fit(X, y)


def _crps_dense(sample, weights, obs, h):
    """CRPS of a weighted sample (h=0) or its Gaussian mixture, by the double sums."""
    if h == 0:
        return weights @ np.abs(sample - obs) - 0.5 * weights @ np.abs(
            sample[:, None] - sample) @ weights  # fmt: skip
    lo, hi = sample.min() - 12 * h, sample.max() + 12 * h
    below, above = (
        np.linspace(min(lo, obs - 1), obs, 100001),
        np.linspace(obs, max(hi, obs + 1), 100001),
    )
    F_below, F_above = (ndtr((g[:, None] - sample) / h) @ weights for g in (below, above))
    return integrate.simpson(F_below**2, x=below) + integrate.simpson((1 - F_above) ** 2, x=above)


@pytest.mark.parametrize("y_bandwidth", [0.0, 0.25])
def test_loo_crps_equals_refits(y_bandwidth):
    X, y, rng = _data(15, d=1)
    w = rng.uniform(0.5, 2, len(y))
    search = BandwidthSearchCV(NadarayaWatsonRegressor(y_bandwidth=y_bandwidth),
                               criterion="crps", bandwidths=[0.4])  # fmt: skip
    search.fit(X, y, sample_weight=w)
    crps = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        reg = NadarayaWatsonRegressor(0.4, y_bandwidth=y_bandwidth).fit(X[keep], y[keep], w[keep])
        a = reg.attention_weights(X[i : i + 1])[0]
        crps.append(_crps_dense(y[keep], a, y[i], y_bandwidth))
    assert search.best_score_ == pytest.approx(-np.average(crps, weights=w), rel=1e-7)


def test_loo_pinball_equals_refits_and_search_selects():
    X, y, rng = _data(30, d=1)
    taus = [0.1, 0.9]
    search = BandwidthSearchCV(KernelQuantileRegressor(taus, y_bandwidth=0.2),
                               criterion="pinball", bandwidths=[0.5])  # fmt: skip
    search.fit(X, y)
    loss = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        q = KernelQuantileRegressor(taus, bandwidth=0.5, y_bandwidth=0.2)
        q = q.fit(X[keep], y[keep]).predict(X[i : i + 1])[0]
        r = y[i] - q
        loss.append(np.mean(np.maximum(np.multiply(taus, r), (np.subtract(taus, 1)) * r)))
    assert search.best_score_ == pytest.approx(-np.mean(loss), rel=1e-8)
    full = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps").fit(X, y)
    assert set(full.best_params_) == {"bandwidth", "y_bandwidth"}
    assert full.best_estimator_.y_bandwidth_ == full.best_params_["y_bandwidth"]
    assert np.isclose(full.cv_results_["mean_test_score"].max(), full.best_score_)
    np.testing.assert_array_equal(full.predict_quantiles(X[:5], taus),
                                  full.best_estimator_.predict_quantiles(X[:5], taus))  # fmt: skip
    assert hasattr(full, "predict_cdf") and hasattr(full, "predict_pdf")
    assert not hasattr(BandwidthSearchCV(ParzenClassifier()), "predict_quantiles")


@pytest.mark.filterwarnings("ignore:The selected bandwidth")  # a 2-candidate grid's end
def test_quantile_regressor_in_scikit_learn_tools():
    X, y, _ = _data(60, d=1)
    reg = KernelQuantileRegressor(0.8, bandwidth=0.4)
    reg.fit(X, y)
    np.testing.assert_array_equal(reg.predict(X), reg.predict_quantiles(X, [0.8])[:, 0])
    assert reg.score(X, y) == pytest.approx(d2_pinball_score(y, reg.predict(X), alpha=0.8))
    assert KernelQuantileRegressor([0.2, 0.8]).fit(X, y).predict(X).shape == (60, 2)
    grid = GridSearchCV(KernelQuantileRegressor(0.8), {"bandwidth": [0.1, 0.4]}, cv=3).fit(X, y)
    assert grid.best_params_["bandwidth"] in (0.1, 0.4)
    pipe = make_pipeline(StandardScaler(), KernelQuantileRegressor(0.5))
    assert np.isfinite(cross_val_score(pipe, X, y, cv=3)).all()
    cv = BandwidthSearchCV(NadarayaWatsonRegressor(y_bandwidth=0.2), criterion="crps",
                           cv=3, bandwidths=[0.2, 0.5]).fit(X, y)  # fmt: skip
    assert cv.best_params_["y_bandwidth"] == 0.2


def test_quantile_regressor_offers_none_of_the_mean_s_methods():
    # Inherited, they described the conditional mean: a gradient of the mean's slope 0
    # where the 0.9 quantile's was 2.6, an interval about the mean, the mean's R^2.
    X, y, _ = _data(60, d=1)
    reg = KernelQuantileRegressor(0.9, bandwidth=0.3).fit(X, y)
    for name in ("predict_gradient", "predict_interval", "summary"):
        assert not hasattr(reg, name)
        with pytest.raises(AttributeError) as info:
            getattr(reg, name)
        assert "conditional mean" in str(info.value.__cause__)
    with pytest.raises(ValueError, match="estimator must be a regressor with predict_gradient"):
        significance_test(KernelQuantileRegressor(0.9, bandwidth=0.3), X, y, [0], n_boot=9)
    assert reg.attention_weights(X[:3]).shape == (3, 60)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_mixed_data_quantiles_invert_the_cdf(algorithm):
    X, y, rng = _data(60)
    X[:, 1] = rng.integers(0, 3, size=len(X))
    reg = NadarayaWatsonRegressor([0.5, 0.2], algorithm=algorithm, categorical_features=[1],
                                  y_bandwidth=0.2, kernel="epanechnikov")  # fmt: skip
    reg.fit(X, y)
    Xq = np.column_stack([rng.uniform(-2, 2, 8), rng.integers(0, 3, 8)])
    Q = reg.predict_quantiles(Xq, TAUS)
    np.testing.assert_allclose(reg.predict_cdf(Xq, Q), np.tile(TAUS, (8, 1)), atol=1e-9)
    brute = NadarayaWatsonRegressor([0.5, 0.2], algorithm="brute", categorical_features=[1],
                                    y_bandwidth=0.2, kernel="epanechnikov").fit(X, y)  # fmt: skip
    np.testing.assert_allclose(Q, brute.predict_quantiles(Xq, TAUS), atol=1e-9)


def test_a_constant_target_is_its_own_distribution_in_any_units():
    # The rules of thumb give h_y = 0 (a point mass), not a bandwidth in no unit.
    X = np.linspace(0, 1, 30)[:, None]
    for c in (1.0, 1e-200, 1e200):
        reg = NadarayaWatsonRegressor(0.2).fit(X, np.full(30, c))
        assert reg.y_bandwidth_ == 0.0
        np.testing.assert_array_equal(reg.predict_quantiles(X[:3], [0.1, 0.9]), c)
        cdf = reg.predict_cdf(X[:2], [c * 0.5, c])  # the weights sum to 1 within rounding
        np.testing.assert_allclose(cdf, [[0, 1], [0, 1]], rtol=0, atol=1e-15)


def test_crps_selection_scores_a_bandwidth_far_below_the_spacing_of_the_data(rng):
    # At h = 1e-3 the leave-one-out weights of each row fall on its nearest other
    # rows (not 0 / 0 after dropping the row from in-sample weights): a finite score.
    X = np.sort(rng.uniform(0, 1, (30, 1)), axis=0)
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.1, 30)
    search = BandwidthSearchCV(
        NadarayaWatsonRegressor(y_bandwidth=0.0), criterion="crps", bandwidths=[1e-3, 0.05, 0.1]
    ).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_crps_pair_term_by_column_blocks_equals_the_whole_matrix(rng, monkeypatch):
    # Beyond the cache's budget the (n, n) matrix of the near term is built by row
    # blocks, and the band's blocks (of 7 rows here) at each call.
    import skl_nw._search._crps as crps
    import skl_nw._search._crps_pairs as pairs

    X = rng.uniform(0, 1, (80, 1))
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.2, 80)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps", bandwidths=[0.1, 0.2])
    whole = search.fit(X, y).cv_results_["mean_test_score"]
    monkeypatch.setattr(crps, "_MAX_PAIR_BYTES", 0)
    monkeypatch.setattr(pairs, "_BAND_BYTES", 0)
    monkeypatch.setattr(pairs, "_BAND_ROWS", 7)
    blocks = search.fit(X, y).cv_results_["mean_test_score"]
    np.testing.assert_allclose(blocks, whole, rtol=1e-12)
    monkeypatch.setattr(pairs, "_MAX_POINTS_FRACTION", 0.0)  # the band route only
    dense = search.fit(X, y).cv_results_["mean_test_score"]
    np.testing.assert_allclose(dense, whole, rtol=1e-12)


def test_compiled_phi_equals_scipy_ndtr():
    # The per-query kernels' normal distribution function (a Chebyshev series of
    # erfcx), against scipy's, over the range where it is neither 0 nor 1.
    numba = pytest.importorskip("numba")
    from skl_nw._engine import _compiled_conditional as kernels

    @numba.njit(fastmath=kernels._FAST, error_model="numpy")
    def phi(u, out):
        for j in range(u.size):
            out[0, j], out[1, j] = kernels._cdf_pdf(u[j])

    u = np.concatenate([np.linspace(-37.5, 8.6, 200_001), [0.0, -1e-300, 1e-300]])
    out = np.empty((2, u.size))
    phi(u, out)
    np.testing.assert_allclose(out[0], ndtr(u), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out[1], np.exp(-0.5 * u * u), rtol=1e-13, atol=1e-300)
    assert (out[0, u >= kernels.ONE_ABOVE] == 1.0).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_per_query_kernels_equal_the_attention_weight_path(weighted, monkeypatch):
    # The compiled per-query mixtures (where numba is present) against the numpy
    # path through the attention weights: empirical quantiles exactly numpy's,
    # smoothed ones the roots, CDF and PDF equal; a query far from every point
    # (its weights underflow against the largest sample weight) included.
    from skl_nw import _engine

    X, y, rng = _data(300)
    w = rng.integers(0, 3, len(y)).astype(float) if weighted else None
    Q = np.vstack([rng.uniform(-2, 2, size=(40, 2)), [[60.0, -60.0]]])
    T = rng.normal(size=(len(Q), 3))
    grid = np.linspace(-3, 3, 9)
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(_engine, "sorted_mixture", lambda *args: None)
        out = {}
        for hy in (0.0, 0.25):
            reg = NadarayaWatsonRegressor(0.3, y_bandwidth=hy).fit(X, y, sample_weight=w)
            out[hy, "q"] = reg.predict_quantiles(Q, TAUS[::-1])
            if hy:
                out["cdf"], out["pdf"] = reg.predict_cdf(Q, T), reg.predict_pdf(Q, T)
                out["grid"] = reg.predict_cdf(Q, grid)
                assert np.abs(reg.predict_cdf(Q, out[hy, "q"]) - TAUS[::-1]).max() < 1e-12
            else:
                A = reg.attention_weights(Q)
                expected = [[np.quantile(y, t, weights=a, method="inverted_cdf")
                             for t in TAUS[::-1]] for a in A]  # fmt: skip
                np.testing.assert_array_equal(out[hy, "q"], expected)
        results.append(out)
    for key in results[0]:
        np.testing.assert_allclose(results[0][key], results[1][key], rtol=0, atol=1e-11)


@pytest.mark.parametrize("bandwidth", [0.01, 0.3])
def test_loo_empirical_crps_kernel_equals_dense_rows(bandwidth):
    # The compiled leave-one-out empirical CRPS (where numba is present) against
    # the numpy rows of the dense leave-one-out attention matrix; integer weights
    # with zeros, and a bandwidth at which most weights underflow.
    from skl_nw._search._crps import crps_rows

    X, y, rng = _data(200)
    w = rng.integers(0, 3, len(y)).astype(float)
    est = NadarayaWatsonRegressor(bandwidth, y_bandwidth=0.0).fit(X, y, sample_weight=w)
    fused = est._fused(est._mixture)
    if fused is None:
        pytest.skip("the compiled kernels are not loaded")
    expected = crps_rows(est._loo_attention(np.arange(len(y))), y, y, 0.0)
    np.testing.assert_allclose(fused.loo_empirical_crps(est._options()), expected, rtol=1e-12,
                               atol=1e-14)  # fmt: skip


# The integrated profiles written out: scipy's ndtr, and the Laplace law's CDF.
_TAILS = {
    "gaussian": ndtr,
    "exponential": lambda u: np.where(
        u < 0, 0.5 * np.exp(np.minimum(u, 0)), 1 - 0.5 * np.exp(-np.abs(u))
    ),  # fmt: skip
}


@pytest.mark.parametrize("y_kernel", list(_TAILS))
@pytest.mark.parametrize("fused", [True, False])
def test_far_tail_quantiles_against_the_dense_mixture(fused, y_kernel, monkeypatch):
    # Levels down to 1e-300: the roots of the mixture written out.  The compiled roots
    # left out rows 9 bandwidths above t (below 1e-16 the level itself) and stepped on
    # F, which falls by hundreds of decades there: 1e-100 stopped at F = 1.5e-91.  The
    # exponential's bracket was the Gaussian's 40 h_y, where its G is 2e-18: every
    # level below came out as its end.  The numpy path of the attention weights, for
    # comparison.
    from skl_nw import _engine

    if not fused:
        monkeypatch.setattr(_engine, "sorted_mixture", lambda *args: None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 1))
    y = X[:, 0] + 0.3 * rng.normal(size=50)
    reg = NadarayaWatsonRegressor(0.5, y_bandwidth=0.2, y_kernel=y_kernel).fit(X, y)
    Xq = np.array([[0.0], [1.5]])
    taus = np.array([1e-300, 1e-100, 1e-30, 1e-18, 1e-5])
    Q = reg.predict_quantiles(Xq, taus)
    alpha = np.exp(-0.5 * ((Xq - X.T) / 0.5) ** 2)
    alpha /= alpha.sum(axis=1, keepdims=True)
    F = np.einsum("mj,mkj->mk", alpha, _TAILS[y_kernel]((Q[:, :, None] - y) / 0.2))
    np.testing.assert_allclose(F, np.tile(taus, (2, 1)), rtol=1e-9)


@pytest.mark.parametrize("fused", [True, False])
def test_conditional_laws_in_tiny_and_huge_units_of_y(fused, monkeypatch):
    # y and h_y times c: quantiles and the CDF's points times c, densities over c.  The
    # compiled kernels squared 1 / h_y, which overflowed from h_y ~ 1e-154 (the 0.99
    # quantile of y * 1e-160 came out 0.4 h_y off); they now take y in a power of two.
    from skl_nw import _engine

    if not fused:
        monkeypatch.setattr(_engine, "sorted_mixture", lambda *args: None)
    X, y, rng = _data(60)
    Xq, T = rng.uniform(-2, 2, size=(5, 2)), np.linspace(-2, 2, 7)
    base = {}
    for c in (1.0, 1e-160, 1e160):
        for hy in (0.0, 0.25):
            reg = NadarayaWatsonRegressor(0.5, y_bandwidth=hy * c).fit(X, y * c)
            q = reg.predict_quantiles(Xq, TAUS) / c
            got = (
                {"q": q}
                if hy == 0
                else {
                    "q": q,
                    "cdf": reg.predict_cdf(Xq, T * c),
                    "pdf": reg.predict_pdf(Xq, T * c) * c,
                }
            )
            for key, value in got.items():
                if c == 1.0:
                    base[hy, key] = value
                else:
                    np.testing.assert_allclose(value, base[hy, key], rtol=1e-12, atol=1e-14)


# (a, b) of K(u) = (1 - |u|^a)^b: their lower tails are regularised incomplete beta
# functions, G(-1 + s) = I_x(b + 1, 1 / a) / 2 with x = 1 - (1 - s)^a.
_POWERS = {"epanechnikov": (2, 1), "biweight": (2, 2), "triweight": (2, 3),
           "tricube": (3, 3), "linear": (1, 1)}  # fmt: skip


@pytest.mark.parametrize("y_kernel", [*_POWERS, "cosine"])
def test_compact_y_kernels_quantiles_at_tiny_levels(y_kernel):
    # G summed 0.5 - int_0^|t| near the lower edge, which cancels, and the roots stopped
    # at a step within rounding of y while F was decades off: a tricube's 1e-20 quantile
    # had F = 4e-58.  Within the documented 1e-11 h_y of the root (one training row: F
    # is the kernel's own law), against closed forms.
    from scipy.special import beta, betainc

    h = 0.5
    reg = NadarayaWatsonRegressor(1.0, y_bandwidth=h, y_kernel=y_kernel).fit([[0.0]], [0.0])
    taus = np.array([1e-30, 1e-20, 1e-16, 1e-12, 1e-5, 0.3])
    s = 1.0 + reg.predict_quantiles([[0.0]], taus)[0] / h  # from the lower edge, in h_y
    if y_kernel == "cosine":
        F, f = np.sin(0.25 * np.pi * s) ** 2, 0.25 * np.pi * np.sin(0.5 * np.pi * s)
    else:
        a, b = _POWERS[y_kernel]
        F = 0.5 * betainc(b + 1, 1.0 / a, -np.expm1(a * np.log1p(-s)))
        f = (1 - (1 - s) ** a) ** b / (2 * beta(1.0 / a, b + 1) / a)
    assert np.all(np.abs(F - taus) <= 1e-9 * taus + 1e-11 * f * 2), (F, taus)
