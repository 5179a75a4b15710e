"""The measured choice of the leave-one-out backend of a set of candidates."""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone

from .._kernels import get_kernel


def _backend(estimator) -> str:
    """Name the neighbour search a fitted estimator uses, from its public ``tree_``."""
    tree = estimator.tree_
    if tree is None:
        return "brute force"
    return type(tree[0] if isinstance(tree, list) else tree).__name__


# With algorithm="auto", the closed-form grid times both backends on this share of
# the training rows (at least _PROBE_MIN_ROWS rows) and runs the faster on all of them
# (``python -m benchmarks search_backend``: the default against each backend).
_PROBE_SHARE = 1 / 100


_PROBE_MIN_ROWS = 32


# Below this size algorithm="auto" is brute force at every bandwidth (its own rule).
_PROBE_MIN_SAMPLES = 1_000


def loo_base(estimator, X, y, w, bandwidth, factors, n_jobs):
    """Fit ``estimator`` at ``bandwidth`` to score the candidates ``factors * bandwidth``.

    The backend serves the whole candidate set, so with ``algorithm="auto"``
    it is decided once for that set, by measurement: brute force computes each
    chunk's distances once for every candidate, a tree one radius query at the
    widest candidate's radius, whose neighbours every narrower candidate
    reuses.  Which is cheaper depends on how many neighbours the wide
    candidates have, so both are fitted and timed on an evenly spaced 1% of
    the training rows, and the faster serves all of them (results agree to
    ``rtol`` either way; only the time differs).  For infinite-support
    kernels the tree is timed only where ``algorithm="auto"`` would choose
    one at the widest candidate.

    Returns
    -------
    fitted : estimator
        The fitted estimator, whose ``_leave_one_out()`` the search uses.
    """
    est = clone(estimator).set_params(bandwidth=bandwidth)
    n = len(X)
    params = est.get_params()
    # binned_tol: the user asked for the binned approximation where "auto" takes it.
    if params.get("algorithm") != "auto" or params.get("binned_tol") or n < _PROBE_MIN_SAMPLES:
        return est.fit(X, y, w)
    candidates = ("brute", "ball_tree")
    if not get_kernel(est.get_params()["kernel"]).compact:
        # Infinite support: a tree's narrow candidates are as wide as its truncation
        # radius, so the widest candidate decides; algorithm="auto" at that bandwidth
        # says whether a tree is worth timing at all.
        widest = clone(est).set_params(bandwidth=bandwidth * np.max(factors)).fit(X, y, w)
        if widest.tree_ is None:
            return est.set_params(algorithm="brute").fit(X, y, w)
    probe = np.unique(np.linspace(0, n - 1, max(_PROBE_MIN_ROWS, int(n * _PROBE_SHARE))))
    probe = probe.astype(np.intp)
    best = None
    for algorithm in candidates:
        start = time.perf_counter()
        fitted = clone(est).set_params(algorithm=algorithm).fit(X, y, w)
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        fitted._leave_one_out().predictions(factors, n_jobs=n_jobs, rows=probe)
        cost = fit_time + (time.perf_counter() - start) * n / len(probe)
        if best is None or cost < best[0]:
            best = (cost, fitted)
    return best[1]
