"""Reliability and intervals over the conformance matrix: every estimator, backend, kernel, data.

The cells are those of ``test_conformance.py`` (NW, Parzen, local degree 0-2 x
brute, kd_tree, ball_tree, binned x Gaussian, Epanechnikov x continuous,
mixed, span).  Every expected value comes from outside the code under test: a
transformation of the data whose effect is known exactly (affine targets,
translated inputs, repeated rows, float32 input), global least squares for
an infinite bandwidth, or the brute-force twin of a binned cell.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats
from sklearn.base import clone
from test_conformance import BINNED_TOL, IDS, MATRIX, data, make

REGRESSORS = [(cell, i) for cell, i in zip(MATRIX, IDS, strict=True) if cell[0] != "parzen"]
CONTINUOUS = [(cell, i) for cell, i in zip(MATRIX, IDS, strict=True) if cell[3] == "continuous"]


def _cells(pairs):
    return pytest.mark.parametrize(
        ("name", "backend", "kernel", "kind"), [c for c, _ in pairs], ids=[i for _, i in pairs]
    )


ALL = _cells(list(zip(MATRIX, IDS, strict=True)))


def _output(est, X):
    """What a cell predicts: class probabilities, or the regression."""
    return est.predict_proba(X) if hasattr(est, "predict_proba") else est.predict(X)


def _fit(name, backend, kernel, kind, X=None, y=None, **params):
    X0, y0, labels = data(kind)
    X = X0 if X is None else X
    target = (labels if name == "parzen" else y0) if y is None else y
    return make(name, backend, kernel, kind, **params).fit(X, target), X, target


def _atol(backend, spread):
    # A binned cell approximates its kernel weights to binned_tol; exact cells to rounding.
    return 50 * BINNED_TOL * spread if backend == "binned" else 1e-9 * spread


@_cells(REGRESSORS)
def test_affine_targets_give_affine_predictions(name, backend, kernel, kind):
    est, X, y = _fit(name, backend, kernel, kind)
    p = est.predict(X)
    # A power of two scales every operation exactly; a shift by 1e6 spreads moves the fit.
    scale, shift = 2.0**600, 1e6 * np.std(y)
    scaled = clone(est).fit(X, y * scale).predict(X)
    assert_allclose(scaled, p * scale, rtol=1e-12, atol=0)
    shifted = clone(est).fit(X, y + shift).predict(X)
    assert_allclose(shifted - shift, p, rtol=0, atol=1e-9 * shift)


@ALL
def test_inputs_far_from_the_origin_give_the_same_fit(name, backend, kernel, kind):
    est, X, target = _fit(name, backend, kernel, kind)
    offset = np.zeros(X.shape[1])
    offset[0] = 1e9  # the continuous feature; x + 1e9 - 1e9 is exact to 2^-23 here
    far, _, _ = _fit(name, backend, kernel, kind, X=X + offset, y=target)
    spread = 1.0 if name == "parzen" else np.ptp(target)
    # Rounding x + 1e9 moves each point by up to 6e-8, 1e-7 of the bandwidth 0.5.
    assert_allclose(_output(far, X + offset), _output(est, X), rtol=0,
                    atol=_atol(backend, spread) + 1e-5 * spread)  # fmt: skip


def _global_design(X, degree):
    """Columns of the polynomial of ``degree`` in the features (with their products)."""
    columns = [np.ones(len(X))]
    if degree >= 1:
        columns += [X[:, 0], X[:, 1]]
    if degree >= 2:
        columns += [X[:, 0] ** 2, X[:, 0] * X[:, 1], X[:, 1] ** 2]
    return np.column_stack(columns)


@_cells(CONTINUOUS)
def test_an_infinite_bandwidth_is_a_global_fit(name, backend, kernel, kind):
    # Every kernel weight is 1 - O(1e-24): the fit of all rows with equal weights.
    est, X, target = _fit(name, backend, kernel, kind, bandwidth=1e12)
    Q = X[::5] + 0.01
    if name == "parzen":
        expected = np.tile(np.bincount(target) / len(target), (len(Q), 1))
        assert_allclose(est.predict_proba(Q), expected, rtol=1e-9, atol=1e-12)
        return
    degree = 0 if name == "nw" else int(name[-1])
    coef = np.linalg.lstsq(_global_design(X, degree), target, rcond=None)[0]
    expected = _global_design(Q, degree) @ coef
    assert_allclose(est.predict(Q), expected, rtol=0, atol=_atol(backend, np.ptp(target)))


# A span counts rows, not weights (as LOESS): integer weights are no repeated rows there.
@_cells([(c, i) for c, i in zip(MATRIX, IDS, strict=True) if c[3] != "span"])
def test_integer_weights_equal_repeated_rows_and_zero_weights_dropped_rows(
    name, backend, kernel, kind
):
    X, y, labels = data(kind)
    target = labels if name == "parzen" else y
    w = np.tile([0, 1, 2, 3], len(X) // 4 + 1)[: len(X)].astype(float)
    weighted = make(name, backend, kernel, kind).fit(X, target, sample_weight=w)
    rows = np.repeat(np.arange(len(X)), w.astype(int))
    repeated = make(name, backend, kernel, kind).fit(X[rows], target[rows])
    spread = 1.0 if name == "parzen" else np.ptp(target)
    assert_allclose(_output(weighted, X), _output(repeated, X), rtol=0, atol=1e-9 * spread)


@ALL
def test_pickle_round_trip_predicts_identically(name, backend, kernel, kind):
    est, X, _ = _fit(name, backend, kernel, kind)
    loaded = pickle.loads(pickle.dumps(est))
    assert_array_equal(_output(loaded, X), _output(est, X))


@ALL
def test_far_queries_and_float32_input(name, backend, kernel, kind):
    est, X, target = _fit(name, backend, kernel, kind)
    far = X[:5].copy()
    far[:, 0] += 1e6  # a million bandwidths away: the nearest rows' fallback, finite
    # Local fits of degree >= 1 warn that they extrapolate; the others fall back quietly.
    extrapolates = name in ("local1", "local2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert np.isfinite(_output(est, far)).all()
    assert any("extrapolated" in str(w.message) for w in caught) == extrapolates
    X32 = X.astype(np.float32)
    single, _, _ = _fit(name, backend, kernel, kind, X=X32, y=target)
    double, _, _ = _fit(name, backend, kernel, kind, X=X32.astype(np.float64), y=target)
    assert_array_equal(_output(single, X32), _output(double, X32.astype(np.float64)))


@_cells(REGRESSORS)
def test_standard_errors_and_intervals(name, backend, kernel, kind):
    est, X, y = _fit(name, backend, kernel, kind)
    Q = X[::3]
    mean, std = est.predict(Q, return_std=True)
    spread = np.ptp(y)
    # The mean of return_std is predict's (binned: the grid's or the exact set's, within tol).
    assert_allclose(mean, est.predict(Q), rtol=0, atol=_atol(backend, spread) / 50)
    exact = clone(est).set_params(algorithm="brute", binned_tol=None).fit(X, y)
    exact_mean, exact_std = exact.predict(Q, return_std=True)
    assert np.isfinite(std).all() and np.all(std >= 0)
    assert_allclose(std, exact_std, rtol=0, atol=_atol(backend, spread))
    lower, upper = est.predict_interval(Q, alpha=0.1).T
    assert np.all(lower <= mean) and np.all(mean <= upper)
    assert_allclose(upper - mean, mean - lower, rtol=1e-9, atol=1e-12 * spread)
    # Half-widths are a t quantile (its local degrees of freedom) times the standard error,
    # and the binned cell's interval is its exact twin's within the tolerance.
    ratio = (upper - mean)[std > 0] / std[std > 0]
    assert np.all(ratio >= stats.norm.ppf(0.95) - 1e-9)
    assert np.all(ratio <= stats.t.ppf(0.95, 1) + 1e-9)
    exact_interval = exact.predict_interval(Q, alpha=0.1)
    assert_allclose(np.column_stack([lower, upper]), exact_interval, rtol=0,
                    atol=4 * _atol(backend, spread))  # fmt: skip
    low_b, high_b = est.predict_interval(Q, method="bootstrap", n_boot=49, random_state=0).T
    assert np.isfinite(low_b).all() and np.isfinite(high_b).all() and np.all(low_b <= high_b)
