"""BandwidthSearchCV and the closed-form leave-one-out against independent references.

References: explicit leave-one-out refits of the estimators, the textbook
leave-one-out formula written here (linear-space kernel sums with the diagonal
removed by index), central finite differences of that formula, and
scikit-learn's own ``GridSearchCV`` and metrics.  Never the code against itself.
"""

import re

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import rankdata
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.metrics import get_scorer, log_loss, mean_absolute_error, mean_squared_error
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut
from sklearn.neighbors import KNeighborsRegressor

from conftest import log_weights as _log  # the short names of the engine calls below
from conftest import (
    naive_loo_predict,
    naive_loo_weights,
    naive_predict,
    naive_rule_of_thumb,
    nearest_weights,
    refit_loo,
    scaled_distances,
)
from conftest import onehot as _onehot
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._engine import loo_loss_grad, loo_pool, prepare_train
from skl_nw._kernels import KERNELS, kernel_names
from skl_nw._search._scoring import _log_loss, _squared_error

NAMES = kernel_names()
COMPACT = [name for name in NAMES if np.isfinite(KERNELS[name].support)]
SMOOTH = [name for name in NAMES if name != "tophat"]


# ---------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------


def _naive_loo_mse(X, y, h, kernel="gaussian"):
    return float(np.mean((naive_loo_predict(X, y, h, kernel) - y) ** 2))


def _loo_data(rng, n=24, k=None):
    """2-D data with a duplicate x of different y, an isolated pair and an isolated point.

    Rows n-4 and n-3 share x far from everything (each is the other's only
    neighbour under a compact kernel: the duplicate must count); row n-2 lies
    far from every other row (the nearest-point fallback).
    """
    X = rng.normal(size=(n, 2))
    X[n - 1] = X[0]  # duplicate of row 0, another y
    X[n - 4] = X[n - 3] = [-9.0, 7.0]
    X[n - 2] = [8.0, 9.0]
    y = rng.normal(size=n if k is None else (n, k))
    w = rng.uniform(0.5, 2.0, n)
    return X, y, w


def _wave(rng, n=200):
    x = np.sort(rng.uniform(0.0, 5.0, n))
    y = 2 * np.sin(x) + x**0.8 + rng.normal(0.0, 0.5, n)
    return x[:, None], y


# ---------------------------------------------------------------------------
# Closed-form leave-one-out equals explicit refits
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fallback", ["nearest", "nan"])
@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("kernel", NAMES)
def test_loo_pool_equals_explicit_refits(rng, kernel, k, fallback):
    X, y, w = _loo_data(rng, k=k)
    h = np.array([0.6, 0.9])
    V = y.reshape(len(y), -1)
    train = prepare_train(X / h, log_w=_log(w), values=V)
    P = loo_pool(train, KERNELS[kernel], np.ones(1), fallback=fallback)[0]
    est = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel, fallback=fallback)
    expected = refit_loo(est, X, y, w).reshape(V.shape)
    assert_allclose(P, expected, rtol=1e-10, atol=1e-10)

    n = len(X)
    if kernel in COMPACT:
        # The duplicate at distance 0 is the only neighbour: it is kept (removal by index).
        assert_allclose(P[n - 4], V[n - 3], rtol=1e-12)
        assert_allclose(P[n - 3], V[n - 4], rtol=1e-12)
        if fallback == "nearest":
            others = np.arange(n) != n - 2
            nearest = nearest_weights(X[others], X[[n - 2]], h, w[others]) @ V[others]
            assert_allclose(P[n - 2], nearest[0], rtol=1e-12)
        else:
            assert np.all(np.isnan(P[n - 2]))
    else:
        # The pair's own duplicate dominates: nearly its y, never its own.
        assert_allclose(P[n - 4], V[n - 3], atol=1e-4)
    if fallback == "nearest":
        assert np.all(np.isfinite(P))


@pytest.mark.parametrize("kernel", NAMES)
def test_loo_pool_classifier_probabilities_equal_explicit_refits(rng, kernel):
    X, _, w = _loo_data(rng)
    n = len(X)
    classes = np.array(["a", "b", "c"])
    y = classes[rng.permutation(np.arange(n) % 3)]  # >= 7 per class: none vanishes in a refit
    y[n - 4], y[n - 3] = "a", "b"  # same x, different labels
    y[n - 1] = "c" if y[0] != "c" else "a"
    h = np.array([0.6, 0.9])
    train = prepare_train(X / h, log_w=_log(w), values=_onehot(y, classes))
    P = loo_pool(train, KERNELS[kernel], [1.0])[0]
    expected = refit_loo(ParzenClassifier(bandwidth=h, kernel=kernel), X, y, w, "predict_proba")
    assert_allclose(P, expected, rtol=1e-10, atol=1e-10)
    assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    if kernel in COMPACT:
        assert_allclose(P[n - 4], [0.0, 1.0, 0.0], atol=1e-15)


