"""The engine against the naive oracle, direct formulas and scipy.

The engine takes bandwidth-scaled inputs, so ``engine(X / h, Q / h)`` is
compared with the textbook formula on ``(X, Q, h)``; a few tests go through
``NadarayaWatsonRegressor`` with a fixed bandwidth instead.
"""

import dataclasses
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import logsumexp
from sklearn import config_context

from conftest import (
    LOG_PROFILES,
    PROFILES,
    log_weights,
    naive_predict,
    naive_weights,
    nearest_weights,
    scaled_distances,
    softmax_weights,
    traced_peak,
)
from skl_nw import NadarayaWatsonRegressor
from skl_nw._engine import (
    Options,
    _dense,
    _plan,
    _sums,
    attention,
    class_log_sums,
    pool,
    prepare_train,
)
from skl_nw._kernels import KERNELS, kernel_names

NAMES = kernel_names()
COMPACT = [name for name in NAMES if np.isfinite(KERNELS[name].support)]
INFINITE = [name for name in NAMES if not np.isfinite(KERNELS[name].support)]
TINY_BUDGET = "ignore:Could not adhere to working_memory config"


def _groups(starts, n):
    """Group code of each row, from the first row of each contiguous group."""
    return np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))


def run_engine(X, Q, h, w, kernel, V):
    """(pool, attention) of the engine on inputs scaled by the bandwidth ``h``."""
    train, Qs = prepare_train(X / h, log_w=log_weights(w), values=V), Q / h
    return pool(Qs, train, KERNELS[kernel]), attention(Qs, train, KERNELS[kernel])


def near_queries(rng, X, m, h, w=None, radius=0.5):
    """Queries within ``radius`` (in bandwidth units) of training points of positive weight.

    Every such query has a positive kernel sum, so the linear-space oracle is defined.
    """
    d = X.shape[1]
    candidates = np.arange(len(X)) if w is None else np.flatnonzero(np.asarray(w) > 0)
    idx = rng.choice(candidates, m)
    step = rng.uniform(-1, 1, size=(m, d)) * radius / np.sqrt(d)
    return X[idx] + step * h


# --------------------------------------------------------------------------
# pool and attention against the naive oracle


@pytest.mark.parametrize("factor", [0.3, 1.0, 3.0, "per-feature"])
@pytest.mark.parametrize("d", [1, 2, 3, 8])
@pytest.mark.parametrize("kernel", NAMES)
def test_pool_and_attention_match_naive(rng, kernel, d, factor):
    n, m, k = 40, 15, 3
    X = rng.normal(size=(n, d))
    if factor == "per-feature":
        h = np.sqrt(d) * rng.uniform(0.3, 3.0, size=d)
    else:
        h = factor * np.sqrt(d)
    w = rng.uniform(0.2, 2.0, size=n)
    w[rng.choice(n, 5, replace=False)] = 0.0
    V = rng.normal(size=(n, k))
    Q = near_queries(rng, X, m, h, w)

    expected_A = naive_weights(X, Q, h, kernel, sample_weight=w)
    assert np.all(np.isfinite(expected_A))
    P, A = run_engine(X, Q, h, w, kernel, V)
    assert P.shape == (m, k) and A.shape == (m, n)
    assert_allclose(A, expected_A, rtol=1e-10, atol=1e-14)
    assert_allclose(P, expected_A @ V, rtol=1e-10, atol=1e-12)
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(A[:, w == 0] == 0.0)


@pytest.mark.parametrize("kernel", NAMES)
def test_regressor_matches_naive_predict(rng, kernel):
    n, m, d = 50, 20, 3
    X = rng.normal(size=(n, d))
    y = rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, size=n)
    h = np.array([0.8, 1.5, 3.0])
    Q = near_queries(rng, X, m, h)
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), naive_predict(X, y, Q, h, kernel, w), rtol=1e-10, atol=1e-12)
    assert_allclose(
        reg.attention_weights(Q), naive_weights(X, Q, h, kernel, w), rtol=1e-10, atol=1e-14
    )


