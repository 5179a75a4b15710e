"""Hypothesis properties over every kernel and backend, and a short fuzz run.

Each property draws small random problems (inputs, targets, optional sample
weights with zeros, scalar or per-feature bandwidths, every kernel, every
backend) and checks an identity that holds for any data: predictions are
convex combinations of the targets, attention rows are probability vectors,
invariances of the distances, the h -> 0 limit, brute force == trees, the
closed-form leave-one-out == explicit refits.  The budget is fixed and the
search derandomised, so CI runs the same cases every time.

Where rounding may legitimately change a result, the input is filtered out
with ``assume`` (see :func:`_stable`): a point at the very edge of a compact
kernel's support (a rounding error in ``u`` moves it in or out, a jump in
the weight), and, for a query with no point inside the support, distinct
points tied for nearest (the nearest-point fallback then averages a
different set).  Infinite-support kernels need no filter.
"""

import warnings
from dataclasses import dataclass, replace

import numpy as np
from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.exceptions import NotFittedError

from conftest import onehot, refit_loo, scaled_distances
from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier
from skl_nw._kernels import KERNELS, kernel_names

NAMES = kernel_names()
BACKENDS = ["brute", "kd_tree", "ball_tree"]
EPS = np.finfo(np.float64).eps

# A fixed, derandomised budget: the same cases on every run, < 60 s in all on 2 cores.
PROPERTY = settings(max_examples=100, deadline=None, derandomize=True, database=None)
FUZZ = settings(max_examples=500, deadline=None, derandomize=True, database=None)

COORD = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
BANDWIDTH = st.floats(0.05, 20.0)


@dataclass
class Problem:
    X: np.ndarray
    y: np.ndarray
    Q: np.ndarray
    h: float | np.ndarray
    w: np.ndarray | None
    kernel: str
    algorithm: str

    @property
    def active(self):
        return np.ones(len(self.X), bool) if self.w is None else self.w > 0

    @property
    def labels(self):
        return (self.y > 0).astype(int)

    def tol(self):
        return 1e-9 * (1.0 + np.abs(self.y).max())


@st.composite
def problems(draw, min_n=1, max_n=12, weighted=True):
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, 3))
    m = draw(st.integers(1, 5))
    X = draw(hnp.arrays(np.float64, (n, d), elements=COORD))
    if n > 1 and draw(st.booleans()):  # an exact duplicate row
        X[draw(st.integers(0, n - 1))] = X[draw(st.integers(0, n - 1))]
    y = draw(hnp.arrays(np.float64, n, elements=st.floats(-100, 100)))
    Q = draw(hnp.arrays(np.float64, (m, d), elements=COORD))
    h = (
        draw(hnp.arrays(np.float64, d, elements=BANDWIDTH))
        if draw(st.booleans())
        else draw(BANDWIDTH)
    )
    w = None
    if weighted and draw(st.booleans()):
        weight = st.sampled_from([0.0, 1.0, 3.0]) | st.floats(0.01, 10.0)
        w = draw(hnp.arrays(np.float64, n, elements=weight))
        assume(w.sum() > 0)
    kernel = draw(st.sampled_from(NAMES))
    algorithm = draw(st.sampled_from(BACKENDS))
    return Problem(X, y, Q, h, w, kernel, algorithm)


def _stable(X, Q, h, kernel, active=None, leave_one_out=False):
    """Whether rounding cannot change which points a compact kernel weighs.

    Rejects a point within 1e-7 of the support's edge, and, for a query with
    no point inside the support, distinct points tied (to 1e-7) for nearest.
    ``leave_one_out``: the queries are the training rows, each without itself.
    """
    if not KERNELS[kernel].compact:
        return True
    active = np.ones(len(X), bool) if active is None else active
    u = scaled_distances(X, Q, h)
    if leave_one_out:
        np.fill_diagonal(u, np.inf)
    u, X = u[:, active], X[active]
    if np.any(np.abs(u - 1.0) < 1e-7):
        return False
    for row in u:
        if np.isfinite(row).any() and row.min() >= 1.0:
            near = row <= row.min() * (1 + 1e-7)
            if np.any(X[near] != X[near][0]):
                return False
    return True


