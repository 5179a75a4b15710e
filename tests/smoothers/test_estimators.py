"""NadarayaWatsonRegressor and ParzenClassifier against independent references.

References are the textbook formulas (the naive oracle of ``conftest.py`` and
hand computations below), statsmodels' ``KernelReg``, scikit-learn's
``KernelDensity`` and sklearn's own data sets; never the package against itself,
except where an identity between two public methods is the property under test.
"""

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn import config_context
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score
from sklearn.neighbors import KernelDensity
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from conftest import (
    ALIASES,
    PROFILES,
    naive_class_proba,
    naive_log_class_proba,
    naive_predict,
    naive_rule_of_thumb,
    naive_weights,
    nearest_weights,
    onehot,
    scaled_distances,
    softmax_weights,
)
from skl_nw import KERNELS, NadarayaWatsonRegressor, ParzenClassifier, rule_of_thumb

ALL_KERNELS = sorted(KERNELS)  # canonical names and aliases
CANONICAL = sorted(PROFILES)
COMPACT = [name for name in CANONICAL if KERNELS[name].compact]  # from the kernels themselves
ALGORITHMS = ["auto", "brute", "kd_tree", "ball_tree"]


def _regression_data(rng, n=60, d=3):
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, d)
    y = np.sin(X[:, 0]) + 0.5 * X[:, -1] + 0.1 * rng.normal(size=n)
    return X, y


def _classification_data(rng, n=90, d=2, k=3):
    centers = rng.normal(scale=2.0, size=(k, d))
    y = rng.permutation(np.arange(n) % k)  # every class present, not sorted
    X = centers[y] + rng.normal(size=(n, d))
    return X, y


# ---------------------------------------------------------------------------
# Regression against independent references
# ---------------------------------------------------------------------------


def test_gaussian_matches_statsmodels_kernelreg_on_diabetes(rng):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = load_diabetes(return_X_y=True)
    d = X.shape[1]
    h = X.std(axis=0) * rng.uniform(0.4, 1.2, d)  # a different bandwidth per feature
    rows = rng.choice(len(X), 40, replace=False)
    Q = np.vstack([X[rows] + rng.normal(scale=0.01, size=(40, d)), rng.permutation(X)[:20]])

    with warnings.catch_warnings():
        # statsmodels >= 0.15 warns about its default random generator, unused with a given bw.
        warnings.simplefilter("ignore", FutureWarning)
        kr = KernelReg(endog=y, exog=X, var_type="c" * d, reg_type="lc", bw=h)
    expected = kr.fit(Q)[0]

    got = NadarayaWatsonRegressor(bandwidth=h).fit(X, y).predict(Q)
    assert_allclose(got, expected, rtol=1e-8)
    assert np.ptp(expected) > 10  # a real, varying regression, not a constant


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_regressor_matches_naive_oracle(rng, kernel):
    X, y = _regression_data(rng)
    w = rng.uniform(0.1, 2.0, len(X))
    h = np.array([1.5, 2.0, 2.5]) * X.std(axis=0)
    Q = X[:15] + rng.normal(scale=0.3, size=(15, 3))
    got = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w).predict(Q)
    assert_allclose(got, naive_predict(X, y, Q, h, kernel, w), rtol=1e-10, atol=1e-12)


def test_multi_output_equals_column_by_column_fits(rng):
    X, _ = _regression_data(rng)
    Y = rng.normal(size=(len(X), 3))
    w = rng.uniform(0.5, 1.5, len(X))
    Q = rng.normal(size=(20, 3))
    reg = NadarayaWatsonRegressor(bandwidth=0.8, kernel="epanechnikov")
    joint = reg.fit(X, Y, sample_weight=w).predict(Q)
    assert joint.shape == (20, 3)
    for j in range(3):
        single = NadarayaWatsonRegressor(bandwidth=0.8, kernel="epanechnikov")
        column = single.fit(X, Y[:, j], sample_weight=w).predict(Q)
        assert column.shape == (20,)
        assert_allclose(joint[:, j], column, rtol=1e-12, atol=1e-14)
    # A single target given as a column keeps its 2-D shape.
    assert reg.fit(X, Y[:, :1]).predict(Q).shape == (20, 1)


@pytest.mark.parametrize("kernel", CANONICAL)
def test_attention_weights_rows_are_the_oracle_weights(rng, kernel):
    X, y = _regression_data(rng, n=40)
    w = rng.uniform(0.1, 2.0, len(X))
    Q = X[:12] + rng.normal(scale=0.2, size=(12, 3))
    h = 2.0 * X.std(axis=0)
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    A = reg.attention_weights(Q)
    assert A.shape == (12, 40)
    assert np.all(A >= 0)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert_allclose(A @ y, reg.predict(Q), rtol=1e-10, atol=1e-12)
    assert_allclose(A, naive_weights(X, Q, h, kernel, w), rtol=1e-10, atol=1e-14)


