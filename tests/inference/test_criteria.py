"""In-sample bandwidth criteria (AICc, GCV) against statsmodels and the dense formulas."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from conftest import PROFILES, naive_predict, scaled_distances
from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier
from skl_nw._kernels import kernel_names


def _data(rng, n=80):
    X = rng.uniform(0, 4, (n, 2))
    y = np.sin(X[:, 0]) + X[:, 1] + rng.normal(0, 0.2, n)
    return X, y


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own random-state notice
@pytest.mark.parametrize("bw", [[0.4, 0.8], [0.15, 0.2], [2.0, 3.0]])
def test_aicc_equals_statsmodels_aic_hurvich(rng, bw):
    kernel_regression = pytest.importorskip("statsmodels.nonparametric.kernel_regression")
    X, y = _data(rng)
    bw = np.array(bw)
    kr = kernel_regression.KernelReg(y, X, var_type="cc", reg_type="lc", bw=bw)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[bw], criterion="aicc")
    search.fit(X, y)
    assert_allclose(-search.best_score_, kr.aic_hurvich(bw)[0], rtol=0, atol=1e-10)


def _dense_criteria(X, y, h, kernel, w):
    K = PROFILES[kernel](scaled_distances(X, X, h)) * w[None, :]
    fit = K @ y / K.sum(1)
    trace = (np.diag(K) / K.sum(1)).sum()
    n = w.sum()
    sigma2 = w @ (y - fit) ** 2 / n
    den = 1 - (trace + 2) / n
    aicc = np.log(sigma2) + (1 + trace / n) / den if den > 0 else np.inf
    return aicc, sigma2 / (1 - trace / n) ** 2


@pytest.mark.parametrize("kernel", kernel_names())
def test_criteria_equal_the_dense_formulas(rng, kernel):
    X, y = _data(rng, n=60)
    w = rng.uniform(0.5, 2.0, 60)
    grid = [[0.3, 0.5], [0.6, 1.0], [1.2, 2.0]]
    for criterion, t in (("aicc", 0), ("gcv", 1)):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel), bandwidths=grid,
                                   criterion=criterion).fit(X, y, sample_weight=w)  # fmt: skip
        want = [_dense_criteria(X, y, np.array(h), kernel, w)[t] for h in grid]
        assert_allclose(-search.cv_results_["mean_test_score"], want, rtol=1e-10)
        assert search.best_score_ == search.cv_results_["mean_test_score"].max()


def test_fits_and_hat_diagonal_of_the_protocol(rng):
    X, y = _data(rng, n=50)
    w = rng.uniform(0.5, 2.0, 50)
    reg = NadarayaWatsonRegressor(bandwidth=[0.5, 0.8], algorithm="kd_tree", rtol=0.0)
    reg.fit(X, y, sample_weight=w)
    fits, hat = reg._leave_one_out().fits([0.5, 1.0, 2.0])
    assert fits.shape == (3, 50, 1) and hat.shape == (3, 50)
    for f, factor in enumerate([0.5, 1.0, 2.0]):
        h = factor * np.array([0.5, 0.8])
        assert_allclose(fits[f, :, 0], naive_predict(X, y, X, h, sample_weight=w), rtol=1e-10)
        K = PROFILES["gaussian"](scaled_distances(X, X, h)) * w[None, :]
        assert_allclose(hat[f], np.diag(K) / K.sum(1), rtol=1e-10)


@pytest.mark.parametrize("criterion", ["aicc", "gcv"])
def test_integer_weights_equal_repeated_rows(rng, criterion):
    X, y = _data(rng, n=40)
    c = rng.integers(1, 4, 40)
    a = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion=criterion)
    a.fit(X, y, sample_weight=c)
    b = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion=criterion)
    b.fit(np.repeat(X, c, 0), np.repeat(y, c))
    assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"], rtol=1e-9)
    assert_allclose(a.bandwidth_, b.bandwidth_)


def test_criteria_choose_sensible_bandwidths_and_penalise_small_ones(rng):
    X = rng.uniform(0, 1, (200, 1))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.3, 200)
    loo = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y).bandwidth_[0]
    for criterion in ("aicc", "gcv"):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion=criterion).fit(X, y)
        assert 0.5 * loo < search.bandwidth_[0] < 2 * loo
        # The training error alone would pick the smallest bandwidth.
        assert search.cv_results_["mean_test_score"][0] < search.best_score_
    # tr(H) >= n - 2 (h -> 0): AICc is +inf, a score of -inf.
    tiny = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[1e-6, 0.1], criterion="aicc")
    assert tiny.fit(X, y).cv_results_["mean_test_score"][0] == -np.inf


def test_two_outputs(rng):
    X, y = _data(rng, n=60)
    Y = np.column_stack([y, 2 * y])
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="gcv").fit(X, Y)
    assert np.isfinite(search.best_score_)


def test_aicc_of_two_outputs_is_the_mean_of_theirs(rng):
    # Each output's log sigma^2 (the dense formula's AICc, averaged): the choice no longer
    # depends on the outputs' units.  log(mean sigma^2) let the output of the larger
    # units choose alone (column 2 times 1e-3 moved it from 0.105 to 0.135).
    X, y = _data(rng, n=60)
    Y = np.column_stack([y, 100 * X[:, 1] ** 2 + rng.normal(0, 0.3, 60)])
    w = np.ones(60)
    grid = [[0.2, 0.3], [0.4, 0.6], [0.8, 1.2]]
    want = [np.mean([_dense_criteria(X, Y[:, j], np.array(h), "gaussian", w)[0]
                     for j in range(2)]) for h in grid]  # fmt: skip
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=grid, criterion="aicc")
    assert_allclose(-search.fit(X, Y).cv_results_["mean_test_score"], want, rtol=1e-10)
    summary = NadarayaWatsonRegressor(grid[1]).fit(X, Y).summary()
    assert summary.aicc == pytest.approx(want[1], rel=1e-10)
    for c in (1e-3, 1e3):
        scaled = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=grid, criterion="aicc")
        assert scaled.fit(X, Y * [1, c]).best_index_ == search.best_index_
        assert_allclose(scaled.cv_results_["mean_test_score"],
                        search.cv_results_["mean_test_score"] - np.log(c), rtol=1e-9)  # fmt: skip


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: BandwidthSearchCV(ParzenClassifier(), criterion="aicc"), "regressors only"),
        (lambda: BandwidthSearchCV(ParzenClassifier(), criterion="gcv"), "regressors only"),
        (
            lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="aicc", method="sgd"),
            "grid",
        ),
        (lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="gcv", cv=5), "cv='loo'"),
        (
            lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="gcv", scoring="r2"),
            "scor",
        ),
        (lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="bic"), "criterion"),
    ],
)
def test_bad_criterion_combinations_raise(rng, make, match):
    X, y = _data(rng, n=20)
    with pytest.raises(ValueError, match=match):
        make().fit(X, (y > 2).astype(int))


def _dense_local_linear_hat(X, h, w, lam=None, codes=None):
    """Hat matrix of Gaussian local-linear regression (rows: l(x_i)), optional AA kernel."""
    n, d = X.shape
    H = np.empty((n, n))
    for i in range(n):
        T = (X - X[i]) / h
        k = w * np.exp(-0.5 * (T**2).sum(axis=1))
        if codes is not None:
            k = k * np.where(codes == codes[i], 1 - lam, lam / 2)
        B = np.column_stack([np.ones(n), T])
        H[i] = np.linalg.solve(B.T @ (k[:, None] * B), (B * k[:, None]).T)[0]
    return H


@pytest.mark.parametrize("mixed", [False, True])
def test_local_linear_aicc_equals_the_dense_hat_matrix(rng, mixed):
    # statsmodels' aic_hurvich uses the local-constant trace even for reg_type="ll":
    # the reference for degree >= 1 is the explicit hat matrix.
    from skl_nw import LocalPolynomialRegressor

    n = 50
    X = rng.uniform(0, 1, (n, 2))
    codes = rng.integers(0, 3, n)
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.3 * codes + rng.normal(0, 0.2, n)
    w = rng.integers(1, 3, n).astype(float)
    h = np.array([0.3, 0.4])
    if mixed:
        Xf, params, cand = np.column_stack([X, codes]), {"categorical_features": [2]}, [[*h, 0.2]]
    else:
        Xf, params, cand = X, {}, [h]
    search = BandwidthSearchCV(LocalPolynomialRegressor(**params), bandwidths=cand,
                               criterion="aicc").fit(Xf, y, sample_weight=w)  # fmt: skip
    H = _dense_local_linear_hat(X, h, w, 0.2 if mixed else None, codes if mixed else None)
    resid = y - H @ y
    N = w.sum()
    sigma2 = np.sum(w * resid**2) / N
    trace = np.trace(H)  # H_ii holds w_i: a merged row's copies together
    want = np.log(sigma2) + (1 + trace / N) / (1 - (trace + 2) / N)
    assert_allclose(-search.best_score_, want, rtol=1e-9)
