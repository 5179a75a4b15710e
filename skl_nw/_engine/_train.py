"""The training side: keys, log weights, values and groups, in the engine's order."""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import BallTree, KDTree

from . import _span

__all__ = ["TrainSet", "prepare_train"]

TREES = {"kd_tree": KDTree, "ball_tree": BallTree}


class TrainSet:
    """Bandwidth-scaled training inputs with their weights and values, stored once at fit.

    The engine stores the rows in an order of its own: sorted by group (the
    classes of the classifier: each group is a contiguous block) and, on the
    tree path, in each group's leaf order (close points close in memory).
    Callers never see that order: every operation takes and returns arrays in
    the caller's row order (``order`` / ``inverse`` translate).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Bandwidth-scaled training inputs (the keys).
    log_w : ndarray of shape (n_samples,), default=None
        Log sample weights, ``-inf`` for a zero weight; None means all 0.
    values : ndarray of shape (n_samples,) or (n_samples, k), default=None
        Values the operations pool (targets, one-hot labels); None: no column.
    groups : ndarray of int of shape (n_samples,), default=None
        Group code of each row, ``0 .. n_groups - 1``, every group non-empty;
        each group gets its own tree and its own log scale in the sums, so
        that a group far from a query keeps a finite log sum.  None: one group.
    algorithm : {"brute", "kd_tree", "ball_tree"}, default="brute"
        Whether to build one scikit-learn tree per group over its rows of
        positive weight (a neighbour search never returns a weightless point).
    leaf_size : int, default=40
        Leaf size of the trees.
    codes : ndarray of int of shape (n_samples, n_discrete), default=None
        Category codes of the categorical features (``0 .. c_j - 1``), whose
        kernels multiply the continuous one.  A query is then a row
        ``[continuous scaled coordinates, log-kernel row]``: the log-kernel
        row holds ``log L_j(a_j, b)`` for every category ``b`` of every
        categorical feature ``j`` (``sum_j c_j`` entries), so that the log of
        the discrete product kernel between a query and a training point is
        the dot product of that row with the point's one-hot codes.
    code_rows : ndarray of shape (n_samples, sum_j c_j), default=None
        The log-kernel rows of the training points themselves (what the
        leave-one-out sums query).
    n_categories : sequence of int, default=None
        ``c_j`` per categorical feature.

    Attributes
    ----------
    center : ndarray of shape (n_features,)
        Subtracted from training inputs and queries alike (distances are
        translation invariant, and centring keeps the BLAS expansion exact).
    X : ndarray of shape (n_samples, n_features)
        Centred inputs, in stored order.
    log_w, values : ndarray
        In stored order (``values`` always 2-D, float64).
    starts : ndarray of int of shape (n_groups,)
        First stored row of each group.
    order : ndarray of int of shape (n_samples,)
        Stored row ``i`` is caller row ``order[i]``.
    inverse : ndarray of int of shape (n_samples,) or None
        Caller row ``j`` is stored row ``inverse[j]``; None when the order is
        the identity.
    sq_norms : ndarray of shape (n_samples,)
        Squared norms of the centred inputs.
    onehot : ndarray of shape (n_samples, sum_j c_j) or None
        One-hot category codes (stored order); None without categorical features.
    trees : list of GroupTree
        One per group with a row of positive weight; empty for brute force.
    neighbours : tuple of (int, float) or None
        ``(k, enlarge)``: each query's bandwidth multiple is its distance to
        its ``k``-th nearest row, times ``enlarge`` (see ``_span``); None:
        the bandwidth is fixed (:meth:`with_neighbours` sets it).
    """

    neighbours: tuple[int, float] | None = None
    neighbour_index = None

    def __init__(
        self,
        X: np.ndarray,
        log_w: np.ndarray | None = None,
        values: np.ndarray | None = None,
        groups: np.ndarray | None = None,
        algorithm: str = "brute",
        leaf_size: int = 40,
        codes: np.ndarray | None = None,
        code_rows: np.ndarray | None = None,
        n_categories=None,
    ) -> None:
        X = np.asarray(X, dtype=np.float64)
        n = len(X)
        log_w = np.zeros(n) if log_w is None else np.asarray(log_w, dtype=np.float64)
        values = np.empty((n, 0)) if values is None else np.asarray(values, dtype=np.float64)
        self.center = X.mean(axis=0) if n else np.zeros(X.shape[1])
        if groups is None:
            order, self.starts = np.arange(n), np.zeros(1, dtype=np.intp)
        else:
            if len(groups) and np.bincount(groups).min() == 0:
                # reduceat gives an empty group its neighbour's first row, not 0
                raise ValueError("groups must label every group 0 .. G - 1 with a row")
            order = np.argsort(groups, kind="stable")
            self.starts = np.searchsorted(groups[order], np.arange(groups.max() + 1))
        if algorithm != "brute":
            order = order[_leaf_order(X[order] - self.center, self._bounds(n),
                                      np.isfinite(log_w[order]), algorithm, leaf_size)]  # fmt: skip
        self.order = order
        self.inverse = None if np.array_equal(order, np.arange(n)) else np.argsort(order)
        self.X = np.ascontiguousarray(X[order] - self.center)
        self.log_w = log_w[order]
        self.values = values.reshape(n, -1)[order]
        self.sq_norms = np.einsum("ij,ij->i", self.X, self.X)
        self.max_sq_norm = float(self.sq_norms.max()) if n else 0.0
        self._set_discrete(codes, code_rows, n_categories, order)
        self.trees = []
        if algorithm != "brute":
            bounds = self._bounds(n)
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                rows = np.arange(lo, hi)[np.isfinite(self.log_w[lo:hi])]
                if len(rows):
                    self.trees.append(GroupTree(self.X, rows, algorithm, leaf_size))

    def __getstate__(self) -> dict:
        """Return the state to pickle, without caches made on first use (rebuilt on need)."""
        state = self.__dict__.copy()
        state.pop("_padded_columns", None)  # the compiled tiles' copy of X (n x d)
        state.pop("_cells", None)
        return state

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the distinct categories of the points of positive weight (made on first need).

        ``cells`` (G, n_categorical) codes, ``cell_of`` (n,) each stored
        row's cell (-1 for a row of weight 0) and ``counts`` (G,) points per cell.
        """
        if getattr(self, "_cells", None) is None:
            active = np.isfinite(self.log_w)
            cells, inverse, counts = np.unique(
                self.codes[active], axis=0, return_inverse=True, return_counts=True
            )
            cell_of = np.full(self.n_samples, -1, dtype=np.intp)
            cell_of[active] = inverse.ravel()
            self._cells = cells, cell_of, counts
        return self._cells

    def _set_discrete(self, codes, code_rows, n_categories, order) -> None:
        self.d = self.X.shape[1]
        self.onehot = self.codes = self.code_rows = None
        self.query_center = self.center
        if codes is None:
            return
        n_categories = np.asarray(n_categories, dtype=np.intp)
        self.offsets = np.concatenate([[0], np.cumsum(n_categories)[:-1]]).astype(np.intp)
        self.codes = np.asarray(codes, dtype=np.intp)[order]
        self.code_rows = np.ascontiguousarray(np.asarray(code_rows, dtype=np.float64)[order])
        self.onehot = np.zeros((len(order), int(n_categories.sum())))
        for j, offset in enumerate(self.offsets):
            self.onehot[np.arange(len(order)), offset + self.codes[:, j]] = 1.0
        self.query_center = np.concatenate([self.center, np.zeros(self.onehot.shape[1])])

    def weight_exponent(self) -> int:
        """Return an integer ``E`` near ``log2(max w)`` (0 without weights): the unit ``2^E``.

        Sums of squared weights over squared sums, ``sum w K^2 / (sum w K)^2``,
        scale as ``2^-E``: read in that unit (``Moments.columns``) they stay
        finite for subnormal weights, and ``ldexp`` restores them.
        """
        live = self.log_w[np.isfinite(self.log_w)]
        return int(np.floor(live.max() / np.log(2.0))) if live.size else 0

    def self_log_weights(self) -> np.ndarray:
        """``log`` of each stored point's weight in its own sums: ``log w_i + log L(z_i, z_i)``.

        (``K(0) = 1``; the discrete kernels of a point with itself, when there are any.)
        """
        if self.codes is None:
            return self.log_w
        return self.log_w + np.einsum("ij,ij->i", self.code_rows, self.onehot)

    def queries(self, rows=None) -> np.ndarray:
        """Return the stored training rows ``rows`` (all if None) as queries (centred)."""
        X = self.X if rows is None else self.X[rows]
        if self.codes is None:
            return X
        return np.hstack([X, self.code_rows if rows is None else self.code_rows[rows]])

    def split(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Split a query block: continuous coordinates, log-kernel rows (None without)."""
        if self.codes is None:
            return Q, None
        return Q[:, : self.d], Q[:, self.d :]

    def _bounds(self, n: int) -> np.ndarray:
        return np.append(self.starts, n)

    @property
    def n_samples(self) -> int:
        """Number of stored training rows."""
        return self.X.shape[0]

    @property
    def n_groups(self) -> int:
        """Number of groups (1 unless the rows were grouped)."""
        return len(self.starts)

    @property
    def group_of_row(self) -> np.ndarray:
        """Group code of each stored row."""
        counts = np.diff(self._bounds(self.n_samples))
        return np.repeat(np.arange(self.n_groups), counts)

    def to_stored(self, A: np.ndarray) -> np.ndarray:
        """Rows of ``A`` (caller order) in stored order."""
        return A if self.inverse is None else A[self.order]

    def inverse_rows(self, rows: np.ndarray) -> np.ndarray:
        """Return the stored indices of caller rows ``rows``."""
        rows = np.asarray(rows, dtype=np.intp)
        return rows if self.inverse is None else self.inverse[rows]

    def to_caller(self, A: np.ndarray, axis: int = 0) -> np.ndarray:
        """Entries of ``A`` along ``axis`` (stored order) in caller order."""
        return A if self.inverse is None else np.take(A, self.inverse, axis=axis)

    def with_neighbours(self, k: int | None, enlarge: float = 1.0, counted=None) -> TrainSet:
        """Return this set with nearest-neighbour radii of ``k`` rows (None: a fixed bandwidth).

        ``counted`` (caller order, boolean): the rows that count towards the
        ``k`` nearest; default those of positive weight.  (Robustness weights
        of 0 leave a row in the count, as LOESS counts it.)
        """
        new = TrainSet.__new__(TrainSet)
        new.__dict__.update(self.__dict__)
        new.neighbours = None if k is None else (int(k), float(enlarge))
        new.neighbour_index = None
        if k is not None:
            mask = np.isfinite(self.log_w) if counted is None else self.to_stored(counted)
            new.neighbour_index = _span.NeighbourIndex(self.X, np.asarray(mask, bool), k, enlarge)
        return new

    def rescaled(self, factors: np.ndarray) -> TrainSet:
        """Return a brute-force set in the same stored order, inputs divided by ``factors``.

        What a bandwidth step of gradient descent needs: new scaled keys,
        the same weights, values, groups and mapping to caller rows.
        """
        new = TrainSet.__new__(TrainSet)
        new.__dict__.update(self.__dict__)
        new.X = np.ascontiguousarray(self.X / factors)
        new.center = np.zeros(self.X.shape[1])
        new.query_center = np.zeros(len(self.query_center))
        new.sq_norms = np.einsum("ij,ij->i", new.X, new.X)
        new.max_sq_norm = float(new.sq_norms.max()) if len(new.X) else 0.0
        new.trees = []
        return new


