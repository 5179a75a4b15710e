"""LOESS: nearest-neighbour spans, robustness iterations, span selection.

References: statsmodels' ``lowess`` (the fitted values at the training rows),
dense formulas written here (each query's radius from a full sort of its
distances, weights ``w_i K(d_i / r_q)``, one ``lstsq`` per query), explicit
refits for the leave-one-out, the backends against each other, and the
``fastloess`` package (two features, degree 2) where it is installed.  R's
``loess`` is compared in ``test_loess_r.py``.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import PROFILES
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)

TREES = ["brute", "kd_tree", "ball_tree"]


def radii(X, Q, h, k, enlarge=1.0, exclude=None):
    """Distance from each query to its k-th nearest row (full sort), times ``enlarge``."""
    D = np.sqrt((((Q[:, None, :] - X[None, :, :]) / h) ** 2).sum(-1))
    if exclude is not None:
        D[np.arange(len(Q)), exclude] = np.inf
    return np.sort(D, axis=1)[:, k - 1] * enlarge, D


def dense_local(X, y, Q, h, k, kernel="tricube", degree=1, w=None, enlarge=1.0, exclude=None):
    """Local polynomial fits (degree 0 or 1) with per-query radii: values and slopes."""
    r, D = radii(X, Q, h, k, enlarge, exclude)
    W = PROFILES[kernel](D / r[:, None]) * (np.ones(len(X)) if w is None else w)
    if exclude is not None:
        W[np.arange(len(Q)), exclude] = 0.0
    fits, slopes = [], []
    for q, wq in zip(Q, W, strict=True):
        Phi = np.ones((len(X), 1)) if degree == 0 else np.column_stack([np.ones(len(X)), X - q])
        root = np.sqrt(wq)[:, None]
        coef = np.linalg.lstsq(Phi * root, y * root[:, 0], rcond=None)[0]
        fits.append(coef[0])
        slopes.append(coef[1:])
    return np.array(fits), np.array(slopes)


def _series(rng, n=120, outliers=True):
    x = np.sort(rng.uniform(0, 10, n))
    y = np.sin(x) + 0.3 * rng.normal(size=n)
    if outliers:
        y[::11] += 4.0
    return x, y


# ------------------------------------------------------------------ statsmodels
@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("frac, it", [(0.2, 0), (0.3, 3), (0.5, 1), (2 / 3, 3)])
def test_statsmodels_lowess_at_the_training_rows(rng, algorithm, frac, it):
    smoothers = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")
    x, y = _series(rng)
    perm = rng.permutation(len(x))  # any row order: the fit does not sort
    x, y = x[perm], y[perm]
    want = smoothers.lowess(y, x, frac=frac, it=it, delta=0.0, return_sorted=False)
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=1, span=frac,
                                   robust_iterations=it, algorithm=algorithm)  # fmt: skip
    got = reg.fit(x[:, None], y).predict(x[:, None])
    assert np.abs(got - want).max() <= 1e-7 * np.ptp(y)
    assert reg.n_neighbors_ == int(frac * len(x) + 1e-10)


def test_robust_weights_are_the_bisquare_of_the_previous_fit(rng):
    smoothers = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")
    x, y = _series(rng)
    previous = smoothers.lowess(y, x, frac=0.3, it=1, delta=0.0, return_sorted=False)
    e = y - previous
    u = e / (6 * np.median(np.abs(e)))
    want = np.where(np.abs(u) < 1, (1 - u**2) ** 2, 0.0)
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.3, robust_iterations=2)
    assert_allclose(reg.fit(x[:, None], y).robust_weights_, want, atol=1e-9)
    assert (reg.robust_weights_[::11] < 0.5).all()  # the outliers are down-weighted
    plain = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.3).fit(x[:, None], y)
    assert_allclose(plain.robust_weights_, 1.0)


def test_zero_median_residual_stops_the_iterations(rng):
    # Constant targets but one: every neighbourhood without the outlier fits exactly, s = 0
    # after the first fit, and the iterations stop with the weights of that fit (all ones).
    x = rng.uniform(size=(30, 1))
    y = np.ones(30)
    y[5] = 10.0
    reg = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.2, robust_iterations=3)
    plain = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.2).fit(x, y)
    assert np.median(np.abs(plain.predict(x) - y)) == 0.0
    assert_allclose(reg.fit(x, y).robust_weights_, 1.0)
    assert_allclose(reg.predict(x), plain.predict(x))


@pytest.mark.parametrize("offset", [1.7, 1e6])
def test_residuals_at_rounding_level_stop_the_iterations(offset):
    # An exact line: the residuals of the first fit are rounding (~1e-15 of |y|), not 0.
    # Their median gave bisquare weights of noise, 6 of 30 of them 0, and fits 0.15 off
    # the line; R's loess and statsmodels' lowess reproduce the line.
    x = np.linspace(0, 10, 30) ** 1.5 / 10**0.5  # uneven, no ties
    y = 0.3 * x + offset
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.2, robust_iterations=3)
    reg.fit(x[:, None], y)
    assert_allclose(reg.robust_weights_, 1.0)
    assert_allclose(reg.predict(x[:, None]), y, rtol=1e-12)
    flat = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.2, robust_iterations=3)
    assert_allclose(flat.fit(x[:, None], np.full(30, offset)).robust_weights_, 1.0)


def test_rows_without_a_fit_keep_the_iterations_going(rng):
    # fallback="nan" leaves rows in an empty neighbourhood without a fit: their NaN
    # residuals made the median NaN, which ended the iterations after the first.  They
    # keep their last weight; the others take the bisquare of the finite residuals.
    x = np.sort(rng.uniform(0, 10, 100))
    y = np.sin(x) + 0.1 * rng.normal(size=100)
    y[40:47] += 20
    y[::13] += 8
    params = {"bandwidth": 1.0, "kernel": "tricube", "span": 0.05, "fallback": "nan"}
    first = LocalPolynomialRegressor(**params, robust_iterations=1).fit(x[:, None], y)
    e = y - first.predict(x[:, None])
    fitted = np.isfinite(e)
    assert not fitted.all()
    u = e[fitted] / (6 * np.median(np.abs(e[fitted])))
    want = first.robust_weights_.copy()  # what the rows without a fit keep
    want[fitted] = np.where(np.abs(u) < 1, (1 - u**2) ** 2, 0.0)
    second = LocalPolynomialRegressor(**params, robust_iterations=2).fit(x[:, None], y)
    assert_allclose(second.robust_weights_, want, atol=1e-12)


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor,
                                  ParzenClassifier])  # fmt: skip
def test_span_with_categorical_features_only_is_refused(rng, make):
    X = rng.integers(0, 3, size=(50, 1)).astype(float)
    y = (X[:, 0] > 0).astype(int)
    est = make(np.array([0.3]), kernel="tricube", span=0.5, categorical_features=[0])
    with pytest.raises(ValueError, match="span needs a continuous feature"):
        est.fit(X, y)


# ------------------------------------------------------------------ dense oracle
@pytest.mark.parametrize("kernel", ["tricube", "epanechnikov", "gaussian", "triweight"])
@pytest.mark.parametrize("algorithm", TREES)
def test_two_features_against_the_dense_formula(rng, kernel, algorithm):
    X = rng.normal(size=(80, 2))
    y = X[:, 0] ** 2 + X[:, 1] + 0.1 * rng.normal(size=80)
    Q = rng.normal(size=(15, 2))
    h = np.array([0.5, 2.0])  # the metric's shape
    w = rng.uniform(0.5, 2.0, 80)
    for degree, cls in [(0, NadarayaWatsonRegressor), (1, LocalPolynomialRegressor)]:
        params = {"kernel": kernel, "span": 0.3, "algorithm": algorithm}
        if degree:
            params["degree"] = 1
        reg = cls(h, **params).fit(X, y, sample_weight=w)
        fit, slope = dense_local(X, y, Q, h, 24, kernel, degree, w)
        assert_allclose(reg.predict(Q), fit, rtol=1e-9, atol=1e-9)
        if degree:
            assert_allclose(reg.predict_gradient(Q), slope, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("d", [3, 5])
@pytest.mark.parametrize("kernel", ["gaussian", "tricube"])
@pytest.mark.parametrize("algorithm", TREES)
def test_queries_on_and_beside_repeated_rows_in_several_dimensions(rng, d, kernel, algorithm):
    # Each point measured 6 times, k = 3: a query on a point has r = 0 and keeps only
    # its rows; one 1e-7 beside it has them all at r ~ 1e-7 (a compact kernel's weight
    # 0 there: the nearest rows, the same mean). The GEMM's distances were off by
    # ~1e-15, which r^2 turned into NaN (36 of 300) or weights off by O(1).
    base = rng.normal(0, 1, (50, d)) * 3.7 + 1.3
    X = np.repeat(base, 6, axis=0)
    y = X.sum(axis=1) + rng.normal(0, 0.1, len(X))
    Q = base[:12] + rng.normal(0, 1e-7, (12, d))
    h = np.ones(d)
    means = y[:72].reshape(12, 6).mean(axis=1)
    for cls in (NadarayaWatsonRegressor, LocalPolynomialRegressor):
        reg = cls(kernel=kernel, span=0.01, algorithm=algorithm).fit(X, y)
        assert_allclose(reg.predict(base[:12]), means, rtol=1e-12)
    reg = NadarayaWatsonRegressor(kernel=kernel, span=0.01, algorithm=algorithm).fit(X, y)
    want = dense_local(X, y, Q, h, 3, kernel, 0)[0] if kernel == "gaussian" else means
    assert_allclose(reg.predict(Q), want, rtol=1e-9)


def test_span_above_one_enlarges_the_farthest_distance(rng):
    X = rng.uniform(size=(40, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1]
    Q = rng.uniform(size=(10, 2))
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", span=2.25).fit(X, y)
    assert reg.n_neighbors_ == 40
    fit, _ = dense_local(X, y, Q, 1.0, 40, "tricube", 1, enlarge=1.5)
    assert_allclose(reg.predict(Q), fit, rtol=1e-9, atol=1e-12)


def test_attention_rows_are_the_normalised_dense_weights(rng):
    X = rng.normal(size=(50, 2))
    Q = rng.normal(size=(6, 2))
    reg = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.2).fit(X, X[:, 0])
    r, D = radii(X, Q, 1.0, 10)
    W = PROFILES["tricube"](D / r[:, None])
    assert_allclose(reg.attention_weights(Q), W / W.sum(1, keepdims=True), atol=1e-12)
    # A query on top of k or more rows (r = 0) keeps only those rows.
    X1 = np.repeat([[0.0], [1.0], [3.0]], [5, 1, 1], axis=0)
    at = NadarayaWatsonRegressor(1.0, span=0.5).fit(X1, np.arange(7.0))
    assert_allclose(at.predict([[0.0]]), [2.0])


def test_parzen_probabilities_against_the_dense_formula(rng):
    X = rng.normal(size=(60, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=60) > 0, "b", "a")
    Q = rng.normal(size=(12, 2))
    for algorithm in TREES:
        clf = ParzenClassifier(1.0, kernel="biweight", span=0.25, algorithm=algorithm).fit(X, y)
        r, D = radii(X, Q, 1.0, 15)
        W = PROFILES["biweight"](D / r[:, None])
        want = np.column_stack([W[:, y == c].sum(1) for c in ("a", "b")]) / W.sum(1)[:, None]
        assert_allclose(clf.predict_proba(Q), want, atol=1e-12)
        assert clf.n_neighbors_ == 15


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("d", [1, 2])
def test_parzen_densities_take_each_query_s_radius(rng, d, algorithm):
    """With a span the kernel at q has widths h r_q: the balloon estimator of the neighbours.

    So a common multiple of the bandwidths changes no density either.
    """
    X = rng.normal(size=(80, d))
    y = np.where(X[:, 0] > 0, "b", "a")
    Q = rng.normal(size=(9, d)) * 1.5
    h, k = np.array([0.7, 1.9][:d]), 20
    r, D = radii(X, Q, h, k)
    K = PROFILES["gaussian"](D / r[:, None]) * (2 * np.pi) ** (-d / 2)
    unit = np.prod(h) * r[:, None] ** d
    want = np.column_stack([K[:, y == c].mean(1) for c in ("a", "b")]) / unit
    for scale in (1.0, 1e-120, 3e90):
        clf = ParzenClassifier(h * scale, span=k / 80, algorithm=algorithm).fit(X, y)
        assert_allclose(np.exp(clf.score_class_samples(Q)), want, rtol=1e-10)
        assert_allclose(np.exp(clf.score_samples(Q)), K.mean(1) / unit[:, 0], rtol=1e-10)
    # On k rows of one class the radius is 0: that class's density is +inf, the other's 0.
    X[:k], y[:k] = X[0], "a"
    clf = ParzenClassifier(h, span=k / 80, algorithm=algorithm).fit(X, y)
    assert clf.score_class_samples(X[:1])[0].tolist() == [np.inf, -np.inf]


# ------------------------------------------------------------------ backends, LOO
def test_trees_equal_brute_force_everywhere(rng):
    X = rng.normal(size=(90, 2))
    y = np.cos(X[:, 0]) + 0.2 * rng.normal(size=90)
    Q = rng.normal(size=(20, 2))
    fits = {}
    for algorithm in TREES:
        reg = LocalPolynomialRegressor(kernel="tricube", span=0.4, robust_iterations=2,
                                       algorithm=algorithm).fit(X, y)  # fmt: skip
        pred, std = reg.predict(Q, return_std=True)
        loo = reg._leave_one_out().predictions((1.0,))
        fits[algorithm] = (pred, std, reg.predict_gradient(Q), reg.predict_interval(Q),
                           reg.robust_weights_, loo)  # fmt: skip
    for algorithm in TREES[1:]:
        for a, b in zip(fits["brute"], fits[algorithm], strict=True):
            assert np.all(np.isfinite(a))
            assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "cls, degree", [(NadarayaWatsonRegressor, 0), (LocalPolynomialRegressor, 1)]
)
def test_closed_form_leave_one_out_equals_refits(rng, cls, degree):
    X = rng.normal(size=(40, 2))
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.normal(size=40)
    w = rng.uniform(0.5, 2.0, 40)
    params = {"kernel": "tricube", "span": 0.3}
    reg = cls(1.0, **params).fit(X, y, sample_weight=w)
    loo = np.asarray(reg._leave_one_out().predictions((1.0,)))[0, :, 0]
    keep = lambda i: np.arange(40) != i  # noqa: E731
    refits = [cls(1.0, **params).fit(X[keep(i)], y[keep(i)], sample_weight=w[keep(i)])
              .predict(X[i : i + 1])[0] for i in range(40)]  # fmt: skip
    # The refit on 39 rows counts floor(0.3 * 39) = 11 rows, the closed form floor(0.3 * 40)
    # = 12 among the 39 others: the dense formula is the reference for the latter.
    want = dense_local(X, y, X, 1.0, 12, "tricube", degree, w, exclude=np.arange(40))[0]
    assert_allclose(loo, want, rtol=1e-8, atol=1e-10)
    same = cls(1.0, kernel="tricube", span=11.5 / 40).fit(X, y, sample_weight=w)
    assert same.n_neighbors_ == 11
    loo11 = np.asarray(same._leave_one_out().predictions((1.0,)))[0, :, 0]
    assert_allclose(loo11, refits, rtol=1e-8, atol=1e-10)


def test_weights_multiply_the_kernel_and_rows_are_counted(rng):
    X = rng.uniform(size=(60, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=60)
    Q = rng.uniform(size=(10, 1))
    # A zero weight drops the row, from the fit and from the count.
    w = rng.integers(0, 3, 60).astype(float)
    w[0] = 1.0
    params = {"kernel": "tricube", "span": 0.3}
    full = LocalPolynomialRegressor(1.0, **params).fit(X, y, sample_weight=w)
    kept = LocalPolynomialRegressor(1.0, **params).fit(X[w > 0], y[w > 0], sample_weight=w[w > 0])
    assert_allclose(full.predict(Q), kept.predict(Q), rtol=1e-12)
    # Every row repeated c times: c k neighbours among them, the same radii and fits.
    rep = LocalPolynomialRegressor(1.0, **params).fit(np.repeat(X, 3, 0), np.repeat(y, 3))
    once = LocalPolynomialRegressor(1.0, **params).fit(X, y, sample_weight=np.full(60, 3.0))
    assert_allclose(rep.predict(Q), once.predict(Q), rtol=1e-10)
    # Unequal integer weights are not repeated rows: the count is of rows (as LOESS).
    k = int(0.3 * (w > 0).sum())
    want = dense_local(X[w > 0], y[w > 0], Q, 1.0, k, "tricube", 1, w[w > 0])[0]
    assert_allclose(full.predict(Q), want, rtol=1e-9)


def test_categorical_feature_and_persistence(rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"x": rng.normal(size=80), "g": pd.Categorical(rng.choice(["u", "v"], 80))})
    y = X["x"].to_numpy() + (X["g"] == "u") + 0.1 * rng.normal(size=80)
    fits = []
    for algorithm in ["brute", "kd_tree"]:
        reg = LocalPolynomialRegressor(kernel="tricube", span=0.5, robust_iterations=1,
                                       algorithm=algorithm).fit(X, y)  # fmt: skip
        fits.append(reg.predict(X.iloc[:10]))
    assert_allclose(fits[0], fits[1], rtol=1e-10)
    again = pickle.loads(pickle.dumps(reg))
    assert_allclose(again.predict(X.iloc[:10]), fits[1])
    sio = pytest.importorskip("skops.io")
    dumped = sio.dumps(reg)
    loaded = sio.loads(dumped, trusted=sio.get_untrusted_types(data=dumped))
    assert_allclose(loaded.predict(X.iloc[:10]), fits[1])


def test_local_constant_gradient_holds_the_radius(rng):
    X = rng.uniform(size=(50, 1))
    y = np.sin(5 * X[:, 0])
    Q = rng.uniform(0.1, 0.9, (8, 1))
    reg = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.3).fit(X, y)
    r, _ = radii(X, Q, 1.0, 15)

    def fixed(q):  # the Nadaraya-Watson fit at q with the radii of Q
        W = PROFILES["tricube"](np.abs(q[:, None] - X[None, :, 0]) / r[:, None])
        return W @ y / W.sum(1)

    step = 1e-6
    want = (fixed(Q[:, 0] + step) - fixed(Q[:, 0] - step)) / (2 * step)
    assert_allclose(reg.predict_gradient(Q)[:, 0], want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ errors
def test_errors_name_the_parameter(rng):
    X, y = rng.normal(size=(30, 1)), rng.normal(size=30)
    with pytest.raises(ValueError, match="algorithm='binned' cannot take span"):
        LocalPolynomialRegressor(span=0.5, algorithm="binned").fit(X, y)
    with pytest.raises(ValueError, match="robust_iterations > 0 takes a 1-D y"):
        LocalPolynomialRegressor(span=0.5, robust_iterations=1).fit(X, np.column_stack([y, y]))
    for bad in (0.0, -1.0, "half"):
        with pytest.raises(InvalidParameterError, match="span"):
            NadarayaWatsonRegressor(span=bad).fit(X, y)
    with pytest.raises(InvalidParameterError, match="robust_iterations"):
        LocalPolynomialRegressor(robust_iterations=-1).fit(X, y)
    # binned_tol with "auto" never bins a span fit.
    reg = NadarayaWatsonRegressor(span=0.5, binned_tol=1e-3).fit(X, y)
    assert np.all(np.isfinite(reg.predict(X)))


# ------------------------------------------------------------------ span selection
def _dense_hat(X, k, kernel="tricube"):
    """The local linear smoother matrix at the training rows (each row's radius counts itself)."""
    r, D = radii(X, X, 1.0, k)
    W = PROFILES[kernel](D / r[:, None])
    H = np.empty_like(W)
    for i, (q, wq) in enumerate(zip(X, W, strict=True)):
        Phi = np.column_stack([np.ones(len(X)), X - q])
        H[i] = (np.linalg.pinv(Phi.T @ (wq[:, None] * Phi)) @ Phi.T * wq)[0]
    return H


@pytest.mark.filterwarnings("ignore:The selected span")
def test_span_selection_scores_against_dense_formulas(rng):
    X = np.sort(rng.uniform(0, 10, (80, 1)), axis=0)
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=80)
    spans = [0.2, 0.35, 0.6]
    est = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.5)
    loo = BandwidthSearchCV(est, spans=spans).fit(X, y)
    gcv = BandwidthSearchCV(est, spans=spans, criterion="gcv").fit(X, y)
    aicc = BandwidthSearchCV(est, spans=spans, criterion="aicc").fit(X, y)
    for t, span in enumerate(spans):
        k = int(span * 80)
        e = y - dense_local(X, y, X, 1.0, k, exclude=np.arange(80))[0]
        assert_allclose(loo.cv_results_["mean_test_score"][t], -np.mean(e**2), rtol=1e-9)
        H = _dense_hat(X, k)
        sigma2, tr = np.mean((y - H @ y) ** 2), np.trace(H)
        assert_allclose(gcv.cv_results_["mean_test_score"][t], -sigma2 / (1 - tr / 80) ** 2,
                        rtol=1e-9)  # fmt: skip
        want = np.log(sigma2) + (1 + tr / 80) / (1 - (tr + 2) / 80)
        assert_allclose(aicc.cv_results_["mean_test_score"][t], -want, rtol=1e-9)
    for search in (loo, gcv, aicc):
        best = spans[int(np.argmax(search.cv_results_["mean_test_score"]))]
        assert search.span_ == best == search.best_params_["span"]
        assert search.best_estimator_.span == best
        assert search.cv_results_["params"][0] == {"span": 0.2}