# --------------------------------------------------------------------------
# Far from the origin, and queries on training points


@pytest.mark.parametrize("spread", [1.0, 10.0])
@pytest.mark.parametrize("d", [1, 3, 8])
@pytest.mark.parametrize("kernel", NAMES)
def test_far_from_origin(rng, kernel, d, spread):
    offset, n, m, h = 1e6, 40, 20, 1.0
    X = offset + spread * rng.normal(size=(n, d))
    y = rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, size=n)
    Q = near_queries(rng, X, m, h)
    if kernel in INFINITE:
        # Queries anywhere in the cloud, not only near training points.
        Q[m // 2 :] = offset + spread * rng.normal(size=(m - m // 2, d))
    # The direct formula on exact differences: x - 1e6 is exact for x in [5e5, 2e6].
    expected_A = naive_weights(X - offset, Q - offset, h, kernel, w)
    assert np.all(np.isfinite(expected_A))

    P, A = run_engine(X, Q, h, w, kernel, y)
    assert_allclose(A, expected_A, rtol=1e-10, atol=1e-14)
    assert_allclose(P, expected_A @ y, rtol=1e-10, atol=1e-12)

    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), expected_A @ y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("h", [0.5, 2.0])
@pytest.mark.parametrize("kernel", NAMES)
def test_queries_on_training_points(rng, kernel, h):
    # d = 5: the squared distances come from the BLAS expansion, whose rounding
    # error e would become sqrt(e) ~ 1e-7 in a kernel of u = sqrt(s) (exponential,
    # linear) at a query that coincides with a training point.
    n, m, d = 60, 30, 5
    X = rng.normal(size=(n, d))
    y = rng.normal(size=(n, 3))
    w = rng.uniform(0.5, 2.0, size=n)
    Q = np.vstack([X[rng.choice(n, m - 5, replace=False)], near_queries(rng, X, 5, h)])
    expected_A = naive_weights(X, Q, h, kernel, w)
    P, A = run_engine(X, Q, h, w, kernel, y)
    assert_allclose(A, expected_A, rtol=1e-10, atol=1e-14)
    assert_allclose(P, expected_A @ y, rtol=1e-10, atol=1e-12)

    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), expected_A @ y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["exponential", "linear"])
def test_queries_on_training_points_far_from_origin(rng, kernel):
    offset, n, d = 1e6, 50, 5
    X = offset + rng.normal(size=(n, d))
    y = rng.normal(size=n)
    Q = X[::2].copy()
    reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel=kernel).fit(X, y)
    expected = naive_predict(X - offset, y, Q - offset, 1.0, kernel)
    assert_allclose(reg.predict(Q), expected, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------
# Log space: tiny and huge bandwidths, ties


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("kernel", NAMES)
def test_tiny_bandwidth_gives_nearest_target(rng, kernel, d):
    # Points on a lattice 0.1 apart, h = 1e-4: the nearest point is 450 bandwidths
    # closer than any other, so its weight is 1 up to exp(-450) (compact kernels
    # have an empty support and fall back to the nearest point).
    grid = np.stack(np.meshgrid(*[np.arange(5)] * d, indexing="ij"), -1).reshape(-1, d)
    X = 0.1 * rng.permutation(grid)
    n, m = len(X), 40
    y = rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, size=n)
    nearest = rng.choice(n, m)
    Q = X[nearest] + rng.uniform(-0.02, 0.02, size=(m, d))
    Q[:5] = X[nearest[:5]]  # and exactly on training points

    reg = NadarayaWatsonRegressor(bandwidth=1e-4, kernel=kernel).fit(X, y, sample_weight=w)
    pred = reg.predict(Q)
    assert np.all(np.isfinite(pred))
    assert_allclose(pred, y[nearest], rtol=1e-12, atol=1e-14)
    A = reg.attention_weights(Q)
    assert_allclose(A, np.eye(n)[nearest], atol=1e-14)
    if kernel == "gaussian":
        # What the linear-space formula gives: 0 / 0.
        with np.errstate(all="ignore"):
            assert np.isnan(naive_predict(X, y, Q[5:], 1e-4, kernel)).any()