def test_many_chunks_and_threads_match_the_oracle(rng):
    X, y = _regression_data(rng, n=200)
    Q = rng.normal(size=(50, 3))
    # ~2 queries per chunk of 200 training points: the chunking must be invisible.
    with config_context(working_memory=0.05):
        reg = NadarayaWatsonRegressor(bandwidth=1.0, n_jobs=2).fit(X, y)
        got = reg.predict(Q)
        # The dense (50, 200) result is larger than this budget: an error, before any work.
        with pytest.raises(MemoryError, match="sparse=True"):
            reg.attention_weights(Q)
        A = reg.attention_weights(Q, sparse=True).toarray()
    assert_allclose(got, naive_predict(X, y, Q, 1.0), rtol=1e-10)
    assert_allclose(A, naive_weights(X, Q, 1.0, "gaussian"), rtol=1e-10, atol=1e-15)


# ---------------------------------------------------------------------------
# Sample weights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bandwidth", [0.7, "per-feature", "scott", "silverman"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_integer_sample_weight_equals_repeated_rows(rng, bandwidth, kernel):
    X, y = _regression_data(rng, n=50)
    if bandwidth == "per-feature":
        bandwidth = np.array([0.9, 1.7, 2.6])
    counts = rng.integers(0, 4, len(X))
    counts[0] = 0  # at least one zero, and one repeated row
    counts[1] = 3
    X_rep, y_rep = np.repeat(X, counts, axis=0), np.repeat(y, counts)
    Q = rng.normal(size=(25, 3)) * X.std(axis=0)

    weighted = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel)
    weighted.fit(X, y, sample_weight=counts)
    repeated = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel).fit(X_rep, y_rep)
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-12)
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-10, atol=1e-12)

    y_cls = (y > np.median(y)).astype(int)
    clf_w = ParzenClassifier(bandwidth=bandwidth, kernel=kernel).fit(X, y_cls, sample_weight=counts)
    clf_r = ParzenClassifier(bandwidth=bandwidth, kernel=kernel).fit(
        X_rep, np.repeat(y_cls, counts)
    )
    assert_allclose(clf_w.bandwidth_, clf_r.bandwidth_, rtol=1e-12)
    assert_allclose(clf_w.class_prior_, clf_r.class_prior_, rtol=1e-12)
    assert_allclose(clf_w.predict_proba(Q), clf_r.predict_proba(Q), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bandwidth", [0.8, "scott", "silverman"])
def test_zero_weights_equal_dropping_rows(rng, bandwidth):
    X, y = _regression_data(rng, n=50)
    w = rng.uniform(0.5, 2.0, len(X))
    drop = rng.permutation(len(X))[:15]
    w[drop] = 0.0
    keep = w > 0
    Q = rng.normal(size=(20, 3)) * X.std(axis=0)
    a = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X, y, sample_weight=w)
    b = NadarayaWatsonRegressor(bandwidth=bandwidth).fit(X[keep], y[keep], sample_weight=w[keep])
    assert_allclose(a.bandwidth_, b.bandwidth_, rtol=1e-12)
    assert_allclose(a.predict(Q), b.predict(Q), rtol=1e-10, atol=1e-12)
    A = a.attention_weights(Q)
    assert np.all(A[:, ~keep] == 0)
    assert_allclose(A[:, keep], b.attention_weights(Q), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("kernel", COMPACT)
def test_zero_weight_point_is_never_the_nearest_fallback(kernel):
    # A far query with a compact kernel falls back to the nearest point *with weight*.
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([10.0, 20.0, 30.0])
    w = np.array([1.0, 1.0, 0.0])  # the point at 2 is nearest to 100 but weightless
    reg = NadarayaWatsonRegressor(bandwidth=0.1, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict([[100.0], [-100.0]]), [20.0, 10.0])


def test_all_zero_weights_raise(rng):
    X, y = _regression_data(rng, n=10)
    with pytest.raises(ValueError, match=r"(?i)sample.weight"):
        NadarayaWatsonRegressor().fit(X, y, sample_weight=np.zeros(10))
    with pytest.raises(ValueError, match=r"(?i)sample.weight"):
        ParzenClassifier().fit(X, y > 0, sample_weight=np.zeros(10))


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_huge_bandwidth_predicts_the_weighted_mean(rng, kernel):
    X, y = _regression_data(rng, n=30)
    w = rng.uniform(0.1, 3.0, len(X))
    Q = rng.normal(size=(5, 3))
    reg = NadarayaWatsonRegressor(bandwidth=1e12, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), np.full(5, np.average(y, weights=w)), rtol=1e-9)


