"""Local polynomial fits and inference with categorical features, against dense formulas.

The categories enter through the weights only (``w_i K(u_i) L(q, x_i)``); the
local polynomial is in the continuous features.  statsmodels' local-linear
``KernelReg`` also puts the category codes into the local basis, so it is no
reference here: the oracle is the weighted least-squares problem itself.
"""

import numpy as np
import pytest

from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor, NadarayaWatsonRegressor


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, (n, 2))
    u = rng.integers(0, 3, n)
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.5 * u + rng.normal(0, 0.2, n)
    X = np.column_stack([x, u]).astype(float)
    Q = np.column_stack([rng.uniform(0, 3, (7, 2)), [0, 1, 2, 0, 1, 2, 5]]).astype(float)
    return X, y, Q  # the last query's category (5) was never seen


def _weights(X, q, h, lam):
    """Gaussian product kernel times the Aitchison–Aitken kernel (3 categories)."""
    K = np.exp(-0.5 * (((X[:, :2] - q[:2]) / h) ** 2).sum(axis=1))
    return K * np.where(X[:, 2] == q[2], 1 - lam, lam / 2)


def _basis(D, degree):
    cols = [np.ones(len(D))]
    if degree >= 1:
        cols += [D[:, 0], D[:, 1]]
    if degree >= 2:
        cols += [D[:, 0] ** 2, D[:, 0] * D[:, 1], D[:, 1] ** 2]
    return np.column_stack(cols)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_local_fit_and_slopes_equal_weighted_least_squares(degree):
    X, y, Q = _data()
    h, lam = np.array([0.5, 0.6]), 0.2
    est = LocalPolynomialRegressor([*h, lam], degree=degree, categorical_features=[2]).fit(X, y)
    pred, grad = est.predict(Q), est.predict_gradient(Q)
    assert grad.shape == (len(Q), 2)  # continuous features only
    for t, q in enumerate(Q):
        w = _weights(X, q, h, lam)
        B = _basis(X[:, :2] - q[:2], degree)
        beta = np.linalg.solve(B.T @ (w[:, None] * B), B.T @ (w * y))
        assert pred[t] == pytest.approx(beta[0], abs=1e-10)
        if degree >= 1:
            np.testing.assert_allclose(grad[t], beta[1:3], atol=1e-8)


def test_local_leave_one_out_equals_refits():
    X, y, _ = _data(90)
    params = {"bandwidth": [0.5, 0.6, 0.2], "categorical_features": [2]}
    P = LocalPolynomialRegressor(**params).fit(X, y)._leave_one_out().predictions([1.0])[0, :, 0]
    for i in range(0, len(X), 9):
        keep = np.arange(len(X)) != i
        ref = LocalPolynomialRegressor(**params).fit(X[keep], y[keep]).predict(X[i : i + 1])
        assert P[i] == pytest.approx(ref[0], abs=1e-10)


def test_standard_errors_with_categories():
    X, y, Q = _data()
    h, lam = np.array([0.5, 0.6]), 0.3
    est = NadarayaWatsonRegressor([*h, lam], categorical_features=[2]).fit(X, y)
    mean, std = est.predict(Q, return_std=True)
    for t, q in enumerate(Q):
        w = _weights(X, q, h, lam)
        alpha = w / w.sum()
        f = alpha @ y
        # The noise variance about the weighted least-squares line in the continuous
        # features, over 1 - tr(G^-1 G2) (the category enters through the weights).
        Phi = np.column_stack([np.ones(len(X)), X[:, :2] - q[:2]])
        G, G2 = Phi.T @ (alpha[:, None] * Phi), Phi.T @ (alpha[:, None] ** 2 * Phi)
        r = y - Phi @ np.linalg.solve(G, Phi.T @ (alpha * y))
        sigma2 = alpha @ r**2 / (1 - np.trace(np.linalg.solve(G, G2)))
        assert mean[t] == pytest.approx(f, abs=1e-12)
        assert std[t] == pytest.approx(np.sqrt(sigma2 * (alpha**2).sum()), rel=1e-9)
    # The local linear fit's: finite, positive, and its mean the plain prediction.
    lp = LocalPolynomialRegressor([*h, lam], categorical_features=[2]).fit(X, y)
    mean, std = lp.predict(Q, return_std=True)
    np.testing.assert_allclose(mean, lp.predict(Q), atol=1e-12)
    assert np.all(np.isfinite(std)) and np.all(std > 0)
    low, high = lp.predict_interval(Q, method="normal").T
    np.testing.assert_allclose((low + high) / 2, mean, atol=1e-12)


def test_gradient_of_nadaraya_watson_with_categories():
    X, y, Q = _data()
    est = NadarayaWatsonRegressor([0.5, 0.6, 0.2], categorical_features=[2]).fit(X, y)
    grad = est.predict_gradient(Q)
    assert grad.shape == (len(Q), 2)
    step = 1e-6
    for j in range(2):
        e = np.zeros(3)
        e[j] = step
        numeric = (est.predict(Q + e) - est.predict(Q - e)) / (2 * step)
        np.testing.assert_allclose(grad[:, j], numeric, rtol=1e-6, atol=1e-7)


