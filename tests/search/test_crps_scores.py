"""Leave-one-out CRPS of the selection against a dense formula written from the definition."""

import numpy as np
import pytest
from scipy import integrate
from scipy.special import ndtr

from conftest import naive_loo_weights
from skl_nw import BandwidthSearchCV, KernelQuantileRegressor, NadarayaWatsonRegressor
from skl_nw._search import _crps_pairs
from skl_nw._search._crps_pairs import PairTerms


def _gaussian_abs_mean(m, s):
    """``E|m + s Z|`` by the normal distribution function (not the code's erf form)."""
    return m * (2.0 * ndtr(m / s) - 1.0) + 2.0 * s * np.exp(-0.5 * (m / s) ** 2) / np.sqrt(
        2.0 * np.pi
    )


def _dense_loo_crps(X, y, bandwidth, hy, w):
    """Each row's CRPS under the others' Gaussian mixture: explicit weights, double sums."""
    A = naive_loo_weights(X, bandwidth, sample_weight=w)
    D = y[:, None] - y
    near = (A * _gaussian_abs_mean(D, hy)).sum(axis=1)
    pairs = np.array([a @ _gaussian_abs_mean(D, np.sqrt(2.0) * hy) @ a for a in A])
    return near - 0.5 * pairs


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + (0.1 + 0.4 * np.abs(X[:, 0])) * rng.normal(size=n)
    return X, y, rng


def test_closed_form_equals_quadrature_of_the_squared_cdf_difference():
    # The oracle's closed form, once against the definition: the integral of
    # (F(u) - 1{u >= y})^2 for one row's leave-one-out mixture.
    X, y, _ = _data(40, 1)
    hy, i = 0.3, 7
    a = naive_loo_weights(X, [0.5, 0.6])[i]
    quad = 0.0
    for lo, hi, step in ((y.min() - 12 * hy, y[i], 0.0), (y[i], y.max() + 12 * hy, 1.0)):
        u = np.linspace(lo, hi, 200_001)  # split at y_i, where the step is
        quad += integrate.simpson((ndtr((u[:, None] - y) / hy) @ a - step) ** 2, x=u)
    closed = _dense_loo_crps(X, y, [0.5, 0.6], hy, None)[i]
    assert closed == pytest.approx(quad, rel=1e-9)


@pytest.mark.filterwarnings("ignore:The selected bandwidth")  # a 3-candidate grid's end
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("factor", [0.04, 1.0])  # h_y over the spread of y: dense, low rank
def test_selection_scores_equal_the_dense_formula(weighted, factor):
    X, y, rng = _data(300, 2)
    w = rng.integers(0, 3, len(y)).astype(float) if weighted else np.ones(len(y))
    hy = factor * y.std()
    low_rank = PairTerms(np.sort(y), hy).factor is not None
    assert low_rank == (factor == 1.0)  # the two routes are both covered
    grid = [np.array([0.2, 0.3]), np.array([0.4, 0.5]), np.array([1.0, 0.8])]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(y_bandwidth=hy), criterion="crps",
                               bandwidths=grid)  # fmt: skip
    search.fit(X, y, sample_weight=w if weighted else None)
    res = search.cv_results_
    for k, params in enumerate(res["params"]):
        crps = _dense_loo_crps(X, y, params["bandwidth"], hy, w)
        mean = np.average(crps, weights=w)
        std = np.sqrt(np.average((crps - mean) ** 2, weights=w))
        assert res["mean_test_score"][k] == pytest.approx(-mean, rel=1e-13)
        assert res["std_test_score"][k] == pytest.approx(std, rel=1e-11)


@pytest.mark.parametrize("categorical", [False, True])
def test_low_rank_and_dense_pair_terms_give_the_same_selection(categorical, monkeypatch):
    # The whole search (h and h_y together) through the low-rank factor where it
    # holds, and through the dense pair matrix only: the same pairs, scores, choice.
    X, y, rng = _data(240, 3)
    if categorical:
        X[:, 1] = rng.integers(0, 3, len(y))
    est = NadarayaWatsonRegressor(categorical_features=[1] if categorical else None)
    runs = []
    for fraction in (_crps_pairs._MAX_POINTS_FRACTION, 0.0):
        monkeypatch.setattr(_crps_pairs, "_MAX_POINTS_FRACTION", fraction)
        runs.append(BandwidthSearchCV(est, criterion="crps").fit(X, y))
    fast, dense = runs
    pairs = [[(list(p["bandwidth"]), p["y_bandwidth"]) for p in run.cv_results_["params"]]
             for run in runs]  # fmt: skip
    assert pairs[0] == pairs[1]
    for key in ("mean_test_score", "std_test_score"):
        np.testing.assert_allclose(fast.cv_results_[key], dense.cv_results_[key], rtol=1e-13)
    assert fast.best_params_["y_bandwidth"] == dense.best_params_["y_bandwidth"]
    np.testing.assert_array_equal(fast.best_params_["bandwidth"], dense.best_params_["bandwidth"])


