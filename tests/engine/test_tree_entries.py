"""The tree path's compiled passes over COO entries against its numpy passes and the formulas."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skl_nw._engine import _tree


@pytest.fixture
def compiled():
    return pytest.importorskip("skl_nw._engine._compiled")


def test_tree_entry_kernels_equal_the_numpy_passes(compiled, rng, monkeypatch):
    # COO entries as the tree path makes them: rows in any order, repeated columns,
    # rows with no entry at all (m = 50 rows, 30 of them used), zero weights; points
    # far from the origin (1e6 +- 1), where a folded |q|^2 - 2 q.x + |x|^2 would lose
    # every digit.  The sums: the same bits as bincount's; the distances: exact.
    m, n, k, entries = 50, 40, 3, 2_000
    row, col = rng.integers(0, 30, entries), rng.integers(0, n, entries)
    e = rng.uniform(size=entries) * (rng.uniform(size=entries) > 0.2)
    V = rng.normal(size=(n, k))
    Q, X = 1e6 + rng.normal(size=(m, 3)), 1e6 + rng.normal(size=(n, 3))
    monkeypatch.setattr(_tree, "compiled", lambda: compiled)
    fast = _tree.coo_sums(row, col, e, V, m), _tree.pair_sq_distances(Q, X, row, col)
    monkeypatch.setattr(_tree, "compiled", lambda: None)
    numpy = _tree.coo_sums(row, col, e, V, m), _tree.pair_sq_distances(Q, X, row, col)
    assert_array_equal(fast[0], numpy[0])
    expected = np.zeros((m, k + 1))
    for r, c, w in zip(row, col, e, strict=True):
        expected[r] += w * np.append(V[c], 1.0)
    assert_allclose(fast[0], expected, rtol=1e-13, atol=1e-13)
    assert np.all(fast[0][30:] == 0.0)
    exact = [sum((float(a) - float(b)) ** 2 for a, b in zip(Q[r], X[c], strict=True))
             for r, c in zip(row, col, strict=True)]  # fmt: skip
    assert_allclose(fast[1], exact, rtol=1e-15)
    assert_allclose(numpy[1], exact, rtol=1e-15)


@pytest.mark.parametrize("n_groups", [1, 3])
@pytest.mark.parametrize("with_mult", [False, True])
def test_log_space_entry_sums_equal_the_numpy_passes(
    compiled, rng, monkeypatch, n_groups, with_mult
):
    # Log terms from -800 to 0 (some underflow against their row's largest), zero
    # weights (-inf), a row whose every term is -inf (row 5), rows with no entry
    # (m = 40, 30 used), groups of the training points, the "ds" multiplier.
    m, n, k, entries = 40, 60, 2, 3_000
    row, col = rng.integers(0, 30, entries), rng.integers(0, n, entries)
    t = -rng.uniform(0, 800, entries) * rng.uniform(size=entries) ** 4
    t[rng.uniform(size=entries) < 0.1] = -np.inf
    t[row == 5] = -np.inf
    V, groups = rng.normal(size=(n, k)), rng.integers(0, n_groups, n)
    mult = rng.normal(size=entries) if with_mult else None
    calls = []
    for kernels in (compiled, None):
        monkeypatch.setattr(_tree, "compiled", lambda kernels=kernels: kernels)
        calls.append(_tree.entry_sums(row, col, t.copy(), V, groups, n_groups, m, mult))
    (top, sums), (top_numpy, sums_numpy) = calls
    assert_array_equal(top, top_numpy)
    scale = _tree.entry_sums(row, col, t.copy(), np.abs(V), groups, n_groups, m,
                             None if mult is None else np.abs(mult))[1]  # fmt: skip
    assert np.all(np.abs(sums - sums_numpy) <= 1e-14 * scale)
    assert np.all(sums[30:] == 0.0) and np.all(sums[5] == 0.0)


def test_log_space_entry_sums_carry_nan_and_infinity_as_numpy_does(compiled, monkeypatch):
    # Not reached by the package's kernels (their log terms are finite or -inf), but
    # a custom kernel's could be: the compiled pass must not drop them silently.
    row, col = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 0, 1, 0, 1])
    t = np.array([-1.0, np.nan, np.inf, -2.0, -np.inf, -np.inf])
    calls = []
    for kernels in (compiled, None):
        monkeypatch.setattr(_tree, "compiled", lambda kernels=kernels: kernels)
        with np.errstate(invalid="ignore"):
            calls.append(_tree.entry_sums(row, col, t.copy(), np.ones((2, 1)), None, 1, 3))
    (top, sums), (top_numpy, sums_numpy) = calls
    assert_array_equal(top, top_numpy)
    assert_array_equal(sums, sums_numpy)
    assert np.isnan(sums[0]).all() and np.all(sums[1] == np.inf) and np.all(sums[2] == 0.0)