def _ordered_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, (n, 2))
    u, o = rng.integers(0, 3, n), rng.integers(0, 4, n)
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.5 * u - 0.2 * o + rng.normal(0, 0.2, n)
    return np.column_stack([x, u, o]).astype(float), y


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_local_lambda_grid_and_gradient(degree):
    from skl_nw._search._scoring import _squared_error

    X, y = _ordered_data()
    params = {"degree": degree, "categorical_features": [2], "ordered_features": [3]}
    loo = LocalPolynomialRegressor([0.5, 0.6, 0.2, 0.4], **params).fit(X, y)._leave_one_out()
    lambdas, factors = [[0.2, 0.4], [0.05, 0.7]], [0.8, 1.0]
    P = loo.predictions(factors, lambdas=lambdas)
    for t, lam in enumerate(lambdas):
        for f, factor in enumerate(factors):
            h = [0.5 * factor, 0.6 * factor, *lam]
            # The leave-one-out fits at these bandwidths, by the per-pair path (itself
            # tested against refits above).
            ref = LocalPolynomialRegressor(h, **params).fit(X, y)._leave_one_out()
            np.testing.assert_allclose(P[t, f], ref.predictions([1.0])[0], atol=1e-10)
    loss_fn = _squared_error(loo.targets)
    rows, weights = np.arange(0, len(X), 2), np.ones(len(X) // 2)
    theta = np.array([0.1, -0.2, 0.3, -0.4])
    loss, grad = loo.loss_grad(theta, rows, loss_fn, weights)
    numeric = [
        (loo.loss_grad(theta + 1e-6 * e, rows, loss_fn, weights)[0]
         - loo.loss_grad(theta - 1e-6 * e, rows, loss_fn, weights)[0]) / 2e-6
        for e in np.eye(4)
    ]  # fmt: skip
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_local_search_of_h_and_lambda():
    import warnings

    from skl_nw import BandwidthSearchCV

    X, y = _ordered_data()
    est = LocalPolynomialRegressor(categorical_features=[2], ordered_features=[3])
    grid = BandwidthSearchCV(est).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sgd = BandwidthSearchCV(est, method="sgd", random_state=0).fit(X, y)
    for search in (grid, sgd):
        h = search.bandwidth_
        assert 0 <= h[2] <= 2 / 3 and 0 <= h[3] < 1
        # best_score_ is the leave-one-out score of the selected bandwidths.
        P = (
            LocalPolynomialRegressor(h, categorical_features=[2], ordered_features=[3])
            .fit(X, y)
            ._leave_one_out()
            .predictions([1.0])[0, :, 0]
        )
        assert -np.mean((P - y) ** 2) == pytest.approx(search.best_score_, rel=1e-9)


@pytest.mark.parametrize(("n", "d"), [(400, 4), (40, 2)])
def test_folded_paths_with_categories(n, d):
    # Four continuous features (the compiled pass adds its look-ups after the
    # product), and few points per cell (the look-ups feature by feature).
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.uniform(0, 1, (n, d)), rng.integers(0, 5, n), rng.integers(0, 7, n)])
    y = X[:, 0] + 0.3 * X[:, d] + rng.normal(0, 0.1, n)
    Q = np.column_stack([rng.uniform(0, 1, (9, d)), rng.integers(0, 5, 9), rng.integers(0, 7, 9)])
    h = np.full(d, 0.3)
    est = NadarayaWatsonRegressor([*h, 0.3, 0.5], categorical_features=[d, d + 1]).fit(X, y)
    K = np.exp(-0.5 * ((((Q[:, None, :d] - X[None, :, :d]) / h) ** 2).sum(axis=2)))
    K *= np.where(Q[:, None, d] == X[None, :, d], 0.7, 0.3 / 4)
    K *= np.where(Q[:, None, d + 1] == X[None, :, d + 1], 0.5, 0.5 / 6)
    np.testing.assert_allclose(est.predict(Q), K @ y / K.sum(axis=1), rtol=1e-12)