@pytest.mark.parametrize("kernel", NAMES)
def test_exact_ties_split_evenly(kernel):
    rng = np.random.default_rng(7)
    # Already scaled: points 1000 bandwidths apart, queries exactly halfway.
    X = 1000.0 * np.arange(10.0)[:, None]
    y = rng.normal(size=(10, 2))
    Q = np.array([[500.0], [1500.0], [4500.0], [8500.0]])
    pairs = np.array([[0, 1], [1, 2], [4, 5], [8, 9]])
    train = prepare_train(X, values=y)

    P = pool(Q, train, KERNELS[kernel])
    assert_allclose(P, y[pairs].mean(axis=1), rtol=1e-12, atol=1e-15)
    A = attention(Q, train, KERNELS[kernel])
    expected_A = np.zeros((4, 10))
    expected_A[np.arange(4)[:, None], pairs] = 0.5
    assert_allclose(A, expected_A, rtol=1e-12, atol=0)

    # Weighted ties share in proportion to the sample weights.  (Here log K = -125000
    # for the gaussian, whose ulp, 1.5e-11, bounds the accuracy of log K + log w: the
    # same as a relative rounding error of s would cause; hence rtol=1e-10.)
    w = rng.uniform(0.5, 2.0, size=10)
    P = pool(Q, prepare_train(X, log_w=np.log(w), values=y), KERNELS[kernel])
    wp = w[pairs][..., None]
    assert_allclose(P, (wp * y[pairs]).sum(axis=1) / wp.sum(axis=1), rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("kernel", NAMES)
def test_exact_ties_through_the_regressor(kernel):
    # Dyadic data and bandwidth, so that scaling and centring are exact and
    # halfway queries are exactly tied: h ~ 1.2e-4 on points 0.125 apart.
    rng = np.random.default_rng(8)
    X = np.column_stack([0.125 * np.arange(8.0), np.zeros(8)])
    y = rng.normal(size=8)
    Q = np.column_stack([0.0625 + 0.125 * np.arange(7.0), np.zeros(7)])
    reg = NadarayaWatsonRegressor(bandwidth=2.0**-13, kernel=kernel).fit(X, y)
    assert_allclose(reg.predict(Q), (y[:-1] + y[1:]) / 2, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kernel", NAMES)
def test_huge_bandwidth_gives_weighted_mean(rng, kernel):
    n, m, d = 30, 10, 3
    X = rng.normal(size=(n, d))
    y = rng.normal(size=(n, 2))
    w = rng.uniform(0.0, 2.0, size=n)
    Q = rng.normal(size=(m, d))
    reg = NadarayaWatsonRegressor(bandwidth=1e8, kernel=kernel).fit(X, y, sample_weight=w)
    pred = reg.predict(Q)
    weighted_mean = w @ y / w.sum()
    # Kernels of u (not u**2) differ from 1 by ~u ~ 1e-8.
    assert_allclose(pred, np.broadcast_to(weighted_mean, pred.shape), rtol=1e-6, atol=1e-7)
    assert_allclose(pred, naive_predict(X, y, Q, 1e8, kernel, w), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kernel", INFINITE)
def test_queries_where_every_weight_underflows(rng, kernel, d):
    # A tight cluster (already scaled) and queries 20 to 45 bandwidths away: from
    # about 38 on, every gaussian weight underflows to 0 (or a subnormal) in linear
    # space, while the squared norms stay small enough for a BLAS expansion.
    n, m = 30, 26
    X = 0.5 * rng.normal(size=(n, d))
    V = rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, size=n)
    direction = rng.normal(size=(m, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    Q = np.linspace(20, 45, m)[:, None] * direction
    alpha = softmax_weights(X, Q, 1.0, kernel, w)

    train = prepare_train(X, log_w=np.log(w), values=V)
    P = pool(Q, train, KERNELS[kernel])
    A = attention(Q, train, KERNELS[kernel])
    assert np.all(np.isfinite(P)) and np.all(np.isfinite(A))
    assert_allclose(A, alpha, rtol=1e-10, atol=1e-300)
    assert_allclose(P, alpha @ V, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("scale, h", [(1.0, 1e-8), (1.0, 1e-3), (1.0, 1e4), (1e120, 1.0)])
@pytest.mark.parametrize("kernel", NAMES)
def test_finite_inputs_give_finite_outputs(rng, kernel, scale, h):
    n, m, d = 50, 30, 3
    X = scale * rng.normal(size=(n, d))
    y = rng.normal(size=n)
    w = rng.uniform(0.0, 1.0, size=n)
    Q = scale * rng.normal(size=(m, d))
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    pred = reg.predict(Q)
    A = reg.attention_weights(Q)
    assert np.all(np.isfinite(pred))
    assert np.all(np.isfinite(A))
    assert_allclose(A.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(A[:, w == 0] == 0)
    # A convex combination of the targets.
    assert np.all(pred >= y.min() - 1e-12) and np.all(pred <= y.max() + 1e-12)


# --------------------------------------------------------------------------
# Compact kernels: queries with no training point inside the support


@pytest.mark.parametrize("kernel", COMPACT)
def test_fallback_nearest_and_nan_by_hand(kernel):
    # Already scaled, support radius 1: points 3 apart leave gaps.
    X = np.array([[0.0], [3.0], [6.0], [9.0], [30.0]])
    y = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]])
    w = np.array([1.0, 3.0, 1.0, 0.0, 1.0])
    Q = np.array(
        [
            [1.5],  # tied between 0 and 3: (1 * 1 + 3 * 2) / 4
            [4.0],  # u = 1 from 3 (K = 0): nearest is 3
            [-50.0],  # nearest is 0
            [9.2],  # inside the support of a zero-weight point only: nearest positive is 6
            [7.5],  # tied between 6 and the zero-weight 9: 6
            [100.0],  # nearest is 30
            [0.5],  # inside the support of 0: not a fallback
        ]
    )
    inside = np.array([False] * 6 + [True])
    expected = np.array([[7 / 4], [2.0], [1.0], [4.0], [4.0], [16.0], [1.0]])
    train = prepare_train(X, log_w=log_weights(w), values=y)
    k = KERNELS[kernel]

    P = pool(Q, train, k)
    assert_allclose(P, expected, rtol=1e-12)
    A = attention(Q, train, k)
    assert_allclose(A[0], [0.25, 0.75, 0, 0, 0], rtol=1e-12)
    assert_allclose(A[:, 3], 0.0, atol=0)
    assert_allclose(A @ y, expected, rtol=1e-12)

    P = pool(Q, train, k, fallback="nan")
    A = attention(Q, train, k, fallback="nan")
    assert np.all(np.isnan(P[~inside])) and np.all(np.isnan(A[~inside]))
    assert_allclose(P[inside], expected[inside], rtol=1e-12)
    assert_allclose(A[inside], [[1.0, 0, 0, 0, 0]], rtol=1e-12)


@pytest.mark.parametrize("d", [1, 3, 5])
@pytest.mark.parametrize("kernel", COMPACT)
def test_fallback_random(rng, kernel, d):
    n, m, h = 40, 30, 0.2
    X = rng.normal(size=(n, d))
    y = rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, size=n)
    w[rng.choice(n, 10, replace=False)] = 0.0
    Q = np.vstack([3 * rng.normal(size=(m, d)), near_queries(rng, X, 10, h, w)])
    u = scaled_distances(X, Q, h)
    has_support = ((u < 1) & (w > 0)).any(axis=1)
    assert (~has_support).sum() >= 10 and has_support.sum() >= 10

    # Nearest: the weighted mean target of the nearest positive-weight point(s).
    reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel).fit(X, y, sample_weight=w)
    pred = reg.predict(Q)
    nearest = nearest_weights(X, Q[~has_support], h, w) @ y
    assert_allclose(pred[~has_support], nearest, rtol=1e-12)
    expected_inside = naive_predict(X, y, Q[has_support], h, kernel, w)
    assert_allclose(pred[has_support], expected_inside, rtol=1e-10, atol=1e-12)

    # Zero-weight training points are never chosen.
    A = reg.attention_weights(Q)
    assert np.all(A[:, w == 0] == 0)

    # NaN: exactly the rows without support.
    reg_nan = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel, fallback="nan")
    reg_nan.fit(X, y, sample_weight=w)
    pred = reg_nan.predict(Q)
    assert np.all(np.isnan(pred[~has_support]))
    assert_allclose(pred[has_support], expected_inside, rtol=1e-10, atol=1e-12)
    A = reg_nan.attention_weights(Q)
    assert np.all(np.isnan(A[~has_support])) and np.all(np.isfinite(A[has_support]))


