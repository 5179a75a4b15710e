"""The merging of repeated rows before the leave-one-out (frequency weights)."""

from __future__ import annotations

import numpy as np


def _collapse(X: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Merge identical (x, y) rows, summing their weights; drop zero weights.

    With frequency weights a row of weight 3 *is* three identical rows, so the
    leave-one-out loss must leave identical rows out together
    (leave-one-location-out); merging them first makes integer weights and
    repeated rows give the same data, and stops exact duplicates from pulling
    the bandwidth to 0.

    The rows come back sorted lexicographically by (x, y), each merged row
    the first of its group (what ``np.unique(axis=0)`` gives, without its
    sort of row records).  A stable sort of the first feature settles the
    common case: no tie there, no duplicate rows, and the labels are never
    sorted.
    """
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    order = np.argsort(X[:, 0], kind="stable")
    first_column = X[order, 0]
    if np.all(first_column[1:] != first_column[:-1]):  # every row distinct
        return X[order], y[order], w[order].astype(np.float64)
    codes = _label_codes(y)
    columns = [X[:, j] for j in range(X.shape[1])] + [codes]
    order, new = _sorted_groups(columns)
    first = order[new]
    weights = np.bincount(np.cumsum(new) - 1, weights=w[order], minlength=len(first))
    return X[first], y[first], weights


def _sorted_groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stable lexicographic order of rows given as columns, and where each run of equal rows starts.

    Returns ``order`` (first column the primary key) and ``new``, True at the
    sorted positions whose row differs from the previous one.
    """
    order = np.lexsort(columns[::-1])
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for column in columns:
        c = column[order]
        new[1:] |= c[1:] != c[:-1]
    return order, new


def _label_codes(y: np.ndarray) -> np.ndarray:
    """Integer codes of the targets' rows, increasing with the rows' sorted order.

    Labels may be strings (object arrays have no lexicographic sort of rows):
    one-dimensional targets through ``np.unique``, numeric rows by a
    lexicographic sort of their columns.
    """
    if y.ndim == 1:
        return np.unique(y, return_inverse=True)[1]
    if y.dtype.kind not in "biuf":
        return np.unique(y, axis=0, return_inverse=True)[1].ravel()
    order, new = _sorted_groups([y[:, j] for j in range(y.shape[1])])
    codes = np.empty(len(y), dtype=np.intp)
    codes[order] = np.cumsum(new) - 1
    return codes
