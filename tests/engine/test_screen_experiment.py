"""The float32 screen of ``benchmarks/_screened.py`` (measured, not in the engine) is exact.

Its sums skip the pairs the screen finds far below their row's largest
weight; they must equal the dense formula (every pair) to rounding however
many it skips, and it must refuse to run where float32 cannot bound them.
"""

import numpy as np
import pytest

pytest.importorskip("numba")
_screened = pytest.importorskip("benchmarks._screened")

from skl_nw._engine import _dense  # noqa: E402


def dense_sums(Q, X, slope, off, V):
    """``[E @ V, E.sum(axis=1)]``, ``E = exp(slope |q - x|^2 + off)``, in long double."""
    Q, X = Q.astype(np.longdouble), X.astype(np.longdouble)
    S = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    E = np.exp(slope * S + off)
    return np.column_stack([E @ V, E.sum(axis=1)]).astype(np.float64), S


def unscreened(Q, X, slope, off, V):
    """The engine's tiled sums over every pair (direct differences, exact to rounding)."""
    kernels = pytest.importorskip("skl_nw._engine._compiled")
    out = np.empty((len(Q), V.shape[1] + 1))
    XT = np.ascontiguousarray(_dense.pad_features(X).T)
    bits, off_bits = slope * np.log2(np.e), off * np.log2(np.e)  # its log weights in bits
    VT = np.ascontiguousarray(V.T)
    kernels.exp_diff_tiled(_dense.pad_features(Q), XT, bits, off_bits, VT, out)
    return out


def assert_exact(out, Q, X, slope, off, V):
    """Screened sums against every pair, the engine's kernel and long double's, to rounding.

    A log weight ``L`` rounds to about ``eps |L|`` (so does its weight, relatively),
    in the engine's kernel as in the screened one.
    """
    expected, S = dense_sums(Q, X, slope, off, V)
    scale = dense_sums(Q, X, slope, off, np.abs(V))[0]
    largest = abs(slope) * S.max() + np.abs(off[off > -1e300]).max(initial=0.0)
    rounding = 4 * np.finfo(float).eps * (1 + largest) * scale
    assert np.all(np.abs(out - expected) <= rounding)
    assert np.all(np.abs(out - unscreened(Q, X, slope, off, V)) <= 2 * rounding)


def screened(Q, X, slope, off, V):
    """The screened sums and the number of pairs kept, or None where the screen refuses."""
    Qp, Xp = _dense.pad_features(Q), _dense.pad_features(X)
    out = np.full((len(Q), V.shape[1] + 1), np.nan)
    call = _screened.screened_call(Qp, Xp, slope, off, np.ascontiguousarray(V.T), out)
    return None if call is None else (out, call())


@pytest.mark.parametrize("d", [5, 16, 32])
@pytest.mark.parametrize("k", [1, 3])
def test_screened_sums_equal_every_pair(rng, d, k):
    # Most pairs skipped (small bandwidth in many features), partial groups of rows
    # (m = 37), partial blocks (n = 601), 2-D values, weights with zeros among them.
    m, n = 37, 601
    X, Q = rng.normal(size=(n, d)), rng.normal(size=(m, d))
    slope = -8.0
    off = -rng.exponential(2.0, n)
    off[::7] = -1e300  # zero weights
    V = rng.normal(size=(n, k))
    out, kept = screened(Q, X, slope, off, V)
    assert kept < 0.5 * m * n
    assert_exact(out, Q, X, slope, off, V)


def test_rows_that_underflow_and_ties_at_the_threshold(rng):
    # Queries so far out that every weight underflows (sums 0, as in the dense
    # formula), and points placed so that log weights fall exactly at the row's
    # largest less T: kept or skipped, the sums agree to rounding.
    d, n = 8, 300
    X = rng.normal(size=(n, d))
    Q = np.vstack([X[:3] + 40.0, X[3:6]])
    slope = -0.5
    T = np.log(n) + _screened.SKIP_BELOW
    X[10:20] = X[3] + np.sqrt(T / 0.5 / d)  # |q - x|^2 = T / 0.5 from the query X[3]
    off = np.zeros(n)
    V = rng.normal(size=(n, 2))
    out, _ = screened(Q, X, slope, off, V)
    assert np.all(out[:3] == 0.0)
    assert_exact(out, Q, X, slope, off, V)


# Inputs that are 0 in float32 (1e-150), subnormal (1e-40: the products underflow,
# which the margin's slack covers), tiny but normal with a bandwidth to match
# (1e-20, most pairs skipped) and large (1e3).
@pytest.mark.parametrize(("scale", "slope"), [(1e-150, -1.0), (1e-40, -1.0), (1e-20, -4e40),
                                              (1e3, -4e-6)])  # fmt: skip
def test_tiny_and_large_coordinates(rng, scale, slope):
    d, n = 16, 200
    X, Q = scale * rng.normal(size=(n, d)), scale * rng.normal(size=(9, d))
    off = np.zeros(n)
    V = rng.normal(size=(n, 1))
    out, _ = screened(Q, X, slope, off, V)
    assert_exact(out, Q, X, slope, off, V)


def test_refuses_far_from_the_centre_and_out_of_range(rng):
    # 1e4 bandwidths out, float32's rounding of |x|^2 exceeds any margin; a slope
    # times a coordinate past float32's range: no screen.
    X, Q = 1e4 + rng.normal(size=(100, 8)), rng.normal(size=(5, 8))
    assert screened(Q, X, -0.5, np.zeros(100), np.ones((100, 1))) is None
    X, Q = 1e-150 * rng.normal(size=(100, 8)), 1e-150 * rng.normal(size=(5, 8))
    assert screened(Q, X, -1e300, np.zeros(100), np.ones((100, 1))) is None


def test_float32_inputs_are_exact_too(rng):
    # Inputs that were float32 to begin with (exact in the screen's keys).
    X = rng.normal(size=(400, 32)).astype(np.float32).astype(np.float64)
    Q = rng.normal(size=(20, 32)).astype(np.float32).astype(np.float64)
    V = rng.normal(size=(400, 1))
    out, kept = screened(Q, X, -2.0, np.zeros(400), V)
    assert kept < 0.5 * 20 * 400
    assert_exact(out, Q, X, -2.0, np.zeros(400), V)