@pytest.mark.parametrize("kernel", NAMES)
def test_loo_pool_factors_equal_separate_bandwidths(rng, kernel):
    X = rng.normal(size=(40, 3)) * [1.0, 3.0, 0.5]
    X[5] = X[6]
    V = rng.normal(size=(40, 2))
    w = rng.uniform(0.2, 3.0, 40)
    h = np.array([0.5, 1.5, 0.3])
    factors = np.array([0.25, 0.7, 1.0, 2.3, 9.0])
    together = loo_pool(prepare_train(X / h, log_w=_log(w), values=V), KERNELS[kernel], factors)
    assert together.shape == (len(factors), 40, 2)
    for t, factor in enumerate(factors):
        train = prepare_train(X / (factor * h), log_w=_log(w), values=V)
        alone = loo_pool(train, KERNELS[kernel], [1.0])
        assert_allclose(together[t], alone[0], rtol=1e-10, atol=1e-12)
    # and against the textbook formula where every point has a neighbour
    assert_allclose(
        together[-1], naive_loo_predict(X, V, 9.0 * h, kernel, w), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("k", [None, 2])
@pytest.mark.parametrize("kernel", NAMES)
def test_search_loo_scores_equal_explicit_refits(rng, kernel, k):
    X, y, w = _loo_data(rng, k=k)
    candidates = [0.3, np.array([0.5, 1.2]), 0.9, 2.0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel), bandwidths=candidates).fit(
        X, y, sample_weight=w
    )
    expected = np.array(
        [
            -mean_squared_error(
                y, refit_loo(NadarayaWatsonRegressor(h, kernel=kernel), X, y, w), sample_weight=w
            )
            for h in candidates
        ]
    )
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-10)
    assert search.best_index_ == np.argmax(expected)
    assert_allclose(search.best_score_, expected.max(), rtol=1e-10)
    best = np.broadcast_to(candidates[np.argmax(expected)], (2,))
    assert_allclose(search.bandwidth_, best, rtol=1e-15)


@pytest.mark.parametrize("kernel", NAMES)
def test_search_loo_classifier_scores_equal_explicit_refits(rng, kernel):
    X, _, w = _loo_data(rng)
    n = len(X)
    y = rng.permutation(np.arange(n) % 3)
    y[n - 4], y[n - 3] = 0, 1
    y[n - 1] = (y[0] + 1) % 3  # same x as row 0, another label: not merged
    candidates = [0.3, 0.8, 2.0]
    search = BandwidthSearchCV(ParzenClassifier(kernel=kernel), bandwidths=candidates)
    search.fit(X, y, sample_weight=w)
    expected = []
    for h in candidates:
        proba = refit_loo(ParzenClassifier(h, kernel=kernel), X, y, w, "predict_proba")
        expected.append(-log_loss(y, proba, sample_weight=w, labels=[0, 1, 2]))
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-10)
    assert search.best_index_ == np.argmax(expected)


# ---------------------------------------------------------------------------
# Analytic gradients against finite differences
# ---------------------------------------------------------------------------


def _grad_problem(rng, kernel, task):
    n, d = 30, 3
    X = rng.normal(size=(n, d)) * [1.0, 2.0, 0.5]
    gaps = scaled_distances(X, X, 1.0) + np.eye(n) * 1e9
    assert gaps.min() > 1e-3  # no two points within tiny distance
    w = rng.uniform(0.5, 2.0, n)
    rows = rng.choice(n, 18, replace=False)
    r = rng.uniform(0.5, 2.0, len(rows))
    if task == "regression":
        V = np.column_stack([np.sin(X[:, 0]) + X[:, 1], rng.normal(size=n)])
    else:  # labels that vary smoothly in x, with some overlap
        V = _onehot(np.digitize(X[:, 0] + 0.5 * rng.normal(size=n), [-0.4, 0.4]), [0, 1, 2])
    log_h = np.log([2.5, 5.0, 1.4]) if kernel in COMPACT else np.log([0.8, 1.5, 0.4])
    return X, V, w, rows, r, log_h


