"""Which path scores each candidate of the closed-form grid: the binned grid or the exact one.

The search decides it here, once per set of candidates (multiples of one
bandwidth vector), and hands on :class:`Path` objects: nothing after this
module asks which backend serves a candidate.

The rules (``BandwidthSearchCV``'s Notes say the same):

* The in-sample criteria (AICc, GCV) are computed on the exact path: the
  binned path approximates leave-one-out predictions only.
* An estimator whose ``_binned_leave_one_out`` is False (the local
  polynomial fits) has an exact leave-one-out on every algorithm (its binned
  fit would only build a grid it does not use).
* Otherwise an estimator that takes the binned path scores on its grid the
  candidates whose grid holds at most :data:`PAIRS_PER_NODE` times fewer
  nodes than there are pairs of training points (and fits the memory limit
  of the binned path); the smaller candidates, whose grids grow as
  ``h^-d``, are scored on the exact path.  The grid of the smallest candidate
  kept serves every larger one (coarsened: :mod:`skl_nw._engine._binned_loo`).

On the exact path, ``algorithm="auto"`` picks its neighbour search by
measurement (:func:`skl_nw._search._backend.loo_base`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier

from .._engine import GridSizeError, check_grid_size, grid_step, make_grid, margin_radius
from .._kernels import get_kernel
from .._smoothers import _binning
from ._backend import _backend, loo_base

__all__ = ["Path", "exact_twin", "robust", "scoring_paths"]

# A candidate goes on the binned grid where the grid has at most n^2 / PAIRS_PER_NODE
# nodes: the exact path evaluates about n^2 kernel values per candidate, the binned
# path a few FFT operations per node, so a grid near n^2 nodes costs more than the
# exact path and a larger one (small bandwidths, small n) far more (measured once, see
# docs/benchmarks.md "Bandwidth search", "Tuned constants").
PAIRS_PER_NODE = 16


@dataclass(frozen=True)
class Path:
    """One fitted estimator and the candidates it scores.

    Attributes
    ----------
    fitted : estimator
        The estimator fitted at the smallest of its candidates; its
        ``_leave_one_out()`` scores them all (one candidate a path with
        robustness iterations, see :func:`robust`).
    factors : ndarray
        Its candidates as multiples (>= 1) of its fitted bandwidth.
    part : ndarray of int
        Their positions among the candidates of the set.
    backend : str
        What computes them, for the start line ("binned grid", "brute
        force", a tree's class).
    by_rows : bool
        Whether its predictions are computed for blocks of training rows as
        cheaply as for all of them (the exact path), so that progress can be
        reported between blocks.
    """

    fitted: BaseEstimator
    factors: np.ndarray
    part: np.ndarray
    backend: str
    by_rows: bool


def exact_twin(estimator: BaseEstimator) -> BaseEstimator:
    """Return ``estimator`` on the exact path: "binned" becomes "auto", no ``binned_tol``."""
    params = estimator.get_params()
    changes = {}
    if params.get("algorithm") == "binned":
        changes["algorithm"] = "auto"
    if params.get("binned_tol") is not None:
        changes["binned_tol"] = None
    return clone(estimator).set_params(**changes)


def _takes_binned(estimator: BaseEstimator, X: np.ndarray, criterion: str) -> bool:
    """Whether the candidates' leave-one-out predictions would come from a binned grid."""
    if criterion != "loo" or not estimator._binned_leave_one_out:
        return False
    return _binning.wanted(estimator, X)  # the estimator's own rule (algorithm, binned_tol)


def _grid_nodes(estimator, X: np.ndarray, bandwidth: np.ndarray, columns: int) -> float:
    """Nodes of the binned grid the estimator would build at ``bandwidth`` (inf: over the limit).

    ``columns``: the values binned per node (targets or classes, and the weight).
    """
    params = estimator.get_params()
    kernel = get_kernel(params["kernel"])
    tol = params.get("binned_tol")
    tol = _binning.DEFAULT_TOL if tol is None else tol
    try:  # the binned path's own grid and its own limit on it
        grid = make_grid(X / bandwidth, grid_step(kernel, tol, X.shape[1]),
                         margin_radius(kernel, tol))  # fmt: skip
        check_grid_size(grid.shape, columns)
    except GridSizeError:
        return np.inf
    return float(grid.size)


def scoring_paths(
    estimator, X, y, w, bandwidth: np.ndarray, factors: np.ndarray, n_jobs, criterion: str
) -> list[Path]:
    """Fit what scores the candidates ``factors * bandwidth``: one :class:`Path` per route.

    Parameters
    ----------
    estimator : estimator
        The searched estimator (unfitted).
    X, y, w : ndarray
        The merged training rows and their weights.
    bandwidth : ndarray of shape (n_features,)
        The vector whose multiples are the candidates.
    factors : ndarray of shape (n_candidates,)
        The multiples, in any order.
    n_jobs : int or None
        Threads of the backend probe.
    criterion : {"loo", "aicc", "gcv"}
        The search's criterion (the in-sample ones are exact).

    Returns
    -------
    list of Path
        The exact path first (small candidates), then the binned one; each
        only where it has candidates.
    """
    factors = np.asarray(factors, dtype=np.float64)
    order = np.argsort(factors, kind="stable")
    split = len(order)  # candidates order[:split] exact, the others binned
    if _takes_binned(estimator, X, criterion):
        budget = len(X) ** 2 / PAIRS_PER_NODE
        k = len(np.unique(y)) if is_classifier(estimator) else y.reshape(len(y), -1).shape[1]
        nodes = [_grid_nodes(estimator, X, f * bandwidth, k + 1) for f in factors[order]]
        fits = np.flatnonzero(np.asarray(nodes) <= budget)
        split = int(fits[0]) if len(fits) else len(order)
    paths = []
    for whole, binned in ((order[:split], False), (order[split:], True)):
        # Robustness weights depend on the bandwidth: each candidate its own fit.
        for part in np.split(whole, np.arange(1, len(whole))) if robust(estimator) else [whole]:
            if not len(part):
                continue
            low = factors[part[0]]
            route = estimator if binned else exact_twin(estimator)
            fitted = loo_base(route, X, y, w, bandwidth * low, factors[part] / low, n_jobs)
            name = "binned grid" if binned else _backend(fitted)
            paths.append(Path(fitted, factors[part] / low, part, name, not binned))
    return paths


def robust(estimator: BaseEstimator) -> bool:
    """Whether the estimator refits with robustness weights, which depend on its bandwidth.

    Its leave-one-out at a multiple of its bandwidth is then not the fit's
    at that bandwidth (whose robustness weights come from its own fits):
    every candidate is a fit of its own.
    """
    return estimator.get_params().get("robust_iterations", 0) > 0
