"""The KD-tree / Ball-tree path against brute force and independent references.

The algorithm changes speed, never results: every tree-path quantity
(predictions, class probabilities, attention weights, the nearest-point
fallback, leave-one-out pooling, the bandwidth search) is compared with the
brute-force path, and where possible with a reference that shares no code
with the engine (explicit refits, the log-space formula of ``conftest.py``,
scikit-learn's ``RadiusNeighborsRegressor``).  Infinite-support
kernels are truncated only as far as ``rtol`` allows, and the documented
bound ``|tree - brute| <= rtol * (max y - min y)`` is checked, along with the
fact that truncation does happen (so the bound is not vacuous).
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn import config_context
from sklearn.neighbors import BallTree, KDTree, RadiusNeighborsRegressor

from conftest import log_weights as _log  # the short name of the engine calls below
from conftest import naive_log_class_proba, onehot, refit_loo, scaled_distances, traced_peak
from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier, _engine
from skl_nw._engine import _tree
from skl_nw._kernels import KERNELS, get_kernel, kernel_names

NAMES = kernel_names()
COMPACT = [name for name in NAMES if KERNELS[name].compact]
INFINITE = [name for name in NAMES if not KERNELS[name].compact]
TREES = ["kd_tree", "ball_tree"]
TREE_CLASS = {"kd_tree": KDTree, "ball_tree": BallTree}


def _weights(rng, n, zero_share=0.2):
    """Positive weights with about ``zero_share`` of them set to exactly 0."""
    w = rng.uniform(0.5, 2.0, size=n)
    w[rng.choice(n, int(zero_share * n), replace=False)] = 0.0
    return w


def _regression_data(rng, n, d, k=2):
    """Uniform inputs in the unit cube and targets of a large, uneven scale."""
    X = rng.uniform(size=(n, d))
    s = X.sum(axis=1)
    y = np.column_stack([100.0 * np.sin(3.0 * s), 1e3 * X[:, 0] ** 2 - 400.0][:k])
    y += rng.normal(scale=5.0, size=y.shape)
    return X, y


def _queries(rng, m, d):
    """Queries inside the cube and, for a quarter of them, up to 0.3 outside it."""
    inside = rng.uniform(size=(m - m // 4, d))
    around = rng.uniform(-0.3, 1.3, size=(m // 4, d))
    return np.vstack([inside, around])


def _bandwidth(spec, d):
    return np.linspace(0.08, 0.3, d) if spec == "per-feature" else spec


def _scale_atol(y):
    """Absolute tolerance of 1e-10 relative to the scale of the values."""
    return 1e-10 * np.abs(y).max()


# --------------------------------------------------------------------------
# Predictions, probabilities and attention weights: tree == brute


@pytest.mark.parametrize("bandwidth", [0.04, 0.25, "per-feature"])
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", NAMES)
def test_regressor_tree_equals_brute(rng, kernel, algorithm, d, bandwidth):
    n, m = 300, 80
    X, y = _regression_data(rng, n, d)
    w = _weights(rng, n)
    Q = _queries(rng, m, d)
    h = _bandwidth(bandwidth, d)
    params = {"bandwidth": h, "kernel": kernel}
    brute = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = NadarayaWatsonRegressor(algorithm=algorithm, **params).fit(X, y, sample_weight=w)
    assert tree._fit_method == algorithm and brute._fit_method == "brute"

    expected = brute.predict(Q)
    assert np.all(np.isfinite(expected))
    assert_allclose(tree.predict(Q), expected, rtol=0, atol=_scale_atol(y))
    # One output at a time gives the same numbers (no mixing between columns).
    tree_1d = NadarayaWatsonRegressor(algorithm=algorithm, **params).fit(X, y[:, 1], w)
    assert tree_1d.predict(Q).shape == (m,)
    assert_allclose(tree_1d.predict(Q), expected[:, 1], rtol=0, atol=_scale_atol(y))


@pytest.mark.parametrize("bandwidth", [0.04, 0.25])
@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", NAMES)
def test_attention_weights_are_csr_and_equal_brute(rng, kernel, algorithm, bandwidth):
    n, m, d = 250, 60, 2
    X, y = _regression_data(rng, n, d)
    w = _weights(rng, n)
    Q = _queries(rng, m, d)
    params = {"bandwidth": bandwidth, "kernel": kernel}
    brute = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = NadarayaWatsonRegressor(algorithm=algorithm, **params).fit(X, y, sample_weight=w)

    A = tree.attention_weights(Q, sparse=True)
    assert sparse.issparse(A) and A.format == "csr"
    assert A.shape == (m, n)
    dense = brute.attention_weights(Q)
    assert isinstance(dense, np.ndarray)
    # The same type on every path: dense by default, CSR when asked.
    assert_array_equal(tree.attention_weights(Q), A.toarray())
    assert_array_equal(brute.attention_weights(Q, sparse=True).toarray(), dense)
    assert_allclose(A.toarray(), dense, rtol=0, atol=1e-15)
    assert_allclose(np.asarray(A.sum(axis=1)).ravel(), 1.0, rtol=1e-12)
    assert A.min() >= 0.0
    # Zero-weight training points never receive attention, not even stored zeros.
    assert not np.isin(A.indices, np.flatnonzero(w == 0)).any()
    assert_allclose(A @ y, tree.predict(Q), rtol=0, atol=_scale_atol(y))


@pytest.mark.parametrize("priors", [None, [0.2, 0.3, 0.5]])
@pytest.mark.parametrize("bandwidth", [0.06, "per-feature"])
@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", NAMES)
def test_classifier_tree_equals_brute(rng, kernel, algorithm, bandwidth, priors):
    n, m, d = 300, 80, 2
    X = rng.uniform(size=(n, d))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0.5, "b", "a").astype(object)
    y[X[:, 1] > 0.8] = "c"
    w = _weights(rng, n)
    Q = _queries(rng, m, d)
    params = {"bandwidth": _bandwidth(bandwidth, d), "kernel": kernel, "priors": priors}
    brute = ParzenClassifier(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = ParzenClassifier(algorithm=algorithm, **params).fit(X, y, sample_weight=w)

    P = brute.predict_proba(Q)
    assert_allclose(tree.predict_proba(Q), P, rtol=0, atol=1e-10)
    log_p = brute.predict_log_proba(Q)
    tree_log_p = tree.predict_log_proba(Q)
    # Same -inf entries (a class with no point in a compact support), and
    # finite entries equal to 1e-10 relative however negative they are.
    assert_array_equal(np.isneginf(tree_log_p), np.isneginf(log_p))
    assert_allclose(tree_log_p, log_p, rtol=1e-10, atol=1e-12)
    assert_array_equal(tree.predict(Q), brute.predict(Q))

    A = tree.attention_weights(Q, sparse=True)
    assert sparse.issparse(A) and A.format == "csr"
    assert_allclose(A.toarray(), brute.attention_weights(Q), rtol=0, atol=1e-15)
    if priors is None:  # with priors the probabilities reweight the classes
        assert_allclose(A @ onehot(y, tree.classes_), P, rtol=0, atol=1e-12)


@pytest.mark.parametrize("priors", [None, [0.5, 0.5]])
@pytest.mark.parametrize("algorithm", TREES)
def test_far_class_keeps_a_finite_log_probability(rng, algorithm, priors):
    # Class "far" lies 60 bandwidths away: its probability underflows to 0 but
    # its log-probability (about -1800) is finite and must stay exact.  This is
    # why the tree path truncates each class relative to its own mass.
    near = rng.normal(scale=0.3, size=(100, 2))
    far = rng.normal(scale=0.3, size=(60, 2)) + [60.0, 0.0]
    X = np.vstack([near, far])
    y = np.array(["near"] * 100 + ["far"] * 60)
    Q = rng.normal(scale=0.5, size=(20, 2))

    # The reference: log-sum-exp of the Gaussian log kernel, class by class.
    classes = np.array(["far", "near"])
    expected = naive_log_class_proba(X, y, Q, 1.0, "gaussian", classes=classes, priors=priors)
    assert np.all(expected[:, 0] < -1500)

    params = {"bandwidth": 1.0, "kernel": "gaussian", "priors": priors}
    for method in ["brute", algorithm]:
        clf = ParzenClassifier(algorithm=method, **params).fit(X, y)
        log_p = clf.predict_log_proba(Q)
        assert np.all(np.isfinite(log_p)), method
        assert_allclose(log_p, expected, rtol=1e-10, atol=1e-13, err_msg=method)
        assert_array_equal(clf.predict_proba(Q)[:, 0], 0.0)
        assert_array_equal(clf.predict(Q), "near")


# --------------------------------------------------------------------------
# Empty neighbourhoods


def _fallback_data():
    """Integer data (in units of h = 0.5) where every distance is exact.

    Query (-5, 0), i.e. (-10, 0) in bandwidth units, is 10 from (0, 0) (two
    points, weights 1 and 3) and from (-10, 10) (weight 2): a three-way tie;
    the zero-weight point at (-6, 0) is closer but never chosen.  Query
    (10, 0) has the single nearest point (6, 0).
    """
    X = 0.5 * np.array(
        [[0, 0], [0, 0], [-10, 10], [-6, 0], [5, 5], [6, 0], [1, 1], [2, -1]], dtype=float
    )
    y = np.array(
        [[0, 1], [4, 1], [10, -2], [1000, 1000], [-7, 3], [3, 8], [2, 2], [5, 5]], dtype=float
    )
    w = np.array([1.0, 3.0, 2.0, 0.0, 1.0, 1.0, 1.0, 2.0])
    Q = 0.5 * np.array([[-10, 0], [10, 0], [0.5, 0.5]])
    expected_far = np.array([[(0 * 1 + 4 * 3 + 10 * 2) / 6, (1 + 3 - 4) / 6], [3.0, 8.0]])
    return X, y, w, Q, expected_far


@pytest.mark.parametrize("algorithm", ["brute", *TREES])
@pytest.mark.parametrize("kernel", COMPACT)
def test_empty_neighbourhood_uses_the_nearest_points(kernel, algorithm):
    X, y, w, Q, expected_far = _fallback_data()
    reg = NadarayaWatsonRegressor(bandwidth=0.5, kernel=kernel, algorithm=algorithm)
    reg.fit(X, y, sample_weight=w)
    pred = reg.predict(Q)
    assert_allclose(pred[:2], expected_far, rtol=1e-13, atol=1e-13)
    brute = NadarayaWatsonRegressor(bandwidth=0.5, kernel=kernel, algorithm="brute")
    assert_allclose(pred, brute.fit(X, y, sample_weight=w).predict(Q), rtol=1e-13, atol=1e-13)

    A = reg.attention_weights(Q)
    A = A.toarray() if sparse.issparse(A) else A
    assert_allclose(A[0], [1 / 6, 3 / 6, 2 / 6, 0, 0, 0, 0, 0], rtol=1e-13, atol=1e-15)
    assert_array_equal(A[1], [0, 0, 0, 0, 0, 1, 0, 0])

    # The classifier falls back the same way: shares of the nearest points.
    labels = np.array([0, 1, 1, 0, 0, 2, 2, 2])
    clf = ParzenClassifier(bandwidth=0.5, kernel=kernel, algorithm=algorithm)
    proba = clf.fit(X, labels, sample_weight=w).predict_proba(Q[:2])
    assert_allclose(proba, [[1 / 6, 5 / 6, 0], [0, 0, 1]], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("algorithm", ["brute", *TREES])
@pytest.mark.parametrize("kernel", COMPACT)
def test_fallback_nan_on_every_path(kernel, algorithm):
    X, y, w, Q, _ = _fallback_data()
    reg = NadarayaWatsonRegressor(bandwidth=0.5, kernel=kernel, algorithm=algorithm, fallback="nan")
    pred = reg.fit(X, y, sample_weight=w).predict(Q)
    assert np.all(np.isnan(pred[:2]))
    assert np.all(np.isfinite(pred[2]))
    brute = NadarayaWatsonRegressor(bandwidth=0.5, kernel=kernel, algorithm="brute")
    assert_allclose(pred[2], brute.fit(X, y, sample_weight=w).predict(Q[2:])[0], rtol=1e-13)
    # The documented identity attention_weights(X) @ y == predict(X) holds for
    # the empty rows too: they are NaN, not a silent row of zeros.
    assert_allclose(reg.attention_weights(Q) @ y, pred, rtol=1e-13, atol=1e-13, equal_nan=True)


# --------------------------------------------------------------------------
# Truncation of infinite-support kernels: rtol


def _rtol_problem(rng, n=600, k=2):
    X, y = _regression_data(rng, n, 2, k)
    w = _weights(rng, n, zero_share=0.1)
    return X, y, w, _queries(rng, 200, 2)


@pytest.mark.parametrize("rtol", [1e-3, 1e-6])
@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", INFINITE)
def test_rtol_bounds_the_prediction_error(rng, kernel, algorithm, rtol):
    X, y, w, Q = _rtol_problem(rng)
    params = {"bandwidth": 0.03, "kernel": kernel}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = NadarayaWatsonRegressor(algorithm=algorithm, rtol=rtol, **params)
    tree.fit(X, y, sample_weight=w)
    error = np.abs(tree.predict(Q) - exact.predict(Q)).max(axis=0)
    active = y[w > 0]
    assert np.all(error <= rtol * (active.max(axis=0) - active.min(axis=0)))

    labels = (X[:, 0] > X[:, 1]).astype(int) + (X[:, 0] > 0.7)
    exact_clf = ParzenClassifier(algorithm="brute", **params).fit(X, labels, sample_weight=w)
    clf = ParzenClassifier(algorithm=algorithm, rtol=rtol, **params).fit(X, labels, w)
    assert np.abs(clf.predict_proba(Q) - exact_clf.predict_proba(Q)).max() <= rtol


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", INFINITE)
def test_rtol_truncation_happens(rng, kernel, algorithm):
    # The bound above is not vacuous: a loose rtol does change the result,
    # and the attention weights then have far fewer than n entries per row.
    X, y, w, Q = _rtol_problem(rng)
    params = {"bandwidth": 0.03, "kernel": kernel}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = NadarayaWatsonRegressor(algorithm=algorithm, rtol=1e-3, **params)
    tree.fit(X, y, sample_weight=w)
    assert np.abs(tree.predict(Q) - exact.predict(Q)).max() > 1e-14 * np.abs(y).max()
    assert tree.attention_weights(Q, sparse=True).nnz < 0.5 * len(Q) * np.count_nonzero(w)


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", INFINITE)
def test_rtol_zero_sums_over_every_point(rng, kernel, algorithm):
    X, y, w, Q = _rtol_problem(rng, n=300)
    params = {"bandwidth": 0.03, "kernel": kernel}
    exact = NadarayaWatsonRegressor(algorithm="brute", **params).fit(X, y, sample_weight=w)
    tree = NadarayaWatsonRegressor(algorithm=algorithm, rtol=0.0, **params)
    tree.fit(X, y, sample_weight=w)
    assert_allclose(tree.predict(Q), exact.predict(Q), rtol=0, atol=_scale_atol(y))
    # Every positive-weight point is in every row.
    assert tree.attention_weights(Q, sparse=True).nnz == len(Q) * np.count_nonzero(w)


# --------------------------------------------------------------------------
# Leave-one-out on the tree path


def _loo_problem(rng, n=200, d=2):
    X, y = _regression_data(rng, n, d)
    X[5] = X[3]  # an exact duplicate with another target: it still counts for row 3
    w = _weights(rng, n)
    w[[3, 5]] = [1.0, 1.5]
    w[17] = 0.0
    return X, y, w


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", NAMES)
def test_loo_pool_tree_equals_brute_and_refits(rng, kernel, algorithm):
    X, y, w = _loo_problem(rng)
    h, factors = 0.1, np.array([0.3, 1.0, 2.5])
    Xs, log_w, active = X / h, _log(w), w > 0
    brute_set = _engine.prepare_train(Xs, log_w=log_w, values=y)
    brute = _engine.loo_pool(brute_set, KERNELS[kernel], factors)
    train = _engine.prepare_train(Xs, log_w=log_w, values=y, algorithm=algorithm, leaf_size=40)
    assert train.trees and all(np.all(active[train.order[t.rows]]) for t in train.trees)
    tree = _engine.loo_pool(train, KERNELS[kernel], factors)
    assert tree.shape == (len(factors), len(X), y.shape[1])
    assert np.all(np.isfinite(brute))
    assert_allclose(tree, brute, rtol=0, atol=_scale_atol(y))

    # Explicit refits without the point (including a zero-weight point and a
    # point whose exact duplicate must stay in).
    rows = [0, 3, 17, 42]
    for t, factor in enumerate(factors):
        refit = NadarayaWatsonRegressor(bandwidth=factor * h, kernel=kernel, algorithm="brute")
        expected = refit_loo(refit, X, y, w, rows=rows)
        assert_allclose(tree[t, rows], expected, rtol=0, atol=_scale_atol(y))


@pytest.mark.parametrize(
    ("make", "algorithm"),
    [
        (lambda **p: NadarayaWatsonRegressor(kernel="gaussian", **p), "kd_tree"),
        (lambda **p: NadarayaWatsonRegressor(kernel="epanechnikov", **p), "ball_tree"),
        (lambda **p: ParzenClassifier(kernel="epanechnikov", **p), "kd_tree"),
        (lambda **p: ParzenClassifier(kernel="gaussian", **p), "ball_tree"),
    ],
    ids=[
        "regressor-gaussian",
        "regressor-epanechnikov",
        "classifier-epanechnikov",
        "classifier-gaussian",
    ],
)
def test_bandwidth_search_on_the_tree_path(rng, make, algorithm):
    n = 300
    X = rng.uniform(size=(n, 2))
    signal = np.sin(6 * X[:, 0]) + X[:, 1]
    y = signal + rng.normal(scale=0.3, size=n)
    if isinstance(make(), ParzenClassifier):
        # Three classes: scikit-learn's log-loss scorer then reads every column
        # of predict_proba.  (With two classes it reads P[:, 1] and forms
        # 1 - P[:, 1], which loses the relative precision of a tiny P[:, 0] on
        # either path, so scores at tiny bandwidths would differ at ~1e-4.)
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    brute = BandwidthSearchCV(make(algorithm="brute")).fit(X, y)
    tree = BandwidthSearchCV(make(algorithm=algorithm)).fit(X, y)
    assert tree.best_estimator_._fit_method == algorithm
    assert_array_equal(tree.bandwidth_, brute.bandwidth_)
    assert_allclose(
        tree.cv_results_["mean_test_score"],
        brute.cv_results_["mean_test_score"],
        rtol=1e-9,
        atol=1e-12,
    )


# --------------------------------------------------------------------------
# The tree_ attribute, leaf_size, pickling


@pytest.mark.parametrize("leaf_size", [5, 40])
@pytest.mark.parametrize("algorithm", TREES)
def test_tree_attribute(rng, algorithm, leaf_size):
    n, d = 500, 2
    X, y = _regression_data(rng, n, d)
    w = _weights(rng, n)
    h = np.array([0.1, 0.4])
    reg = NadarayaWatsonRegressor(bandwidth=h, algorithm=algorithm, leaf_size=leaf_size)
    reg.fit(X, y, sample_weight=w)
    tree = reg.tree_
    assert type(tree) is TREE_CLASS[algorithm]
    # Built over the bandwidth-scaled points of positive weight: their pairwise
    # distances are those of X[w > 0] / h (the tree holds them centred, in its
    # own leaf order, which the engine's training set records in its order).
    data = np.asarray(tree.data)
    assert data.shape == (np.sum(w > 0), d)
    stored = reg._backend.train.order[: len(data)]
    assert np.all(w[stored] > 0)
    active = X[stored] / h
    sample = rng.choice(len(active), 50, replace=False)
    ref_d = scaled_distances(active[sample], active[sample], 1.0)
    tree_pts = data[sample]
    assert_allclose(scaled_distances(tree_pts, tree_pts, 1.0), ref_d, atol=1e-12)
    # leaf_size is used: the node count is that of a tree built with it.
    reference = TREE_CLASS[algorithm](active, leaf_size=leaf_size)
    assert len(tree.node_data) == len(reference.node_data)
    other = TREE_CLASS[algorithm](active, leaf_size=45 - leaf_size)
    assert len(tree.node_data) != len(other.node_data)

    clf = ParzenClassifier(bandwidth=h, algorithm=algorithm, leaf_size=leaf_size)
    labels = np.digitize(X[:, 0], [0.3, 0.6])
    clf.fit(X, labels, sample_weight=w)
    assert isinstance(clf.tree_, list) and len(clf.tree_) == 3
    for c, class_tree in enumerate(clf.tree_):
        assert type(class_tree) is TREE_CLASS[algorithm]
        assert np.asarray(class_tree.data).shape[0] == np.count_nonzero((labels == c) & (w > 0))

    for est in (NadarayaWatsonRegressor(algorithm="brute"), ParzenClassifier(algorithm="brute")):
        assert est.fit(X, labels).tree_ is None


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_pickle_round_trip(rng, kernel, algorithm):
    X, y = _regression_data(rng, 400, 2)
    w = _weights(rng, 400)
    Q = _queries(rng, 50, 2)
    reg = NadarayaWatsonRegressor(bandwidth=0.1, kernel=kernel, algorithm=algorithm)
    reg.fit(X, y, sample_weight=w)
    clf = ParzenClassifier(bandwidth=0.1, kernel=kernel, algorithm=algorithm)
    clf.fit(X, (X[:, 0] > 0.5).astype(int), sample_weight=w)
    reg2, clf2 = pickle.loads(pickle.dumps(reg)), pickle.loads(pickle.dumps(clf))
    assert type(reg2.tree_) is TREE_CLASS[algorithm]
    assert_array_equal(reg2.predict(Q), reg.predict(Q))
    A2, A = reg2.attention_weights(Q, sparse=True), reg.attention_weights(Q, sparse=True)
    assert (A2 != A).nnz == 0
    assert_array_equal(clf2.predict_proba(Q), clf.predict_proba(Q))
    assert_array_equal(clf2.predict_log_proba(Q), clf.predict_log_proba(Q))


# --------------------------------------------------------------------------
# algorithm="auto"


def test_auto_uses_brute_force_for_small_n(rng):
    X, y = _regression_data(rng, 999, 2)  # below _TREE_MIN_SAMPLES = 1000
    reg = NadarayaWatsonRegressor(bandwidth=0.01, kernel="epanechnikov").fit(X, y)
    assert reg._fit_method == "brute" and reg.tree_ is None


def test_auto_uses_brute_force_in_high_dimension(rng):
    X, y = _regression_data(rng, 3000, 13)  # beyond the 12 features measured
    reg = NadarayaWatsonRegressor(bandwidth=0.05, kernel="epanechnikov").fit(X, y)
    assert reg._fit_method == "brute" and reg.tree_ is None


@pytest.mark.parametrize("est", [NadarayaWatsonRegressor, ParzenClassifier])
def test_auto_uses_a_tree_for_large_low_dimensional_data(rng, est):
    n = 20_000
    X = rng.uniform(size=(n, 2))
    h = np.sqrt(50 / (np.pi * n))  # ~50 neighbours per query
    y = np.sin(5 * X[:, 0]) + X[:, 1] if est is NadarayaWatsonRegressor else X[:, 0] > X[:, 1]
    Q = rng.uniform(size=(300, 2))
    auto = est(bandwidth=h, kernel="epanechnikov").fit(X, y)
    assert auto._fit_method == "ball_tree"  # faster than kd_tree in 236 of 240 measurements
    assert auto.tree_ is not None
    brute = est(bandwidth=h, kernel="epanechnikov", algorithm="brute").fit(X, y)
    if est is NadarayaWatsonRegressor:
        assert_allclose(auto.predict(Q), brute.predict(Q), rtol=0, atol=_scale_atol(y))
    else:
        assert_allclose(auto.predict_proba(Q), brute.predict_proba(Q), rtol=0, atol=1e-10)
    # A bandwidth covering much of the data makes the tree pointless.
    wide = est(bandwidth=0.5, kernel="epanechnikov").fit(X, y)
    assert wide._fit_method == "brute"


def test_auto_uses_brute_force_when_the_gaussian_folds(rng, monkeypatch):
    # The unit square at h = 0.022 spans 45 bandwidths: the Gaussian's truncation
    # radius (~9.5 bandwidths) holds ~12% of the data, under the 15% share limit
    # of the numpy passes, but the data sit close enough to their centre for the
    # Gaussian to fold into one GEMM on the brute path, which beats a tree at every
    # measured size.  A compact kernel does not fold and gets the tree.
    from skl_nw._engine import _auto

    monkeypatch.setattr(_auto, "compiled", lambda: None)
    n = 20_000
    X = rng.uniform(size=(n, 2))
    y = np.sin(5 * X[:, 0])
    gaussian = NadarayaWatsonRegressor(bandwidth=0.022).fit(X, y)
    assert gaussian._fit_method == "brute"
    log_w = np.zeros(n)
    share = _engine.neighbour_fraction(X / 0.022, log_w, get_kernel("gaussian"), 1e-16)
    assert share <= 0.15  # the share alone would have chosen a tree
    assert (
        NadarayaWatsonRegressor(0.022, kernel="epanechnikov").fit(X, y)._fit_method == "ball_tree"
    )


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_auto_keeps_the_tiled_brute_force_in_more_dimensions(rng, monkeypatch, kernel):
    # d = 8, n = 3,000, h = 0.04: ~0.5% of the data in a query's radius and no fold
    # (the Gaussian's slope is too steep for the GEMM's bound).  The earlier passes
    # lost to a ball tree there; the compiled register tiles beat it (Gaussian 8.6x,
    # Epanechnikov 1.7-2.2x, docs/benchmarks.md "Choosing the algorithm"), so auto
    # keeps brute force with the compiled kernels and a tree without them.
    from skl_nw._engine import _auto

    X = rng.uniform(size=(3000, 8))
    y = np.sin(5 * X[:, 0])
    share = _engine.neighbour_fraction(X / 0.04, np.zeros(3000), get_kernel(kernel), 1e-16)
    assert share < 0.01
    monkeypatch.setattr(_auto, "compiled", lambda: _engine)  # any module: "compiled"
    assert NadarayaWatsonRegressor(0.04, kernel=kernel).fit(X, y)._fit_method == "brute"
    monkeypatch.setattr(_auto, "compiled", lambda: None)
    assert NadarayaWatsonRegressor(0.04, kernel=kernel).fit(X, y)._fit_method == "ball_tree"


@pytest.mark.parametrize("h, tiled, earlier", [(0.4, "ball_tree", "ball_tree"),
                                                (0.5, "brute", "ball_tree")])  # fmt: skip
def test_auto_share_limits_with_and_without_the_tiles(rng, monkeypatch, h, tiled, earlier):
    # Epanechnikov in d = 5 (no minimum n there): a 2.8% share takes a tree on either
    # rule; a 7.2% share is over the compiled limit (3%) and under the earlier one (15%).
    # Categorical features or a span (plain=False) keep the earlier limits.
    from skl_nw._engine import _auto

    X = rng.uniform(size=(3000, 5))
    kernel = get_kernel("epanechnikov")
    monkeypatch.setattr(_auto, "compiled", lambda: _engine)
    assert _auto.choose_algorithm(X / h, np.zeros(3000), kernel, 1e-16) == tiled
    assert _auto.choose_algorithm(X / h, np.zeros(3000), kernel, 1e-16, plain=False) == earlier
    monkeypatch.setattr(_auto, "compiled", lambda: None)
    assert _auto.choose_algorithm(X / h, np.zeros(3000), kernel, 1e-16) == earlier


@pytest.mark.parametrize(
    "n, h, fused, earlier",
    [(20_000, 0.005, "ball_tree", "ball_tree"), (5_000, 0.005, "brute", "ball_tree"),
     (20_000, 0.0135, "brute", "ball_tree")],
)  # fmt: skip
def test_auto_gaussian_limits_with_the_compiled_kernels(rng, monkeypatch, n, h, fused, earlier):
    # The Gaussian in d = 2, spread too wide in bandwidths to fold: with the compiled
    # kernels its brute force runs in one fused pass all the same (rows past the
    # GEMM's bound take direct differences), so a tree takes only a share of at most
    # 2% (0.7% here, not 4.7%) in sets of at least 10,000 points; the numpy passes
    # keep the 15% limit.
    from skl_nw._engine import _auto

    X = rng.uniform(size=(n, 2))
    gaussian = get_kernel("gaussian")
    assert not _auto._folds(X / h, gaussian)
    monkeypatch.setattr(_auto, "compiled", lambda: _engine)
    assert _auto.choose_algorithm(X / h, np.zeros(n), gaussian, 1e-16) == fused
    assert _auto.choose_algorithm(X / h, np.zeros(n), gaussian, 1e-16, plain=False) == earlier
    monkeypatch.setattr(_auto, "compiled", lambda: None)
    assert _auto.choose_algorithm(X / h, np.zeros(n), gaussian, 1e-16) == earlier


# --------------------------------------------------------------------------
# Chunking and threads on the tree path


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_chunks_and_threads_do_not_change_tree_results(rng, kernel, algorithm, monkeypatch):
    n, m = 3000, 2000
    X, y = _regression_data(rng, n, 2)
    w = _weights(rng, n)
    Q = _queries(rng, m, 2)
    labels = np.digitize(X[:, 1], [0.4, 0.7])
    params = {"bandwidth": 0.03, "kernel": kernel, "algorithm": algorithm}

    def results(n_jobs):
        reg = NadarayaWatsonRegressor(n_jobs=n_jobs, **params).fit(X, y, sample_weight=w)
        clf = ParzenClassifier(n_jobs=n_jobs, **params).fit(X, labels, sample_weight=w)
        loo = reg._leave_one_out().predictions(np.array([0.5, 1.0]), n_jobs=n_jobs)
        A = reg.attention_weights(Q, sparse=True)
        return reg.predict(Q), A, clf.predict_log_proba(Q), loo

    calls = []

    class Counting(_tree.Neighbours):
        def __init__(self, Q, *args, **kwargs):
            calls.append(len(Q))
            super().__init__(Q, *args, **kwargs)

    monkeypatch.setattr(_tree, "Neighbours", Counting)
    reference = results(1)
    default_calls = len(calls)
    for n_jobs in [1, 2]:
        calls.clear()
        with config_context(working_memory=1):
            tiny = results(n_jobs)
        # The tiny budget does split the work into more chunks.
        assert len(calls) > default_calls
        for got in (tiny, results(n_jobs)):
            assert_allclose(got[0], reference[0], rtol=1e-14, atol=1e-14 * np.abs(y).max())
            assert abs(got[1] - reference[1]).max() <= 1e-15
            assert_allclose(got[2], reference[2], rtol=1e-14, atol=1e-14)
            assert_allclose(got[3], reference[3], rtol=1e-14, atol=1e-14 * np.abs(y).max())


# --------------------------------------------------------------------------
# The same estimate as scikit-learn's RadiusNeighborsRegressor


def _epanechnikov_weights(h):
    """``weights`` callable for RadiusNeighborsRegressor: 1 - (d / h)^2 per neighbour.

    For radius neighbours scikit-learn passes an object array holding one
    array of distances per query, and expects the same structure back.
    """

    def weights(dist):
        out = np.empty(len(dist), dtype=object)
        for i, row in enumerate(dist):
            out[i] = 1.0 - (np.asarray(row, dtype=float) / h) ** 2
        return out

    return weights


@pytest.mark.parametrize("algorithm", TREES)
def test_equals_radius_neighbors_regressor(rng, algorithm):
    n, m, h = 2000, 500, 0.06
    X = rng.uniform(size=(n, 2))
    y = np.column_stack([np.sin(6 * X[:, 0]) * 50, X[:, 1] ** 2])
    # Every query lies within h / 2 of a training point: a positive kernel sum.
    Q = X[rng.choice(n, m)] + rng.uniform(-0.35, 0.35, size=(m, 2)) * h
    ours = NadarayaWatsonRegressor(bandwidth=h, kernel="epanechnikov", algorithm=algorithm)
    ours.fit(X, y)
    sk = RadiusNeighborsRegressor(radius=h, weights=_epanechnikov_weights(h), algorithm=algorithm)
    sk.fit(X, y)
    assert_allclose(ours.predict(Q), sk.predict(Q), rtol=0, atol=_scale_atol(y))
    ours_1d = NadarayaWatsonRegressor(bandwidth=h, kernel="epanechnikov", algorithm=algorithm)
    sk_1d = sk.fit(X, y[:, 0]).predict(Q)
    assert_allclose(ours_1d.fit(X, y[:, 0]).predict(Q), sk_1d, rtol=0, atol=_scale_atol(y))


@pytest.mark.parametrize("algorithm", TREES)
def test_training_rows_are_stored_in_leaf_order(rng, algorithm):
    # Close points close in memory (the speed of the tree path at large n),
    # while every result stays in training order.
    X = rng.uniform(size=(4000, 2))
    y = np.sin(6 * X[:, 0]) + rng.normal(scale=0.1, size=4000)
    reg = NadarayaWatsonRegressor(bandwidth=0.05, algorithm=algorithm).fit(X, y)
    stored = reg._backend.train.X
    step = np.linalg.norm(np.diff(stored, axis=0), axis=1).mean()
    random_step = np.linalg.norm(np.diff(X / 0.05, axis=0), axis=1).mean()
    assert step < 0.25 * random_step  # measured: about 0.1
    assert sorted(reg._backend.train.order) == list(range(4000))
    brute = NadarayaWatsonRegressor(bandwidth=0.05, algorithm="brute").fit(X, y)
    Q = rng.uniform(size=(30, 2))
    assert_allclose(reg.predict(Q), brute.predict(Q), rtol=1e-10)
    assert_allclose(reg.attention_weights(Q), brute.attention_weights(Q), atol=1e-14)


def test_sgd_search_is_the_same_on_every_algorithm(rng):
    # The tree path stores rows in leaf order; the minibatches are drawn in
    # training order all the same, so random_state means the same thing.
    X = rng.uniform(size=(300, 2))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=300)

    def bandwidth(algorithm):
        est = NadarayaWatsonRegressor(algorithm=algorithm)
        search = BandwidthSearchCV(
            est, method="sgd", batch_size=16, max_iter=5, tol=None, random_state=0
        )
        return search.fit(X, y).bandwidth_

    brute = bandwidth("brute")
    for algorithm in TREES:
        assert_allclose(bandwidth(algorithm), brute, rtol=1e-9)


@pytest.mark.parametrize("d", [2, 12])
@pytest.mark.parametrize("algorithm", TREES)
def test_tree_predict_memory_is_bounded_by_working_memory(rng, algorithm, d):
    n, m, budget_mib, slack_mib = 6000, 4000, 4, 2
    X = rng.uniform(size=(n, d))
    y = rng.normal(size=n)
    Q = rng.uniform(size=(m, d))
    # About 300 neighbours per query: enough pairs that the chunking matters.
    h = (300 / n) ** (1 / d)
    reg = NadarayaWatsonRegressor(h, kernel="epanechnikov", algorithm=algorithm).fit(X, y)
    with config_context(working_memory=budget_mib):
        pred, peak = traced_peak(lambda: reg.predict(Q))
    assert np.all(np.isfinite(pred))
    assert peak - pred.nbytes < (budget_mib + slack_mib) * 2**20, peak / 2**20