# ---------------------------------------------------------------------------
# Rules of thumb
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_rule_of_thumb_matches_the_formula(rng, rule):
    n = 83
    X = np.column_stack(
        [
            rng.uniform(-1, 1, size=n),  # light tails: std is the smaller scale
            rng.standard_t(1.5, size=n) * 10,  # heavy tails: IQR / 1.349 is the smaller scale
            rng.uniform(0, 0.01, size=n),
        ]
    )
    expected = naive_rule_of_thumb(X, rule)
    assert expected.min() > 0
    assert_allclose(rule_of_thumb(X, rule), expected, rtol=1e-12)
    y = X[:, 0]
    assert_allclose(
        NadarayaWatsonRegressor(bandwidth=rule).fit(X, y).bandwidth_, expected, rtol=1e-12
    )
    clf = ParzenClassifier(bandwidth=rule).fit(X, y > 0)
    assert_allclose(clf.bandwidth_, expected, rtol=1e-12)
    # Both branches of min(std, IQR / 1.349) are exercised.
    q25, q75 = np.percentile(X, [25, 75], axis=0, method="inverted_cdf")
    iqr_smaller = (q75 - q25) / 1.349 < X.std(axis=0)
    assert not iqr_smaller[0] and iqr_smaller[1]


def test_rule_of_thumb_follows_each_features_scale(rng):
    X, y = _regression_data(rng, n=70)
    Q = rng.normal(size=(15, 3))
    stretch = np.array([1.0, 1000.0, 1.0])
    for rule in ("scott", "silverman"):
        a = NadarayaWatsonRegressor(bandwidth=rule).fit(X, y)
        b = NadarayaWatsonRegressor(bandwidth=rule).fit(X * stretch, y)
        assert_allclose(b.bandwidth_, a.bandwidth_ * stretch, rtol=1e-12)
        # The scaled distances, hence the predictions, are unchanged.
        assert_allclose(b.predict(Q * stretch), a.predict(Q), rtol=1e-9)


@pytest.mark.parametrize("rule", ["scott", "silverman"])
def test_constant_feature_gets_a_finite_positive_bandwidth(rng, rule):
    X, y = _regression_data(rng, n=40)
    Xc = np.column_stack([X, np.full(len(X), 7.0)])
    Q = np.column_stack([rng.normal(size=(10, 3)), rng.uniform(0, 14, 10)])
    reg = NadarayaWatsonRegressor(bandwidth=rule).fit(Xc, y)
    h = reg.bandwidth_
    assert np.all(np.isfinite(h)) and np.all(h > 0)
    assert_allclose(rule_of_thumb(Xc, rule)[:3], naive_rule_of_thumb(Xc, rule)[:3], rtol=1e-12)
    got = reg.predict(Q)
    assert np.all(np.isfinite(got))
    # A constant feature shifts every squared distance of a query equally, so the
    # Gaussian weights are those of the other features with the same bandwidths.
    assert_allclose(got, naive_predict(X, y, Q[:, :3], h[:3]), rtol=1e-9)
    clf = ParzenClassifier(bandwidth=rule).fit(Xc, y > 0)
    assert np.all(np.isfinite(clf.predict_proba(Q)))


# ---------------------------------------------------------------------------
# Parzen classifier
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_parzen_equals_regressor_on_one_hot_labels(rng, kernel):
    X, y = _classification_data(rng, k=3)
    labels = np.array([-4, 2, 9])[y]
    w = rng.uniform(0.2, 2.0, len(X))
    h = np.array([1.3, 0.9])
    Q = rng.normal(scale=2.5, size=(30, 2))
    clf = ParzenClassifier(bandwidth=h, kernel=kernel).fit(X, labels, sample_weight=w)
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel)
    expected = reg.fit(X, onehot(y, [0, 1, 2]), sample_weight=w).predict(Q)
    assert_array_equal(clf.classes_, [-4, 2, 9])
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10, atol=1e-12)


def _gaussian_class_density(X_c, Q, h, weights=None):
    """Parzen density of one class: ``sum_i w_i N(q; x_i, diag(h^2)) / sum_i w_i``."""
    h = np.asarray(h, float)
    weights = np.ones(len(X_c)) if weights is None else weights
    kernel = PROFILES["gaussian"](scaled_distances(X_c, Q, h))
    kernel = kernel / ((2 * np.pi) ** (Q.shape[1] / 2) * np.prod(h))
    return kernel @ weights / weights.sum()


def test_hand_parzen_density_is_sklearn_kernel_density(rng):
    # Checks the reference density used below against scikit-learn's KernelDensity.
    X = rng.normal(size=(40, 2))
    w = rng.uniform(0.5, 2.0, 40)
    Q = rng.normal(size=(10, 2))
    kde = KernelDensity(bandwidth=0.7).fit(X, sample_weight=w)
    assert_allclose(_gaussian_class_density(X, Q, [0.7, 0.7], w), np.exp(kde.score_samples(Q)))