@pytest.mark.filterwarnings("ignore:The selected span")
def test_default_spans_and_other_routes(rng):
    X = rng.uniform(size=(60, 1))
    y = np.sin(6 * X[:, 0]) + 0.2 * rng.normal(size=60)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.5))
    search.fit(X, y)
    spans = search.cv_results_["param_span"].data.astype(float)
    assert spans.min() * 60 >= 5 and spans.max() == 1.0
    assert 0 < search.span_ < 1
    cv = BandwidthSearchCV(NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.5),
                           spans=[0.1, 0.3, 0.9], cv=3).fit(X, y)  # fmt: skip
    assert cv.span_ in (0.1, 0.3, 0.9)
    clf = BandwidthSearchCV(ParzenClassifier(1.0, span=0.5), spans=[0.1, 0.5])
    assert clf.fit(X, y > 0).span_ in (0.1, 0.5)
    with pytest.raises(ValueError, match="a span is selected from a grid"):
        BandwidthSearchCV(NadarayaWatsonRegressor(span=0.5), method="sgd").fit(X, y)
    with pytest.raises(ValueError, match="not a pipeline"):
        BandwidthSearchCV(make_pipeline(StandardScaler(), NadarayaWatsonRegressor(span=0.5))).fit(
            X, y
        )
    with pytest.raises(ValueError, match="spans must be positive"):
        BandwidthSearchCV(NadarayaWatsonRegressor(span=0.5), spans=[0.5, -1]).fit(X, y)


