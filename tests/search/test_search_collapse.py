"""The merging of identical (x, y) rows before the closed-form leave-one-out search."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skl_nw._search._rows import _collapse


def _by_unique(X, y, w):
    """The definition: np.unique over the rows of (x, code of y), weights summed."""
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    _, codes = np.unique(y, return_inverse=True, **({"axis": 0} if y.ndim > 1 else {}))
    key = np.column_stack([X, codes.reshape(len(X), -1)])
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return X[first], y[first], np.bincount(inverse.ravel(), weights=w, minlength=len(first))


def _data(rng, n, d, kind):
    X = (
        rng.integers(0, 4, size=(n, d)).astype(float)
        if kind != "distinct"
        else rng.normal(size=(n, d))
    )
    if kind == "signed zeros":
        X[rng.random(n) < 0.3] = -0.0
    y = rng.integers(0, 3, size=n).astype(float)
    w = rng.integers(0, 3, size=n).astype(float)
    w[0] = 1.0
    return X, y, w


@pytest.mark.parametrize("kind", ["distinct", "ties", "signed zeros"])
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("labels", ["float", "string", "2-D"])
def test_collapse_matches_its_definition(rng, kind, d, labels):
    X, y, w = _data(rng, 300, d, kind)
    if labels == "string":
        y = np.array(["a", "bb", "c"], dtype=object)[y.astype(int)]
    elif labels == "2-D":
        y = np.column_stack([y, rng.integers(0, 2, size=len(y))])
    got, expected = _collapse(X, y, w), _by_unique(X, y, w)
    for a, b in zip(got, expected, strict=True):
        assert_array_equal(a, b)
    assert_array_equal(np.signbit(got[0]), np.signbit(expected[0]))
    if kind == "ties":
        assert len(got[0]) < np.count_nonzero(w)