@pytest.mark.parametrize("priors", [None, [0.8, 0.2]])
def test_binary_decision_is_the_sign_of_the_density_difference(rng, priors):
    n0, n1 = 30, 50
    X = np.vstack([rng.normal(size=(n0, 2)), rng.normal(size=(n1, 2)) * 1.5 + [1.5, 0.5]])
    y = np.repeat(np.array(["a", "b"]), [n0, n1])
    perm = rng.permutation(n0 + n1)
    X, y = X[perm], y[perm]
    h = np.array([0.6, 0.9])
    g = np.linspace(-3, 4, 15)
    Q = np.array([[a, b] for a in g for b in g])

    # Bayes: pi_c p(q | c), p(q | c) = sum_{i in c} N(q; x_i, diag(h^2)) / n_c.
    pi = np.array([n0, n1]) / (n0 + n1) if priors is None else np.asarray(priors)
    f0 = _gaussian_class_density(X[y == "a"], Q, h)
    f1 = _gaussian_class_density(X[y == "b"], Q, h)
    diff = pi[1] * f1 - pi[0] * f0
    confident = np.abs(diff) > 1e-9 * (pi[1] * f1 + pi[0] * f0)
    assert confident.mean() > 0.95
    expected = np.where(diff > 0, "b", "a")
    assert 0.1 < (expected == "b").mean() < 0.9  # a real boundary crosses the grid

    clf = ParzenClassifier(bandwidth=h, priors=priors).fit(X, y)
    assert_array_equal(clf.predict(Q)[confident], expected[confident])
    proba = pi * np.column_stack([f0, f1])
    assert_allclose(clf.predict_proba(Q), proba / proba.sum(1, keepdims=True), rtol=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "cosine"])