# ------------------------------------------------------------------ the window path
@pytest.mark.parametrize("name", ["tricube", "biweight", "triweight", "epanechnikov", "tophat",
                                  "linear"])  # fmt: skip
def test_power_forms_are_the_profiles(name):
    from skl_nw._kernels import get_kernel

    a, b = get_kernel(name).power_form
    u = np.linspace(0, 1.5, 61)
    assert_allclose(np.where(u < 1, (1 - u**a) ** b, 0.0), PROFILES[name](u), atol=1e-15)


@pytest.mark.parametrize("kernel", ["tricube", "tophat", "triweight"])
def test_window_path_equals_the_general_path(rng, monkeypatch, kernel):
    from skl_nw._engine import _window

    X = np.round(rng.uniform(0, 3, (70, 1)), 1)  # ties: windows share rows at the radius
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=70)
    w = rng.uniform(0.5, 2, 70)
    Q = np.vstack([X[:5], rng.uniform(-1, 4, (10, 1))])

    def everything():
        reg = LocalPolynomialRegressor(kernel=kernel, span=0.3, robust_iterations=1)
        reg.fit(X, y, sample_weight=w)
        return (
            *reg.predict(Q, return_std=True),
            reg.robust_weights_,
            reg._leave_one_out().predictions((1.0,)),
            *reg._leave_one_out().fits((1.0,)),
        )

    used = []
    original = _window.window_sums
    monkeypatch.setattr(_window, "window_sums", lambda *a: used.append(1) or original(*a))
    fast = everything()
    if _window.compiled() is not None:
        assert used  # the window path served these sums
    monkeypatch.setattr(_window, "applies", lambda plan, Q: False)
    for a, b in zip(fast, everything(), strict=True):
        assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_fastloess_two_features_degree_two(rng):
    fastloess = pytest.importorskip("fastloess")
    X = rng.uniform(0, 1, (300, 2))
    y = np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1]) + 0.2 * rng.normal(size=300)
    model = fastloess.Loess(fraction=0.3, iterations=0, degree="quadratic", dimensions=2,
                            surface_mode="direct", distance_metric="euclidean")  # fmt: skip
    want = np.asarray(model.fit(X.ravel(), y).y)
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=2, span=0.3).fit(X, y)
    assert np.abs(reg.predict(X) - want).max() <= 1e-7 * np.ptp(y)


