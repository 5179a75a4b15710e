"""Reliability: numeric extremes, degenerate data, bad input, threads, persistence.

What real data and real users do to an estimator inside a long job.  Every
expected value comes from outside the code under test: the naive oracle of
``conftest.py`` (direct differences, linear space), explicit refits, the
brute-force path for the trees, or a formula written here.  The Hypothesis
properties and the fuzz run live in ``test_properties.py``.
"""

import importlib
import io
import json
import os
import pickle
import subprocess
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import joblib
import numpy as np
import pytest
import skops.io as sio
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn import config_context
from sklearn.utils import get_tags
from threadpoolctl import threadpool_info

from conftest import (
    naive_class_proba,
    naive_predict,
    naive_rule_of_thumb,
    naive_weights,
    nearest_weights,
    onehot,
    refit_loo,
    softmax_weights,
    traced_peak,
)
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
    _engine,
)
from skl_nw._kernels import KERNELS, kernel_names

NAMES = kernel_names()
COMPACT = [name for name in NAMES if KERNELS[name].compact]
INFINITE = [name for name in NAMES if not KERNELS[name].compact]
BACKENDS = ["brute", "kd_tree", "ball_tree"]
EPS = np.finfo(np.float64).eps


def _dense(A):
    return A.toarray() if sparse.issparse(A) else np.asarray(A)


# ===========================================================================
# Numeric extremes
# ===========================================================================


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_features_near_1e9_with_unit_bandwidth(rng, kernel, algorithm):
    # |x|^2 ~ 1e18 next to distances ~1: the BLAS expansion would cancel to noise.
    offset = 1e9
    X = offset + rng.uniform(0, 4, size=(150, 2))
    y = np.sin(X[:, 0] - offset) + (X[:, 1] - offset)
    Q = offset + rng.uniform(0, 4, size=(30, 2))
    # X - offset is exact (Sterbenz): the oracle sees the very same offsets.
    Xc, Qc = X - offset, Q - offset
    expected = naive_predict(Xc, y, Qc, 1.0, kernel)
    assert np.all(np.isfinite(expected))  # every query has a point inside the support
    reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel=kernel, algorithm=algorithm).fit(X, y)
    assert_allclose(reg.predict(Q), expected, rtol=1e-9, atol=1e-9)
    assert_allclose(_dense(reg.attention_weights(Q)), naive_weights(Xc, Qc, 1.0, kernel), atol=1e-9)
    labels = (y > np.median(y)).astype(int)
    clf = ParzenClassifier(bandwidth=1.0, kernel=kernel, algorithm=algorithm).fit(X, labels)
    expected_proba = naive_class_proba(Xc, labels, Qc, 1.0, kernel)
    assert_allclose(clf.predict_proba(Q), expected_proba, atol=1e-9)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_features_spanning_1e_minus_8_to_1e8(rng, kernel, algorithm):
    n = 120
    X = np.column_stack([rng.uniform(0, 1e-8, n), rng.uniform(0, 1e8, n), rng.uniform(0, 1, n)])
    y = np.cos(X[:, 0] * 1e8) + X[:, 1] * 1e-8 + X[:, 2]
    Q = np.column_stack([rng.uniform(0, 1e-8, 25), rng.uniform(0, 1e8, 25), rng.uniform(0, 1, 25)])
    h = np.array([4e-9, 4e7, 0.4])
    expected = naive_predict(X, y, Q, h, kernel)
    assert np.all(np.isfinite(expected))
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel, algorithm=algorithm)
    assert_allclose(reg.fit(X, y).predict(Q), expected, rtol=1e-9, atol=1e-9)

    # The rules of thumb follow each feature's own scale: same as the unit-scaled data.
    scaled = NadarayaWatsonRegressor(kernel=kernel, algorithm=algorithm).fit(X, y)
    unit = np.array([1e-8, 1e8, 1.0])
    reference = NadarayaWatsonRegressor(kernel=kernel, algorithm="brute").fit(X / unit, y)
    assert_allclose(scaled.bandwidth_ / unit, reference.bandwidth_, rtol=1e-12)
    assert_allclose(scaled.predict(Q), reference.predict(Q / unit), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_targets_near_1e12_and_huge_outliers(rng, kernel, algorithm):
    X = rng.uniform(0, 4, size=(150, 2))
    Q = rng.uniform(0, 4, size=(20, 2))
    y = 1e12 + 1e6 * rng.normal(size=150)
    y[[3, 40]] = [1e300, -1e299]  # outliers
    expected = naive_predict(X, y, Q, 1.0, kernel)
    assert np.all(np.isfinite(expected))  # every query has a point inside the support
    reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel=kernel, algorithm=algorithm)
    assert_allclose(reg.fit(X, y).predict(Q), expected, rtol=1e-9)

    # Without the outliers the 1e6 signal on top of 1e12 survives (1e-9 of 1e12 is 1e3).
    y[[3, 40]] = 1e12
    got = reg.fit(X, y).predict(Q) - 1e12
    assert_allclose(got, naive_predict(X, y - 1e12, Q, 1.0, kernel), atol=1e3)