def test_priors_formula_by_hand(rng, kernel):
    X, y = _classification_data(rng, k=3)
    w = rng.uniform(0.2, 2.0, len(X))
    priors = np.array([0.2, 0.5, 0.3])
    h = np.array([3.0, 4.0])  # wide enough for every query to see every class
    Q = X[rng.permutation(len(X))[:20]] + rng.normal(scale=0.5, size=(20, 2))

    expected = naive_class_proba(X, y, Q, h, kernel, w, priors=priors)
    assert np.all(np.isfinite(expected))  # every query sees some class: no 0 / 0

    clf = ParzenClassifier(bandwidth=h, kernel=kernel, priors=priors).fit(X, y, sample_weight=w)
    assert_allclose(clf.class_prior_, priors)
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10, atol=1e-12)
    assert_array_equal(clf.predict(Q), np.argmax(expected, axis=1))
    # Priors matter: the empirical-prior answer differs.
    plain = ParzenClassifier(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(plain.class_prior_, np.bincount(y, weights=w) / w.sum(), rtol=1e-12)
    assert np.abs(plain.predict_proba(Q) - expected).max() > 1e-3


@pytest.mark.parametrize("priors", [None, [0.3, 0.7]])
def test_log_proba_of_a_far_class_is_finite(rng, priors):
    X = np.concatenate([rng.normal(size=20), rng.normal(size=20) + 60.0])[:, None]
    y = np.repeat([0, 1], 20)
    w = rng.uniform(0.5, 2.0, 40)
    Q = np.array([[-1.0], [0.0], [1.0], [2.5]])

    expected = naive_log_class_proba(X, y, Q, 1.0, "gaussian", w, priors=priors)
    assert np.all(expected[:, 1] < -1000)  # exp underflows to 0 in float64

    clf = ParzenClassifier(bandwidth=1.0, priors=priors).fit(X, y, sample_weight=w)
    log_proba = clf.predict_log_proba(Q)
    assert np.all(np.isfinite(log_proba))
    assert_allclose(log_proba, expected, rtol=1e-10)
    proba = clf.predict_proba(Q)
    assert np.all(proba[:, 1] < 1e-300)
    assert_allclose(proba[:, 0], 1.0)
    assert_array_equal(clf.predict(Q), [0, 0, 0, 0])


@pytest.mark.parametrize("kernel", CANONICAL)
def test_predict_log_proba_is_log_of_predict_proba(rng, kernel):
    X, y = _classification_data(rng, k=3)
    Q = rng.normal(scale=2.0, size=(25, 2))
    clf = ParzenClassifier(bandwidth=2.0, kernel=kernel).fit(X, y)
    proba, log_proba = clf.predict_proba(Q), clf.predict_log_proba(Q)
    assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
    positive = proba > 1e-200
    assert positive.mean() > 0.3
    assert_allclose(log_proba[positive], np.log(proba[positive]), rtol=1e-10, atol=1e-12)
    assert np.all(np.isneginf(log_proba[proba == 0]))


def test_string_labels(rng):
    X, y = _classification_data(rng, k=3)
    names = np.array(["setosa", "versicolor", "virginica"])
    Q = rng.normal(scale=2.0, size=(20, 2))
    clf_s = ParzenClassifier(bandwidth=1.0).fit(X, names[y])
    clf_i = ParzenClassifier(bandwidth=1.0).fit(X, y)
    assert_array_equal(clf_s.classes_, names)
    assert_allclose(clf_s.predict_proba(Q), clf_i.predict_proba(Q), rtol=1e-12)
    expected = names[np.argmax(naive_class_proba(X, y, Q, 1.0), axis=1)]
    assert_array_equal(clf_s.predict(Q), expected)
    assert clf_s.predict(Q).dtype.kind == "U"


@pytest.mark.parametrize("kernel", CANONICAL)
def test_multiclass_matches_the_oracle(rng, kernel):
    X, y = _classification_data(rng, n=100, k=4)
    w = rng.uniform(0.3, 1.5, len(X))
    h = np.array([2.0, 2.5])
    Q = X[:25] + rng.normal(scale=0.3, size=(25, 2))
    clf = ParzenClassifier(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    expected = naive_class_proba(X, y, Q, h, kernel, w)
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10, atol=1e-12)
    assert_array_equal(clf.predict(Q), np.argmax(expected, axis=1))
    assert clf.score(X, y) > 0.5


@pytest.mark.parametrize("priors", [None, [0.1, 0.6, 0.3]])
@pytest.mark.parametrize("kernel", ["gaussian", "linear"])
def test_classifier_attention_weights_pool_one_hot_labels(rng, priors, kernel):
    X, y = _classification_data(rng, k=3)
    w = rng.uniform(0.2, 2.0, len(X))
    Q = X[:20] + rng.normal(scale=0.5, size=(20, 2))
    clf = ParzenClassifier(bandwidth=2.5, kernel=kernel, priors=priors)
    clf.fit(X, y, sample_weight=w)
    A = clf.attention_weights(Q)
    assert A.shape == (20, len(X))
    assert np.all(A >= 0)
    assert_allclose(A.sum(1), 1.0, rtol=1e-12)
    assert_allclose(A @ onehot(y, [0, 1, 2]), clf.predict_proba(Q), rtol=1e-10, atol=1e-12)
    if priors is None:  # columns in training order: the oracle's weights
        assert_allclose(A, naive_weights(X, Q, 2.5, kernel, w), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kernel", COMPACT)
def test_classifier_far_query_takes_the_nearest_class(kernel):
    X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    y = np.array(["near", "near", "far"])
    clf = ParzenClassifier(bandwidth=0.5, kernel=kernel).fit(X, y)
    Q = np.array([[-50.0, -50.0], [60.0, 60.0]])
    proba = clf.predict_proba(Q)
    assert np.all(np.isfinite(proba))
    assert_allclose(proba, [[0.0, 1.0], [1.0, 0.0]])  # classes_ = ["far", "near"]
    assert_array_equal(clf.predict(Q), ["near", "far"])


# ---------------------------------------------------------------------------
# Robustness
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_tiny_bandwidth_predicts_the_nearest_target(rng, kernel):
    X = np.arange(20)[:, None] * 0.1
    y = rng.normal(size=20)
    Q = X + rng.uniform(-0.03, 0.03, size=X.shape)
    reg = NadarayaWatsonRegressor(bandwidth=1e-4, kernel=kernel).fit(X, y)
    assert_allclose(reg.predict(Q), y, rtol=1e-12)
    clf = ParzenClassifier(bandwidth=1e-4, kernel=kernel).fit(X, np.arange(20) % 3)
    assert_array_equal(clf.predict(Q), np.arange(20) % 3)


@pytest.mark.parametrize("kernel", COMPACT)
def test_far_queries_with_compact_kernels(rng, kernel):
    X = rng.uniform(0, 1, size=(30, 2))
    y = rng.normal(size=30)
    Q = np.array([[50.0, 50.0], [-30.0, 0.5], [0.5, 0.5]])
    nearest = nearest_weights(X, Q[:2]) @ y
    inside = naive_predict(X, y, Q[2:], 0.2, kernel)

    got = NadarayaWatsonRegressor(bandwidth=0.2, kernel=kernel).fit(X, y).predict(Q)
    assert np.all(np.isfinite(got))
    assert_allclose(got[:2], nearest, rtol=1e-12)
    assert_allclose(got[2:], inside, rtol=1e-10)

    reg = NadarayaWatsonRegressor(bandwidth=0.2, kernel=kernel, fallback="nan").fit(X, y)
    got = reg.predict(Q)
    assert np.all(np.isnan(got[:2]))
    assert_allclose(got[2:], inside, rtol=1e-10)
    A = reg.attention_weights(Q)
    assert np.all(np.isnan(A[:2]))
    assert_allclose(A[2].sum(), 1.0)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_far_queries_with_infinite_support_stay_finite(rng, kernel):
    X = rng.uniform(0, 1, size=(30, 2))
    y = rng.normal(size=30)
    Q = np.array([[50.0, 50.0], [-30.0, 0.5], [0.0, 200.0]])
    expected = softmax_weights(X, Q, 0.05, kernel) @ y  # stable; linear space gives 0 / 0
    got = NadarayaWatsonRegressor(bandwidth=0.05, kernel=kernel).fit(X, y).predict(Q)
    assert np.all(np.isfinite(got))
    assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tophat"])
def test_duplicates_in_X(rng, kernel):
    X0 = rng.normal(size=(15, 2))
    X = np.vstack([X0, X0, X0[:5]])  # every row twice, five rows three times
    y = rng.normal(size=len(X))
    w = rng.uniform(0.5, 2.0, len(X))
    Q = rng.normal(size=(10, 2))
    reg = NadarayaWatsonRegressor(bandwidth=1.5, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), naive_predict(X, y, Q, 1.5, kernel, w), rtol=1e-10)
    # With a tiny bandwidth a duplicated point predicts the weighted mean of its copies.
    tiny = NadarayaWatsonRegressor(bandwidth=1e-6, kernel=kernel).fit(X, y, sample_weight=w)
    copies = [[i, 15 + i, 30 + i] if i < 5 else [i, 15 + i] for i in range(15)]
    expected = [np.average(y[c], weights=w[c]) for c in copies]
    assert_allclose(tiny.predict(X0), expected, rtol=1e-10)


@pytest.mark.parametrize("d", [1, 3, 6])
def test_data_far_from_the_origin(rng, d):
    X = 1e6 + rng.uniform(0, 10, size=(80, d))
    y = np.sin((X - 1e6).sum(1))
    Q = 1e6 + rng.uniform(0, 10, size=(20, d))
    h = 1.0 * np.sqrt(d)
    got = NadarayaWatsonRegressor(bandwidth=h).fit(X, y).predict(Q)
    # The oracle subtracts before squaring: exact to rounding at any offset.
    assert_allclose(got, naive_predict(X, y, Q, h), rtol=1e-8, atol=1e-10)
    labels = (y > 0).astype(int)
    clf = ParzenClassifier(bandwidth=4 * h, kernel="epanechnikov").fit(X, labels)
    expected = naive_class_proba(X, labels, Q, 4 * h, "epanechnikov")
    assert np.all(np.isfinite(expected))  # every query has points inside the support
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------
# Hypothesis properties, over every kernel and random bandwidths
# ---------------------------------------------------------------------------

_COORD = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


@st.composite
def _problems(draw):
    n = draw(st.integers(1, 12))
    d = draw(st.integers(1, 3))
    m = draw(st.integers(1, 5))
    X = draw(hnp.arrays(np.float64, (n, d), elements=_COORD))
    y = draw(hnp.arrays(np.float64, n, elements=st.floats(-100, 100)))
    Q = draw(hnp.arrays(np.float64, (m, d), elements=_COORD))
    h_elements = st.floats(0.05, 20.0)
    if draw(st.booleans()):
        h = draw(hnp.arrays(np.float64, d, elements=h_elements))
    else:
        h = draw(h_elements)
    kernel = draw(st.sampled_from(ALL_KERNELS))
    return X, y, Q, h, kernel


def _well_conditioned(X, Q, h, kernel):
    """Whether rounding cannot move a point across a compact kernel's support or break a tie.

    Translating or permuting the data changes distances by rounding only, which
    matters only for a point at the support's edge, or, for a query with no
    point inside the support, for distinct points equally near (the nearest
    fallback then averages a different set).
    """
    if ALIASES.get(kernel, kernel) not in COMPACT:
        return True
    u = scaled_distances(X, Q, h)
    if np.any(np.abs(u - 1.0) < 1e-6):
        return False
    for row in u:
        if row.min() >= 1.0:
            near = row <= row.min() * (1 + 1e-6)
            if np.any(X[near] != X[near][0]):
                return False
    return True


def _tolerance(y):
    return 1e-9 * (1.0 + np.abs(y).max())


@settings(max_examples=50, deadline=None)
@given(_problems())
def test_property_predictions_lie_within_the_target_range(problem):
    X, y, Q, h, kernel = problem
    got = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y).predict(Q)
    tol = 1e-12 * (1.0 + np.abs(y).max())
    assert np.all(got >= y.min() - tol)
    assert np.all(got <= y.max() + tol)