# --------------------------------------------------------------------------
# log_group_sums


def naive_group_sums(X, Q, h, kernel, w, starts):
    K = PROFILES[kernel](scaled_distances(X, Q, h)) * w
    return np.add.reduceat(K, starts, axis=1)


@pytest.mark.parametrize("d", [1, 3, 8])
@pytest.mark.parametrize("kernel", NAMES)
def test_log_group_sums_match_naive(rng, kernel, d):
    n, m = 40, 25
    starts = np.array([0, 5, 6, 17, 30])
    X = rng.normal(size=(n, d))
    h = 0.7 * np.sqrt(d)
    w = rng.uniform(0.2, 2.0, size=n)
    w[[3, 20]] = 0.0
    Q = np.vstack([near_queries(rng, X, m - 5, h, w), 3 * rng.normal(size=(5, d))])
    expected = naive_group_sums(X, Q, h, kernel, w, starts)
    with np.errstate(divide="ignore"):
        expected = np.log(expected)
    # fallback="nan" keeps empty rows empty: the sums are then exact (log 0 = -inf).
    train = prepare_train(X / h, log_w=log_weights(w), groups=_groups(starts, n))
    k = KERNELS[kernel]
    L = class_log_sums(Q / h, train, k, fallback="nan")
    assert L.shape == (m, len(starts))
    assert not np.any(np.isnan(L))
    assert_allclose(L, expected, rtol=1e-10, atol=1e-10)
    if kernel in COMPACT:
        assert np.any(L == -np.inf)
    nonempty = np.isfinite(expected).any(axis=1)
    L_nearest = class_log_sums(Q / h, train, k)
    assert_allclose(L_nearest[nonempty], expected[nonempty], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kernel", INFINITE)
def test_log_group_sums_far_group_stays_finite(rng, kernel):
    # Group 1 is ~2000 bandwidths away from every query: its linear-space sum
    # underflows to 0, its log-sum is about -2e6 (gaussian) or -2000 (exponential).
    n0, n1, d, m = 20, 15, 3, 10
    X = np.vstack([rng.normal(size=(n0, d)), 2000.0 + rng.normal(size=(n1, d))])
    w = rng.uniform(0.5, 2.0, size=n0 + n1)
    starts = np.array([0, n0])
    Q = rng.normal(size=(m, d))
    train = prepare_train(X, log_w=np.log(w), groups=_groups(starts, n0 + n1))
    L = class_log_sums(Q, train, KERNELS[kernel])
    assert np.all(np.isfinite(L))

    log_terms = np.log(w) + LOG_PROFILES[kernel](scaled_distances(X, Q, 1.0))
    expected = np.column_stack(
        [logsumexp(log_terms[:, :n0], axis=1), logsumexp(log_terms[:, n0:], axis=1)]
    )
    assert_allclose(L, expected, rtol=1e-10)
    with np.errstate(divide="ignore"):
        assert np.all(np.log(naive_group_sums(X, Q, 1.0, kernel, w, starts))[:, 1] == -np.inf)


@pytest.mark.parametrize("groups", [[0, 0, 2, 2], [1, 1, 2]])
def test_a_group_with_no_rows_is_refused(groups):
    # reduceat would give the empty group its neighbour's first row instead of 0
    with pytest.raises(ValueError, match="every group"):
        prepare_train(np.zeros((len(groups), 1)), groups=np.array(groups))


@pytest.mark.parametrize("numpy_passes", [False, True])
def test_gaussian_group_sums_fold_and_redo_the_rows_a_group_underflows(rng, monkeypatch,
                                                                       numpy_passes):  # fmt: skip
    # The Gaussian's group sums fold into one product (a column per group); a row where
    # a group with weight has a sum below the underflow floor (group 2 lies 45 bandwidths
    # from the first queries, 22.5 from the others) takes the sums shifted by each group's
    # nearest point, so its log-sum stays finite; a group of zero weight alone (group 1)
    # is -inf, and no redo.
    if numpy_passes:
        monkeypatch.setattr(_dense, "compiled", lambda: None)
    X = np.vstack([rng.normal(size=(30, 2)), rng.normal(size=(10, 2)),
                   rng.normal(scale=0.3, size=(20, 2)) + [45.0, 0.0]])  # fmt: skip
    w = np.concatenate([rng.uniform(0.5, 2.0, 30), np.zeros(10), rng.uniform(0.5, 2.0, 20)])
    starts = np.array([0, 30, 40])
    Q = np.vstack([rng.normal(scale=0.3, size=(12, 2)), [[22.5, 0.0], [22.0, 0.5], [23, 0]]])
    train = prepare_train(X, log_w=log_weights(w), groups=_groups(starts, 60))
    redone, original = [], _sums._grouped_slope_sums

    def spy(plan, Qc, own):
        redone.append(len(Qc))
        return original(plan, Qc, own)

    monkeypatch.setattr(_sums, "_grouped_slope_sums", spy)
    L = class_log_sums(Q, train, KERNELS["gaussian"])
    assert redone == [12]  # the rows near group 0 alone: group 2 underflows there
    with np.errstate(divide="ignore"):
        log_terms = log_weights(w) + LOG_PROFILES["gaussian"](scaled_distances(X, Q, 1.0))
    expected = np.column_stack([logsumexp(log_terms[:, lo:hi], axis=1)
                                for lo, hi in [(0, 30), (30, 40), (40, 60)]])  # fmt: skip
    assert np.all(L[:, 1] == -np.inf) and np.all(np.isfinite(L[:, [0, 2]]))
    assert_allclose(L[:, [0, 2]], expected[:, [0, 2]], rtol=1e-12)


@pytest.mark.parametrize("working_memory, folds", [(0.1, 1), (0.005, 0)])
def test_gaussian_group_sums_fold_within_their_memory_and_while_they_pay(
    rng, monkeypatch, working_memory, folds
):
    # Groups 100 bandwidths apart: every row has a group whose folded sum underflows,
    # so after the first chunk (of ~14 rows) the call takes the shifted sums alone.
    # With a budget too small for the folded columns (2 x 8 bytes x 150 rows x 3
    # groups against a quarter of 5 KiB) none folds.
    X = np.vstack([rng.normal(size=(50, 1)) + 100.0 * g for g in range(3)])
    train = prepare_train(X, groups=_groups(np.array([0, 50, 100]), 150))
    Q = rng.normal(size=(400, 1)) + 100.0 * rng.integers(0, 3, (400, 1))
    calls, original = [], _plan.Plan.group_folded_sums

    def spy(plan, Qc):
        calls.append(len(Qc))
        return original(plan, Qc)

    monkeypatch.setattr(_plan.Plan, "group_folded_sums", spy)
    options = Options(working_memory=working_memory, n_jobs=1)
    L = class_log_sums(Q, train, KERNELS["gaussian"], options=options)
    assert len(calls) == folds
    log_terms = LOG_PROFILES["gaussian"](scaled_distances(X, Q, 1.0))
    expected = np.column_stack([logsumexp(log_terms[:, lo:lo + 50], axis=1)
                                for lo in (0, 50, 100)])  # fmt: skip
    assert_allclose(L, expected, rtol=1e-12)


# --------------------------------------------------------------------------
# Chunking, threads and memory


def counting(kernel):
    """The record of ``kernel`` with a log-profile that records its input shapes."""
    shapes = []
    record = KERNELS[kernel]

    def log_profile(s):
        shapes.append(s.shape)
        return record.log_profile(s)

    return dataclasses.replace(record, log_profile=log_profile), shapes


@pytest.mark.filterwarnings(TINY_BUDGET)
@pytest.mark.parametrize("kernel", ["gaussian", "linear", "cosine"])
def test_chunking_and_threads_do_not_change_results(rng, kernel):
    n, m, d = 300, 120, 3
    X = rng.normal(size=(n, d))
    V = rng.normal(size=(n, 2))
    w = rng.uniform(0.2, 2.0, size=n)
    starts = np.array([0, 100, 250])
    Q = near_queries(rng, X, m, 1.0)
    train = prepare_train(X, log_w=np.log(w), values=V)
    grouped = prepare_train(X, log_w=np.log(w), groups=_groups(starts, n))

    def all_three(**kwargs):
        # The record's log-profile sees each chunk of squared distances (a
        # kernel with a fast path may skip it in some functions, not in all).
        k, shapes = counting(kernel)
        results = (
            pool(Q, train, k, options=Options(**kwargs)),
            # Dense weights over the budget are an error: the sparse form, densified.
            attention(Q, train, k, sparse=True, options=Options(**kwargs)).toarray(),
            class_log_sums(Q, grouped, k, options=Options(**kwargs)),
        )
        assert shapes and all(shape[1] == n for shape in shapes)
        return results, [shape[0] for shape in shapes]

    reference, rows = all_three()
    assert max(rows) == m  # one chunk per call by default
    expected_A = naive_weights(X, Q, 1.0, kernel, w)
    assert_allclose(reference[0], expected_A @ V, rtol=1e-10, atol=1e-12)
    assert_allclose(reference[1], expected_A, rtol=1e-10, atol=1e-14)

    for working_memory in (1e-9, 0.1):
        for n_jobs in (1, 2):
            results, rows = all_three(n_jobs=n_jobs, working_memory=working_memory)
            assert max(rows) < m
            if working_memory == 1e-9:
                assert max(rows) == 1 and len(rows) >= m
            for got, want in zip(results, reference, strict=True):
                assert_allclose(got, want, rtol=1e-12, atol=1e-15)

    # The same through the estimator and scikit-learn's global budget.
    y = V[:, 0]
    reg = NadarayaWatsonRegressor(bandwidth=1.0, kernel=kernel).fit(X, y, sample_weight=w)
    want = reg.predict(Q)
    for n_jobs in (1, 2):
        reg.set_params(n_jobs=n_jobs)
        with config_context(working_memory=1e-9):
            assert_allclose(reg.predict(Q), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "kernel, n_jobs", [(kernel, None) for kernel in NAMES] + [("gaussian", 2), ("linear", 2)]
)
def test_predict_memory_is_bounded_by_working_memory(rng, kernel, n_jobs):
    n, m, d, budget_mib, slack_mib = 2000, 20000, 3, 8, 2
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n)
    Q = rng.normal(size=(m, d))
    reg = NadarayaWatsonRegressor(bandwidth=0.5, kernel=kernel, n_jobs=n_jobs).fit(X, y)
    reg.predict(Q[:10])  # one-time work (numba compiling its kernels) is not per call
    with config_context(working_memory=budget_mib):
        pred, peak = traced_peak(lambda: reg.predict(Q))
    assert pred.shape == (m,) and np.all(np.isfinite(pred))
    # An (m, n) float matrix would be 305 MiB.
    assert peak - pred.nbytes < (budget_mib + slack_mib) * 2**20, peak / 2**20