def _naive_loss(log_h, X, V, w, kernel, rows, r, task):
    P = naive_loo_weights(X, np.exp(log_h), kernel, w)[rows] @ V
    if task == "regression":
        losses = ((P - V[rows]) ** 2).mean(axis=1)
    else:
        losses = -np.log((P * V[rows]).sum(axis=1))
    return float(r @ losses / r.sum())


def _engine_loss_grad(log_h, X, V, w, kernel, rows, r, task):
    loss_fn = _squared_error(V) if task == "regression" else _log_loss(V)
    train = prepare_train(X / np.exp(log_h), log_w=_log(w), values=V)
    return loo_loss_grad(train, KERNELS[kernel], rows, loss_fn, r)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("kernel", SMOOTH)
def test_loo_gradient_matches_central_differences(rng, kernel, task):
    X, V, w, rows, r, log_h = _grad_problem(rng, kernel, task)
    args = (X, V, w, kernel, rows, r, task)
    # every evaluated row has a neighbour inside the support (the formula is defined)
    # (and, for the log-loss, gives the true class a positive probability)
    A = naive_loo_weights(X, np.exp(log_h), kernel, w)[rows]
    assert np.all(np.isfinite(A))
    if task == "classification":
        assert np.all(((A @ V) * V[rows]).sum(axis=1) > 1e-3)

    loss, grad = _engine_loss_grad(log_h, *args)
    assert_allclose(loss, _naive_loss(log_h, *args), rtol=1e-10)

    eps = 1e-6
    fd = np.empty_like(log_h)
    for j in range(len(log_h)):
        step = np.zeros_like(log_h)
        step[j] = eps
        fd[j] = (_naive_loss(log_h + step, *args) - _naive_loss(log_h - step, *args)) / (2 * eps)
    assert np.all(np.abs(fd) > 1e-6)  # a non-trivial check
    assert_allclose(grad, fd, rtol=1e-6, atol=1e-9 * np.abs(fd).max())


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_tophat_gradient_is_exactly_zero(rng, task):
    X, V, w, rows, r, log_h = _grad_problem(rng, "tophat", task)
    args = (X, V, w, "tophat", rows, r, task)
    loss, grad = _engine_loss_grad(log_h, *args)
    assert_allclose(loss, _naive_loss(log_h, *args), rtol=1e-10)
    assert np.all(grad == 0.0)
    for j in range(len(log_h)):  # piecewise constant: no change under a small step
        step = np.zeros_like(log_h)
        step[j] = 1e-6
        assert _naive_loss(log_h + step, *args) == _naive_loss(log_h - step, *args)


# ---------------------------------------------------------------------------
# Grid search on the closed-form path
# ---------------------------------------------------------------------------


def test_grid_loo_equals_gridsearchcv_with_leave_one_out(rng):
    X = rng.uniform(0, 4, size=(30, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=30)
    candidates = [0.1, 0.25, 0.5, 1.0, 3.0]
    for scoring in ["neg_mean_squared_error", "neg_mean_absolute_error"]:
        ours = BandwidthSearchCV(
            NadarayaWatsonRegressor(), bandwidths=candidates, scoring=scoring
        ).fit(X, y)
        ref = GridSearchCV(
            NadarayaWatsonRegressor(), {"bandwidth": candidates}, scoring=scoring, cv=LeaveOneOut()
        ).fit(X, y)
        assert_allclose(
            ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], rtol=1e-10
        )
        assert_array_equal(ours.cv_results_["rank_test_score"], ref.cv_results_["rank_test_score"])
        assert ours.best_index_ == ref.best_index_
        assert_allclose(ours.best_score_, ref.best_score_, rtol=1e-10)


def test_grid_loo_rank_ties_follow_gridsearchcv(rng):
    # Two equal candidates score equally; GridSearchCV ranks ties with method="min".
    X = rng.uniform(0, 4, size=(30, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=30)
    candidates = [0.1, 0.5, 0.5, 2.0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=candidates).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] == scores[2]
    expected = rankdata(-scores, method="min").astype(np.int32)
    assert_array_equal(search.cv_results_["rank_test_score"], expected)
    assert search.best_index_ == int(np.argmin(expected))