# check_sample_weight_equivalence_on_dense_data fails by design: the span counts rows, not
# weights (as LOESS does; see test_weights_multiply_the_kernel_and_rows_are_counted); and
# robustness weights are one per row: a 2-D y is the documented error of robust_iterations.
@parametrize_with_checks(
    [
        NadarayaWatsonRegressor(kernel="tricube", span=0.5),
        LocalPolynomialRegressor(kernel="tricube", span=0.5, robust_iterations=2),
        ParzenClassifier(kernel="biweight", span=0.5),
    ],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": "the span counts rows, not weights",
        **(
            {"check_regressor_multioutput": "robust_iterations takes a 1-D y"}
            if getattr(est, "robust_iterations", 0)
            else {}
        ),
    },
)
def test_sklearn_checks_with_a_span(estimator, check):
    check(estimator)


def test_span_errors_of_the_search_name_the_parameters(rng):
    X = rng.uniform(0, 1, (60, 1))
    y = X[:, 0] + rng.normal(0, 0.1, 60)
    with pytest.raises(ValueError, match="spans=.*has span=None"):
        BandwidthSearchCV(NadarayaWatsonRegressor(1.0), spans=[0.5]).fit(X, y)
    loess = NadarayaWatsonRegressor(1.0, kernel="tricube", span=0.3)
    with pytest.raises(ValueError, match="criterion='crps'.*span=0.3"):
        BandwidthSearchCV(loess, criterion="crps").fit(X, y)
    assert BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps").fit(X, y).span_ is None
    # One sample: scikit-learn's wording (it blamed fallback='nan', which was not set).
    with pytest.raises(ValueError, match=r"at least 2 training points.*\(1 sample\)"):
        BandwidthSearchCV(loess).fit(X[:1], y[:1])