def test_a_budget_below_one_row_names_both_sizes():
    # A budget under a row's temporaries: the warning names the budget and the row's
    # need as they are (it said "0MiB, 1MiB required" for a budget of 0.01 MiB).
    X = np.arange(20000.0)[:, None]
    reg = NadarayaWatsonRegressor(bandwidth=0.5, algorithm="brute", n_jobs=1).fit(X, X[:, 0])
    with config_context(working_memory=0.01):
        with pytest.warns(UserWarning, match=r"Currently 0\.01 MiB, 0\.\d+ MiB required"):
            reg.predict([[3.0]])


@pytest.mark.parametrize("kernel", ["gaussian", "tophat"])
def test_no_queries_gives_empty_results_without_warnings(kernel):
    # Arrays in, arrays out: zero queries is an empty result, not a (misleading)
    # "Could not adhere to working_memory config" warning.
    X = np.random.default_rng(3).normal(size=(10, 3))
    train = prepare_train(X, values=np.ones((10, 2)), groups=_groups(np.array([0, 4]), 10))
    Q, k = np.empty((0, 3)), KERNELS[kernel]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pool(Q, train, k).shape == (0, 2)
        assert attention(Q, train, k).shape == (0, 10)
        assert class_log_sums(Q, train, k).shape == (0, 2)