def test_cv_results_keys_and_best_candidate(rng):
    X = rng.uniform(0, 4, size=(40, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=40)
    candidates = [0.05, 0.2, 0.4, 0.8, 1.6, 6.0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=candidates).fit(X, y)
    res = search.cv_results_
    assert {"params", "param_bandwidth", "mean_test_score", "rank_test_score"} <= set(res)
    for key in ("params", "param_bandwidth", "mean_test_score", "rank_test_score"):
        assert len(res[key]) == len(candidates)
    by_hand = np.array([-_naive_loo_mse(X, y, h) for h in candidates])
    assert_allclose(res["mean_test_score"], by_hand, rtol=1e-10)
    best = int(np.argmax(by_hand))
    assert 0 < best < len(candidates) - 1  # interior: the test can fail
    assert search.best_index_ == best
    assert_allclose(search.best_params_["bandwidth"], [candidates[best]] * 2)
    assert_allclose(res["params"][best]["bandwidth"], [candidates[best]] * 2)
    assert_allclose(res["param_bandwidth"][3], [0.8, 0.8])
    assert res["rank_test_score"][best] == 1
    assert search.n_iter_ == len(candidates)


def test_scoring_applies_to_the_closed_form_path(rng):
    X = rng.uniform(0, 4, size=(40, 1))
    y = np.sin(2 * X[:, 0]) + rng.standard_t(2, size=40) * 0.3  # heavy tails: MAE != MSE
    candidates = np.geomspace(0.03, 3.0, 15)
    mae = np.array([mean_absolute_error(y, naive_loo_predict(X, y, h)) for h in candidates])
    search = BandwidthSearchCV(
        NadarayaWatsonRegressor(), bandwidths=candidates, scoring="neg_mean_absolute_error"
    ).fit(X, y)
    assert_allclose(search.cv_results_["mean_test_score"], -mae, rtol=1e-10)
    assert search.best_index_ == np.argmin(mae)
    assert_allclose(search.bandwidth_, [candidates[np.argmin(mae)]], rtol=1e-15)

    # a callable scorer too, and the classifier with accuracy
    yc = (y > np.median(y)).astype(int)
    clf = BandwidthSearchCV(ParzenClassifier(), bandwidths=candidates, scoring="accuracy")
    clf.fit(X, yc)
    acc = [np.mean(refit_loo(ParzenClassifier(h), X, yc) == yc) for h in candidates]
    assert_allclose(clf.cv_results_["mean_test_score"], acc, rtol=1e-12)


@pytest.mark.parametrize("rule", ["scott", "silverman", 0.7])
def test_default_grid_is_multiples_of_the_rule_of_thumb(rng, rule):
    X = rng.normal(size=(60, 2)) * [1.0, 50.0]
    y = np.sin(X[:, 0]) + X[:, 1] / 50 + 0.2 * rng.normal(size=60)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(bandwidth=rule)).fit(X, y)
    H = np.array([p["bandwidth"] for p in search.cv_results_["params"]])
    assert H.shape[1] == 2 and len(H) >= 10
    ratio = H / naive_rule_of_thumb(X, rule if isinstance(rule, str) else "scott")
    assert_allclose(ratio[:, 0], ratio[:, 1], rtol=1e-10)  # one multiple for all features
    steps = np.diff(np.log(ratio[:, 0]))
    assert np.all(steps > 0)
    assert_allclose(steps, steps[0], rtol=1e-8)  # log-spaced
    assert ratio[0, 0] < 0.2 and ratio[-1, 0] > 5  # brackets the rule of thumb widely
    assert_allclose(-search.best_score_, _naive_loo_mse(X, y, search.bandwidth_), rtol=1e-10)


def test_per_feature_candidate_arrays(rng):
    X = rng.uniform(0, 4, size=(30, 2))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=30)  # feature 1 is noise
    candidates = [np.array([0.3, 0.3]), np.array([0.3, 5.0]), np.array([5.0, 0.3]), 1.0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=candidates).fit(X, y)
    by_refit = [
        -mean_squared_error(y, refit_loo(NadarayaWatsonRegressor(h), X, y)) for h in candidates
    ]
    assert_allclose(search.cv_results_["mean_test_score"], by_refit, rtol=1e-10)
    assert search.best_index_ == int(np.argmax(by_refit)) == 1
    assert_allclose(search.bandwidth_, [0.3, 5.0])
    assert_allclose(search.best_estimator_.bandwidth_, [0.3, 5.0])