def test_bandwidth_search_with_targets_near_1e12(rng):
    # The closed-form leave-one-out scores equal explicit refits at this scale too.
    X = rng.uniform(0, 5, size=(30, 1))
    y = 1e12 + 1e6 * np.sin(X[:, 0]) + 1e5 * rng.normal(size=30)
    y[7] = 1e15  # an outlier; squared errors stay finite (~1e30)
    bandwidths = [0.2, 0.5, 1.5]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=bandwidths).fit(X, y)
    for h, score in zip(bandwidths, search.cv_results_["mean_test_score"], strict=True):
        loo = refit_loo(NadarayaWatsonRegressor(bandwidth=h), X, y)
        assert_allclose(score, -np.mean((loo - y) ** 2), rtol=1e-9)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_targets_near_the_float_maximum_do_not_overflow(kernel, algorithm):
    # Finite targets, so a convex combination of them is finite: the pooled sums
    # must not add n values near 1.8e308 before normalising.
    X = np.array([[0.0], [0.1], [0.2], [0.3]])
    Q = np.array([[0.15], [0.05]])
    for y in ([1.7e308] * 4, [-1.7e308, 1.7e308, 1.7e308, -1.7e308]):
        y = np.array(y)
        expected = naive_weights(X, Q, 1.0, kernel) @ (y / 4) * 4  # scaled: no overflow
        with np.errstate(over="raise", invalid="raise"):
            reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel=kernel, algorithm=algorithm)
            got = reg.fit(X, y).predict(Q)
        assert np.all(np.isfinite(got))
        assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * 1.7e308)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("degree", [1, 2])
def test_local_fits_of_targets_near_the_float_maximum_do_not_overflow(rng, degree, algorithm):
    # The moments y x^g of a local fit held y ~ 1e308 times inputs of a few bandwidths:
    # inf, and NaN fits (7 of 9 at degree 1). In units of a power of two near max |y|
    # they are the fits of y / 2^1023 times 2^1023, exactly.
    X = rng.uniform(0, 1, (50, 1))
    Q = np.linspace(0.05, 0.95, 9)[:, None]
    y = 1e308 * np.clip(rng.normal(size=50), -1.7, 1.7)
    reg = LocalPolynomialRegressor(0.2, degree=degree, algorithm=algorithm)
    scaled = np.ldexp(reg.fit(X, np.ldexp(y, -1023)).predict(Q), 1023)
    got = reg.fit(X, y).predict(Q)
    assert np.isfinite(got).all()
    assert_allclose(got, scaled, rtol=1e-12)
    assert_allclose(reg.predict(Q, return_std=True)[0], got, rtol=1e-12)
    assert_allclose(reg.predict_gradient(Q), np.ldexp(
        LocalPolynomialRegressor(0.2, degree=degree, algorithm=algorithm)
        .fit(X, np.ldexp(y, -1023)).predict_gradient(Q), 1023), rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_bandwidth_1e_minus_12_gives_the_nearest_training_point(rng, kernel, algorithm):
    X = rng.uniform(0, 5, size=(40, 2))
    y = rng.normal(size=40)
    labels = (y > 0).astype(int)
    Q = rng.uniform(0, 5, size=(25, 2))
    nearest = nearest_weights(X, Q)  # one 1.0 per row: no ties in random data
    reg = NadarayaWatsonRegressor(bandwidth=1e-12, kernel=kernel, algorithm=algorithm)
    assert_allclose(reg.fit(X, y).predict(Q), nearest @ y, rtol=1e-12)
    A = _dense(reg.attention_weights(Q))
    assert_allclose(A, nearest, atol=1e-12)
    clf = ParzenClassifier(bandwidth=1e-12, kernel=kernel, algorithm=algorithm).fit(X, labels)
    # Each class's log-sum is ~ -1e24 here; the class of the nearest point must win.
    nearest_class = nearest @ onehot(labels, [0, 1])
    assert_array_equal(clf.predict(Q), np.argmax(nearest_class, axis=1))
    assert_allclose(clf.predict_proba(Q), nearest_class, atol=1e-12)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_bandwidth_1e12_gives_the_weighted_mean(rng, kernel, algorithm):
    X = rng.uniform(0, 5, size=(40, 2))
    y = rng.normal(size=40)
    w = rng.uniform(0.1, 2.0, size=40)
    labels = np.arange(40) % 3
    Q = rng.uniform(-50, 50, size=(10, 2))
    # u = |q - x| / h <= 1e-10: kernels with a kink at 0 (1 - u, exp(-u)) move each
    # weight by up to 1e-10, hence the prediction by 1e-10 of the targets' scale.
    reg = NadarayaWatsonRegressor(bandwidth=1e12, kernel=kernel, algorithm=algorithm)
    got = reg.fit(X, y, sample_weight=w).predict(Q)
    assert_allclose(got, np.average(y, weights=w), rtol=0, atol=1e-10 * np.abs(y).max())
    clf = ParzenClassifier(bandwidth=1e12, kernel=kernel, algorithm=algorithm)
    shares = np.bincount(labels, weights=w) / w.sum()
    proba = clf.fit(X, labels, sample_weight=w).predict_proba(Q)
    assert_allclose(proba, np.tile(shares, (10, 1)), rtol=0, atol=1e-10)


@pytest.mark.parametrize("kernel", NAMES)
def test_float32_input_computes_in_float64_on_every_backend(rng, kernel):
    # The estimators compute in float64 whatever the input dtype: no tag promises
    # float32 preservation (that is a transformer tag), and float64 comes out.
    X = rng.uniform(0, 4, size=(60, 2)).astype(np.float32)
    y = rng.normal(size=60).astype(np.float32)
    labels = (y > 0).astype(int)
    Q = rng.uniform(0, 4, size=(15, 2)).astype(np.float32)
    assert get_tags(NadarayaWatsonRegressor()).transformer_tags is None
    outputs = {}
    for algorithm in BACKENDS:
        reg = NadarayaWatsonRegressor(bandwidth=0.7, kernel=kernel, algorithm=algorithm).fit(X, y)
        clf = ParzenClassifier(bandwidth=0.7, kernel=kernel, algorithm=algorithm).fit(X, labels)
        pred, proba, A = reg.predict(Q), clf.predict_proba(Q), reg.attention_weights(Q)
        assert pred.dtype == proba.dtype == A.dtype == reg.bandwidth_.dtype == np.float64
        outputs[algorithm] = pred, proba, _dense(A)
        # The same as fitting the float64 copies of the same values.
        reg64 = NadarayaWatsonRegressor(bandwidth=0.7, kernel=kernel, algorithm=algorithm)
        reg64.fit(X.astype(np.float64), y.astype(np.float64))
        assert_array_equal(pred, reg64.predict(Q.astype(np.float64)))
    for algorithm in ("kd_tree", "ball_tree"):
        for got, brute in zip(outputs[algorithm], outputs["brute"], strict=True):
            assert_allclose(got, brute, rtol=1e-12, atol=1e-12)
    assert_allclose(outputs["brute"][0], naive_predict(X, y, Q, 0.7, kernel), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("bandwidth", [1.0, "scott", "silverman", 1e-12, 1e12])
@pytest.mark.parametrize("algorithm", [*BACKENDS, "auto"])
@pytest.mark.parametrize("kernel", NAMES)
def test_single_training_sample(rng, kernel, algorithm, bandwidth):
    Q = np.vstack([[[1.0, 2.0]], rng.normal(scale=10, size=(5, 2))])
    reg = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel, algorithm=algorithm)
    reg.fit([[1.0, 2.0]], [3.0])
    assert np.all(reg.bandwidth_ > 0) and np.all(np.isfinite(reg.bandwidth_))
    assert_allclose(reg.predict(Q), 3.0, rtol=4 * EPS)
    assert_allclose(_dense(reg.attention_weights(Q)), 1.0, rtol=4 * EPS)
    clf = ParzenClassifier(bandwidth=bandwidth, kernel=kernel, algorithm=algorithm)
    clf.fit([[1.0, 2.0]], ["only"])
    assert_array_equal(clf.predict(Q), ["only"] * 6)
    assert_array_equal(clf.predict_proba(Q), np.ones((6, 1)))


@pytest.mark.parametrize("bandwidth", [0.5, 1e-12, 1e12])
@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_two_identical_points_with_different_targets(kernel, algorithm, bandwidth):
    X = np.array([[1.0, 2.0], [1.0, 2.0]])
    # On the point, near it, and far beyond any compact support (~1e12 bandwidths at 1e-12).
    Q = np.array([[1.0, 2.0], [1.1, 2.0], [-3.0, 7.0]])
    w = np.array([1.0, 3.0])
    reg = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel, algorithm=algorithm)
    assert_allclose(reg.fit(X, [3.0, 5.0]).predict(Q), 4.0, rtol=4 * EPS)
    assert_allclose(reg.fit(X, [3.0, 5.0], sample_weight=w).predict(Q), 4.5, rtol=4 * EPS)
    clf = ParzenClassifier(bandwidth=bandwidth, kernel=kernel, algorithm=algorithm)
    proba = clf.fit(X, [0, 1]).predict_proba(Q)
    # Equal weights at the same place: a fair coin everywhere, rows summing to 1.
    assert_allclose(proba, 0.5, rtol=1e-12)
    proba = clf.fit(X, [0, 1], sample_weight=w).predict_proba(Q)
    assert_allclose(proba, np.tile([0.25, 0.75], (3, 1)), rtol=1e-12)