def prepare_train(X: np.ndarray, **kwargs) -> TrainSet:
    """Centre bandwidth-scaled training inputs once, at fit (and build the trees).

    Keyword arguments are those of :class:`TrainSet`.
    """
    return TrainSet(X, **kwargs)


def _leaf_order(X, bounds, active, algorithm, leaf_size) -> np.ndarray:
    """Return a permutation that stores each group's active rows in its tree's leaf order.

    Points that are close in space are then close in memory: a radius query
    touches a few cache lines instead of one per neighbour, and so do the
    gathers of the neighbours' inputs, values and weights (measured at
    n = 1e6, d = 2: query_radius 1.8x faster).  Weightless rows follow.
    """
    order = np.arange(len(X))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        rows = np.arange(lo, hi)
        keep = rows[active[lo:hi]]
        if len(keep) > 1:
            leaves = TREES[algorithm](X[keep], leaf_size=leaf_size).get_arrays()[1]
            order[lo:hi] = np.concatenate([keep[leaves], rows[~active[lo:hi]]])
    return order


def lengths(arrays: np.ndarray) -> np.ndarray:
    """Lengths of the arrays of an object array (as ``query_radius`` returns)."""
    return np.fromiter(map(len, arrays), dtype=np.intp, count=len(arrays))


class GroupTree:
    """A scikit-learn tree over some stored training rows (one group, e.g. one class)."""

    def __init__(self, X: np.ndarray, rows: np.ndarray, algorithm: str, leaf_size: int):
        self.rows = rows
        self.tree = TREES[algorithm](X[rows], leaf_size=leaf_size)

    def nearest(self, Q: np.ndarray, exclude: np.ndarray | None) -> np.ndarray:
        """Distance to the nearest point, skipping ``exclude`` (by index); inf if none."""
        k = min(1 if exclude is None else 2, len(self.rows))
        dist, ind = self.tree.query(Q, k=k)
        if exclude is None:
            return dist[:, 0]
        other = self.rows[ind] != exclude[:, None]
        d_nn = dist[np.arange(len(Q)), np.argmax(other, axis=1)]
        return np.where(other.any(axis=1), d_nn, np.inf)

    def within(self, Q: np.ndarray, radius: np.ndarray):
        """``(row, col)`` of every point within ``radius`` of each query.

        Without distances: query_radius is a sixth faster without them, and
        concatenating a second array per query costs more than recomputing
        the squared distances of the pairs.
        """
        ind = self.tree.query_radius(Q, radius)
        row = np.repeat(np.arange(len(Q)), lengths(ind))
        if not len(Q):
            return row, np.empty(0, np.intp)
        return row, self.rows[np.concatenate(ind)]