@pytest.mark.parametrize("kernel", ["tricube", "tophat", "triweight"])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_grid_path_equals_the_general_path(rng, monkeypatch, kernel, algorithm):
    from skl_nw._engine import _grid

    X = np.round(rng.uniform(0, 3, (90, 2)), 1)  # ties: rows share the radius
    y = np.sin(2 * X[:, 0]) * X[:, 1] + 0.2 * rng.normal(size=90)
    w = rng.uniform(0.5, 2, 90)
    Q = np.vstack([X[:5], rng.uniform(-1, 4, (10, 2))])

    def everything():
        reg = LocalPolynomialRegressor(kernel=kernel, span=0.3, robust_iterations=1,
                                       algorithm=algorithm)  # fmt: skip
        reg.fit(X, y, sample_weight=w)
        return (
            *reg.predict(Q, return_std=True),
            reg.robust_weights_,
            reg._leave_one_out().predictions((1.0,)),
            *reg._leave_one_out().fits((1.0,)),
        )

    used = []
    original = _grid.grid_sums
    monkeypatch.setattr(_grid, "grid_sums", lambda *a: used.append(1) or original(*a))
    fast = everything()
    if _grid.compiled() is not None:
        assert used  # the grid served these sums
    monkeypatch.setattr(_grid, "usable", lambda d: False)  # a KD-tree's radii, general sums
    for a, b in zip(fast, everything(), strict=True):
        assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