# ===========================================================================
# Degenerate data
# ===========================================================================


@pytest.mark.parametrize("rule", ["scott", "silverman"])
@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_constant_feature_changes_nothing(rng, kernel, algorithm, rule):
    n = 50
    x = rng.normal(size=n)
    y = np.sin(2 * x) + 0.1 * rng.normal(size=n)
    X = np.column_stack([x, np.full(n, 1e9)])  # constant, and far from the origin
    Q = np.column_stack([rng.normal(size=12), np.full(12, 1e9)])
    reg = NadarayaWatsonRegressor(bandwidth=rule, kernel=kernel, algorithm=algorithm).fit(X, y)
    assert np.all(np.isfinite(reg.bandwidth_)) and np.all(reg.bandwidth_ > 0)
    # The constant column adds 0 to every distance: the fit on x alone, same h for x.
    alone = NadarayaWatsonRegressor(bandwidth=reg.bandwidth_[:1], kernel=kernel).fit(X[:, :1], y)
    assert_allclose(reg.predict(Q), alone.predict(Q[:, :1]), rtol=1e-12, atol=1e-12)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(bandwidth=rule, kernel=kernel)).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert np.all(np.isfinite(search.predict(Q)))

    # Documented: a feature of zero spread gets a scale of 1.0, with sample weights
    # too (whose weighted mean of a constant is not exactly the constant).
    w = rng.uniform(0.5, 2.0, size=n)
    weighted = NadarayaWatsonRegressor(bandwidth=rule, kernel=kernel, algorithm=algorithm)
    weighted.fit(X, y, sample_weight=w)
    assert_allclose(weighted.bandwidth_[1], naive_rule_of_thumb(X, rule, w)[1], rtol=1e-12)


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_all_identical_X(rng, kernel, algorithm):
    X = np.full((12, 3), 2.5)
    y = rng.normal(size=12)
    w = rng.uniform(0.5, 2.0, size=12)
    labels = np.arange(12) % 3
    Q = np.vstack([X[:1], rng.normal(scale=5.0, size=(4, 3))])
    reg = NadarayaWatsonRegressor(kernel=kernel, algorithm=algorithm).fit(X, y, sample_weight=w)
    assert np.all(reg.bandwidth_ > 0) and np.all(np.isfinite(reg.bandwidth_))
    # Every training point is equally near every query: the weighted mean.
    assert_allclose(reg.predict(Q), np.average(y, weights=w), rtol=1e-12)
    assert_allclose(_dense(reg.attention_weights(Q)), np.tile(w / w.sum(), (5, 1)), rtol=1e-12)
    clf = ParzenClassifier(kernel=kernel, algorithm=algorithm).fit(X, labels, sample_weight=w)
    shares = np.bincount(labels, weights=w) / w.sum()
    assert_allclose(clf.predict_proba(Q), np.tile(shares, (5, 1)), rtol=1e-12)

    # Leave-one-out: each point is predicted by the weighted mean of the others.
    search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel)).fit(X, y, sample_weight=w)
    loo = (np.sum(w * y) - w * y) / (w.sum() - w)
    expected = -np.average((loo - y) ** 2, weights=w)
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-10)
    # Identical X with identical y is a single observation: no leave-one-out.
    with pytest.raises(ValueError, match="at least 2 distinct"):
        BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel)).fit(X, np.ones(12))


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_one_class(rng, kernel, algorithm):
    X = rng.normal(size=(20, 2))
    Q = np.vstack([rng.normal(size=(5, 2)), [[1e6, -1e6]]])
    clf = ParzenClassifier(bandwidth=0.5, kernel=kernel, algorithm=algorithm).fit(X, ["a"] * 20)
    assert_array_equal(clf.classes_, ["a"])
    assert_array_equal(clf.predict(Q), ["a"] * 6)
    assert_array_equal(clf.predict_proba(Q), np.ones((6, 1)))
    assert_array_equal(clf.predict_log_proba(Q), np.zeros((6, 1)))
    search = BandwidthSearchCV(ParzenClassifier(kernel=kernel, algorithm=algorithm)).fit(
        X, [7] * 20
    )
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert_array_equal(search.predict(Q), [7] * 6)