def _regressor(p, **params):
    params = {"bandwidth": p.h, "kernel": p.kernel, "algorithm": p.algorithm, **params}
    return NadarayaWatsonRegressor(**params).fit(p.X, p.y, sample_weight=p.w)


def _classifier(p, **params):
    params = {"bandwidth": p.h, "kernel": p.kernel, "algorithm": p.algorithm, **params}
    return ParzenClassifier(**params).fit(p.X, p.labels, sample_weight=p.w)


def _dense(A):
    return A.toarray() if sparse.issparse(A) else np.asarray(A)


# ---------------------------------------------------------------------------
# Convex combinations and attention rows
# ---------------------------------------------------------------------------


@PROPERTY
@given(problems(), st.sampled_from([100.0, 1e-300, 1e12, 1.7e308]))
def test_predictions_are_convex_combinations_of_the_targets(p, scale):
    # Targets of any magnitude: max |y| = scale, up to near the float maximum
    # (where two of them already sum past it).
    top = np.abs(p.y).max()
    p = replace(p, y=p.y / top * scale if top > 0 else p.y)
    reg = _regressor(p)
    pred = reg.predict(p.Q)
    A = _dense(reg.attention_weights(p.Q))
    # A convex combination: pred = A y with A a row-stochastic matrix ...
    assert np.all(A >= 0)
    assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
    assert_allclose(pred, A @ p.y, rtol=1e-12, atol=p.tol())
    # ... so it lies within the range of the targets that carry weight.
    y = p.y[p.active]
    slack = 4 * EPS * np.abs(y).max() + 8 * np.finfo(float).smallest_subnormal  # rounding
    assert np.all(pred >= y.min() - slack)
    assert np.all(pred <= y.max() + slack)
    # The classifier's probabilities are the same combination of one-hot labels.
    clf = _classifier(p)
    proba = clf.predict_proba(p.Q)
    assert np.all(proba >= 0)
    assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    A_clf = _dense(clf.attention_weights(p.Q))
    assert_allclose(proba, A_clf @ onehot(p.labels, clf.classes_), atol=1e-9)


@PROPERTY
@given(problems())
def test_attention_rows_are_probability_vectors(p):
    for est in (_regressor(p), _classifier(p)):
        A = est.attention_weights(p.Q)
        # The same type on every path: dense by default, CSR with sparse=True.
        assert isinstance(A, np.ndarray)
        assert_allclose(_dense(est.attention_weights(p.Q, sparse=True)), A, rtol=0, atol=0)
        assert A.shape == (len(p.Q), len(p.X))
        assert np.all(np.isfinite(A))
        assert np.all(A >= 0)
        assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
        # A point without weight never gets attention.
        assert np.all(A[:, ~p.active] == 0)


# ---------------------------------------------------------------------------
# Invariances
# ---------------------------------------------------------------------------


@PROPERTY
@given(problems(), st.data())
def test_invariant_to_permuting_training_rows(p, data):
    perm = np.array(data.draw(st.permutations(range(len(p.X)))))
    assume(_stable(p.X, p.Q, p.h, p.kernel, p.active))
    permuted = Problem(
        p.X[perm], p.y[perm], p.Q, p.h, None if p.w is None else p.w[perm], p.kernel, p.algorithm
    )
    reg, reg_p = _regressor(p), _regressor(permuted)
    assert_allclose(reg_p.predict(p.Q), reg.predict(p.Q), rtol=1e-9, atol=p.tol())
    A, A_p = _dense(reg.attention_weights(p.Q)), _dense(reg_p.attention_weights(p.Q))
    assert_allclose(A_p, A[:, perm], atol=1e-9)
    proba = _classifier(p).predict_proba(p.Q)
    assert_allclose(_classifier(permuted).predict_proba(p.Q), proba, atol=1e-9)