@pytest.mark.parametrize("degree", [1, 2])
def test_gradient_with_categories_is_the_gradient_within_the_cell_at_lambda_zero(degree):
    # lambda = 0: a query weighs only the rows of its own cell, so the mixed fit's
    # slopes are the continuous fit's on that cell alone (one column per continuous
    # feature: a category has no derivative).
    X, y = _ordered_data(n=900, seed=1)
    params = {"degree": degree, "categorical_features": [2], "ordered_features": [3]}
    mixed = LocalPolynomialRegressor([0.8, 0.9, 0.0, 0.0], **params).fit(X, y)
    cell = (X[:, 2] == 1) & (X[:, 3] == 2)
    alone = LocalPolynomialRegressor([0.8, 0.9], degree=degree).fit(X[cell, :2], y[cell])
    Q = np.column_stack([np.linspace(0.5, 2.5, 7), np.linspace(2.5, 0.5, 7), [1] * 7, [2] * 7])
    grad = mixed.predict_gradient(Q)
    assert grad.shape == (7, 2)
    np.testing.assert_allclose(grad, alone.predict_gradient(Q[:, :2]), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("Est", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_cells_of_zero_weight_and_tiny_lambdas_keep_the_leave_one_out_fits_finite(Est):
    # Two cells 34 bandwidths apart, one of zero weight, and a lambda of 1e-90: the
    # zero-weight cell's rows draw on the other cell alone, at a factor 1e-90.  The
    # cells' sums keep a log scale each, whether one bandwidth multiple folds them
    # into one product or several take the sums shifted by each cell's nearest point.
    import pandas as pd

    rng = np.random.default_rng(2)
    c = np.repeat([0, 1], 30)
    x = np.where(c == 0, 17.0, 0.0) + 0.2 * rng.normal(size=60)
    y = np.sin(x) + 0.1 * rng.normal(size=60)
    X = pd.DataFrame({"x": x, "c": pd.Categorical(c)})
    est = Est(bandwidth=[0.5, 0.3], algorithm="brute").fit(X, y, sample_weight=(c == 0) * 1.0)
    loo = est._leave_one_out()
    for lam in (1e-3, 1e-90):
        one, hat_one = loo.fits(np.ones(1), lambdas=np.array([[lam]]))
        two, hat_two = loo.fits(np.array([1.0, 1.0 + 1e-9]), lambdas=np.array([[lam]]))
        assert np.all(np.isfinite(one))
        np.testing.assert_allclose(one[:, 0], two[:, 0], rtol=1e-6)
        # A point of no weight has no attention on itself: its hat value is 0.
        assert np.all(hat_one[..., c == 1] == 0) and np.all(hat_two[..., c == 1] == 0)
        np.testing.assert_allclose(hat_one[:, 0], hat_two[:, 0], rtol=1e-6)


def test_the_lambdas_pass_takes_the_targets_frame(rng):
    # The lambdas' one pass summed the raw targets: y + 2^30 cost it 2e-5 of its scores,
    # where the continuous path kept them to rounding.
    x, c = np.round(rng.uniform(0, 1, 120) * 2**10) / 2**10, rng.integers(0, 3, 120)
    X = np.column_stack([x, c]).astype(float)
    y = np.round((np.sin(6 * x) + 0.5 * c + 0.1 * rng.normal(size=120)) * 2**20) / 2**20
    make = lambda: BandwidthSearchCV(  # noqa: E731
        LocalPolynomialRegressor(degree=2, categorical_features=[1]), method="grid"
    )
    # Two offsets, the same frame (y less its least, exact): the same scores, to the
    # rounding of fits read back at 2^30 (2e-7).
    base = make().fit(X, y + 2.0**10).cv_results_["mean_test_score"]
    shifted = make().fit(X, y + 2.0**30).cv_results_["mean_test_score"]
    np.testing.assert_allclose(shifted, base, rtol=0, atol=2e-7)


@pytest.mark.parametrize("degree", [2, 3])
def test_the_lambdas_pass_refits_rows_far_from_the_middle(degree):
    # Rows up to 150 bandwidths from the inputs' centre: the lambdas' one pass
    # expanded their moments from the centre, which cancels (here up to 1e-3 off; on
    # [0, 1000] at h = 2 the search's scores moved by up to 100), where the continuous
    # path refits about origins of their own.
    rng = np.random.default_rng(1)
    n, h, lam = 1200, 10.0, 0.3
    x, c = rng.uniform(0, 3000, n), rng.integers(0, 3, n)
    X = np.column_stack([x, c]).astype(float)
    y = np.sin(x / 40) + 0.5 * c + 0.1 * rng.normal(size=n)
    est = LocalPolynomialRegressor([h, lam], degree=degree, categorical_features=[1]).fit(X, y)
    loo = est._leave_one_out()
    pred = loo.predictions([1.0], lambdas=[[lam]])[0, 0, :, 0]
    fitted, hat = (a[0, 0] for a in loo.fits([1.0], lambdas=[[lam]]))
    for i in range(0, n, 7):  # dense weighted least squares about each row
        t = (x - x[i]) / h
        w = np.exp(-0.5 * t**2) * np.where(c == c[i], 1 - lam, lam / 2)
        B = np.vander(t, degree + 1, increasing=True) * np.sqrt(w)[:, None]
        S = np.linalg.pinv(B) * np.sqrt(w)  # coefficients = S @ y
        np.testing.assert_allclose(fitted[i, 0], S[0] @ y, atol=1e-9)
        np.testing.assert_allclose(hat[i], S[0, i], atol=1e-9)
        w[i] = 0
        B = np.vander(t, degree + 1, increasing=True) * np.sqrt(w)[:, None]
        np.testing.assert_allclose(pred[i], (np.linalg.pinv(B) * np.sqrt(w))[0] @ y, atol=1e-9)