@pytest.mark.parametrize("kernel", NAMES)
def test_a_class_seen_once_in_leave_one_out(rng, kernel):
    X = rng.normal(size=(25, 2))
    labels = np.array([0] * 12 + [1] * 12 + [2])  # class 2 appears once
    bandwidths = [0.3, 1.0, 3.0]
    search = BandwidthSearchCV(ParzenClassifier(kernel=kernel), bandwidths=bandwidths)
    search.fit(X, labels)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    classes = np.array([0, 1, 2])
    for h, score in zip(bandwidths, scores, strict=True):
        clf = ParzenClassifier(bandwidth=h, kernel=kernel)
        P = refit_loo(clf, X, labels, method="predict_proba", classes=classes)
        # Left out, the singleton's class has probability 0: log-loss clipped at eps.
        assert P[-1, 2] == 0.0
        p = np.clip(P[np.arange(len(X)), labels], EPS, 1 - EPS)
        assert_allclose(score, np.mean(np.log(p)), rtol=1e-10)
    assert_array_equal(search.classes_, classes)
    assert search.predict(X[-1:])[0] in classes


@pytest.mark.parametrize("fallback", ["nearest", "nan"])
@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_far_queries_for_every_kernel_on_every_backend(rng, kernel, algorithm, fallback):
    # Far beyond every support (compact) or where every weight underflows (infinite).
    X = rng.uniform(0, 1, size=(30, 2))
    y = rng.normal(size=30)
    labels = np.arange(30) % 3
    Q = np.array([[1e4, 1e4], [-1e4, 0.5], [0.5, 3e3]])
    h = 0.05
    if kernel in COMPACT:
        expected = nearest_weights(X, Q, h)  # the nearest point: the h -> 0 limit
    else:
        # Every weight underflows in linear space; the log-space softmax does not.
        # (Far away the exponential kernel weighs distance *differences*, which
        # stay finite: it does not tend to the nearest point.)
        expected = softmax_weights(X, Q, h, kernel)
    reg = NadarayaWatsonRegressor(
        bandwidth=h, kernel=kernel, algorithm=algorithm, fallback=fallback
    )
    pred = reg.fit(X, y).predict(Q)
    A = _dense(reg.attention_weights(Q))
    if fallback == "nan" and kernel in COMPACT:
        assert np.all(np.isnan(pred))
    else:
        # Infinite-support kernels never need the fallback.
        assert_allclose(pred, expected @ y, rtol=1e-9, atol=1e-12)
        assert_allclose(A, expected, atol=1e-9)
    clf = ParzenClassifier(bandwidth=h, kernel=kernel, algorithm=algorithm).fit(X, labels)
    expected_proba = expected @ onehot(labels, [0, 1, 2])
    assert_array_equal(clf.predict(Q), np.argmax(expected_proba, axis=1))
    assert_allclose(clf.predict_proba(Q), expected_proba, atol=1e-9)
    # The losing classes' log-probabilities stay finite for infinite support.
    log_proba = clf.predict_log_proba(Q)
    assert not np.any(np.isnan(log_proba))
    if kernel in INFINITE:
        assert np.all(np.isfinite(log_proba))


