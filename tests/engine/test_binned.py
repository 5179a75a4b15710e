"""The binned path (algorithm="binned"): accuracy against the exact path, fallbacks, LOO, search."""

import pickle

import numpy as np
import pytest

from conftest import naive_linear_bin
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._engine import _binned
from skl_nw._engine._binned import Grid, linear_bin
from skl_nw._kernels import get_kernel, kernel_names

# (kernel has a jump, d) -> binned_tol: small enough to mean something, large enough
# that the grid stays small (data 8 bandwidths wide).
TOLS = {(False, 1): 1e-4, (False, 2): 1e-3, (False, 3): 1e-2,
        (True, 1): 1e-2, (True, 2): 5e-2, (True, 3): 0.2}  # fmt: skip
SIZES = {1: 20_000, 2: 30_000, 3: 50_000}


def _has_jump(kernel):
    return get_kernel(kernel).name == "tophat"


def _smooth_data(rng, d, n_outputs=1):
    """Dense data: uniform inputs 8 bandwidths (h = 0.5) wide, smooth targets plus noise."""
    n = SIZES[d]
    X = rng.uniform(0, 4, size=(n, d))
    y = np.column_stack(
        [np.sin(2 * X[:, 0] + t) + X[:, -1] + 0.5 * rng.normal(size=n) for t in range(n_outputs)]
    )
    w = rng.uniform(0.5, 2.0, size=n)
    return X, y, w


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kernel", kernel_names())
def test_error_bound_every_kernel(rng, kernel, d):
    # max |binned - exact| <= binned_tol * (max y - min y), per output, over queries
    # anywhere in the data's box; weighted, two outputs.
    X, y, w = _smooth_data(rng, d, n_outputs=2)
    tol = TOLS[_has_jump(kernel), d]
    if kernel == "exponential" and d == 3:
        tol = 5e-2  # its heavy tail widens the grid's margin (about 20 bandwidths)
    Q = rng.uniform(0, 4, size=(150, d))
    params = {"bandwidth": 0.5, "kernel": kernel}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, w).predict(Q)
    binned = NadarayaWatsonRegressor(algorithm="binned", binned_tol=tol, **params).fit(X, y, w)
    error = np.abs(binned.predict(Q) - exact).max(axis=0) / np.ptp(y, axis=0)
    assert np.all(error <= tol), (error, tol)
    assert binned.tree_ is None


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_classifier_probabilities(rng, kernel, d):
    X, _, w = _smooth_data(rng, d)
    labels = np.array(["a", "b", "c"])[(np.sin(3 * X[:, 0]) > 0).astype(int) + (X[:, -1] > 2)]
    Q = rng.uniform(0, 4, size=(150, d))
    tol = TOLS[False, d]
    params = {"bandwidth": 0.5, "kernel": kernel}
    exact = ParzenClassifier(algorithm="brute", **params).fit(X, labels, w)
    binned = ParzenClassifier(algorithm="binned", binned_tol=tol, **params).fit(X, labels, w)
    P = binned.predict_proba(Q)
    assert np.abs(P - exact.predict_proba(Q)).max() <= tol
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(binned.predict_log_proba(Q)), P, rtol=1e-12)
    sure = np.abs(np.diff(np.sort(exact.predict_proba(Q), axis=1)[:, -2:])) > 2 * tol
    np.testing.assert_array_equal(binned.predict(Q)[sure[:, 0]], exact.predict(Q)[sure[:, 0]])


def test_classifier_priors(rng):
    X, _, _ = _smooth_data(rng, 1)
    labels = (X[:, 0] + 0.5 * rng.normal(size=len(X)) > 2).astype(int)
    Q = rng.uniform(0, 4, size=(100, 1))
    params = {"bandwidth": 0.5, "priors": [0.2, 0.8]}
    exact = ParzenClassifier(algorithm="brute", **params).fit(X, labels).predict_proba(Q)
    binned = ParzenClassifier(algorithm="binned", binned_tol=1e-5, **params).fit(X, labels)
    assert np.abs(binned.predict_proba(Q) - exact).max() <= 1e-5