def test_pair_matrix_and_factor_against_the_direct_formula(rng):
    # The mirrored triangle equals the direct matrix; with a tolerance, within it
    # (beyond the band, |y_i - y_k|); the piecewise factor, with the number of points
    # its a-priori bound gives, within the tolerance on every entry (ties included).
    y = np.sort(np.round(rng.standard_t(3, 257), 2))
    for s in (0.05, 0.4, 2.0):
        direct = _gaussian_abs_mean(y[:, None] - y, s)
        P = _crps_pairs.pair_matrix(y, s)
        np.testing.assert_allclose(P, direct, rtol=1e-14, atol=1e-15)
        assert np.array_equal(P, P.T)
        tol = _crps_pairs.pair_tol(y, s)
        assert tol == pytest.approx(32 * np.finfo(float).eps * np.abs(direct).max(), rel=1e-12)
        banded = _crps_pairs.pair_matrix(y, s, tol)
        assert np.abs(banded - direct).max() <= tol
        assert np.array_equal(banded, banded.T)
        for pieces in (1, 2, 3):
            M = _crps_pairs.chebyshev_points(y[-1] - y[0], s, pieces, tol)
            starts, L, G = _crps_pairs.chebyshev_factor(y, s, M, pieces)
            full = np.zeros((len(y), pieces * M))  # the block diagonal L
            for q in range(pieces):
                rows = slice(starts[q], starts[q + 1])
                full[rows, q * M : (q + 1) * M] = L[rows]
            assert np.abs(full @ G @ full.T - direct).max() <= tol


def test_excess_over_the_absolute_value(rng):
    # E|m + sZ| - |m| against the difference of the two (which cancels: to its rounding);
    # positive, even and decreasing in |m| everywhere; the band's cut where it falls
    # to the tolerance.
    m = np.linspace(-3, 3, 601)
    s = 0.7
    expected = _gaussian_abs_mean(m, s) - np.abs(m)
    np.testing.assert_allclose(_crps_pairs.abs_excess(m, s), expected, rtol=1e-12, atol=2e-15)
    far = np.linspace(0, 14, 6001)  # to 20 s: the excess ~ 1e-90 (then subnormal rounding)
    c = _crps_pairs.abs_excess(far, s)
    assert np.all(c >= 0) and np.all(np.diff(c) <= 0)
    assert np.array_equal(c, _crps_pairs.abs_excess(-far, s))
    tol = 1e-14
    cut = _crps_pairs.band_cut(s, tol)
    assert _crps_pairs.abs_excess(cut, s) <= tol < _crps_pairs.abs_excess(cut - 0.01 * s, s)


@pytest.mark.parametrize("shift", [0.0, 1e3])
@pytest.mark.parametrize("route", ["factor", "band", "factor near"])
def test_pair_terms_rows_equal_the_dense_formula(route, shift, rng, monkeypatch):
    # Each route's CRPS of mixture rows (sparse and spread weights, ties, an offset)
    # against the double sums with the direct matrices, at several h_y; "factor
    # near": the near term from the factor's points too (no matrix of it).
    if route == "band":
        monkeypatch.setattr(_crps_pairs, "_MAX_POINTS_FRACTION", 0.0)
    y = np.sort(np.round(rng.normal(size=300), 3)) + shift
    A = rng.random((40, 300)) ** rng.choice([1, 30], (40, 1))
    A /= A.sum(axis=1, keepdims=True)
    rows = rng.choice(300, 40, replace=False)
    for hy in (0.01, 0.2, 1.0):
        terms = PairTerms(y, hy, few=route == "factor near")
        if route == "band" or hy == 0.01:
            assert terms.factor is None and terms.near is None
        elif hy == 1.0:
            assert terms.factor is not None
            assert (terms.near is not None) == (route == "factor near")
        D = y[:, None] - y
        near = (A * _gaussian_abs_mean(D[rows], hy)).sum(axis=1)
        pairs = np.einsum("ij,jk,ik->i", A, _gaussian_abs_mean(D, np.sqrt(2.0) * hy), A)
        np.testing.assert_allclose(terms.crps(A, rows), near - 0.5 * pairs, rtol=1e-13,
                                   atol=1e-15)  # fmt: skip