@pytest.mark.parametrize("algorithm", BACKENDS)
@pytest.mark.parametrize("kernel", NAMES)
def test_zero_weights_for_some_rows_equal_dropping_them(rng, kernel, algorithm):
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.1, size=40)
    labels = (X[:, 1] > 0).astype(int)
    w = rng.uniform(0.5, 2.0, size=40)
    w[::4] = 0.0
    keep = w > 0
    Q = rng.normal(size=(15, 2))
    params = {"bandwidth": 0.6, "kernel": kernel, "algorithm": algorithm}
    reg = NadarayaWatsonRegressor(**params).fit(X, y, sample_weight=w)
    dropped = NadarayaWatsonRegressor(**params).fit(X[keep], y[keep], sample_weight=w[keep])
    assert_allclose(reg.predict(Q), dropped.predict(Q), rtol=1e-12, atol=1e-12)
    A = _dense(reg.attention_weights(Q))
    assert np.all(A[:, ~keep] == 0)
    clf = ParzenClassifier(**params).fit(X, labels, sample_weight=w)
    dropped = ParzenClassifier(**params).fit(X[keep], labels[keep], sample_weight=w[keep])
    assert_allclose(clf.predict_proba(Q), dropped.predict_proba(Q), rtol=1e-12, atol=1e-12)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel), bandwidths=[0.3, 0.9])
    a = search.fit(X, y, sample_weight=w).cv_results_["mean_test_score"]
    b = search.fit(X[keep], y[keep], sample_weight=w[keep]).cv_results_["mean_test_score"]
    assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize(
    "est",
    [
        NadarayaWatsonRegressor(),
        ParzenClassifier(),
        BandwidthSearchCV(NadarayaWatsonRegressor()),
        BandwidthSearchCV(ParzenClassifier(), method="sgd"),
        BandwidthSearchCV(NadarayaWatsonRegressor(), cv=3),
    ],
    ids=repr,
)
def test_all_zero_weights_raise_a_clear_error(est):
    X = np.arange(12.0).reshape(6, 2)
    with pytest.raises(ValueError, match="(?i)sample.weight"):
        est.fit(X, [0, 1, 0, 1, 0, 1], sample_weight=np.zeros(6))


# ===========================================================================
# Bad input: a clear ValueError / TypeError, before any heavy work
# ===========================================================================


@pytest.fixture
def no_heavy_work(monkeypatch):
    """Make every engine entry point fail loudly: validation must come first."""

    def heavy(*args, **kwargs):
        raise AssertionError("the engine ran before the input was validated")

    for name in (
        "prepare_train",
        "choose_algorithm",
        "pool",
        "attention",
        "class_log_sums",
        "kernel_sums",
        "loo_pool",
        "loo_loss_grad",
    ):
        monkeypatch.setattr(_engine, name, heavy)


def _fitted(make):
    X = np.arange(24.0).reshape(8, 3) / 7
    return make().fit(X, [0, 1, 0, 1, 2, 2, 1, 0])


ESTIMATORS = {
    "regressor": lambda: NadarayaWatsonRegressor(),
    "classifier": lambda: ParzenClassifier(),
    "tree-regressor": lambda: NadarayaWatsonRegressor(algorithm="kd_tree"),
    "search": lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[0.5, 1.0]),
    "search-classifier": lambda: BandwidthSearchCV(ParzenClassifier(), bandwidths=[0.5, 1.0]),
}
_Y = [0, 1, 0, 1]
_X = [[0.0, 1.0, 2.0], [1.0, 0.5, 2.0], [2.0, 0.0, 1.0], [3.0, 1.0, 0.0]]


def _with(value, where):
    X = np.array(_X)
    X[where] = value
    return X


BAD_X = {
    "nan": (ValueError, "X contains NaN", _with(np.nan, (1, 2))),
    "inf": (ValueError, "X contains infinity", _with(np.inf, (0, 0))),
    "-inf": (ValueError, "X contains infinity", _with(-np.inf, (3, 1))),
    "ragged list": (ValueError, "inhomogeneous|sequence", [[0.0, 1.0, 2.0], [1.0, 2.0]] * 2),
    "object array of strings": (
        ValueError,
        "could not convert string to float",
        np.array([["a", 1.0, 2.0]] * 4, dtype=object),
    ),
    "strings": (ValueError, "could not convert string to float", [["a", "b", "c"]] * 4),
    "complex": (ValueError, "[Cc]omplex", np.array(_X) + 1j),
    "sparse csr": (TypeError, "[Ss]parse", sparse.csr_matrix(np.array(_X))),
    "sparse coo": (TypeError, "[Ss]parse", sparse.coo_array(np.array(_X))),
    "3-D": (ValueError, "dim 3", np.ones((4, 3, 2))),
    "1-D": (ValueError, "2D array", np.arange(4.0)),
    "no sample": (ValueError, "0 sample", np.empty((0, 3))),
    "no feature": (ValueError, "0 feature", np.empty((4, 0))),
}


@pytest.mark.parametrize("bad", BAD_X, ids=str)
@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_bad_X_at_fit(make, bad, no_heavy_work):
    error, match, X = BAD_X[bad]
    y = _Y if bad not in ("no sample",) else []
    with pytest.raises(error, match=match):
        make().fit(X, y)


@pytest.mark.parametrize("bad", BAD_X, ids=str)
@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_bad_X_at_predict(make, bad, monkeypatch):
    est = _fitted(make)
    error, match, X = BAD_X[bad]
    if bad == "no feature":  # validation reports the feature count first
        match = "0 feature|features"
    for name in ("pool", "attention", "class_log_sums"):
        monkeypatch.setattr(_engine, name, lambda *a, **k: pytest.fail("engine before validation"))
    methods = ["predict", "attention_weights", "predict_proba", "predict_log_proba"]
    for method in (m for m in methods if hasattr(est, m)):
        with pytest.raises(error, match=match):
            getattr(est, method)(X)


def test_object_array_of_numbers_is_accepted(rng):
    X = rng.normal(size=(10, 2))
    y = rng.normal(size=10)
    a = NadarayaWatsonRegressor(bandwidth=0.5).fit(X.astype(object), y).predict(X.astype(object))
    b = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y).predict(X)
    assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_non_finite_y_and_sample_weight(make, bad, no_heavy_work):
    X = np.array(_X)
    y = np.array(_Y, dtype=float)
    y[2] = bad
    with pytest.raises(ValueError, match="y contains"):
        make().fit(X, y)
    w = np.ones(4)
    w[1] = bad
    if bad == -np.inf:
        match = "sample_weight contains|[Nn]egative"
    else:
        match = "sample_weight contains"
    with pytest.raises(ValueError, match=match):
        make().fit(X, _Y, sample_weight=w)