# ---------------------------------------------------------------------------
# Other cv: exactly GridSearchCV
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("est", "cv", "scoring", "weighted"),
    [
        (NadarayaWatsonRegressor(), 5, None, False),
        (NadarayaWatsonRegressor(kernel="epanechnikov"), KFold(4, shuffle=True, random_state=0),
         None, True),
        (NadarayaWatsonRegressor(), 3, "r2", False),
        (ParzenClassifier(), 3, None, False),
        (ParzenClassifier(kernel="cosine"), KFold(5, shuffle=True, random_state=1), "accuracy",
         True),
    ],
)  # fmt: skip
def test_other_cv_equals_sklearn_gridsearchcv(rng, est, cv, scoring, weighted):
    X = rng.uniform(0, 4, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=60)
    if is_classifier(est):
        y = (y > 0).astype(int)
    w = rng.uniform(0.5, 2.0, 60) if weighted else None
    candidates = [0.2, 0.5, 1.0, 2.5]
    default = "neg_log_loss" if is_classifier(est) else "neg_mean_squared_error"
    ours = BandwidthSearchCV(est, bandwidths=candidates, cv=cv, scoring=scoring)
    ours.fit(X, y, sample_weight=w)
    if w is None:
        ref = GridSearchCV(est, {"bandwidth": candidates}, cv=cv, scoring=scoring or default)
        ref.fit(X, y)
    else:  # fits and fold scores weighted, as the search weights them (routing or not)
        with sklearn.config_context(enable_metadata_routing=True):
            requested = clone(est).set_fit_request(sample_weight=True)
            scorer = get_scorer(scoring or default).set_score_request(sample_weight=True)
            ref = GridSearchCV(requested, {"bandwidth": candidates}, cv=cv, scoring=scorer)
            ref.fit(X, y, sample_weight=w)
    assert_allclose(
        ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], rtol=1e-12
    )
    assert_array_equal(ours.cv_results_["rank_test_score"], ref.cv_results_["rank_test_score"])
    assert ours.best_index_ == ref.best_index_
    assert_allclose(ours.best_params_["bandwidth"], ref.best_params_["bandwidth"])
    assert_allclose(ours.bandwidth_, [ref.best_params_["bandwidth"]] * 2)
    Q = rng.uniform(0, 4, size=(10, 2))
    assert_allclose(ours.predict(Q), ref.predict(Q), rtol=1e-12)


# ---------------------------------------------------------------------------
# SGD
# ---------------------------------------------------------------------------


def test_sgd_is_reproducible_and_records_its_epochs(rng, capsys):
    X = rng.uniform(0, 4, size=(80, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=80)
    params = {"method": "sgd", "batch_size": 16, "max_iter": 15, "tol": None}
    a = BandwidthSearchCV(NadarayaWatsonRegressor(), random_state=3, **params).fit(X, y)
    b = BandwidthSearchCV(NadarayaWatsonRegressor(), random_state=3, **params).fit(X, y)
    c = BandwidthSearchCV(NadarayaWatsonRegressor(), random_state=4, **params).fit(X, y)
    assert_array_equal(a.bandwidth_, b.bandwidth_)
    assert a.loss_curve_ == b.loss_curve_
    assert not np.array_equal(a.bandwidth_, c.bandwidth_)  # the seed matters
    assert len(a.loss_curve_) == a.n_iter_ == 15
    assert capsys.readouterr().out == ""

    v = BandwidthSearchCV(NadarayaWatsonRegressor(), random_state=3, verbose=2, **params)
    v.fit(X, y)
    lines = re.findall(r"^.*\bepoch \d+:.*$", capsys.readouterr().out, re.MULTILINE)
    assert len(lines) == v.n_iter_
    for epoch, (line, loss) in enumerate(zip(lines, v.loss_curve_, strict=True), start=1):
        assert re.search(rf"\b{epoch}\b", line)
        value = re.search(r"loss\D*?([-+]?\d[\d.]*(?:e[-+]?\d+)?)", line, re.IGNORECASE)
        assert value is not None
        assert_allclose(float(value.group(1)), loss, rtol=1e-5)
    assert_array_equal(v.bandwidth_, a.bandwidth_)  # printing changes nothing


def test_sgd_early_stopping(rng):
    X = rng.uniform(0, 4, size=(60, 1))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=60)
    search = BandwidthSearchCV(
        NadarayaWatsonRegressor(), method="sgd", max_iter=500, tol=1e-4, random_state=0
    ).fit(X, y)
    assert search.n_iter_ < 500
    assert len(search.loss_curve_) == search.n_iter_
    assert search.loss_curve_[-1] < search.loss_curve_[0]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sgd_keeps_the_iterate_of_its_lowest_loss():
    # A compact kernel's local fits: Adam leaves the valley in one epoch (0.21 to 120)
    # and stalls there; the search returned that last iterate.  It now returns the
    # start of the epoch of the lowest loss, scored on every row (one minibatch an
    # epoch here: that epoch's loss), checked against refits leaving each row out.
    rng = np.random.default_rng(6)
    X = rng.uniform(0, 1, (60, 2))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.3, 60)
    search = BandwidthSearchCV(LocalPolynomialRegressor(kernel="biweight"), method="sgd",
                               random_state=0).fit(X, y)  # fmt: skip
    assert max(search.loss_curve_) > 100 * min(search.loss_curve_)  # it did leave the valley
    assert -search.best_score_ == pytest.approx(min(search.loss_curve_), rel=1e-10)
    errors = [y[i] - LocalPolynomialRegressor(search.bandwidth_, kernel="biweight")
              .fit(np.delete(X, i, 0), np.delete(y, i)).predict(X[i : i + 1])[0]
              for i in range(60)]  # fmt: skip
    assert -search.best_score_ == pytest.approx(np.mean(np.square(errors)), rel=1e-9)


