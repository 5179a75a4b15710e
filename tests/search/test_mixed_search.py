"""BandwidthSearchCV on mixed data: h and lambda chosen together.

References: explicit refits without each point (the leave-one-out by
definition), statsmodels ``KernelReg.cv_loo``, central finite differences.
"""

import warnings

import numpy as np
import pytest

from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._search._scoring import _log_loss, _squared_error

statsmodels = pytest.importorskip("statsmodels.nonparametric.kernel_regression")


def _data(n=90, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, n)
    u = np.repeat(np.arange(3), n // 3)  # every category at least twice
    o = rng.integers(0, 4, n)
    y = np.sin(x) + 0.5 * u - 0.2 * o + rng.normal(0, 0.2, n)
    return np.column_stack([x, u, o]).astype(float), y


MIXED = {"categorical_features": [1], "ordered_features": [2]}


def _refit_loo(make, X, y, rows, proba=False):
    """Leave-one-out predictions by refitting without each row."""
    out = []
    for i in rows:
        keep = np.arange(len(X)) != i
        est = make().fit(X[keep], y[keep])
        out.append(est.predict_proba(X[i : i + 1])[0] if proba else est.predict(X[i : i + 1])[0])
    return np.array(out)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("cat_kernel", ["aitchison_aitken", "li_racine"])
def test_cell_predictions_equal_refits(kernel, cat_kernel):
    X, y = _data()
    est = NadarayaWatsonRegressor([0.3, 0.2, 0.4], kernel=kernel, categorical_kernel=cat_kernel,
                                  **MIXED).fit(X, y)  # fmt: skip
    factors = np.array([0.7, 1.0, 2.0])
    lambdas = np.array([[0.0, 0.1], [0.2, 0.5], [0.6, 0.9]])
    P = est._leave_one_out().predictions(factors, lambdas=lambdas)
    assert P.shape == (3, 3, len(X), 1)
    rows = np.arange(0, len(X), 11)
    for t, lam in enumerate(lambdas):
        for f, factor in enumerate(factors):
            h = np.array([0.3 * factor, *lam])

            def make(h=h):
                return NadarayaWatsonRegressor(h, kernel=kernel, categorical_kernel=cat_kernel,
                                               **MIXED)  # fmt: skip

            # lambda = 0 with no neighbour of the same category: the lambda -> 0 limit,
            # computed through log weights of -1e8 (relative rounding ~1e-8).
            np.testing.assert_allclose(P[t, f, rows, 0], _refit_loo(make, X, y, rows), atol=1e-7)


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_cell_predictions_at_lambda_zero_out_of_reach_equal_refits(make):
    # Category 0's rows at 0-1 but two at 2.5 and 2.6, beside the others' rows: left
    # out, their own category is out of a compact kernel's reach. At lambda = 0 the
    # cell sums took the other categories' rows (0.70 off the refits); now their own
    # category's fallback, the nearest, as a refit has it. Ordered lambda = 0 too.
    rng = np.random.default_rng(1)
    u = np.repeat(np.arange(3), 20)
    x = np.where(u == 0, rng.uniform(0, 1, 60), rng.uniform(2, 3, 60))
    x[5], x[6] = 2.5, 2.6
    o = rng.integers(0, 4, 60)
    y = np.sin(x) + 0.5 * u - 0.2 * o + rng.normal(0, 0.2, 60)
    X = np.column_stack([x, u, o]).astype(float)
    est = make([0.3, 0.0, 0.0], kernel="epanechnikov", **MIXED).fit(X, y)
    lambdas = np.array([[0.0, 0.0], [0.2, 0.0]])
    P = est._leave_one_out().predictions([1.0, 3.0], lambdas=lambdas)
    for t, lam in enumerate(lambdas):
        for f, factor in enumerate([1.0, 3.0]):
            h = np.array([0.3 * factor, *lam])
            want = _refit_loo(lambda h=h: make(h, kernel="epanechnikov", **MIXED), X, y, range(60))
            np.testing.assert_allclose(P[t, f, :, 0], want, rtol=1e-9, atol=1e-9)


def test_cell_predictions_of_the_classifier():
    X, y = _data()
    labels = (y > np.median(y)).astype(int)
    est = ParzenClassifier([0.3, 0.2, 0.4], **MIXED).fit(X, labels)
    P = est._leave_one_out().predictions([1.0], lambdas=[[0.3, 0.6]])[0, 0]
    rows = np.arange(0, len(X), 13)
    ref = _refit_loo(lambda: ParzenClassifier([0.3, 0.3, 0.6], **MIXED), X, labels, rows, True)
    np.testing.assert_allclose(P[rows], ref, atol=1e-12)


def test_closed_form_equals_statsmodels_cv_loo():
    X, y = _data(60)
    bw = [0.25, 0.3, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' own FutureWarning on its random state
        kr = statsmodels.KernelReg(y, X, var_type="cuo", reg_type="lc", bw=bw)
        reference = float(np.ravel(kr.cv_loo(np.array(bw), kr.est["lc"]))[0])
    est = NadarayaWatsonRegressor(bw, **MIXED).fit(X, y)
    P = est._leave_one_out().predictions([1.0])[0, :, 0]
    assert np.mean((P - y) ** 2) == pytest.approx(reference, rel=1e-10)


@pytest.mark.parametrize("classifier", [False, True])
def test_gradient_matches_finite_differences(classifier):
    X, y = _data()
    if classifier:
        y = (y > np.median(y)).astype(int)
        est = ParzenClassifier([0.3, 0.2, 0.4], **MIXED).fit(X, y)
    else:
        est = NadarayaWatsonRegressor([0.3, 0.2, 0.4], **MIXED).fit(X, y)
    loo = est._leave_one_out()
    loss_fn = (_log_loss if classifier else _squared_error)(loo.targets)
    rows, weights = np.arange(0, len(X), 2), np.ones(len(X))[::2]
    theta = np.array([0.1, -0.4, 0.3])
    loss, grad = loo.loss_grad(theta, rows, loss_fn, weights)
    step = 1e-6
    numeric = [
        (loo.loss_grad(theta + step * e, rows, loss_fn, weights)[0]
         - loo.loss_grad(theta - step * e, rows, loss_fn, weights)[0]) / (2 * step)
        for e in np.eye(3)
    ]  # fmt: skip
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)
    # The loss is the leave-one-out loss at the bandwidths theta stands for.
    h = loo.bandwidth_at(theta)
    assert 0 < h[1] < 2 / 3 and 0 < h[2] < 1
    refit = type(est)(h, **MIXED).fit(X, y)._leave_one_out().predictions([1.0])[0]
    expected = loss_fn(refit[rows], rows)[0].mean()
    assert loss == pytest.approx(expected, rel=1e-10)


def test_grid_selects_the_best_candidate_by_refits():
    X, y = _data(60)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="grid").fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == 40 * 7 * 7 and np.isfinite(scores).all()
    best = search.bandwidth_
    assert search.best_estimator_.bandwidth_ == pytest.approx(best)
    # The best candidate and a few others, scored by explicit refits.
    rng = np.random.default_rng(0)
    for t in [search.best_index_, *rng.choice(len(scores), 3, replace=False)]:
        h = search.cv_results_["params"][t]["bandwidth"]
        P = _refit_loo(lambda h=h: NadarayaWatsonRegressor(h, **MIXED), X, y, range(len(X)))
        assert -np.mean((P - y) ** 2) == pytest.approx(scores[t], rel=1e-6, abs=1e-12)