@PROPERTY
@given(problems(), hnp.arrays(np.float64, 3, elements=st.floats(-1e3, 1e3)))
def test_invariant_to_a_common_translation(p, shift):
    t = shift[: p.X.shape[1]]
    moved = Problem(p.X + t, p.y, p.Q + t, p.h, p.w, p.kernel, p.algorithm)
    assume(_stable(p.X, p.Q, p.h, p.kernel, p.active))
    assume(_stable(moved.X, moved.Q, p.h, p.kernel, p.active))
    assert_allclose(_regressor(moved).predict(moved.Q), _regressor(p).predict(p.Q), atol=p.tol())
    proba = _classifier(p).predict_proba(p.Q)
    assert_allclose(_classifier(moved).predict_proba(moved.Q), proba, atol=1e-9)


@PROPERTY
@given(problems(), st.floats(1e-3, 1e3))
def test_invariant_to_a_common_rescaling_of_inputs_queries_and_bandwidth(p, c):
    scaled = Problem(p.X * c, p.y, p.Q * c, np.asarray(p.h) * c, p.w, p.kernel, p.algorithm)
    assume(_stable(p.X, p.Q, p.h, p.kernel, p.active))
    assume(_stable(scaled.X, scaled.Q, scaled.h, p.kernel, p.active))
    reg, reg_c = _regressor(p), _regressor(scaled)
    assert_allclose(reg_c.bandwidth_, reg.bandwidth_ * c, rtol=1e-15)
    assert_allclose(reg_c.predict(scaled.Q), reg.predict(p.Q), atol=p.tol())
    A = _dense(reg.attention_weights(p.Q))
    assert_allclose(_dense(reg_c.attention_weights(scaled.Q)), A, atol=1e-9)
    proba = _classifier(p).predict_proba(p.Q)
    assert_allclose(_classifier(scaled).predict_proba(scaled.Q), proba, atol=1e-9)


# ---------------------------------------------------------------------------
# The h -> 0 limit, and brute force == trees
# ---------------------------------------------------------------------------


@PROPERTY
@given(problems(min_n=2), st.data())
def test_tiny_bandwidth_at_a_training_point_returns_its_target(p, data):
    distance = scaled_distances(p.X, p.X, 1.0)
    np.fill_diagonal(distance, np.inf)
    # Rows whose x is unique (1e-6 from any other) and that carry weight.
    candidates = np.flatnonzero(p.active & (distance.min(axis=1) > 1e-6))
    assume(candidates.size)
    i = data.draw(st.sampled_from(candidates.tolist()))
    h = 1e-6 * distance[i].min()  # every other point is >= 1e6 bandwidths away
    note(f"i={i}, h={h}")
    reg = _regressor(p, bandwidth=h)
    assert_allclose(reg.predict(p.X[i : i + 1]), p.y[i : i + 1], rtol=1e-12, atol=1e-300)
    clf = _classifier(p, bandwidth=h)
    assert_array_equal(clf.predict(p.X[i : i + 1]), p.labels[i : i + 1])
    expected = onehot(p.labels[i : i + 1], clf.classes_)
    assert_allclose(clf.predict_proba(p.X[i : i + 1]), expected, atol=1e-12)