@pytest.mark.parametrize(
    ("sample_weight", "match"),
    [
        (-np.ones(4), "[Nn]egative"),
        (np.ones(3), "sample_weight"),
        (np.ones((4, 1)), "[Ss]ample weights must be 1D"),
        (["a", "b", "c", "d"], "could not convert string"),
    ],
)
@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_bad_sample_weight(make, sample_weight, match, no_heavy_work):
    with pytest.raises(ValueError, match=match):
        make().fit(np.array(_X), _Y, sample_weight=sample_weight)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_wrong_number_of_features_at_predict_for_every_method(make, monkeypatch):
    est = _fitted(make)
    for name in ("pool", "attention", "class_log_sums"):
        monkeypatch.setattr(_engine, name, lambda *a, **k: pytest.fail("engine before validation"))
    methods = ["predict", "attention_weights", "predict_proba", "predict_log_proba", "score"]
    for method in (m for m in methods if hasattr(est, m)):
        for X in (np.ones((2, 2)), np.ones((2, 4))):
            args = (X, [0, 1]) if method == "score" else (X,)
            with pytest.raises(ValueError, match="features"):
                getattr(est, method)(*args)


@pytest.mark.parametrize(
    "bandwidth", [["a", "b", "c"], ["1", "2", "3"], "1.0", ["scott"] * 3, [None, 1.0, 1.0]]
)
@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, ParzenClassifier])
def test_bandwidth_given_as_strings(make, bandwidth, no_heavy_work):
    with pytest.raises(ValueError, match="bandwidth"):
        make(bandwidth=bandwidth).fit(np.array(_X), _Y)


@pytest.mark.parametrize("bandwidths", [["a", "b"], [["1", "2", "3"]], "abc", [None]])
def test_search_bandwidths_given_as_strings(bandwidths, no_heavy_work):
    with pytest.raises(ValueError, match="bandwidths"):
        BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=bandwidths).fit(np.array(_X), _Y)


# ===========================================================================
# Concurrency
# ===========================================================================


def _blas_threads():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def _in_threads(fn, n=8):
    """Run ``fn`` from ``n`` threads released at the same instant."""
    barrier = threading.Barrier(n)

    def run(_):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


@pytest.mark.parametrize("algorithm", BACKENDS)
def test_predict_from_eight_threads_equals_serial(rng, algorithm):
    X = rng.uniform(size=(2000, 2))
    y = np.column_stack([np.sin(6 * X[:, 0]), X[:, 1] ** 2])
    labels = np.digitize(X[:, 0] + X[:, 1], [0.7, 1.3])
    Q = rng.uniform(-0.1, 1.1, size=(1500, 2))
    reg = NadarayaWatsonRegressor(bandwidth=0.05, algorithm=algorithm).fit(X, y)
    clf = ParzenClassifier(bandwidth=0.05, kernel="epanechnikov", algorithm=algorithm)
    clf.fit(X, labels)

    def results():
        return reg.predict(Q), _dense(reg.attention_weights(Q[:300])), clf.predict_log_proba(Q)

    serial = results()
    for got in _in_threads(results):
        # Same chunks, same arithmetic; only the BLAS thread count of a product
        # may differ between overlapping calls, which moves the last bit at most.
        for a, b in zip(got, serial, strict=True):
            assert_allclose(a, b, rtol=1e-13, atol=1e-15)


_BLAS_SCRIPT = """
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_info

from skl_nw import NadarayaWatsonRegressor


def blas():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


rng = np.random.default_rng(0)
X, y, Q = rng.uniform(size=(2000, 3)), rng.normal(size=2000), rng.uniform(size=(2500, 3))
reg = NadarayaWatsonRegressor(bandwidth=0.3, algorithm="brute").fit(X, y)
before = blas()
after = []
for _ in range(3):
    barrier = threading.Barrier(8)

    def run(_):
        barrier.wait()
        return reg.predict(Q)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, range(8)))
    after.append(blas())
print(json.dumps({"before": before, "after": after}))
"""


