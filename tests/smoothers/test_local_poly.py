"""LocalPolynomialRegressor against the dense least-squares oracle, statsmodels and itself."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn import config_context

import skl_nw._engine._local_fit as local_fit
from conftest import PROFILES, naive_local_poly, naive_local_poly_loo
from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor, NadarayaWatsonRegressor
from skl_nw._kernels import kernel_names
from skl_nw._smoothers._base import rule_of_thumb

KERNELS = kernel_names()
COMPACT = ["tophat", "epanechnikov", "linear", "cosine"]


def _data(rng, n=80, d=2, k=None):
    X = rng.uniform(0, 1, (n, d))
    f = np.sin(3 * X[:, 0]) + X[:, -1] ** 2
    y = f + rng.normal(0, 0.1, n)
    if k is not None:
        y = np.column_stack([y] + [np.cos(2 * X[:, 0]) * (j + 1) for j in range(k - 1)])
    return X, y


# ------------------------------------------------------------------ the oracle
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_matches_weighted_least_squares_oracle(rng, kernel, degree):
    X, y = _data(rng, k=2)
    w = rng.uniform(0.2, 3.0, len(X))
    Q = rng.uniform(0.1, 0.9, (25, 2))
    h = [0.6, 0.8]  # wide enough for every compact neighbourhood to be well-posed
    reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel, degree=degree).fit(X, y, w)
    pred, grad = naive_local_poly(X, y, Q, h, kernel, degree, w)
    assert_allclose(reg.predict(Q), pred, rtol=1e-9, atol=1e-10)
    if degree >= 1:
        assert_allclose(reg.predict_gradient(Q), grad, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_degree_zero_is_nadaraya_watson(rng, kernel, algorithm):
    X, y = _data(rng, k=3)
    Q = rng.uniform(-0.2, 1.2, (30, 2))
    params = {"bandwidth": [0.15, 0.3], "kernel": kernel, "algorithm": algorithm}
    nw = NadarayaWatsonRegressor(**params).fit(X, y)
    lp = LocalPolynomialRegressor(degree=0, **params).fit(X, y)
    assert_allclose(lp.predict(Q), nw.predict(Q), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("bandwidth", [0.03, 0.3, 3.0, 30.0])
def test_reproduces_polynomials_of_its_degree(rng, degree, bandwidth):
    # The fit is exact for a polynomial of degree <= degree (values and gradient)
    # wherever the local problem is well-posed: the Gaussian at any bandwidth on
    # points in general position.
    X = rng.uniform(0, 1, (150, 2))
    Q = rng.uniform(0.2, 0.8, (20, 2))
    coefs = [1.5, -2.0, 0.7, 1.1, -0.4, 0.9]
    funcs = [
        lambda Z: coefs[0] + 0 * Z[:, 0],
        lambda Z: coefs[1] * Z[:, 0] + coefs[2] * Z[:, 1],
        lambda Z: coefs[3] * Z[:, 0] ** 2 + coefs[4] * Z[:, 0] * Z[:, 1] + coefs[5] * Z[:, 1] ** 2,
    ]
    grads = [
        lambda Z: np.zeros_like(Z),
        lambda Z: np.tile([coefs[1], coefs[2]], (len(Z), 1)),
        lambda Z: np.column_stack([
            2 * coefs[3] * Z[:, 0] + coefs[4] * Z[:, 1],
            coefs[4] * Z[:, 0] + 2 * coefs[5] * Z[:, 1],
        ]),
    ]  # fmt: skip
    f = lambda Z: sum(g(Z) for g in funcs[: degree + 1])  # noqa: E731
    df = lambda Z: sum(g(Z) for g in grads[: degree + 1])  # noqa: E731
    reg = LocalPolynomialRegressor(bandwidth=bandwidth, degree=degree).fit(X, f(X))
    assert_allclose(reg.predict(Q), f(Q), rtol=0, atol=1e-9)
    if degree >= 1:
        assert_allclose(reg.predict_gradient(Q), df(Q), rtol=0, atol=1e-8)


# ------------------------------------------------------------------ statsmodels
@pytest.mark.parametrize("d", [1, 2, 3])
def test_statsmodels_local_linear_predictions_and_slopes(rng, d):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = _data(rng, n=120, d=d)
    h = np.linspace(0.15, 0.35, d)  # per-feature; statsmodels' Gaussian with the same h
    # Local-linear slopes only: statsmodels' local-constant marginal effects
    # (reg_type="lc") are off by a factor n / 2, so they are never a reference here;
    # degree 0 is checked against finite differences of predict instead.
    Q = rng.uniform(0, 1, (30, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, slopes = KernelReg(y, X, var_type="c" * d, reg_type="ll", bw=h).fit(Q)
    reg = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    assert_allclose(reg.predict(Q), mean, rtol=1e-8, atol=1e-10)
    assert_allclose(reg.predict_gradient(Q), slopes.reshape(len(Q), d), rtol=1e-8, atol=1e-9)


def test_statsmodels_leave_one_out(rng):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = _data(rng, n=60, d=2)
    h = np.array([0.2, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KernelReg(y, X, var_type="cc", reg_type="ll", bw=h)
        reference = float(np.ravel(model.cv_loo(h, model.est["ll"]))[0])
    loo = LocalPolynomialRegressor(bandwidth=h).fit(X, y)._leave_one_out()
    ours = np.mean((loo.predictions([1.0])[0, :, 0] - y) ** 2)
    assert_allclose(ours, reference, rtol=1e-8)


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "exponential", "cosine"])
def test_degree_zero_gradient_is_the_derivative_of_predict(rng, kernel):
    X, y = _data(rng, k=2)
    Q = rng.uniform(0.1, 0.9, (20, 2))
    reg = LocalPolynomialRegressor(bandwidth=[0.7, 0.9], kernel=kernel, degree=0).fit(X, y)
    G = reg.predict_gradient(Q)
    assert G.shape == (20, 2, 2)
    e = 1e-6
    for j in range(2):
        step = e * np.eye(2)[j]
        fd = (reg.predict(Q + step) - reg.predict(Q - step)) / (2 * e)
        assert_allclose(G[:, :, j], fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("degree", [1, 2])
def test_gradient_shapes_and_finite_differences_on_polynomials(rng, degree):
    # For degree >= 1 the gradient is the local slope, the derivative of predict
    # only where the fit is exact: on a polynomial of the fit's degree.
    X = rng.uniform(0, 1, (100, 3))
    Y = np.column_stack([X @ [1.0, -2.0, 0.5], 2 * X[:, 1] + X[:, 2]])
    Q = rng.uniform(0.2, 0.8, (10, 3))
    reg = LocalPolynomialRegressor(bandwidth=0.4, degree=degree).fit(X, Y)
    G = reg.predict_gradient(Q)
    assert G.shape == (10, 2, 3)
    assert_allclose(G[:, 0], np.tile([1.0, -2.0, 0.5], (10, 1)), atol=1e-9)
    one = LocalPolynomialRegressor(bandwidth=0.4, degree=degree).fit(X, Y[:, 1])
    assert one.predict_gradient(Q).shape == (10, 3)
    e = 1e-6
    fd = (one.predict(Q + e * np.eye(3)[1]) - one.predict(Q - e * np.eye(3)[1])) / (2 * e)
    assert_allclose(one.predict_gradient(Q)[:, 1], fd, atol=1e-7)


# ------------------------------------------------------------------ backends and memory
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_trees_match_brute_force(rng, kernel, algorithm):
    X, y = _data(rng, n=300, k=2)
    Q = rng.uniform(-0.1, 1.1, (40, 2))
    for degree in (1, 2):
        params = {"bandwidth": [0.3, 0.4], "kernel": kernel, "degree": degree}
        brute = LocalPolynomialRegressor(algorithm="brute", **params).fit(X, y)
        tree = LocalPolynomialRegressor(algorithm=algorithm, **params).fit(X, y)
        assert tree.tree_ is not None
        assert_allclose(tree.predict(Q), brute.predict(Q), rtol=1e-9, atol=1e-10)
        assert_allclose(tree.predict_gradient(Q), brute.predict_gradient(Q), rtol=1e-8, atol=1e-9)


def test_chunks_and_blocks_change_nothing(rng, monkeypatch):
    X, y = _data(rng, n=400)
    Q = rng.uniform(0, 1, (300, 2))
    reg = LocalPolynomialRegressor(bandwidth=0.2, degree=2).fit(X, y)
    expected, grad = reg.predict(Q), reg.predict_gradient(Q)
    monkeypatch.setattr(local_fit, "_BLOCK_FLOATS", 5000)  # several blocks of queries
    with config_context(working_memory=0.5):  # several engine chunks per block
        assert_allclose(reg.predict(Q), expected, rtol=1e-12, atol=1e-13)
        assert_allclose(reg.predict_gradient(Q), grad, rtol=1e-11, atol=1e-12)


# ------------------------------------------------------------------ degenerate neighbourhoods
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kernel", COMPACT)
def test_too_few_neighbours_fall_back_toward_the_local_mean(rng, kernel, degree):
    X, y = _data(rng, n=40)
    Q = np.vstack([X[:5] + 1e-3, [[5.0, 5.0]], rng.uniform(0, 1, (10, 2))])
    reg = LocalPolynomialRegressor(bandwidth=0.05, kernel=kernel, degree=degree).fit(X, y)
    pred, grad = reg.predict(Q), reg.predict_gradient(Q)
    assert np.isfinite(pred).all() and np.isfinite(grad).all()
    # One neighbour (or none: the nearest point) -> the Nadaraya-Watson value.
    nw = NadarayaWatsonRegressor(bandwidth=0.05, kernel=kernel).fit(X, y)
    single = np.array([(np.sqrt((((X - q) / 0.05) ** 2).sum(1)) < 1).sum() <= 1 for q in Q])
    assert single[5]  # the far query has no neighbour at all
    assert_allclose(pred[single], nw.predict(Q[single]), rtol=1e-12)
    assert_allclose(grad[single], 0.0, atol=1e-12)


def test_collinear_neighbours_fit_along_the_line(rng):
    # Every point on the line x2 = 0.5: the slope across it is undetermined (0);
    # the fit along it is the one-dimensional local-linear fit.
    t = np.sort(rng.uniform(0, 1, 50))
    X = np.column_stack([t, np.full(50, 0.5)])
    y = np.sin(3 * t)
    Q = np.column_stack([rng.uniform(0, 1, 10), np.full(10, 0.5)])
    reg = LocalPolynomialRegressor(bandwidth=0.2).fit(X, y)
    line = LocalPolynomialRegressor(bandwidth=0.2).fit(t[:, None], y)
    assert_allclose(reg.predict(Q), line.predict(Q[:, :1]), rtol=1e-10)
    G = reg.predict_gradient(Q)
    assert_allclose(G[:, 0], line.predict_gradient(Q[:, :1])[:, 0], rtol=1e-8)
    assert_allclose(G[:, 1], 0.0, atol=1e-12)
    off = reg.predict(Q + [0.0, 0.3])  # off the line: still finite, the same value
    assert_allclose(off, reg.predict(Q), rtol=1e-10)


@pytest.mark.parametrize("degree", [1, 2])
def test_far_queries_and_extreme_bandwidths_stay_finite(rng, degree):
    X, y = _data(rng, n=60)
    Q = np.array([[1e3, 1e3], [-1e6, 2.0], [0.5, 1e8]])
    for h in (1e-6, 0.2, 1e6):
        for kernel in ("gaussian", "exponential", "epanechnikov"):
            reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel, degree=degree).fit(X, y)
            assert np.isfinite(reg.predict(Q)).all()
            assert np.isfinite(reg.predict_gradient(Q)).all()
    Xd = np.repeat(X[:3], 10, axis=0)  # three distinct points, repeated
    reg = LocalPolynomialRegressor(bandwidth=0.5, degree=degree).fit(Xd, np.repeat(y[:3], 10))
    assert np.isfinite(reg.predict(rng.uniform(0, 1, (5, 2)))).all()


# ------------------------------------------------------------------ leave-one-out
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tophat"])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_closed_form_leave_one_out_is_a_refit(rng, kernel, degree):
    X, y = _data(rng, n=40, k=2)
    X[5] = X[6]  # an exact duplicate keeps its weight: removal is by index
    w = rng.uniform(0.5, 2.0, len(X))
    h = np.array([0.7, 0.9])
    reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel, degree=degree).fit(X, y, w)
    P = reg._leave_one_out().predictions([1.0, 1.3])
    for f, P_f in zip([1.0, 1.3], P, strict=True):
        assert_allclose(P_f, naive_local_poly_loo(X, y, f * h, kernel, degree, w), rtol=1e-8)


def test_leave_one_out_is_the_linear_smoother_identity(rng):
    # y_i - yhat_(-i) = (y_i - yhat_i) / (1 - H_ii), H_ii = w_i K(0) [G_i^-1]_00.
    X, y = _data(rng, n=50)
    h = np.array([0.25, 0.3])
    reg = LocalPolynomialRegressor(bandwidth=h).fit(X, y)
    fitted = reg.predict(X)
    H = np.empty(len(X))
    for i, q in enumerate(X):
        T = (X - q) / h
        W = PROFILES["gaussian"](np.sqrt((T**2).sum(1)))
        Phi = np.column_stack([np.ones(len(X)), T])
        H[i] = W[i] * np.linalg.inv(Phi.T @ (W[:, None] * Phi))[0, 0]
    loo = reg._leave_one_out().predictions([1.0])[0, :, 0]
    assert_allclose(y - loo, (y - fitted) / (1 - H), rtol=1e-8)


@pytest.mark.parametrize(
    ("kernel", "degree"),
    [("gaussian", 0), ("gaussian", 1), ("gaussian", 2), ("epanechnikov", 1),
     ("exponential", 1), ("cosine", 0)],
)  # fmt: skip
def test_loss_gradient_matches_finite_differences(rng, kernel, degree):
    X, y = _data(rng, n=70, k=2)
    w = rng.uniform(0.5, 2.0, len(X))
    reg = LocalPolynomialRegressor(bandwidth=[0.6, 0.8], kernel=kernel, degree=degree)
    loo = reg.fit(X, y, w)._leave_one_out()
    Y = loo.targets

    def loss_fn(P, rows):
        residual = P - Y[rows]
        return (residual**2).sum(axis=1), 2.0 * residual

    rows = np.arange(0, len(X), 2)
    theta = np.array([0.1, -0.2])
    loss, grad = loo.loss_grad(theta, rows, loss_fn, w[rows])
    # The loss is the leave-one-out loss at those bandwidths.
    P = loo.predictions([1.0])[0]  # at theta = 0
    loss0, _ = loo.loss_grad(np.zeros(2), rows, loss_fn, w[rows])
    assert_allclose(loss0, np.average(loss_fn(P[rows], rows)[0], weights=w[rows]), rtol=1e-10)
    e = 1e-6
    fd = [
        (loo.loss_grad(theta + e * s, rows, loss_fn, w[rows])[0]
         - loo.loss_grad(theta - e * s, rows, loss_fn, w[rows])[0]) / (2 * e)
        for s in np.eye(2)
    ]  # fmt: skip
    assert_allclose(grad, fd, rtol=1e-5, atol=1e-9)


# ------------------------------------------------------------------ the search
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_bandwidth_search_grid_leave_one_out(rng, degree):
    X, y = _data(rng, n=60)
    candidates = [0.1, 0.2, 0.4, [0.2, 0.5]]
    search = BandwidthSearchCV(LocalPolynomialRegressor(degree=degree), bandwidths=candidates).fit(
        X, y
    )
    mse = [np.mean((naive_local_poly_loo(X, y, h, degree=degree) - y) ** 2) for h in candidates]
    assert_allclose(-search.cv_results_["mean_test_score"], mse, rtol=1e-8)
    assert search.best_index_ == int(np.argmin(mse))
    assert isinstance(search.best_estimator_, LocalPolynomialRegressor)


def test_bandwidth_search_cv_folds_and_sgd(rng):
    X, y = _data(rng, n=80)
    grid = BandwidthSearchCV(LocalPolynomialRegressor(), cv=3).fit(X, y)
    assert np.isfinite(grid.best_score_)
    sgd = BandwidthSearchCV(LocalPolynomialRegressor(), method="sgd", random_state=0).fit(X, y)
    assert sgd.loss_curve_[-1] <= sgd.loss_curve_[0]
    start = BandwidthSearchCV(
        LocalPolynomialRegressor(), bandwidths=[rule_of_thumb(X, "scott")]
    ).fit(X, y)
    assert sgd.best_score_ >= start.best_score_


def test_bandwidth_search_lbfgs_is_a_per_feature_optimum(rng):
    X, y = _data(rng, n=80)
    search = BandwidthSearchCV(LocalPolynomialRegressor(), method="lbfgs").fit(X, y)
    grid = BandwidthSearchCV(LocalPolynomialRegressor()).fit(X, y)
    assert search.best_score_ >= grid.best_score_  # per feature beats multiples of one vector
    # A stationary point: moving either bandwidth by 1% loses (or gains at most rounding).
    h = search.bandwidth_
    moves = [h * np.exp(s * 0.01 * np.eye(len(h))[j]) for j in range(len(h)) for s in (-1, 1)]
    around = BandwidthSearchCV(LocalPolynomialRegressor(), bandwidths=moves).fit(X, y)
    assert around.best_score_ <= search.best_score_ + 1e-6 * abs(search.best_score_)


def test_invalid_degree():
    X, y = np.zeros((5, 1)), np.zeros(5)
    for degree in (-1, 1.5, "1"):
        with pytest.raises(ValueError, match="degree"):
            LocalPolynomialRegressor(degree=degree).fit(X, y)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_kernel_sums_exclude_is_leave_one_out_at_some_rows(rng, algorithm, kernel):
    from skl_nw import _engine
    from skl_nw._kernels import get_kernel

    X = rng.uniform(0, 4, (120, 2))
    X[7] = X[8]  # a duplicate still counts: removal is by index
    V = rng.normal(size=(120, 3))
    train = _engine.prepare_train(X, values=V, algorithm=algorithm)
    k = get_kernel(kernel)
    rows = rng.choice(120, 30, replace=False)
    rows[0] = 7
    full = _engine.kernel_sums(None, train, k, loo=True, powers=(1, "ds"))
    some = _engine.kernel_sums(X[rows], train, k, exclude=rows, powers=(1, "ds"))
    scale = np.exp(full.shift[rows, :, None] + full.log_scale[rows])[..., None]
    expected = scale * full.scaled[rows]
    got = np.exp(some.shift[:, :, None] + some.log_scale)[..., None] * some.scaled
    assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_leave_one_out_at_some_rows_is_a_refit(rng, kernel):
    # The search's progress blocks and backend probe ask for some rows only.
    X, y = _data(rng, n=60)
    h = np.array([0.4, 0.5])
    reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel).fit(X, y)
    rows = np.array([7, 0, 33, 59])
    P = reg._leave_one_out().predictions([1.0, 1.5], rows=rows)
    assert P.shape == (2, 4, 1)
    for f, P_f in zip([1.0, 1.5], P, strict=True):
        assert_allclose(P_f[:, 0], naive_local_poly_loo(X, y, f * h, kernel, 1)[rows], rtol=1e-8)


@pytest.mark.filterwarnings("ignore:The selected bandwidth is the")  # a grid edge, on purpose
@pytest.mark.parametrize(
    ("kernel", "verbose"), [("gaussian", 1), ("epanechnikov", 0)]
)  # fmt: skip
def test_bandwidth_search_at_1200_rows(rng, kernel, verbose, capsys):
    # Verbose progress runs by blocks of rows; a compact kernel at n >= 1,000 probes
    # the backend on some rows: both asked LocalLeaveOneOut for rows (a TypeError).
    X = rng.normal(size=(1200, 2))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.1, 1200)
    grid = [0.3, 0.6, 1.2]
    est = LocalPolynomialRegressor(kernel=kernel)
    search = BandwidthSearchCV(est, bandwidths=grid, verbose=verbose).fit(X, y)
    loo = est.set_params(bandwidth=0.3).fit(X, y)._leave_one_out()
    P = loo.predictions(np.array(grid) / 0.3)[:, :, 0]
    assert_allclose(search.cv_results_["mean_test_score"], -((P - y) ** 2).mean(axis=1))
    assert ("Done in" in capsys.readouterr().out) == bool(verbose)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_fallback_is_nadaraya_watsons(rng, degree, algorithm):
    # No training point in a compact kernel's support: the nearest point(s), or NaN.
    X, y = _data(rng, n=40)
    far = np.array([[3.0, 3.0], [-2.0, 0.5]])
    Q = np.vstack([far, X[:3]])
    nearest = y[np.argmin(((far[:, None] - X[None]) ** 2).sum(axis=2), axis=1)]
    for fallback in ("nearest", "nan"):
        kw = {"bandwidth": 0.3, "kernel": "epanechnikov", "algorithm": algorithm}
        kw["fallback"] = fallback
        lp = LocalPolynomialRegressor(degree=degree, **kw).fit(X, y)
        nw = NadarayaWatsonRegressor(**kw).fit(X, y)
        inside = LocalPolynomialRegressor(degree=degree, **{**kw, "fallback": "nearest"})
        assert_allclose(lp.predict(Q)[2:], inside.fit(X, y).predict(Q)[2:], rtol=1e-12)
        mean, std = lp.predict(Q, return_std=True)
        grad, L = lp.predict_gradient(Q), lp.attention_weights(Q)
        if fallback == "nan":
            assert np.isnan(mean[:2]).all() and np.isnan(std[:2]).all()
            assert np.isnan(grad[:2]).all() and np.isnan(L[:2]).all()
            assert np.isfinite(mean[2:]).all() and np.isfinite(L[2:]).all()
        else:
            assert_allclose(mean[:2], nearest, rtol=1e-12)
            assert_allclose(std[:2], 0.0, atol=1e-12)
            assert_allclose(L[:2] @ y, nearest, rtol=1e-12)
        assert_allclose(mean[:2], nw.predict(Q)[:2], rtol=1e-12)


@pytest.mark.filterwarnings("ignore:The selected bandwidth is the")  # a grid edge, on purpose
def test_fallback_nan_leave_one_out(rng):
    # A row with no other point in the support: NaN, as Nadaraya–Watson's.
    X, y = _data(rng, n=30, d=1)
    X[0] = 5.0
    kw = {"bandwidth": 0.2, "kernel": "tophat", "fallback": "nan"}
    P = LocalPolynomialRegressor(degree=0, **kw).fit(X, y)._leave_one_out().predictions([1.0])
    assert_allclose(P, NadarayaWatsonRegressor(**kw).fit(X, y)._leave_one_out().predictions([1.0]))
    D = np.abs(X - X.T)
    np.fill_diagonal(D, np.inf)
    lonely = D.min(axis=1) >= 0.2  # the tophat's support is u < 1
    assert lonely[0] and np.array_equal(np.isnan(P[0, :, 0]), lonely)
    # Only the widest candidate reaches row 0 from the others: the others score -inf.
    search = BandwidthSearchCV(LocalPolynomialRegressor(**kw), bandwidths=[0.2, 1.0, 5.0])
    assert np.isfinite(search.fit(X, y).best_score_)
    assert search.best_estimator_.bandwidth_[0] == 5.0


def test_fallback_is_validated():
    X = np.arange(10.0)[:, None]
    with pytest.raises(ValueError, match="fallback"):
        LocalPolynomialRegressor(fallback="zero").fit(X, X[:, 0])


def test_collinear_features_warn_that_the_fit_is_nadaraya_watson(rng):
    # One-hot columns that sum to 1 (OneHotEncoder's default) make every local design
    # singular: the solve drops whole degrees, so the fit was Nadaraya-Watson's
    # everywhere, silently. It still is (the docs' rule), and fit now says so.
    x, g = rng.uniform(0, 1, 300), rng.integers(0, 2, 300)
    y = 3 * x + g + rng.normal(0, 0.1, 300)
    Z = np.column_stack([x, g == 0, g == 1]).astype(float)
    Q = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    h = [0.3, 0.5, 0.5]
    with pytest.warns(UserWarning, match="collinear"):
        got = LocalPolynomialRegressor(h, degree=1).fit(Z, y).predict(Q)
    assert_allclose(got, NadarayaWatsonRegressor(h).fit(Z, y).predict(Q), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one column dropped; a constant column
        dropped = LocalPolynomialRegressor(h[:2], degree=1).fit(Z[:, :2], y).predict(Q[:, :2])
        LocalPolynomialRegressor(h, degree=1).fit(np.column_stack([x, g, np.ones(300)]), y)
        LocalPolynomialRegressor(h, degree=0).fit(Z, y)
    assert_allclose(dropped, [0.0, 4.0], atol=0.1)  # the local linear fit of 3 x + g