@pytest.mark.filterwarnings("ignore:The selected bandwidth")
def test_compiled_leave_one_out_rows_equal_the_attention_weights(monkeypatch):
    # The engine's compiled rows (where numba is present) against the numpy
    # attention weights: integer sample weights with zeros, a bandwidth far below
    # the spacing of the data (weights that underflow against the largest).
    from skl_nw import _engine

    X, y, rng = _data(200, 4)
    w = rng.integers(0, 3, len(y)).astype(float)
    grid = [np.array([1e-3, 1e-3]), np.array([0.1, 0.1]), np.array([0.5, 0.4])]
    runs = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(_engine, "sorted_mixture", lambda *args: None)
        search = BandwidthSearchCV(NadarayaWatsonRegressor(y_bandwidth=0.3), criterion="crps",
                                   bandwidths=grid)  # fmt: skip
        runs.append(search.fit(X, y, sample_weight=w).cv_results_)
    for key in ("mean_test_score", "std_test_score"):
        assert np.all(np.isfinite(runs[0][key]))
        np.testing.assert_allclose(runs[0][key], runs[1][key], rtol=1e-12)


@pytest.mark.filterwarnings("ignore:The selected bandwidth")
@pytest.mark.parametrize("case", ["categorical", "robust", "pinball", "weighted"])
def test_refits_of_the_validated_data_equal_public_fits(case, monkeypatch):
    # The search refits its clone at each candidate without validating the data again;
    # against the same search with a fresh clone and the public fit at every candidate.
    from sklearn.base import clone

    from skl_nw import KernelQuantileRegressor
    from skl_nw._search import _crps

    X, y, rng = _data(150, 5)
    w = rng.integers(0, 3, len(y)).astype(float) if case == "weighted" else None
    est = NadarayaWatsonRegressor(robust_iterations=1 if case == "robust" else 0)
    if case == "categorical":
        X[:, 1] = rng.integers(0, 3, len(y))
        est = NadarayaWatsonRegressor(categorical_features=[1])
    if case == "pinball":
        est = KernelQuantileRegressor(quantile=[0.2, 0.7])
    criterion = "pinball" if case == "pinball" else "crps"
    runs = [BandwidthSearchCV(est, criterion=criterion).fit(X, y, sample_weight=w)]

    def public(ctx, X, y, w, h, hy):
        return clone(ctx.estimator).set_params(bandwidth=h, y_bandwidth=hy).fit(X, y, w)

    monkeypatch.setattr(_crps, "_fitted", public)
    runs.append(BandwidthSearchCV(est, criterion=criterion).fit(X, y, sample_weight=w))
    first, second = (r.cv_results_ for r in runs)
    assert [str(p) for p in first["params"]] == [str(p) for p in second["params"]]
    np.testing.assert_array_equal(first["mean_test_score"], second["mean_test_score"])