def test_grid_path_serves_every_estimator_with_a_span(rng, monkeypatch, d):
    """Nadaraya-Watson and local quadratic fits on the grid equal the general path's.

    Many queries in one cell (more than one group of the grid's sums), queries
    outside the data, ties, a second kernel power (standard errors), rows left
    out; Parzen's class sums (grouped: the general path) take the grid's radii.
    """
    from skl_nw._engine import _grid

    X = np.round(rng.uniform(0, 3, (300, d)), 1)
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.2 * rng.normal(size=300)
    classes = (y > np.median(y)).astype(int)
    Q = np.vstack([X[:40], rng.uniform(-1, 4, (20, d)), X[0] + rng.uniform(0, 1e-3, (150, d))])

    def everything():
        nw = NadarayaWatsonRegressor(kernel="tricube", span=0.2).fit(X, y)
        parzen = ParzenClassifier(kernel="epanechnikov", span=0.3).fit(X, classes)
        local = LocalPolynomialRegressor(kernel="tricube", degree=2, span=0.4).fit(X, y)
        fits = (*nw.predict(Q, return_std=True), *local.predict(Q, return_std=True))
        return *fits, parzen.predict_proba(Q), local._leave_one_out().predictions((1.0,))

    used = []
    original = _grid.grid_sums
    monkeypatch.setattr(_grid, "grid_sums", lambda *a: used.append(1) or original(*a))
    fast = everything()
    if _grid.compiled() is not None:
        assert len(used) == 3  # the grid served the regressors' sums
    monkeypatch.setattr(_grid, "usable", lambda d: False)  # a KD-tree's radii, general sums
    for a, b in zip(fast, everything(), strict=True):
        assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2])  # the window path and the cell grid
@pytest.mark.parametrize("estimator", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_span_sums_keep_the_scale_of_weights_below_one(rng, d, estimator):
    # The span's sums took the weights' shift as 0 where every weight is below 1: the
    # predictions (ratios) were right, tr(H) and the standard errors 1 / max(w) off.
    X = rng.uniform(size=(100, d))
    y = np.sin(6 * X[:, 0]) + 0.2 * rng.normal(size=100)
    Q = rng.uniform(0.2, 0.8, size=(5, d))
    est = estimator(bandwidth=1.0, kernel="tricube", span=0.3)
    ones = est.fit(X, y).predict(Q, return_std=True)[1]
    quarter = est.fit(X, y, sample_weight=np.full(100, 0.25))
    assert quarter.summary().trace == pytest.approx(np.trace(quarter.attention_weights(X)))
    if estimator is LocalPolynomialRegressor:  # se^2 = sigma^2 sum_i l_i^2 / w_i
        assert_allclose(quarter.predict(Q, return_std=True)[1], 2 * ones, rtol=1e-9)


@pytest.mark.parametrize("estimator", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_summary_of_a_robust_fit_counts_rows_by_sample_weight(rng, estimator):
    # The robustness weights weight the fit, not the count or the residuals: n was the
    # sum of the robustness weights, r2 and sigma2 those of a down-weighted RSS.
    X = rng.uniform(size=(80, 1))
    y = np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=80)
    y[::10] += 3.0
    w = rng.integers(1, 3, 80).astype(float)
    est = estimator(bandwidth=1.0, kernel="tricube", span=0.5, robust_iterations=3)
    summary = est.fit(X, y, sample_weight=w).summary()
    residuals = y - est.predict(X)
    assert summary.n == w.sum()
    assert summary.sigma2 == pytest.approx(np.average(residuals**2, weights=w), rel=1e-12)
    assert summary.r2 == pytest.approx(est.score(X, y, sample_weight=w), rel=1e-12)
    assert est.robust_weights_.min() < 0.5  # the outliers were down-weighted


def test_robustness_does_not_stop_for_an_offset_of_y(rng):
    # The iterations stop at a median residual of rounding size: 1e-10 of max |y| took the
    # noise (0.2) of y + 1e10 for an exact fit and kept the outliers' weights (0.41 off).
    x = np.sort(rng.uniform(0, 10, 200))
    y = np.sin(x) + 0.2 * rng.normal(size=200)
    y[::20] += 5.0
    est = LocalPolynomialRegressor(bandwidth=1.0, kernel="tricube", span=0.3, robust_iterations=3)
    base = est.fit(x[:, None], y).predict(x[:, None])
    moved = est.fit(x[:, None], y + 1e10)
    assert np.all(moved.robust_weights_[::20] == 0)
    assert_allclose(moved.predict(x[:, None]) - 1e10, base, atol=1e-3)  # y's rounding: 2e-6


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("algorithm", TREES)
def test_tophat_span_leaves_the_k_th_row_on_the_edge(rng, d, algorithm):
    # The k-th nearest row sits on the kernel's edge, weight 0: the rounding of its
    # distance over the radius decided it (k - 1 or k rows, differing by algorithm).
    X = rng.normal(size=(150, d))
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=150)
    Q = np.vstack([X[:5], rng.normal(size=(15, d))])
    est = NadarayaWatsonRegressor(bandwidth=1.0, kernel="tophat", span=0.3, algorithm=algorithm)
    est.fit(X, y)
    k = est.n_neighbors_
    order = np.argsort(((Q[:, None, :] - X[None]) ** 2).sum(axis=2), axis=1)
    expected = y[order[:, : k - 1]].mean(axis=1)
    assert_allclose(est.predict(Q), expected, rtol=1e-12)
    assert np.all((est.attention_weights(Q) > 0).sum(axis=1) == k - 1)


