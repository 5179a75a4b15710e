"""The integer screen (``_engine/_screen.py``, AVX-512 VNNI): exact sums, bound, dispatch.

Its sums leave out the pairs more than ``log2 n + 58`` bits below their row's
largest weight; they must equal the dense formula over every pair to rounding
(relative to the row's sums), every pair it drops must lie beyond that margin,
and the engine must take it only where it applies and pays.
"""

import numpy as np
import pytest

from skl_nw import NadarayaWatsonRegressor
from skl_nw._engine import _folded, _screen

pytest.importorskip("numba")
needs_vnni = pytest.mark.skipif(
    not _screen.cpu_supported(), reason="the CPU lacks AVX-512 F/BW/VNNI: the screen never runs"
)
LOG2E = np.log2(np.e)


def weighted_data(n, m, d, seed=0, shift=0.0, heavy=0):
    """Standard-normal points and queries (``heavy`` Cauchy columns), weights with zeros."""
    rng = np.random.default_rng(seed)
    X, Q = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    if heavy:
        X[:, :heavy] = rng.standard_cauchy(size=(n, heavy))
        Q[:, :heavy] = rng.standard_cauchy(size=(m, heavy))
    w = rng.uniform(0.01, 1.0, n) ** 4  # 26 bits of spread
    w[rng.choice(n, n // 20, replace=False)] = 0.0
    with np.errstate(divide="ignore"):
        off = np.maximum(np.log2(w) - np.log2(w.max()), -1e300)
    return X + shift, Q + shift, rng.normal(size=n), off


def dense(Q, X, slope, off, v):
    """``[sum e v, sum e]`` and ``sum e |v|`` over every pair, ``e = 2^(slope d2 + off)``."""
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    L = slope * d2 + off
    E = np.exp2(L)
    return np.column_stack([E @ v, E.sum(axis=1)]), E @ np.abs(v), L


def screened(X, Q, v, off, h):
    points = _screen.ScreenPoints(X, off, -LOG2E / (2 * h * h))
    assert points.usable
    out = np.full((len(Q), 2), np.nan)
    kept, thr = points.sums(Q, v, out)
    return points, out, kept, thr


def assert_agrees(out, ref, scale):
    """Sums equal to rounding, relative to the row's sums (rows that do not underflow)."""
    live = ref[:, 1] > 1e-290
    assert live.mean() > 0.9
    np.testing.assert_array_less(np.abs(out[live, 1] - ref[live, 1]), 1e-12 * ref[live, 1])
    np.testing.assert_array_less(np.abs(out[live, 0] - ref[live, 0]), 1e-12 * scale[live] + 1e-300)


@needs_vnni
@pytest.mark.parametrize("d", [16, 32, 40, 64])
@pytest.mark.parametrize("h", [0.3, 0.5, 1.0])
def test_sums_agree_with_dense(d, h):
    X, Q, v, off = weighted_data(1500, 133, d, seed=d)  # 133: not a multiple of any tile
    slope = -LOG2E / (2 * h * h)
    _, out, kept, _ = screened(X, Q, v, off, h)
    ref, scale, _ = dense(Q, X, slope, off, v)
    assert_agrees(out, ref, scale)
    assert 0 < kept <= len(X) * len(Q)


@needs_vnni
def test_sums_agree_with_tiled_far_from_centre():
    kernels = pytest.importorskip("skl_nw._engine._compiled")
    from skl_nw._engine._dense import pad_features

    X, Q, v, off = weighted_data(2000, 70, 32, seed=1, shift=1e6)
    h = 0.5
    slope = -LOG2E / (2 * h * h)
    _, out, kept, _ = screened(X, Q, v, off, h)
    tiled = np.empty((len(Q), 2))
    XT = np.ascontiguousarray(pad_features(X).T)
    kernels.exp_diff_tiled(pad_features(Q), XT, slope, off, v[None], tiled)
    ref, scale, _ = dense(Q, X, slope, off, v)
    assert_agrees(out, ref, scale)
    assert_agrees(out, tiled, scale)
    assert kept < 0.5 * len(X) * len(Q)  # the screen did skip pairs


@needs_vnni
@pytest.mark.parametrize("h", [0.3, 1.0])
def test_heavy_tails_engage_the_clipping(h):
    X, Q, v, off = weighted_data(1800, 90, 32, seed=2, heavy=3)
    points, out, _, _ = screened(X, Q, v, off, h)
    assert points.scale * 127 < np.abs(X - X.mean(axis=0)).max() / 10  # outliers clipped
    ref, scale, _ = dense(Q, X, -LOG2E / (2 * h * h), off, v)
    assert_agrees(out, ref, scale)


@needs_vnni
@pytest.mark.parametrize("d", [16, 40])
def test_every_dropped_pair_is_beyond_the_margin(d):
    X, Q, v, off = weighted_data(1200, 41, d, seed=3, heavy=1)
    h = 0.3
    points, out, kept, thr = screened(X, Q, v, off, h)
    Qq, Sq, *_ = points.queries(Q)
    dots = Qq[: len(Q), :d].astype(np.int64) @ points.xt.T.astype(np.int64)
    acc = dots - points.fb[None, :] + 128 * Sq[:, None]
    live = np.isfinite(points.doff)
    keep = (acc >= thr[:, None]) & live[None, :]
    assert keep.sum() == kept  # the kernel's test is the integer one below
    _, _, L = dense(Q, X, -LOG2E / (2 * h * h), off, v)
    gap = L.max(axis=1, keepdims=True) - L  # bits below the row's largest
    margin = np.log2(len(X)) + 58
    assert np.all(gap[~keep & live[None, :]] > margin)
    assert np.all(keep.any(axis=1))
    assert (~keep).mean() > 0.05  # thousands of dropped pairs: the check means something


def nw_case(h):
    X, Q, _, off = weighted_data(2600, 2200, 16, seed=4)
    y = np.sin(X[:, 0]) + X[:, 1]
    return X, y, np.exp2(off), Q


@needs_vnni
def test_estimator_predict_with_and_without_screen(monkeypatch):
    X, y, w, Q = nw_case(0.3)
    model = NadarayaWatsonRegressor(bandwidth=0.3, algorithm="brute").fit(X, y, sample_weight=w)
    calls = []
    sums = _screen.ScreenPoints.sums
    monkeypatch.setattr(_screen.ScreenPoints, "sums", lambda s, *a: calls.append(1) or sums(s, *a))
    with_screen = model.predict(Q)
    if _screen.screen_supported():
        assert calls, "the screen did not run"
    monkeypatch.setattr(_screen, "screen_supported", lambda: False)
    calls.clear()
    without = model.predict(Q)
    assert not calls
    np.testing.assert_allclose(with_screen, without, rtol=1e-12, atol=1e-12 * np.abs(y).max())


def test_dispatch_declines_without_vnni(monkeypatch):
    from llvmlite import binding

    features = dict(binding.get_host_cpu_features())
    features["avx512vnni"] = False
    monkeypatch.setattr(binding, "get_host_cpu_features", lambda: features)
    _screen.cpu_supported.cache_clear()
    try:
        assert not _screen.cpu_supported()
        X, y, w, Q = nw_case(0.3)
        called = []
        monkeypatch.setattr(_screen.ScreenPoints, "__init__", lambda *a: called.append(1))
        assert _screen.screen_points(X, np.zeros(len(X)), -5.0, 1, len(Q)) is None
        NadarayaWatsonRegressor(bandwidth=0.3, algorithm="brute").fit(X, y).predict(Q[:2100])
        assert not called
    finally:
        _screen.cpu_supported.cache_clear()


@needs_vnni
def test_dispatch_declines_where_most_pairs_are_kept():
    X, Q, v, off = weighted_data(2600, 300, 32, seed=5)
    points = _screen.ScreenPoints(X, off, -LOG2E / (2 * 3.0**2))  # h = 3: every pair counts
    out = np.full((len(Q), 2), np.nan)
    assert not _screen.screened_sums(points, Q, v[None], out)
    assert points.declined and np.isnan(out).all()
    assert not _screen.screened_sums(points, Q, v[None], out)  # later chunks skip the sample
    small = _screen.ScreenPoints(X, off, -LOG2E / (2 * 0.3**2))
    assert _screen.screened_sums(small, Q, v[None], out) and np.isfinite(out).all()


def test_dispatch_declines_small_shapes():
    X = np.random.default_rng(0).normal(size=(3000, 32))
    off = np.zeros(len(X))
    assert _screen.screen_points(X[:, :8], off, -5.0, 1, 5000) is None  # few features
    assert _screen.screen_points(X[:500], off[:500], -5.0, 1, 5000) is None  # few points
    assert _screen.screen_points(X, off, -5.0, 1, 100) is None  # few queries
    assert _screen.screen_points(X, off, -5.0, 3, 5000) is None  # value columns
    assert _folded.screen_points is _screen.screen_points


@needs_vnni
def test_far_queries_keep_no_padding_point():
    # n = 2049 packs 63 padding points (integer value -2^30, dot product 0). A far query's
    # threshold fell below it (and one query at 1e12 widened a chunk's whole margin): the
    # padding was kept, and the exact pass read past X, the weights and the values (NaN,
    # or a tiny sum that stopped the caller's log-space redo). NaN tails make a read
    # past the ends show.
    rng = np.random.default_rng(0)
    n, d, h = 2049, 32, 0.5
    X, Q = rng.normal(size=(n, d)), rng.normal(size=(40, d))
    Q[-2], Q[-1] = 300.0, 1e12
    off, v = np.full(n + 64, np.nan), np.full(n + 64, np.nan)
    off[:n], v[:n] = 0.0, rng.normal(size=n)
    points = _screen.ScreenPoints(X, off[:n], -LOG2E / (2 * h * h))
    out = np.full((len(Q), 2), np.nan)
    kept, _ = points.sums(Q, v[:n], out)
    assert kept <= n * len(Q) and np.isfinite(out).all()
    ref, _, _ = dense(Q[:-2], X, -LOG2E / (2 * h * h), off[:n], v[:n])
    np.testing.assert_allclose(out[:-2], ref, rtol=1e-12, atol=1e-300)
    # Through the estimator, a few such queries among many: the screen's predictions.
    Qe = rng.normal(size=(2100, d))
    Qe[-5:] = 1e100 * rng.normal(size=(5, d))
    y = rng.normal(size=n)
    model = NadarayaWatsonRegressor(bandwidth=h, algorithm="brute").fit(X, y)
    with_screen = model.predict(Qe)
    assert np.isfinite(with_screen).all()
    rows = np.r_[np.arange(0, 2095, 20), 2094]  # a dense check of some ordinary rows
    d2 = ((Qe[rows, None, :] / h - X[None] / h) ** 2).sum(axis=2)
    E = np.exp(-0.5 * (d2 - d2.min(axis=1, keepdims=True)))
    np.testing.assert_allclose(with_screen[rows], E @ y / E.sum(axis=1), rtol=1e-11,
                               atol=1e-12 * np.abs(y).max())  # fmt: skip