def test_sgd_and_grid_reach_the_brute_force_optimum(rng):
    X, y = _wave(rng)
    scan = np.geomspace(0.03, 3.0, 400)
    loo = np.array([_naive_loo_mse(X, y, h) for h in scan])
    best = int(np.argmin(loo))
    assert 0 < best < len(scan) - 1
    optimum = loo[best]

    sgd = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0).fit(X, y)
    sgd_mse = _naive_loo_mse(X, y, sgd.bandwidth_)
    assert sgd_mse <= 1.05 * optimum
    assert_allclose(-sgd.best_score_, sgd_mse, rtol=1e-10)
    assert sgd.loss_curve_[-1] < sgd.loss_curve_[0]

    grid = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    grid_mse = _naive_loo_mse(X, y, grid.bandwidth_)
    assert grid_mse <= 1.02 * optimum
    assert_allclose(-grid.best_score_, grid_mse, rtol=1e-10)


def test_lbfgs_reaches_the_brute_force_optimum(rng):
    X, y = _wave(rng)
    scan = np.geomspace(0.03, 3.0, 400)
    optimum = min(_naive_loo_mse(X, y, h) for h in scan)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y)
    mse = _naive_loo_mse(X, y, search.bandwidth_)
    assert mse <= 1.001 * optimum
    assert_allclose(-search.best_score_, mse, rtol=1e-10)
    assert len(search.loss_curve_) == search.n_iter_
    assert search.loss_curve_[-1] < search.loss_curve_[0]
    with pytest.warns(ConvergenceWarning, match="method='lbfgs'"):
        BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs", max_iter=1).fit(X, y)


def test_lbfgs_classifier_and_shared_scale(rng):
    X = rng.normal(size=(80, 2))
    y = (X[:, 0] > 0).astype(int)
    search = BandwidthSearchCV(ParzenClassifier(), method="lbfgs").fit(X, y)
    assert np.isfinite(search.best_score_)
    shared = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs", per_feature=False)
    shared.fit(X, X[:, 0] ** 2)
    base = naive_rule_of_thumb(X)
    ratio = shared.bandwidth_ / base
    assert_allclose(ratio, ratio[0], rtol=1e-12)


def test_sgd_classifier_best_score_is_the_loo_log_loss(rng):
    X = rng.normal(size=(45, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=45) > 0).astype(int)
    search = BandwidthSearchCV(ParzenClassifier(), method="sgd", max_iter=40, random_state=0).fit(
        X, y
    )
    assert search.bandwidth_.shape == (2,)
    proba = refit_loo(ParzenClassifier(search.bandwidth_), X, y, method="predict_proba")
    assert_allclose(-search.best_score_, log_loss(y, proba), rtol=1e-10)
    start = refit_loo(ParzenClassifier(), X, y, method="predict_proba")
    assert log_loss(y, proba) < log_loss(y, start)  # improved on the rule of thumb


def test_sgd_gives_a_noise_feature_a_large_bandwidth(rng):
    n = 200
    X = rng.uniform(0, 5, size=(n, 2))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] ** 0.8 + rng.normal(0, 0.5, n)  # feature 1 is noise
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0)
    search.fit(X, y)
    assert search.bandwidth_[1] >= 3 * search.bandwidth_[0]
    assert_allclose(search.bandwidth_, search.best_estimator_.bandwidth_)