@pytest.mark.parametrize("fallback", ["nearest", "nan"])
@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
def test_queries_outside_the_grid_follow_the_exact_rules(rng, kernel, fallback):
    X = rng.uniform(0, 4, size=(2000, 1))
    y = np.sin(3 * X[:, 0])
    Q = np.array([[-50.0], [-0.3], [4.2], [60.0]])  # far out, near the edges, far out
    params = {"bandwidth": 0.2, "kernel": kernel, "fallback": fallback}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y).predict(Q)
    binned = NadarayaWatsonRegressor(algorithm="binned", binned_tol=1e-6, **params).fit(X, y)
    np.testing.assert_allclose(binned.predict(Q), exact, atol=1e-6 * np.ptp(y))
    if kernel == "epanechnikov":
        assert np.isnan(exact[[0, -1]]).all() == (fallback == "nan")


def test_gap_between_clusters_is_exact_enough(rng):
    # Far from every point (a wide gap) the binned sums fall below the floor and the
    # query is computed on the exact path: no 0 / 0, the exact softmax limit.
    X = np.concatenate([rng.uniform(0, 1, 500), rng.uniform(30, 31, 500)])[:, None]
    y = np.where(X[:, 0] < 10, 0.0, 1.0) + 0.01 * rng.normal(size=1000)
    Q = np.linspace(-5, 36, 83)[:, None]
    exact = NadarayaWatsonRegressor(0.5, algorithm="brute").fit(X, y).predict(Q)
    binned = NadarayaWatsonRegressor(0.5, algorithm="binned", binned_tol=1e-4).fit(X, y)
    assert np.abs(binned.predict(Q) - exact).max() <= 1e-4 * np.ptp(y)


def test_more_than_three_features_is_a_clear_error(rng):
    X, y = rng.normal(size=(50, 4)), rng.normal(size=50)
    with pytest.raises(ValueError, match="algorithm='binned' supports at most 3 features"):
        NadarayaWatsonRegressor(algorithm="binned").fit(X, y)
    # "auto" with a tolerance falls back to an exact path above three features.
    NadarayaWatsonRegressor(binned_tol=1e-3).fit(X, y)


@pytest.mark.parametrize("tol", [0.0, 1.0, -1e-3, "1e-3"])
def test_invalid_binned_tol(rng, tol):
    X, y = rng.normal(size=(30, 1)), rng.normal(size=30)
    with pytest.raises(ValueError, match="binned_tol"):
        NadarayaWatsonRegressor(binned_tol=tol).fit(X, y)


def test_auto_bins_only_when_asked(rng):
    X = rng.uniform(size=(100_000, 1))
    y = np.sin(6 * X[:, 0])
    assert NadarayaWatsonRegressor().fit(X[:5000], y[:5000])._fit_method != "binned"
    assert NadarayaWatsonRegressor(binned_tol=1e-3).fit(X[:5000], y[:5000])._fit_method != (
        "binned"
    )
    assert NadarayaWatsonRegressor(binned_tol=1e-3).fit(X, y)._fit_method == "binned"


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, ParzenClassifier,
                                  LocalPolynomialRegressor])  # fmt: skip
def test_auto_takes_the_exact_path_where_the_grid_passes_the_memory_limit(rng, make, monkeypatch):
    # "auto" with binned_tol bins large sets; where the grid would pass the path's limit
    # it fits exactly (it raised the grid's MemoryError); "binned" still raises it.
    from skl_nw._engine import _binned_convolve

    X = rng.uniform(size=(100_000, 2))
    y = (X[:, 0] > 0.5).astype(int)
    Q = rng.uniform(size=(50, 2))
    monkeypatch.setattr(_binned_convolve, "_MAX_GRID_VALUES", 1_000)
    auto = make(bandwidth=0.1, binned_tol=1e-2).fit(X, y)
    assert auto._fit_method != "binned"
    exact = make(bandwidth=0.1, algorithm="brute").fit(X, y)
    np.testing.assert_allclose(auto.predict(Q), exact.predict(Q), rtol=1e-12, atol=1e-12)
    with pytest.raises(MemoryError, match="binned_tol"):
        make(bandwidth=0.1, algorithm="binned", binned_tol=1e-2).fit(X, y)


def test_attention_weights_are_the_exact_ones(rng):
    X, y, _ = _smooth_data(rng, 1)
    Q = rng.uniform(0, 4, size=(5, 1))
    exact = NadarayaWatsonRegressor(0.5, algorithm="brute").fit(X, y[:, 0])
    binned = NadarayaWatsonRegressor(0.5, algorithm="binned", binned_tol=1e-6).fit(X, y[:, 0])
    np.testing.assert_allclose(binned.attention_weights(Q), exact.attention_weights(Q))
    assert np.abs(binned.attention_weights(Q) @ y[:, 0] - binned.predict(Q)).max() < 1e-5