@pytest.mark.parametrize("d", [1, 2, 4, 8, 13])
def test_far_from_origin_matches_centred_oracle(rng, d):
    # Data at 1e6 with bandwidth 1: centred at fit, the predictions keep every digit
    # that the inputs' own rounding (ulp(1e6) = 1.2e-10) leaves; queries 30 bandwidths
    # per feature beyond the data make the folded GEMM's rounding bound too large,
    # so those chunks take direct differences.
    offset = 1e6
    Z, Zq = rng.normal(size=(400, d)), rng.normal(size=(60, d))
    Zq[:20] += 30.0
    X, Q = Z + offset, Zq + offset
    y = np.cos(Z[:, 0]) + 0.1 * Z.sum(axis=1)
    pred = NadarayaWatsonRegressor(bandwidth=1.0, algorithm="brute").fit(X, y).predict(Q)
    weights = softmax_weights(X - offset, Q - offset, 1.0, "gaussian")
    assert_allclose(pred, weights @ y, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_leave_one_out_attention_equals_the_weights_of_a_refit_without_the_row(
    rng, kernel, algorithm
):
    # Row i dropped by index, in log space: at h = 1e-3 its neighbours no longer
    # underflow against it (renormalising the in-sample weights gave 0 / 0).
    X = rng.uniform(0, 1, (40, 2))
    y = rng.normal(size=40)
    w = rng.uniform(0.5, 2.0, 40)
    for h in (1e-3, 0.2):
        est = NadarayaWatsonRegressor(h, kernel=kernel, algorithm=algorithm).fit(X, y, w)
        rows = np.array([0, 7, 39])
        A = est._loo_attention(rows)
        assert np.all(A[np.arange(3), rows] == 0) and np.allclose(A.sum(axis=1), 1)
        for j, i in enumerate(rows):
            others = np.delete(np.arange(40), i)
            refit = NadarayaWatsonRegressor(h, kernel=kernel, algorithm=algorithm)
            want = refit.fit(X[others], y[others], w[others]).attention_weights(X[i : i + 1])
            assert_allclose(A[j, others], want[0], rtol=1e-10, atol=1e-300)