@settings(max_examples=50, deadline=None)
@given(_problems(), st.data())
def test_property_invariant_to_permuting_training_rows(problem, data):
    X, y, Q, h, kernel = problem
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    assume(_well_conditioned(X, Q, h, kernel))
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel)
    a = reg.fit(X, y).predict(Q)
    b = reg.fit(X[perm], y[perm]).predict(Q)
    assert_allclose(a, b, rtol=1e-9, atol=_tolerance(y))
    labels = (y > 0).astype(int)
    clf = ParzenClassifier(bandwidth=h, kernel=kernel)
    pa = clf.fit(X, labels).predict_proba(Q)
    pb = clf.fit(X[perm], labels[perm]).predict_proba(Q)
    assert_allclose(pa, pb, rtol=1e-9, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(_problems(), hnp.arrays(np.float64, 3, elements=st.floats(-100, 100)))
def test_property_invariant_to_translating_inputs_and_queries(problem, shift):
    X, y, Q, h, kernel = problem
    t = shift[: X.shape[1]]
    assume(_well_conditioned(X, Q, h, kernel) and _well_conditioned(X + t, Q + t, h, kernel))
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel)
    a = reg.fit(X, y).predict(Q)
    b = reg.fit(X + t, y).predict(Q + t)
    assert_allclose(a, b, rtol=1e-7, atol=1e-7 * (1.0 + np.abs(y).max()))


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def _fit_reg(**params):
    X = np.arange(12.0).reshape(4, 3)
    return NadarayaWatsonRegressor(**params).fit(X, np.arange(4.0))