def test_pickle_round_trip(rng):
    X, y, _ = _smooth_data(rng, 2)
    est = NadarayaWatsonRegressor(0.5, algorithm="binned", binned_tol=1e-3).fit(X, y[:, 0])
    Q = rng.uniform(0, 4, size=(20, 2))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(Q), est.predict(Q))


@pytest.mark.parametrize("kernel", kernel_names())
def test_leave_one_out_against_the_exact_closed_form(rng, kernel):
    X, y, w = _smooth_data(rng, 1)
    X, y, w = X[:2000], y[:2000, 0], w[:2000]
    factors = np.array([1.0, 1.7, 3.0, 6.5])
    tol = TOLS[_has_jump(kernel), 1]
    params = {"bandwidth": 0.1, "kernel": kernel}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, w)
    binned = NadarayaWatsonRegressor(algorithm="binned", binned_tol=tol, **params).fit(X, y, w)
    P = binned._leave_one_out().predictions(factors)
    reference = exact._leave_one_out().predictions(factors)
    assert P.shape == reference.shape == (4, 2000, 1)
    assert np.abs(P - reference).max() <= tol * np.ptp(y)


def test_leave_one_out_past_the_grid_limit_is_exact(rng, monkeypatch):
    # A multiple in [1, 2) convolves the fitted grid with a stencil up to twice as wide:
    # a compact kernel's transform, padded by it, can pass the limit the fit met (it
    # raised the grid's MemoryError in the search); those multiples are computed exactly.
    from skl_nw._engine import _binned_convolve

    X = rng.uniform(size=(3_000, 2))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.2, 3_000)
    params = {"bandwidth": 0.05, "kernel": "epanechnikov"}
    binned = NadarayaWatsonRegressor(algorithm="binned", binned_tol=1e-2, **params).fit(X, y)
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y)
    nodes = binned._backend.sums.grid.size
    monkeypatch.setattr(_binned_convolve, "_MAX_GRID_VALUES", 2 * nodes)  # no padding fits
    P = binned._leave_one_out().predictions([1.0, 1.9])
    np.testing.assert_allclose(P, exact._leave_one_out().predictions([1.0, 1.9]), rtol=1e-10)


def test_leave_one_out_drops_the_point_itself(rng):
    # An isolated point (compact kernel): its leave-one-out prediction is its
    # nearest other point's target, as on the exact path.
    X = np.concatenate([rng.uniform(0, 1, 300), [5.0]])[:, None]
    y = np.concatenate([np.zeros(300), [1.0]])
    est = NadarayaWatsonRegressor(0.05, kernel="epanechnikov", algorithm="binned").fit(X, y)
    P = est._leave_one_out().predictions([1.0])[0, :, 0]
    assert P[-1] == 0.0
    np.testing.assert_allclose(P[:-1], 0.0, atol=1e-12)


def test_search_selects_the_exact_choice(rng):
    X = rng.uniform(0, 1, size=(1500, 1))
    y = np.sin(8 * X[:, 0]) + 0.3 * rng.normal(size=1500)
    exact = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    binned = BandwidthSearchCV(NadarayaWatsonRegressor(algorithm="binned")).fit(X, y)
    assert binned.best_index_ == exact.best_index_
    np.testing.assert_allclose(
        binned.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"], rtol=1e-3
    )
    assert binned.best_estimator_._fit_method == "binned"


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_linear_binning_against_its_definition(rng, monkeypatch, d, compiled):
    # Rows inside the grid, on its nodes and on its last node; weighted, two value columns.
    # The compiled pass is tested even where SKL_NW_DISABLE_NUMBA turns it off.
    module = pytest.importorskip("skl_nw._engine._compiled") if compiled else None
    monkeypatch.setattr(_binned, "compiled", lambda: module)
    shape = (5, 4, 3)[:d]
    grid = Grid(np.array([-1.0, 0.5, 2.0])[:d], np.array([0.5, 0.25, 1.0])[:d], shape)
    top = grid.lo + grid.step * (np.array(shape) - 1)
    X = np.vstack([rng.uniform(grid.lo, top, size=(200, d)), grid.lo, top,
                   grid.lo + grid.step])  # fmt: skip
    w, V, mid = rng.uniform(0.5, 2, len(X)), rng.normal(size=(len(X), 2)), np.array([0.3, -1])
    expected = naive_linear_bin(X, grid.lo, grid.step, shape, [*(w * (V - mid).T), w])
    np.testing.assert_allclose(linear_bin(X, w, V, mid, grid), expected, rtol=1e-13, atol=1e-13)