@PROPERTY
@given(problems())
def test_brute_force_equals_trees(p):
    assume(_stable(p.X, p.Q, p.h, p.kernel, p.active))
    brute = Problem(p.X, p.y, p.Q, p.h, p.w, p.kernel, "brute")
    reg, clf = _regressor(brute), _classifier(brute)
    pred, A, proba = reg.predict(p.Q), _dense(reg.attention_weights(p.Q)), clf.predict_proba(p.Q)
    log_proba = clf.predict_log_proba(p.Q)
    for algorithm in ("kd_tree", "ball_tree"):
        tree = Problem(p.X, p.y, p.Q, p.h, p.w, p.kernel, algorithm)
        reg_t, clf_t = _regressor(tree), _classifier(tree)
        # rtol=1e-16 (default) truncates the infinite-support kernels by nothing visible.
        assert_allclose(reg_t.predict(p.Q), pred, rtol=1e-9, atol=p.tol())
        assert_allclose(_dense(reg_t.attention_weights(p.Q)), A, atol=1e-9)
        assert_allclose(clf_t.predict_proba(p.Q), proba, atol=1e-9)
        # -inf exactly where brute force has a class with no point in the support.
        log_t = clf_t.predict_log_proba(p.Q)
        assert_array_equal(np.isneginf(log_t), np.isneginf(log_proba))
        finite = np.isfinite(log_proba)
        assert_allclose(log_t[finite], log_proba[finite], rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# Closed-form leave-one-out == explicit refits
# ---------------------------------------------------------------------------


@st.composite
def loo_problems(draw):
    p = draw(problems(min_n=2, max_n=9))
    if p.w is not None:
        # Every refit (one row left out) keeps a positive total weight.
        assume(np.all(p.w.sum() - p.w > 0))
    factors = draw(st.lists(st.floats(0.25, 4.0), min_size=1, max_size=3))
    return p, np.array(factors)


@PROPERTY
@given(loo_problems())
def test_closed_form_leave_one_out_equals_explicit_refits(problem):
    p, factors = problem
    for f in factors:
        assume(_stable(p.X, p.X, np.asarray(p.h) * f, p.kernel, p.active, leave_one_out=True))
    reg = _regressor(p)
    # Through the estimator's leave-one-out protocol; rows come back in training order.
    P = reg._leave_one_out().predictions(factors)[:, :, 0]
    refits = []
    for t, f in enumerate(factors):
        brute = NadarayaWatsonRegressor(np.asarray(p.h) * f, kernel=p.kernel, algorithm="brute")
        refits.append(refit_loo(brute, p.X, p.y, p.w))
        assert_allclose(P[t], refits[t], rtol=1e-9, atol=p.tol())

    # Through the public search: distinct rows, no weights (the search merges
    # identical (x, y) rows, leaving them out together).
    if p.w is None and len(np.unique(p.X, axis=0)) == len(p.X):
        bandwidths = [np.asarray(p.h) * f for f in factors]
        search = BandwidthSearchCV(
            NadarayaWatsonRegressor(kernel=p.kernel, algorithm=p.algorithm), bandwidths=bandwidths
        ).fit(p.X, p.y)
        expected = [-np.mean((refit - p.y) ** 2) for refit in refits]
        assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-9, atol=1e-12)

        classes = np.unique(p.labels)
        if len(classes) == 2:
            search = BandwidthSearchCV(
                ParzenClassifier(kernel=p.kernel, algorithm=p.algorithm), bandwidths=bandwidths
            ).fit(p.X, p.labels)
            for t, h in enumerate(bandwidths):
                brute = ParzenClassifier(bandwidth=h, kernel=p.kernel, algorithm="brute")
                proba = refit_loo(brute, p.X, p.labels, method="predict_proba", classes=classes)
                # probability of the row's own class; 0 if no other row has it
                own = proba[np.arange(len(p.X)), np.searchsorted(classes, p.labels)]
                # The default log-loss clips probabilities to [eps, 1 - eps].
                expected = np.mean(np.log(np.clip(own, EPS, 1 - EPS)))
                assert_allclose(search.cv_results_["mean_test_score"][t], expected, rtol=1e-9)


# ---------------------------------------------------------------------------
# Fuzz: only the documented exception types
# ---------------------------------------------------------------------------

_GOOD_DTYPES = ["float64", "float32", "int64", "bool"]
_BAD_DTYPES = ["float16", "complex128", "object", "str"]


def _rarely(draw):
    """True one time in eight: each input is adversarial now and then, so that
    most cases reach the engine and some break one rule at a time."""
    return draw(st.sampled_from([False] * 7 + [True]))