def test_sgd_shared_scale_is_a_multiple_of_the_rule_of_thumb(rng):
    n = 120
    X = rng.uniform(0, 5, size=(n, 2)) * [1.0, 40.0]
    y = np.sin(X[:, 0]) + np.cos(X[:, 1] / 40) + 0.3 * rng.normal(size=n)
    search = BandwidthSearchCV(
        NadarayaWatsonRegressor(), method="sgd", per_feature=False, random_state=0
    ).fit(X, y)
    rot = naive_rule_of_thumb(X)
    ratio = search.bandwidth_ / rot
    assert_allclose(ratio[0], ratio[1], rtol=1e-10)
    assert not np.isclose(ratio[0], 1.0)  # it moved
    assert _naive_loo_mse(X, y, search.bandwidth_) < _naive_loo_mse(X, y, rot)


# ---------------------------------------------------------------------------
# The textbook pitfall
# ---------------------------------------------------------------------------


def test_training_loss_drives_h_to_zero_while_loo_does_not(rng):
    X, y = _wave(rng, n=100)
    hs = np.geomspace(0.02, 3.0, 40)
    train_mse = np.array([mean_squared_error(y, naive_predict(X, y, X, h)) for h in hs])
    loo_mse = np.array([_naive_loo_mse(X, y, h) for h in hs])
    assert np.argmin(train_mse) == 0  # the smallest h wins
    assert np.all(np.diff(train_mse) > 0)  # every step down in h lowers the training loss
    assert train_mse[0] < 0.5 * loo_mse.min()
    # ... and it tends to 0: each point ends up predicting its own y
    assert mean_squared_error(y, naive_predict(X, y, X, 1e-5)) < 1e-20
    best = int(np.argmin(loo_mse))
    assert 5 < best < len(hs) - 5  # an interior minimum
    assert loo_mse[0] > 1.3 * loo_mse[best]

    # the same through the search: scoring on the training rows picks the smallest h
    everything = np.arange(len(X))
    on_train = BandwidthSearchCV(
        NadarayaWatsonRegressor(), bandwidths=hs, cv=[(everything, everything)]
    ).fit(X, y)
    assert on_train.best_index_ == 0
    loo = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=hs).fit(X, y)
    assert loo.best_index_ == best


# ---------------------------------------------------------------------------
# Frequency weights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["grid", "sgd"])
@pytest.mark.parametrize("est", [NadarayaWatsonRegressor(), ParzenClassifier()], ids=repr)
def test_integer_weights_equal_repeated_rows(rng, method, est):
    n = 40
    X = rng.uniform(0, 4, size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)
    if is_classifier(est):
        y = (y > 0).astype(int)
    counts = rng.integers(1, 4, n)
    counts[:3] = [0, 3, 2]
    shuffle = rng.permutation(counts.sum())
    rows = np.repeat(np.arange(n), counts)[shuffle]
    params = {"method": method, "random_state": 0, "max_iter": 30, "tol": None}
    weighted = BandwidthSearchCV(est, **params).fit(X, y, sample_weight=counts)
    repeated = BandwidthSearchCV(est, **params).fit(X[rows], y[rows])
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-12)
    assert_allclose(weighted.best_score_, repeated.best_score_, rtol=1e-10)
    Q = rng.uniform(0, 4, size=(15, 2))
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-10, atol=1e-12)
    if is_classifier(est):
        assert_allclose(
            weighted.predict_proba(Q), repeated.predict_proba(Q), rtol=1e-10, atol=1e-12
        )

    # identical rows are left out together: leave-one-location-out by explicit refits
    if method == "grid":
        keep = counts > 0
        for t in (0, weighted.best_index_, len(weighted.cv_results_["params"]) - 1):
            h = weighted.cv_results_["params"][t]["bandwidth"]
            est_h = clone(est).set_params(bandwidth=h)
            if is_classifier(est):
                P = refit_loo(est_h, X[rows], y[rows], groups=rows, method="predict_proba")
                expected = -log_loss(y[rows], P, labels=[0, 1])
            else:
                P = refit_loo(est_h, X[rows], y[rows], groups=rows)
                expected = -mean_squared_error(y[rows], P)
            assert_allclose(repeated.cv_results_["mean_test_score"][t], expected, rtol=1e-10)
            assert_allclose(weighted.cv_results_["mean_test_score"][t], expected, rtol=1e-10)
        assert keep.sum() < n  # a zero weight was dropped