def test_pair_terms_at_a_y_bandwidth_far_below_the_spacing(rng):
    # h_y = 1e-200: no overflow warning, the empirical CRPS of each row (the
    # Gaussian's excess over |d| below the floats' resolution of the result).
    import warnings

    y = np.sort(rng.normal(size=120))
    A = rng.random((30, 120))
    A /= A.sum(axis=1, keepdims=True)
    rows = rng.choice(120, 30, replace=False)
    D = np.abs(y[:, None] - y)
    expected = (A * D[rows]).sum(axis=1) - 0.5 * np.einsum("ij,jk,ik->i", A, D, A)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = PairTerms(y, 1e-200).crps(A, rows)
    np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_a_search_with_categorical_features_warns_nothing(recwarn):
    # A categorical lambda of 0 among the candidates: its log is -inf (the candidates
    # are then not ordered by scale), not a "divide by zero" RuntimeWarning to the user.
    X, y, rng = _data(120, 5)
    X[:, 1] = rng.integers(0, 3, len(y))
    search = BandwidthSearchCV(NadarayaWatsonRegressor(categorical_features=[1]),
                               criterion="crps").fit(X, y)  # fmt: skip
    assert 0.0 in {float(h[1]) for h in search.cv_results_["param_bandwidth"]}
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [
        str(w.message) for w in recwarn
    ]


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_selection_in_tiny_and_huge_units_of_y(scale):
    # The Chebyshev bound squared y-sized lengths before dividing: inf / inf (or 0 / 0)
    # from |y| ~ 1e200 (1e-200), a NaN count of points and a ValueError. The bandwidths
    # are those of y, y_bandwidth_ scaled.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=120)
    base = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps").fit(X, y)
    got = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps").fit(X, y * scale)
    np.testing.assert_allclose(got.bandwidth_, base.bandwidth_, rtol=1e-12)
    np.testing.assert_allclose(got.y_bandwidth_, base.y_bandwidth_ * scale, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:The selected bandwidth")
@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_tree_scores_equal_the_dense_formula_where_each_row_outweighs_its_neighbours(algorithm):
    # At a bandwidth near the spacing a row's own weight dwarfs its neighbours': the
    # tree's radius must be that of the other rows, or real neighbours fall outside it.
    X, y, _ = _data(70, 11)
    hy, h = 0.1, 0.05
    search = BandwidthSearchCV(NadarayaWatsonRegressor(algorithm=algorithm, y_bandwidth=hy),
                               bandwidths=[h], criterion="crps").fit(X, y)  # fmt: skip
    expected = _dense_loo_crps(X, y, h, hy, None).mean()
    assert search.cv_results_["mean_test_score"][0] == pytest.approx(-expected, rel=1e-10)


@pytest.mark.filterwarnings("ignore:The selected bandwidth")
@pytest.mark.parametrize("criterion", ["crps", "pinball"])
@pytest.mark.parametrize("categorical", [False, True])
def test_integer_weights_are_repeated_rows(criterion, categorical):
    # Repeated rows are left out together, as frequency weights say: a copy left in
    # scored its twin and pulled the bandwidth to the grid's smallest.
    pd = pytest.importorskip("pandas")
    from skl_nw import KernelQuantileRegressor

    X, y, rng = _data(60, 5)
    counts = rng.integers(1, 4, len(y))
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1]})
    if categorical:
        frame["b"] = pd.Categorical(rng.integers(0, 3, len(y)))
    est = NadarayaWatsonRegressor() if criterion == "crps" else KernelQuantileRegressor([0.3])
    grid = list(np.geomspace(0.05, 2.0, 9))
    if categorical:
        grid = [np.array([h, lam]) for h in grid for lam in (0.1, 0.5)]
    search = BandwidthSearchCV(est, criterion=criterion, bandwidths=grid)
    weighted = search.fit(frame, y, sample_weight=counts)
    repeated = BandwidthSearchCV(est, criterion=criterion, bandwidths=grid).fit(
        frame.loc[frame.index.repeat(counts)], np.repeat(y, counts)
    )
    np.testing.assert_allclose(
        weighted.cv_results_["mean_test_score"], repeated.cv_results_["mean_test_score"],
        rtol=1e-12,
    )  # fmt: skip
    assert weighted.best_index_ == repeated.best_index_


@pytest.mark.parametrize("criterion", ["crps", "pinball"])
def test_a_small_working_memory_chunks_the_rows_and_changes_no_score(criterion, rng):
    # The leave-one-out rows came in blocks of 64 MiB, which the engine refused under a
    # smaller working_memory (a MemoryError): 600 rows of 600 floats are 2.7 MiB.
    import sklearn

    X = rng.uniform(0, 1, (600, 1))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.3, 600)
    model = NadarayaWatsonRegressor if criterion == "crps" else KernelQuantileRegressor
    make = lambda: BandwidthSearchCV(  # noqa: E731
        model(kernel="epanechnikov", y_bandwidth=0.1), criterion=criterion, bandwidths=[0.1, 0.2]
    )
    whole = make().fit(X, y).cv_results_["mean_test_score"]
    with sklearn.config_context(working_memory=1):
        small = make().fit(X, y).cv_results_["mean_test_score"]
    np.testing.assert_allclose(small, whole, rtol=1e-12)