def _direct_local_fit(x, y, q, radius, degree, profile):
    """Weighted least squares about ``q`` itself, the kernel ``profile`` of ``|x - q| / radius``."""
    K = profile(np.abs(x - q) / radius)
    P = np.vander(x - q, degree + 1, increasing=True)
    root = np.sqrt(K)
    return np.linalg.lstsq(P * root[:, None], y * root, rcond=None)[0][0]


def test_fits_far_from_the_middle_of_the_data_are_refitted_about_their_own_origin(rng):
    # Log-normal inputs: the dense region lies thousands of span radii from the middle of
    # the range, where a local quadratic's moments, expanded about the query, cancelled
    # (0.65 off R's loess): such queries are refitted about an origin of their own.
    x = np.sort(rng.lognormal(0, 2.0, 2000))
    y = np.log(x) + 0.1 * rng.normal(size=2000)
    Q = x[::100]
    est = LocalPolynomialRegressor(bandwidth=1.0, kernel="tricube", degree=2, span=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = est.fit(x[:, None], y).predict(Q[:, None])
        mean, std = est.predict(Q[:, None], return_std=True)
    tricube = lambda u: np.where(u < 1, (1 - np.minimum(u, 1) ** 3) ** 3, 0.0)  # noqa: E731
    radius = [np.sort(np.abs(x - q))[est.n_neighbors_ - 1] for q in Q]
    expected = [_direct_local_fit(x, y, q, r, 2, tricube) for q, r in zip(Q, radius, strict=True)]
    assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert_allclose(mean, got, rtol=1e-10)
    assert np.all(np.isfinite(std))


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_a_local_quadratic_hundreds_of_bandwidths_from_the_middle_is_exact(rng, algorithm):
    # 250 bandwidths from the middle, the expansion's moments lost 1e-6 of their size
    # and the solve amplified it to 30% of the fit.
    x = rng.uniform(0, 1000, 2000)
    y = np.sin(x / 30) + 0.1 * rng.normal(size=2000)
    Q = np.array([3.0, 10.0, 500.0, 990.0, 997.0])
    est = LocalPolynomialRegressor(degree=2, bandwidth=2.0, kernel="epanechnikov",
                                   algorithm=algorithm).fit(x[:, None], y)  # fmt: skip
    epanechnikov = lambda u: np.maximum(1 - u**2, 0.0)  # noqa: E731
    expected = [_direct_local_fit(x, y, q, 2.0, 2, epanechnikov) for q in Q]
    enough = [np.sum(np.abs(x - q) < 2.0) >= 6 for q in Q]  # else the fit drops a degree
    assert sum(enough) >= 3
    got = est.predict(Q[:, None])
    assert_allclose(got[enough], np.array(expected)[enough], rtol=1e-9, atol=1e-9)


def _direct_row_fits(x, y, width, degree, profile, leave_out):
    """Each row's weighted least squares about itself, without it if ``leave_out``."""
    fits = np.empty(len(x))
    for i, q in enumerate(x):
        keep = np.arange(len(x)) != i if leave_out else slice(None)
        r = width[i] if np.ndim(width) else width
        fits[i] = _direct_local_fit(x[keep], y[keep], q, r, degree, profile)
    return fits


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("span", [None, 0.012])
def test_in_sample_and_leave_one_out_fits_far_from_the_middle_are_refitted(rng, span, algorithm):
    # The training rows' own fits (summary, the leave-one-out search) took the same
    # expansion from the centre as predictions did: a local cubic at h = 2 on [0, 1000]
    # had sigma2 2% and leave-one-out fits 0.04 off.
    x = np.sort(rng.uniform(0, 1000, 2000))
    y = np.sin(x / 3) + 0.1 * rng.normal(size=2000)
    gaussian = lambda u: np.exp(-0.5 * u**2)  # noqa: E731
    est = LocalPolynomialRegressor(degree=3, bandwidth=2.0 if span is None else 1.0,
                                   span=span, algorithm=algorithm).fit(x[:, None], y)  # fmt: skip
    if span is None:
        width = loo_width = 2.0
    else:  # the k-th nearest row's distance, the row itself counted or not
        D = np.sort(np.abs(x[:, None] - x[None]), axis=1)
        width, loo_width = D[:, est.n_neighbors_ - 1], D[:, est.n_neighbors_]
    fitted = _direct_row_fits(x, y, width, 3, gaussian, False)
    loo = _direct_row_fits(x, y, loo_width, 3, gaussian, True)
    summary = est.summary()
    assert_allclose(summary.sigma2, np.mean((y - fitted) ** 2), rtol=1e-9)
    assert_allclose(summary.loo_mse, np.mean((y - loo) ** 2), rtol=1e-9)
    grid = {"bandwidths": [2.0]} if span is None else {"spans": [span]}
    search = BandwidthSearchCV(est, **grid).fit(x[:, None], y)
    assert_allclose(-search.best_score_, np.mean((y - loo) ** 2), rtol=1e-9)


def test_the_gradient_searches_loss_takes_the_refitted_leave_one_out_fits(rng):
    # Their loss and gradient came from the expansion about the centre: a local cubic at
    # h = 2 on [0, 1000] scored 1% off its leave-one-out error.
    x = np.sort(rng.uniform(0, 1000, 2000))
    y = np.sin(x / 3) + 0.1 * rng.normal(size=2000)
    loo = LocalPolynomialRegressor(degree=3, bandwidth=2.0).fit(x[:, None], y)._leave_one_out()
    gaussian = lambda u: np.exp(-0.5 * u**2)  # noqa: E731
    rows = np.arange(2000)
    loss_fn = lambda P, r: (((P - y[r, None]) ** 2).sum(1), 2 * (P - y[r, None]))  # noqa: E731
    loss, grad = loo.loss_grad(np.zeros(1), rows, loss_fn, np.ones(2000))
    expected = np.mean((y - _direct_row_fits(x, y, 2.0, 3, gaussian, True)) ** 2)
    assert_allclose(loss, expected, rtol=1e-9)
    # d loss / d log h against the refitted leave-one-out fits at h exp(+-1e-4)
    P = loo.predictions(np.exp([-1e-4, 1e-4]))[:, :, 0]
    assert_allclose(grad[0], np.diff(((P - y) ** 2).mean(axis=1))[0] / 2e-4, rtol=1e-5)


def test_fits_that_cannot_be_refitted_are_announced(rng, monkeypatch):
    from skl_nw._inference import _recentred

    monkeypatch.setattr(_recentred, "_REFIT_ROWS", 0)  # no refit within the budget
    x = rng.uniform(0, 1000, 2000)
    est = LocalPolynomialRegressor(degree=2, bandwidth=2.0, kernel="epanechnikov")
    est.fit(x[:, None], np.sin(x / 30))
    with pytest.warns(UserWarning, match=r"[0-9]+ of 3 queries lie so far .* could not be refit"):
        est.predict([[3.0], [10.0], [997.0]])


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_a_robust_search_scores_each_candidate_at_its_own_robustness_weights(rng, make):
    # The candidates shared the robustness weights of the smallest one's fit: the scores
    # moved with the other candidates of the grid, and the wrong bandwidth won.
    X = rng.uniform(-1, 1, (80, 1))
    y = np.sin(3 * X[:, 0]) + 0.3 * rng.normal(size=80)
    y[5] = 20.0
    grid = [0.005, 0.02, 0.1, 0.5, 5.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny bandwidths: empty windows, an edge of the grid
        search = BandwidthSearchCV(make(robust_iterations=2), bandwidths=grid).fit(X, y)
        own = [-make(h, robust_iterations=2).fit(X, y).summary().loo_mse for h in grid]
    # (h = 0.005 leaves windows of one row: its fits amplify the rounding of y's unit)
    assert_allclose(search.cv_results_["mean_test_score"], own, rtol=1e-6)
    for method in ("lbfgs", "sgd"):
        with pytest.raises(ValueError, match="robust_iterations > 0 those weights change"):
            BandwidthSearchCV(make(robust_iterations=2), method=method).fit(X, y)


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_robust_fits_say_they_take_one_target(make):
    # One robustness weight per row: a 2-D y is refused, and the tags said it was taken.
    from sklearn.utils import get_tags

    assert get_tags(make()).target_tags.multi_output
    robust = make(robust_iterations=2)
    assert not get_tags(robust).target_tags.multi_output
    assert not get_tags(BandwidthSearchCV(robust)).target_tags.multi_output
    with pytest.raises(ValueError, match="robust_iterations > 0 takes a 1-D y"):
        robust.fit(np.arange(10.0)[:, None], np.ones((10, 2)))


def test_a_robust_fit_of_a_column_y_scores_as_of_its_1d_y(rng):
    # Raveled to one target, its predictions were (m,) against a (m, 1) y: the default
    # scorer's residuals broadcast to (m, m), and a cv search picked another bandwidth.
    X = rng.uniform(0, 1, (60, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=60)
    make = lambda: BandwidthSearchCV(  # noqa: E731
        LocalPolynomialRegressor(robust_iterations=1), bandwidths=[0.05, 0.1, 0.3], cv=3
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the DataConversionWarning of the column
        column = make().fit(X, y[:, None]).cv_results_["mean_test_score"]
    assert_allclose(column, make().fit(X, y).cv_results_["mean_test_score"], rtol=1e-12)
