"""The fitted training side of an estimator: one backend object, chosen once at fit.

An estimator's fit chooses its algorithm in one place (``_base._NWBase._build``)
and keeps the result as ``_backend``: an :class:`ExactBackend` (brute force or
a tree over the exact training set) or a :class:`BinnedBackend` (kernel sums
pooled on a grid, ``algorithm="binned"``).  The estimators only call it; they
never ask which one they hold.  Each operation that the binned path computes
on its grid takes ``exact``, the exact computation for the queries the grid
cannot answer (outside it, below its floor, or too few to pay for binning):
the exact backend simply calls it for every query.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import _engine
from . import _binning

__all__ = ["BinnedBackend", "ExactBackend"]


class ExactBackend:
    """The exact training set, searched by brute force or by a tree.

    Parameters
    ----------
    train : TrainSet
        The engine's training set (its row order is the tree's).
    method : {"brute", "kd_tree", "ball_tree"}
        The neighbour search it was built for.
    grouped : bool, default=False
        Whether the rows were grouped (one tree per class or category cell).
    """

    def __init__(self, train: _engine.TrainSet, method: str, grouped: bool = False):
        self.train, self.method, self.grouped = train, method, grouped

    def exact(self) -> _engine.TrainSet:
        """Return the exact training set."""
        return self.train

    def as_exact(self) -> ExactBackend:
        """Return this backend on the exact path (itself)."""
        return self

    def trees(self):
        """Return the fitted ``tree_``: None (brute force), a tree, or one per category cell."""
        trees = [t.tree for t in self.train.trees] or None
        return trees[0] if trees is not None and not self.grouped else trees

    def targets(self) -> tuple[np.ndarray, np.ndarray]:
        """Training targets (n, k) and sample weights (n,), in the caller's row order."""
        train = self.train
        return train.to_caller(train.values), np.exp(train.to_caller(train.log_w))

    def inputs(self) -> np.ndarray:
        """Scaled continuous training inputs (n, d), caller's row order, up to a shift."""
        return self.train.to_caller(self.train.X)

    def pool(self, Q, kernel, fallback: str, options: _engine.Options) -> np.ndarray:
        """Attention-pooled training values at scaled queries: (m, k)."""
        return _engine.pool(Q, self.train, kernel, fallback=fallback, options=options)

    def class_log_sums(self, Q, kernel, options: _engine.Options) -> np.ndarray:
        """Log of the kernel sums per class at scaled queries (relative to their largest)."""
        return _engine.class_log_sums(Q, self.train, kernel, relative=True, options=options)

    def mean_std(self, Q, Z, exact: Callable):
        """Nadaraya–Watson's fit and standard error (see :func:`_binning.mean_std`)."""
        return exact(Q)

    def variance_factor(self, Q, exact: Callable) -> np.ndarray:
        """``sum_i w_i K_i^2 / (sum_i w_i K_i)^2`` per scaled query."""
        return exact(Q)

    def local_fit(self, Q, slopes: bool, exact: Callable):
        """Local polynomial values (m, k) and slopes (m, d, k) or None, scaled units."""
        return exact(Q, slopes)

    def usable_degree(self, degree: int) -> int:
        """``degree``, lowered to the number of training points of positive weight."""
        n_points = int(np.isfinite(self.train.log_w).sum())
        return _engine.usable_degree(degree, self.train.d, n_points)

    def leave_one_out(self, kernel, fallback: str, rtol: float) -> _engine.LeaveOneOut:
        """Return the closed-form leave-one-out of a pooling estimator (the search's protocol)."""
        return _engine.LeaveOneOut(self.train, kernel, fallback, rtol)

    def with_neighbours(self, k: int, enlarge: float, counted: np.ndarray) -> ExactBackend:
        """Return this backend with a span: each query's radius, its ``k``-th counted row."""
        train = self.train.with_neighbours(k, enlarge, counted=counted)
        return ExactBackend(train, self.method, grouped=self.grouped)