def test_sgd_reaches_the_grid_loss():
    X, y = _data(120, seed=3)
    grid = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="grid").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sgd = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="sgd",
                                random_state=0, tol=1e-6, max_iter=300).fit(X, y)  # fmt: skip
    assert sgd.best_estimator_.is_categorical_.tolist() == [False, True, True]
    lam = sgd.bandwidth_[1:]
    assert 0 <= lam[0] <= 2 / 3 and 0 <= lam[1] < 1
    assert -sgd.best_score_ <= -grid.best_score_ * 1.01


def test_pandas_categories_and_strings():
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame({
        "x": X[:, 0],
        "colour": pd.Categorical(np.array(["red", "green", "blue"])[X[:, 1].astype(int)]),
        "size": pd.Categorical(X[:, 2].astype(int), categories=[0, 1, 2, 3], ordered=True),
    })  # fmt: skip
    search = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(frame, y)
    est = search.best_estimator_
    assert est.is_categorical_.tolist() == [False, True, True]
    assert est.is_ordered_.tolist() == [False, False, True]
    # The same data as codes, categories declared by hand: the same search (the
    # unordered kernel does not care how the colours are labelled).
    numeric = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED)).fit(X, y)
    np.testing.assert_allclose(search.bandwidth_, numeric.bandwidth_, rtol=1e-12)
    np.testing.assert_allclose(search.predict(frame.iloc[:5]), numeric.predict(X[:5]), rtol=1e-12)
    # A search over user-given candidates, lambdas included.
    candidates = [[0.3, 0.0, 0.2], [0.3, 0.5, 0.2]]
    given = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=candidates).fit(frame, y)
    assert len(given.cv_results_["mean_test_score"]) == 2


def test_out_of_range_candidate_lambda_is_rejected():
    X, y = _data(30)
    with pytest.raises(ValueError, match="categorical feature 1"):
        BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), bandwidths=[[0.3, 0.9, 0.2]]).fit(X, y)


def test_lbfgs_learns_h_and_lambda():
    X, y = _data(120, seed=3)
    grid = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="grid").fit(X, y)
    lbfgs = BandwidthSearchCV(NadarayaWatsonRegressor(**MIXED), method="lbfgs").fit(X, y)
    lam = lbfgs.bandwidth_[1:]
    assert 0 <= lam[0] <= 2 / 3 and 0 <= lam[1] < 1
    assert -lbfgs.best_score_ <= -grid.best_score_ * 1.001
    # best_score_ is the leave-one-out score of the bandwidths returned (by refits).
    P = _refit_loo(lambda: NadarayaWatsonRegressor(lbfgs.bandwidth_, **MIXED), X, y, range(len(X)))
    assert -np.mean((P - y) ** 2) == pytest.approx(lbfgs.best_score_, rel=1e-9)
