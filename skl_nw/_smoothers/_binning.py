"""Estimator side of the binned path (``algorithm="binned"``): choice, fit, predict, LOO.

The choice (:func:`wanted`), the grid's standard errors (:func:`mean_std`) and
the normal intervals' degrees of freedom (:func:`variance_factor`), its leave-one-out
object, called by :class:`skl_nw._smoothers._backends.BinnedBackend`; the numerics live
in :mod:`skl_nw._engine._binned`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._engine import MAX_FEATURES, BinnedSums, GridSizeError, LossFn, binned_loo_pool
from .._inference._local_variance import GridNoise

__all__ = [
    "DEFAULT_TOL",
    "BinnedLeaveOneOut",
    "mean_std",
    "training",
    "variance_factor",
    "wanted",
]

#: ``binned_tol`` used by ``algorithm="binned"`` when the user leaves it at None.
DEFAULT_TOL = 1e-4
# algorithm="auto" with binned_tol set bins from this many training points on.
_AUTO_MIN_SAMPLES = 100_000
# The variance factor goes to the grid when queries x rows exceed this many times rows +
# grid nodes: the binning of the weights' columns then costs less than the exact pass
# (measured once, see docs/benchmarks.md "Binned path", "Tuned constants").
_GRID_STD_MIN_RATIO = 32
# Standard errors: a node's local line costs about this many of the exact pass's
# query-row pairs (1-3 us a node, 1-6 ns a pair): 120-1,050 measured in 1-D and 2-D, on
# brute force and trees, the geometric mean (``python -m benchmarks binned --only std``).
_NOISE_NODE_PAIRS = 500


def wanted(est, Xs: np.ndarray) -> bool:
    """Whether this fit takes the binned path; a clear error where it cannot."""
    n, d = Xs.shape
    if getattr(est, "span", None) is not None:  # nearest-neighbour radii are exact-path only
        if est.algorithm == "binned":
            raise ValueError(
                "algorithm='binned' cannot take span (the grid's kernel has one fixed width); "
                "use algorithm='auto', 'brute', 'kd_tree' or 'ball_tree', or span=None."
            )
        return False
    if est.algorithm == "binned":
        if d > MAX_FEATURES:
            raise ValueError(
                f"algorithm='binned' supports at most {MAX_FEATURES} features; X has {d}. "
                "Use algorithm='auto', 'brute', 'kd_tree' or 'ball_tree'."
            )
        return True
    tol = getattr(est, "binned_tol", None)
    return (
        est.algorithm == "auto"
        and tol is not None
        and d <= MAX_FEATURES
        and (n >= _AUTO_MIN_SAMPLES)
    )


def training(est, Xs: np.ndarray, w: np.ndarray, values: np.ndarray):
    """Return the binned training side of this fit, or None for the exact path.

    "auto" takes the exact path where the grid would pass the binned path's
    memory limit (checked before the grid is allocated); "binned" raises that
    :class:`~skl_nw._engine.GridSizeError`, a MemoryError.
    """
    if not wanted(est, Xs):
        return None
    tol = getattr(est, "binned_tol", None)
    try:
        return est._binned_training(Xs, w, values, DEFAULT_TOL if tol is None else tol)
    except GridSizeError:
        if est.algorithm == "binned":
            raise
        return None


def mean_std(binned: BinnedSums, Q: np.ndarray, Z: np.ndarray, exact: Callable):
    """Nadaraya–Watson's fit and standard error at scaled queries, on the grid: two (m, k).

    The fit is the grid's (``predict``'s, to the last bit); the noise
    variance about a local line from the nodes
    (:class:`skl_nw._inference._local_variance.GridNoise`, ``Z`` the
    standardised targets in the training rows' order), times the binned
    ``sum alpha^2 / w``: ``O(n + G)`` instead of ``O(n m)``.  Queries the grid
    cannot answer (outside it, or below its floor) go to ``exact(rows)``,
    which returns the same two arrays, and so do all of them where the
    noise's grid would pass the path's memory limit (it holds more columns
    than the fit's grid).  The standard error is in units of ``Z``.
    """
    n, G = len(binned.w), binned.grid.size
    few = len(Q) * n <= _GRID_STD_MIN_RATIO * n + _NOISE_NODE_PAIRS * G
    if few or not GridNoise.fits(binned.grid.shape, Z.shape[1]):
        return exact(Q)
    sigma2, redo = GridNoise(binned.X, binned.w, Z, binned.kernel, binned.tol).at(Q)
    S, good = binned.interpolated(Q)
    factor, good = _grid_factor(binned, Q, S, good)
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = S[:, :-1] / S[:, -1:] * binned.unit + binned.mid
    std = np.sqrt(np.maximum(sigma2, 0.0) * factor[:, None])
    rows = np.flatnonzero(redo | ~good)
    if len(rows):
        fit[rows], std[rows] = exact(Q[rows])
    return fit, std


def variance_factor(binned: BinnedSums, Q: np.ndarray, exact: Callable) -> np.ndarray:
    """Return ``sum_i w_i K_i^2 / (sum_i w_i K_i)^2`` per scaled query, on the grid."""
    if _few(binned, Q):
        return exact(Q)
    factor, good = _grid_factor(binned, Q, *binned.interpolated(Q))
    redo = np.flatnonzero(~good)
    if len(redo):
        factor[redo] = exact(Q[redo])
    return factor


def _few(binned: BinnedSums, Q: np.ndarray) -> bool:
    """Whether so few queries are asked that the exact pass costs less than binning."""
    return len(Q) * len(binned.w) <= _GRID_STD_MIN_RATIO * (len(binned.w) + binned.grid.size)


def _grid_factor(binned: BinnedSums, Q: np.ndarray, S: np.ndarray, good: np.ndarray):
    """Binned ``sum w K^2 / (sum w K)^2`` (m,), and where the grid answers (m,) bool.

    ``S``, ``good``: ``binned.interpolated(Q)``, whose last column is the
    binned ``sum w K`` (in units of ``weight_unit``); the squared kernel's
    sums are binned here on the same grid.
    """
    S2, good2 = binned.squared().interpolated(Q)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = S2[:, -1] / S[:, -1] ** 2 / binned.weight_unit  # sums of w / unit
        return factor, good & good2


class BinnedLeaveOneOut:
    """The ``_leave_one_out()`` protocol object of a binned fit (``_engine.LeaveOneOutProtocol``).

    ``predictions`` is the binned closed form of
    :mod:`skl_nw._engine._binned_loo`; ``loss_grad`` (for ``method="sgd"``)
    delegates to the exact path's protocol object, built on first need.
    """

    takes_lambdas = False

    def __init__(self, binned: BinnedSums, fallback: str):
        self.binned, self.fallback = binned, fallback
        self.targets = binned.values

    def predictions(self, factors, n_jobs=None, rows=None) -> np.ndarray:
        """Binned leave-one-out predictions at the training points, per bandwidth multiple."""
        P = binned_loo_pool(self.binned, factors, self.fallback)
        return P if rows is None else P[:, rows]

    def fits(self, factors, n_jobs=None):
        """In-sample fits and hat diagonal (the exact path's: criteria are not binned)."""
        return self._exact().fits(factors, n_jobs)

    def _exact(self):
        from .._engine import LeaveOneOut

        return LeaveOneOut(self.binned.exact(), self.binned.kernel, self.fallback,
                           self.binned.rtol)  # fmt: skip

    def loss_grad(
        self,
        theta: np.ndarray,
        rows: np.ndarray,
        loss_fn: LossFn,
        row_weights: np.ndarray,
    ) -> tuple[float, np.ndarray]:
        """Exact leave-one-out loss and gradient (the exact path's)."""
        return self._exact().loss_grad(theta, rows, loss_fn, row_weights)