def _fit_clf(**params):
    X = np.arange(18.0).reshape(6, 3)
    return ParzenClassifier(**params).fit(X, [0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize("fit", [_fit_reg, _fit_clf])
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"kernel": "gausian"}, "kernel"),
        ({"algorithm": "kdtree"}, "algorithm"),
        ({"bandwidth": -1.0}, "bandwidth"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"bandwidth": 0}, "bandwidth"),
        ({"bandwidth": "scot"}, "bandwidth"),
        ({"bandwidth": [1.0, -1.0, 1.0]}, "bandwidth"),
        ({"bandwidth": [1.0, 0.0, 1.0]}, "bandwidth"),
        ({"bandwidth": [1.0, np.inf, 1.0]}, "bandwidth"),
        ({"bandwidth": [1.0, np.nan, 1.0]}, "bandwidth"),
        ({"bandwidth": [1.0, 2.0]}, "bandwidth"),
        ({"bandwidth": [1.0, 2.0, 3.0, 4.0]}, "bandwidth"),
        ({"bandwidth": [[1.0, 2.0, 3.0]]}, "bandwidth"),
        ({"bandwidth": ["1", "2", "3"]}, "bandwidth"),
    ],
)
def test_bad_parameters_raise_a_value_error_naming_them(fit, params, match):
    with pytest.raises(ValueError, match=match):
        fit(**params)


def test_unknown_kernel_message_lists_every_valid_kernel():
    with pytest.raises(ValueError, match="kernel") as info:
        _fit_reg(kernel="gausian")
    for name in ALL_KERNELS:
        assert repr(name) in str(info.value)


def test_unknown_fallback_raises():
    with pytest.raises(ValueError, match="fallback"):
        _fit_reg(fallback="zero")


@pytest.mark.parametrize(
    "priors",
    [[0.5, 0.5], [0.2, 0.3, 0.3, 0.2], [0.5, 0.5, 0.5], [1.2, -0.1, -0.1], ["a", "b", "c"]],
)
def test_bad_priors_raise(priors):
    with pytest.raises(ValueError, match="priors"):
        _fit_clf(priors=priors)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("est", [NadarayaWatsonRegressor(), ParzenClassifier()])
def test_non_finite_inputs_raise(est, bad):
    X = np.arange(12.0).reshape(4, 3)
    y = np.array([0, 1, 0, 1])
    X_bad = X.copy()
    X_bad[1, 2] = bad
    with pytest.raises(ValueError, match="X contains"):
        est.fit(X_bad, y)
    est.fit(X, y)
    with pytest.raises(ValueError, match="X contains"):
        est.predict(X_bad)


@pytest.mark.parametrize("est", [NadarayaWatsonRegressor(), ParzenClassifier()])
def test_wrong_number_of_features_at_predict(est):
    X = np.arange(12.0).reshape(4, 3)
    est.fit(X, [0, 1, 0, 1])
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="features"):
        est.attention_weights(np.ones((2, 4)))


@pytest.mark.parametrize(
    ("est", "method"),
    [
        (NadarayaWatsonRegressor(), "predict"),
        (NadarayaWatsonRegressor(), "attention_weights"),
        (ParzenClassifier(), "predict"),
        (ParzenClassifier(), "predict_proba"),
        (ParzenClassifier(), "predict_log_proba"),
        (ParzenClassifier(), "attention_weights"),
    ],
)
def test_not_fitted(est, method):
    with pytest.raises(NotFittedError):
        getattr(est, method)(np.ones((2, 3)))


# ---------------------------------------------------------------------------
# scikit-learn integration
# ---------------------------------------------------------------------------


def test_pickle_round_trip(rng):
    X, y = _classification_data(rng, k=3)
    Q = rng.normal(scale=2.0, size=(15, 2))
    for est in (
        NadarayaWatsonRegressor(bandwidth="silverman", kernel="cosine").fit(X, X[:, 0] ** 2),
        ParzenClassifier(kernel="epanechnikov", priors=[0.2, 0.3, 0.5]).fit(X, y),
    ):
        clone = pickle.loads(pickle.dumps(est))
        assert_array_equal(clone.predict(Q), est.predict(Q))
        assert_array_equal(clone.attention_weights(Q), est.attention_weights(Q))
        assert_array_equal(clone.bandwidth_, est.bandwidth_)
        if hasattr(est, "predict_proba"):
            assert_array_equal(clone.predict_proba(Q), est.predict_proba(Q))


_STRATIFIED = StratifiedKFold(5, shuffle=True, random_state=0)
_KFOLD = KFold(5, shuffle=True, random_state=0)