class BinnedBackend:
    """Kernel sums pooled on a grid (``algorithm="binned"``).

    What it approximates (each within ``binned_tol`` of the exact answer, see
    the user guide's "Binned path"): on the grid, ``predict`` and Parzen's
    probabilities, local polynomial values and slopes, the closed-form
    leave-one-out predictions of the search's grid and, for many queries,
    Nadaraya–Watson's standard errors (its noise variance about a local line
    at the nodes, blended) and the normal intervals' degrees of freedom (the
    mean of ``predict(return_std=True)`` is then ``predict``'s, to the last
    bit).  On the exact training set, built on first need: attention
    weights, gradients, densities, the bootstrap, local polynomial standard
    errors and intervals, the criteria and the leave-one-out gradient; there,
    and for few queries, the mean of ``predict(return_std=True)`` is the
    exact fit, within ``binned_tol`` of ``predict``.

    Parameters
    ----------
    sums : BinnedSums or BinnedLocalFit
        The binned training side (pooled sums, or local fits at the nodes).
    """

    method = "binned"

    def __init__(self, sums: _engine.BinnedSums):
        self.sums = sums

    def exact(self) -> _engine.TrainSet:
        """Return the exact training set, built on first need (what the grid does not serve)."""
        return self.sums.exact()

    def as_exact(self) -> ExactBackend:
        """Return the exact path over the same training set (brute force)."""
        return ExactBackend(self.exact(), "brute")

    def trees(self) -> None:
        """Return None: the grid is the search structure, no tree."""
        return None

    def targets(self) -> tuple[np.ndarray, np.ndarray]:
        """Training targets (n, k) and sample weights (n,), in the caller's row order."""
        return self.sums.values, self.sums.w

    def inputs(self) -> np.ndarray:
        """Scaled training inputs (n, d), caller's row order, up to a shift."""
        return self.sums.X

    def pool(self, Q, kernel, fallback: str, options: _engine.Options) -> np.ndarray:
        """Binned pooled values at scaled queries: (m, k)."""
        return self.sums.pool(Q, fallback, options)

    def class_log_sums(self, Q, kernel, options: _engine.Options) -> np.ndarray:
        """Log of the binned pooled one-hot labels; exact in log space where one underflows.

        A probability below the smallest normal float (far from the data: the
        Gaussian's ``exp(-999.5)``) has lost its digits in linear space; those
        rows take the exact path's log sums, ``-inf`` only where a class has
        exactly no weight.
        """
        P = self.pool(Q, kernel, "nearest", options)
        with np.errstate(divide="ignore"):
            L = np.log(np.maximum(P, 0.0))
        rows = np.flatnonzero((P < np.finfo(float).tiny).any(axis=1))
        if len(rows):
            L[rows] = _engine.class_log_sums(Q[rows], self._by_class(), kernel, relative=True,
                                             options=options)  # fmt: skip
        return L

    def __getstate__(self) -> dict:
        """Return the state to pickle, without the set grouped by class (rebuilt on need)."""
        state = self.__dict__.copy()
        state.pop("_classes", None)
        return state

    def _by_class(self) -> _engine.TrainSet:
        """Return the exact training set grouped by class (the one-hot labels), on first need."""
        if getattr(self, "_classes", None) is None:
            sums = self.sums
            with np.errstate(divide="ignore"):
                log_w = np.log(sums.w)
            self._classes = _engine.prepare_train(
                sums.X, log_w=log_w, values=sums.values, groups=np.argmax(sums.values, axis=1)
            )
        return self._classes

    def mean_std(self, Q, Z, exact: Callable):
        """Nadaraya–Watson's fit and standard error on the grid (see :func:`_binning.mean_std`)."""
        return _binning.mean_std(self.sums, Q, Z, exact)

    def variance_factor(self, Q, exact: Callable) -> np.ndarray:
        """``sum_i w_i K_i^2 / (sum_i w_i K_i)^2`` per scaled query, on the grid."""
        return _binning.variance_factor(self.sums, Q, exact)

    def local_fit(self, Q, slopes: bool, exact: Callable):
        """Local fits interpolated from the nodes; ``exact`` where the grid cannot serve."""
        values, grad, redo = self.sums.predict(Q, slopes)
        rows = np.flatnonzero(redo)
        if len(rows):
            values[rows], exact_grad = exact(Q[rows], slopes)
            if slopes:
                grad[rows] = exact_grad
        return values, grad

    def usable_degree(self, degree: int) -> int:
        """Return the degree the nodes were fitted at (lowered as the exact path lowers it)."""
        return self.sums.degree

    def leave_one_out(self, kernel, fallback: str, rtol: float) -> _binning.BinnedLeaveOneOut:
        """Return the binned closed-form leave-one-out (its gradient the exact path's)."""
        return _binning.BinnedLeaveOneOut(self.sums, fallback)

    def with_neighbours(self, k: int, enlarge: float, counted: np.ndarray):
        """Raise: a span needs each query's exact neighbours (``_binning.wanted`` refuses it)."""
        raise ValueError("a span takes an exact backend; algorithm='binned' has none.")