def test_concurrent_predict_leaves_the_blas_thread_count_as_found():
    # predict limits BLAS to one thread inside its chunks; the limit is
    # process-wide, so overlapping calls from several threads must not leave it
    # behind (every later product in the user's process would run on one core).
    # A fresh interpreter with several BLAS threads: a known start, whatever this
    # process's earlier tests left.
    env = {
        **os.environ,
        "OPENBLAS_NUM_THREADS": "4",
        "MKL_NUM_THREADS": "4",
        "OMP_NUM_THREADS": "4",
    }
    done = subprocess.run(
        [sys.executable, "-c", _BLAS_SCRIPT],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"]
    if (os.cpu_count() or 1) > 1:  # OpenBLAS caps the 4 at the core count
        assert min(result["before"]) > 1  # else the check below would be vacuous
    assert result["after"] == [result["before"]] * 3


def test_results_do_not_depend_on_n_jobs_or_chunk_size(rng):
    X = rng.uniform(size=(600, 2))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    labels = (X[:, 0] > X[:, 1]).astype(int)
    Q = rng.uniform(size=(900, 2))

    def results(n_jobs, algorithm):
        reg = NadarayaWatsonRegressor(bandwidth=0.08, algorithm=algorithm, n_jobs=n_jobs)
        clf = ParzenClassifier(bandwidth=0.08, algorithm=algorithm, n_jobs=n_jobs)
        search = BandwidthSearchCV(
            NadarayaWatsonRegressor(algorithm=algorithm), bandwidths=[0.05, 0.1], n_jobs=n_jobs
        )
        return (
            reg.fit(X, y).predict(Q),
            _dense(reg.attention_weights(Q[:200])),
            clf.fit(X, labels).predict_proba(Q),
            search.fit(X, y).cv_results_["mean_test_score"],
        )

    for algorithm in BACKENDS:
        reference = results(None, algorithm)
        for n_jobs in (1, 2, -1):
            for memory in (None, 1):  # 1 MiB: chunks of a few dozen queries
                with config_context(working_memory=memory or 1024):
                    got = results(n_jobs, algorithm)
                for a, b in zip(got, reference, strict=True):
                    assert_allclose(a, b, rtol=1e-13, atol=1e-15)


# ===========================================================================
# Persistence and trust
# ===========================================================================


def _fitted_estimators():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    labels = np.where(X[:, 1] > 0, "up", "down")
    # A mixed design: the kernel records of the categories must persist as data too.
    Xm = np.column_stack([X[:, 0], rng.integers(0, 3, 80), rng.integers(0, 4, 80)])
    mixed = {"categorical_features": [1, 2], "ordered_features": [2]}
    return {
        "regressor-mixed": NadarayaWatsonRegressor(**mixed).fit(Xm, y),
        "local-linear-mixed": LocalPolynomialRegressor(
            categorical_features=[1], categorical_kernel="li_racine"
        ).fit(Xm[:, :2], y),
        "classifier-mixed": ParzenClassifier(**mixed).fit(Xm, labels),
        "search-mixed": BandwidthSearchCV(NadarayaWatsonRegressor(**mixed)).fit(Xm, y),
        "regressor-brute": NadarayaWatsonRegressor(kernel="cosine").fit(X, y),
        "regressor-kd_tree": NadarayaWatsonRegressor(
            bandwidth=0.3, algorithm="kd_tree", kernel="epanechnikov"
        ).fit(X, y),
        "regressor-ball_tree": NadarayaWatsonRegressor(
            bandwidth=[0.3, 0.5], algorithm="ball_tree"
        ).fit(X, np.column_stack([y, -y])),
        "classifier-brute": ParzenClassifier(priors=[0.3, 0.7]).fit(X, labels),
        "classifier-kd_tree": ParzenClassifier(bandwidth=0.4, algorithm="kd_tree").fit(X, labels),
        "search-loo": BandwidthSearchCV(NadarayaWatsonRegressor(algorithm="kd_tree")).fit(X, y),
        "search-sgd": BandwidthSearchCV(
            ParzenClassifier(), method="sgd", max_iter=3, tol=None, random_state=0
        ).fit(X, labels),
        "search-cv": BandwidthSearchCV(NadarayaWatsonRegressor(), cv=3, bandwidths=[0.3, 1.0]).fit(
            X, y
        ),
    }


def _queries(name, est):
    # Continuous queries, or for the mixed fits a continuous column and category codes
    # (an unseen one, 5, among them).
    rng = np.random.default_rng(8)
    if "mixed" not in name:
        return rng.normal(size=(25, 2))
    codes = rng.integers(0, 6, size=(25, 2)).astype(float)
    return np.column_stack([rng.normal(size=25), codes])[:, : est.n_features_in_]


def _assert_same_predictions(a, b, Q):
    for method in ("predict", "predict_proba", "predict_log_proba", "attention_weights"):
        if hasattr(a, method):
            got, expected = getattr(b, method)(Q), getattr(a, method)(Q)
            assert_array_equal(_dense(got), _dense(expected))
    assert_array_equal(a.bandwidth_, b.bandwidth_)
    tree = getattr(a, "tree_", getattr(getattr(a, "best_estimator_", None), "tree_", None))
    tree_b = getattr(b, "tree_", getattr(getattr(b, "best_estimator_", None), "tree_", None))
    assert type(tree) is type(tree_b)


def test_pickle_and_joblib_round_trips():
    for name, est in _fitted_estimators().items():
        Q = _queries(name, est)
        _assert_same_predictions(est, pickle.loads(pickle.dumps(est)), Q)
        buffer = io.BytesIO()
        joblib.dump(est, buffer)
        buffer.seek(0)
        _assert_same_predictions(est, joblib.load(buffer), Q)


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_span_fits_pickled_with_the_compiled_grid_load_without_it(rng, monkeypatch, make):
    # A span in 2-D keeps its rows in a cell grid only the compiled kernels search: loaded
    # where numba is absent (an optional extra), predict raised AttributeError. It now
    # searches a KD-tree of the same rows: the same radii, the same predictions.
    from skl_nw._engine import _grid

    X = rng.uniform(0, 1, (300, 2))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    Q = rng.uniform(0, 1, (40, 2))
    want = make(kernel="tricube", span=0.3).fit(X, y).predict(Q)
    with monkeypatch.context() as patch:
        patch.setattr(_grid, "usable", lambda d: True)
        blob = pickle.dumps(make(kernel="tricube", span=0.3).fit(X, y))
    assert b"CellGrid" in blob
    monkeypatch.setattr(_grid, "compiled", lambda: None)  # the grid's kernels absent
    assert_allclose(pickle.loads(blob).predict(Q), want, rtol=1e-12)


_TRUSTED_PACKAGES = ("skl_nw.", "numpy.", "scipy.", "sklearn.")


@pytest.mark.parametrize(
    "est",
    [
        NadarayaWatsonRegressor(0.1),
        NadarayaWatsonRegressor(0.1, algorithm="binned"),
        LocalPolynomialRegressor(0.2, algorithm="kd_tree", kernel="epanechnikov"),
        LocalPolynomialRegressor(0.2, algorithm="binned"),
        ParzenClassifier(0.1, algorithm="ball_tree", kernel="epanechnikov"),
    ],
    ids=lambda e: f"{type(e).__name__}-{e.algorithm}",
)
def test_pickles_made_before_the_backend_object_still_load(rng, est):
    # Fits pickled before the training side became one object held _fit_method and
    # _train (exact) or _binned (binned); their state is rebuilt on load.
    X = rng.uniform(0, 1, (300, 2))
    y = X[:, 0] + rng.normal(0, 0.1, 300)
    fitted = est.fit(X, (y > 0.5) if isinstance(est, ParzenClassifier) else y)
    state = fitted.__getstate__()
    backend = state.pop("_backend")
    old = {**state, "_fit_method": backend.method}
    old["_binned" if backend.method == "binned" else "_train"] = getattr(
        backend, "sums" if backend.method == "binned" else "train"
    )
    loaded = pickle.loads(pickle.dumps(fitted))
    loaded.__setstate__(old)
    predict = "predict_proba" if isinstance(est, ParzenClassifier) else "predict"
    assert_array_equal(getattr(loaded, predict)(X[:20]), getattr(fitted, predict)(X[:20]))
    assert loaded._fit_method == backend.method and type(loaded._backend) is type(backend)


@pytest.mark.parametrize(
    ("est", "old"),
    [
        (NadarayaWatsonRegressor(0.1), b"skl_nw._estimators"),
        (LocalPolynomialRegressor(0.2), b"skl_nw._local_poly"),
        (ParzenClassifier(0.1), b"skl_nw._parzen"),
    ],
)
def test_pickles_naming_the_modules_before_the_subpackages_still_load(rng, est, old):
    X = rng.uniform(0, 1, (200, 2))
    y = X[:, 0] + rng.normal(0, 0.1, 200)
    fitted = est.fit(X, (y > 0.5) if isinstance(est, ParzenClassifier) else y)
    new = type(est).__module__.encode()
    data = pickle.dumps(fitted, protocol=0)  # text opcodes: the module name is a line
    data = data.replace(b"c" + new + b"\n", b"c" + old + b"\n")
    assert b"c" + old + b"\n" in data and b"c" + new + b"\n" not in data
    predict = "predict_proba" if isinstance(est, ParzenClassifier) else "predict"
    assert_array_equal(getattr(pickle.loads(data), predict)(X), getattr(fitted, predict)(X))


def test_pickles_naming_the_discrete_kernels_old_module_still_load(rng):
    # Categorical fits pickle their discrete kernels by name, through the module that
    # held them before they had their own (skl_nw._kernels).
    X = np.column_stack([rng.uniform(0, 1, 200), rng.integers(0, 3, 200)])
    y = X[:, 0] + (X[:, 1] == 1) + rng.normal(0, 0.1, 200)
    fitted = NadarayaWatsonRegressor([0.1, 0.2], categorical_features=[1]).fit(X, y)
    data = pickle.dumps(fitted, protocol=0)
    assert b"cskl_nw._discrete_kernels\n" in data
    data = data.replace(b"cskl_nw._discrete_kernels\n", b"cskl_nw._kernels\n")
    assert_array_equal(pickle.loads(data).predict(X), fitted.predict(X))


def test_skops_round_trip_trusting_only_our_and_scientific_types(tmp_path):
    for name, est in _fitted_estimators().items():
        path = tmp_path / f"{name}.skops"
        sio.dump(est, path)
        untrusted = sio.get_untrusted_types(file=path)
        # Only our own classes and numpy / scipy / scikit-learn ones; no function
        # of ours (a lambda would be arbitrary code, and cannot be loaded anyway).
        assert all(t.startswith(_TRUSTED_PACKAGES) for t in untrusted), (name, untrusted)
        odd = [t for t in untrusted if "<lambda>" in t or "<locals>" in t]
        assert odd == [], (name, odd)
        # Every type of ours is a class (an estimator or a data holder), not a function.
        for t in (t for t in untrusted if t.startswith("skl_nw.")):
            module, _, attr = t.rpartition(".")
            assert isinstance(getattr(importlib.import_module(module), attr, None), type), t
        loaded = sio.load(path, trusted=untrusted)
        _assert_same_predictions(est, loaded, _queries(name, est))


# ===========================================================================
# Memory
# ===========================================================================


@pytest.mark.slow
def test_brute_force_memory_stays_bounded_for_1e5_by_1e5(rng):
    n = 100_000
    X = rng.uniform(size=(n, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    Q = rng.uniform(size=(n, 2))
    reg = NadarayaWatsonRegressor(bandwidth=0.05, algorithm="brute", n_jobs=2).fit(X, y)
    pred, peak = traced_peak(lambda: reg.predict(Q))
    # The dense (1e5, 1e5) matrix would be 80 GB; the budget is 1 GiB by default.
    assert peak < 512 * 2**20
    sample = rng.choice(n, 50, replace=False)
    assert_allclose(pred[sample], naive_predict(X, y, Q[sample], 0.05), rtol=1e-9, atol=1e-12)


def test_overflowing_queries_raise_without_a_runtime_warning():
    # Found by the fuzz test: a search on tiny inputs picks h ~ 1e-306; a query
    # at 102 then overflows x / h.  The documented ValueError, and no warning first.
    X = np.array([[4.36502964e-305], [0.0]])
    search = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, np.zeros(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="overflows"):
            search.predict(np.array([[102.0]]))