@pytest.mark.parametrize(
    ("loader", "est", "cv", "bar"),
    [
        # Majority class: iris 0.33, breast cancer 0.63; the mean predictor: R^2 <= 0.
        (load_iris, ParzenClassifier(), _STRATIFIED, 0.9),
        (load_breast_cancer, ParzenClassifier(), _STRATIFIED, 0.9),
        (load_diabetes, NadarayaWatsonRegressor(bandwidth=1.0), _KFOLD, 0.35),
    ],
    ids=["iris", "breast_cancer", "diabetes"],
)
def test_cross_val_score_in_a_pipeline_on_real_data(loader, est, cv, bar):
    X, y = loader(return_X_y=True)
    scores = cross_val_score(make_pipeline(StandardScaler(), est), X, y, cv=cv)
    assert scores.mean() > bar


def test_grid_search_picks_a_sensible_bandwidth(rng):
    X = rng.uniform(0, 2 * np.pi, size=(150, 1))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=150)
    pipe = make_pipeline(StandardScaler(), NadarayaWatsonRegressor())
    grid = {
        "nadarayawatsonregressor__bandwidth": [0.003, 0.15, 100.0],
        "nadarayawatsonregressor__kernel": ["gaussian", "epanechnikov"],
    }
    search = GridSearchCV(pipe, grid, cv=KFold(5, shuffle=True, random_state=0)).fit(X, y)
    assert search.best_params_["nadarayawatsonregressor__bandwidth"] == 0.15
    assert search.best_score_ > 0.7
    X_test = np.linspace(0.5, 5.5, 30)[:, None]
    assert np.abs(search.predict(X_test) - np.sin(X_test[:, 0])).max() < 0.4


def test_grid_search_over_kernel_for_the_classifier():
    X, y = load_iris(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), ParzenClassifier())
    grid = {
        "parzenclassifier__kernel": ["gaussian", "tophat", "cosine"],
        "parzenclassifier__bandwidth": ["scott", 0.5, 1.0],
    }
    search = GridSearchCV(pipe, grid, cv=StratifiedKFold(5, shuffle=True, random_state=0))
    search.fit(X, y)
    assert search.best_score_ > 0.93
    assert search.score(X, y) > 0.93
    assert search.predict_proba(X).shape == (150, 3)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_every_algorithm_gives_the_same_results(rng, kernel):
    X, y = _classification_data(rng, k=3)
    Q = rng.normal(scale=2.0, size=(30, 2))
    ref_reg = NadarayaWatsonRegressor(kernel=kernel, algorithm="brute").fit(X, X[:, 0])
    ref_clf = ParzenClassifier(kernel=kernel, algorithm="brute").fit(X, y)
    for algorithm in ALGORITHMS:
        reg = NadarayaWatsonRegressor(kernel=kernel, algorithm=algorithm).fit(X, X[:, 0])
        clf = ParzenClassifier(kernel=kernel, algorithm=algorithm).fit(X, y)
        assert_allclose(reg.predict(Q), ref_reg.predict(Q), rtol=1e-12, atol=1e-14)
        weights = reg.attention_weights(Q)
        # The same type on every path: dense by default, CSR with sparse=True.
        assert isinstance(weights, np.ndarray)
        assert sparse.issparse(reg.attention_weights(Q, sparse=True))
        assert_allclose(weights, ref_reg.attention_weights(Q), rtol=1e-12, atol=1e-15)
        assert_allclose(clf.predict_proba(Q), ref_clf.predict_proba(Q), rtol=1e-12, atol=1e-14)
        assert_array_equal(clf.predict(Q), ref_clf.predict(Q))


@pytest.mark.parametrize(
    ("weights", "message"),
    [(-np.ones(10), "Negative values"), (np.ones(5), r"sample_weight.shape"),
     (np.full(10, np.nan), "sample_weight contains NaN"), (np.zeros(10), "non-zero|positive sum")],
)  # fmt: skip
def test_rule_of_thumb_checks_its_weights(weights, message):
    with pytest.raises(ValueError, match=message):
        rule_of_thumb(np.arange(20.0).reshape(10, 2), sample_weight=weights)


@pytest.mark.parametrize(
    "X, message",
    [
        ([[0.0, 1.0], [np.nan, 2.0], [3.0, 1.0]], "Input X contains NaN"),
        ([[0.0, 1.0], [np.inf, 2.0], [3.0, 1.0]], "Input X contains infinity"),
        (np.empty((0, 2)), "0 sample"),
        (np.arange(5.0), "Expected 2D array"),
    ],
)
def test_rule_of_thumb_checks_its_inputs(X, message):
    # NaN and inf gave a bandwidth, an empty X numpy's own reduction error.
    with pytest.raises(ValueError, match=message):
        rule_of_thumb(X)


def test_rule_of_thumb_says_how_it_reads_weights_summing_below_two():
    X = np.arange(20.0).reshape(10, 2)
    with pytest.warns(UserWarning, match="sample_weight sums to 1: .*10 rows count as 1 "):
        rule_of_thumb(X, sample_weight=np.full(10, 0.1))