def test_duplicate_x_with_different_y_is_not_merged(rng):
    # Same x, different y: two observations, each counts in the other's prediction.
    X = np.array([[0.0], [0.0], [2.0], [6.0]])
    y = np.array([1.0, 2.0, 5.0, 9.0])
    search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel="tophat"), bandwidths=[0.5]).fit(X, y)
    # LOO by index: 0 -> 2, 1 -> 1, 2 -> nearest (0 and 0: mean 1.5), 3 -> 5
    expected = -np.mean((np.array([2.0, 1.0, 1.5, 5.0]) - y) ** 2)
    assert_allclose(search.best_score_, expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# Delegation and tags
# ---------------------------------------------------------------------------


def test_delegation_regressor(rng):
    X = rng.uniform(0, 4, size=(40, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=40)
    search = BandwidthSearchCV(NadarayaWatsonRegressor())
    assert is_regressor(search) and not is_classifier(search)
    assert not hasattr(search, "predict_proba")
    assert not hasattr(search, "predict_log_proba")
    search.fit(X, y)
    assert not hasattr(search, "predict_proba")
    assert not hasattr(search, "predict_log_proba")
    assert is_regressor(search)
    assert_array_equal(search.bandwidth_, search.best_estimator_.bandwidth_)
    assert isinstance(search.bandwidth_, np.ndarray) and search.bandwidth_.shape == (2,)
    Q = rng.uniform(0, 4, size=(10, 2))
    ref = NadarayaWatsonRegressor(bandwidth=search.bandwidth_).fit(X, y)
    assert_allclose(search.predict(Q), ref.predict(Q), rtol=1e-12)
    yq = np.sin(2 * Q[:, 0])
    assert search.score(Q, yq) == search.best_estimator_.score(Q, yq)
    assert_allclose(search.score(Q, yq), ref.score(Q, yq), rtol=1e-12)


def test_delegation_classifier(rng):
    X = rng.normal(size=(45, 2))
    y = np.array(["x", "y", "z"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 1)]
    search = BandwidthSearchCV(ParzenClassifier())
    assert is_classifier(search) and not is_regressor(search)
    assert hasattr(search, "predict_proba") and hasattr(search, "predict_log_proba")
    search.fit(X, y)
    assert hasattr(search, "predict_proba") and hasattr(search, "predict_log_proba")
    assert_array_equal(search.classes_, ["x", "y", "z"])
    assert_array_equal(search.bandwidth_, search.best_estimator_.bandwidth_)
    Q = rng.normal(size=(10, 2))
    ref = ParzenClassifier(bandwidth=search.bandwidth_).fit(X, y)
    assert_allclose(search.predict_proba(Q), ref.predict_proba(Q), rtol=1e-12)
    assert_allclose(search.predict_log_proba(Q), ref.predict_log_proba(Q), rtol=1e-12)
    assert_array_equal(search.predict(Q), ref.predict(Q))
    yq = ref.predict(Q)
    yq[0] = "x" if yq[0] != "x" else "y"
    assert search.score(Q, yq) == search.best_estimator_.score(Q, yq) == 0.9


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("est", [KNeighborsRegressor(), LinearRegression()], ids=repr)
def test_non_nw_estimator_raises(rng, est):
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    with pytest.raises(ValueError, match="estimator"):
        BandwidthSearchCV(est).fit(X, y)


@pytest.mark.parametrize("cv", ["loo", 3])
@pytest.mark.parametrize(
    "bandwidths",
    [[-0.5], [0.5, 0.0], [np.array([0.5, 0.5, 0.5])], [np.ones((2, 2))], ["a"], "scott",
     [np.nan], [np.inf], [np.array([0.5, -1.0])], []],
    ids=repr,
)  # fmt: skip
def test_bad_bandwidths_raise(rng, bandwidths, cv):
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    with pytest.raises(ValueError, match="bandwidths"):
        BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=bandwidths, cv=cv).fit(X, y)


def test_unknown_method_raises(rng):
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    with pytest.raises(ValueError, match="method"):
        BandwidthSearchCV(NadarayaWatsonRegressor(), method="newton").fit(X, y)


@pytest.mark.parametrize("method", ["grid", "sgd"])
@pytest.mark.parametrize("est", [NadarayaWatsonRegressor(), ParzenClassifier()], ids=repr)
def test_one_sample_raises(method, est):
    with pytest.raises(ValueError):
        BandwidthSearchCV(est, method=method).fit([[1.0, 2.0]], [1])
    # two copies of one row are one location: nothing to leave out against either
    with pytest.raises(ValueError):
        BandwidthSearchCV(est, method=method).fit([[1.0, 2.0]] * 2, [1, 1])