def _values(draw, shape, bad):
    x = draw(hnp.arrays(np.float64, shape, elements=st.floats(-1e6, 1e6)))
    if bad and x.size:
        x.flat[draw(st.integers(0, x.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return x


def _cast(x, dtype):
    with np.errstate(all="ignore"):
        if dtype == "str":
            return x.astype(str)
        if dtype in ("int64", "bool"):
            return np.nan_to_num(x).astype(dtype)
        return x.astype(dtype)


def _dtype(draw):
    return draw(st.sampled_from(_BAD_DTYPES if _rarely(draw) else _GOOD_DTYPES))


@st.composite
def fuzz_cases(draw):
    kind = draw(st.sampled_from(["regressor", "classifier", "search", "search-classifier"]))
    n = 0 if _rarely(draw) else draw(st.integers(1, 8))
    d = 0 if _rarely(draw) else draw(st.integers(1, 3))
    m = 0 if _rarely(draw) else draw(st.integers(1, 5))
    if _rarely(draw):
        bandwidth = draw(
            st.floats()  # every float: 0, negative, subnormal, huge, inf, nan
            | st.sampled_from(["scot", "", "1.0"])
            | st.lists(st.text(max_size=2), min_size=1, max_size=3)
            | st.lists(st.floats(), min_size=1, max_size=4)
        )
    else:
        bandwidth = draw(
            st.floats(1e-4, 1e4)
            | st.sampled_from(["scott", "silverman"])
            | st.lists(st.floats(1e-4, 1e4), min_size=d, max_size=d)
        )
    params = {
        "kernel": draw(st.sampled_from(["gausian", "", "Gaussian"] if _rarely(draw) else NAMES)),
        "algorithm": draw(
            st.sampled_from(["kdtree", "KD"] if _rarely(draw) else [*BACKENDS, "auto"])
        ),
        "bandwidth": bandwidth,
    }
    if not kind.startswith("search") and draw(st.booleans()):
        params["n_jobs"] = draw(st.sampled_from([1, 2, -1]))
    shape = draw(st.sampled_from([(n,), (n, d, 2)])) if _rarely(draw) else (n, d)
    X = _cast(_values(draw, shape, _rarely(draw)), _dtype(draw))
    q_features = draw(st.integers(0, 4)) if _rarely(draw) else d
    Q = _cast(_values(draw, (m, q_features), _rarely(draw)), _dtype(draw))
    n_y = draw(st.integers(0, 9)) if _rarely(draw) else n
    y = _values(draw, (n_y,), _rarely(draw))
    if kind.endswith("classifier"):
        labels = np.round(np.nan_to_num(y, posinf=9, neginf=-9) / 5e5)
        y = _cast(labels, draw(st.sampled_from(["int64", "str", "float64"])))
    w = None
    if _rarely(draw):
        w = draw(hnp.arrays(np.float64, draw(st.sampled_from([n, n + 1])), elements=st.floats()))
    elif draw(st.booleans()):
        w = draw(hnp.arrays(np.float64, n, elements=st.floats(0.01, 10) | st.just(0.0)))
    return kind, params, X, y, w, Q, _rarely(draw)


def _estimator(kind, params):
    if kind == "regressor":
        return NadarayaWatsonRegressor(**params)
    if kind == "classifier":
        return ParzenClassifier(**params)
    inner = NadarayaWatsonRegressor if kind == "search" else ParzenClassifier
    bandwidth = params.pop("bandwidth")
    bandwidths = bandwidth if isinstance(bandwidth, list) and bandwidth else None
    return BandwidthSearchCV(inner(**params), bandwidths=bandwidths)


@FUZZ
@given(fuzz_cases())
def test_fuzz_raises_only_documented_exceptions(case):
    kind, params, X, y, w, Q, skip_fit = case
    est = _estimator(kind, dict(params))
    note(f"{kind} {params} X={X!r} y={y!r} w={w!r} Q={Q!r} skip_fit={skip_fit}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if not skip_fit:
                est.fit(X, y, sample_weight=w)
            pred = est.predict(Q)
            proba = est.predict_proba(Q) if hasattr(est, "predict_proba") else None
        except (ValueError, TypeError, NotFittedError) as error:
            event(f"{type(error).__name__}")
            pred = None
    # A floating-point RuntimeWarning (overflow, invalid value) raised in our own
    # code is a defect too; scikit-learn's validation may warn on its own.
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning) and "skl_nw" in w.filename]
    assert ours == [], [str(w.message) for w in ours]
    if pred is None:
        return
    event("fitted and predicted")
    # It worked: then the answer is well formed.
    assert len(pred) == len(Q)
    if kind.endswith("classifier"):
        assert np.isin(pred, est.classes_).all()
        assert np.all(np.isfinite(proba))
        assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    else:
        assert np.all(np.isfinite(pred))
