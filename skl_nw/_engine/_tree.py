"""The tree path: each query's neighbourhood from scikit-learn's KD/Ball trees, as COO entries.

A chunk of queries becomes ``(row, col, s)`` entries, one per (query,
stored training point) pair inside the query's search radius, ``s`` the
squared scaled distance.  The radius is the kernel's support for compact
kernels (exact).  For infinite support it is chosen per query and per tree
(group) from the query's nearest neighbour in that tree and the tree's
margin (:func:`margins`): the mass left outside is at most ``rtol`` times
the mass inside, so a pooled value moves by at most ``rtol * (max - min)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._kernels import Kernel
from . import _discrete, _span
from ._loader import compiled

# Bytes per neighbour on the tree path: index, row id, squared distance, log
# weight, weight (8 each) and the COO sums' temporaries, plus the two gathered
# rows of d features (query and training point) of the distance computation.
BYTES_PER_NEIGHBOUR = 64
BYTES_PER_NEIGHBOUR_FEATURE = 16
# Queries whose neighbour counts size the tree path's chunks.
PROBE_QUERIES = 256
_MAX_TREE_CHUNK = 4096


def margins(train, rtol: float) -> list[float]:
    """Per tree, ``log(rtol) + log(smallest weight) - log(total weight)`` of its points.

    Everything of a tree outside radius ``r`` weighs at most ``W K(r^2)`` (``W``
    its total weight) and its included mass is at least the nearest point's own
    term ``w_min K(s_nn)``: stopping where ``log K(r^2) = log K(s_nn) + margin``
    keeps the excluded mass below ``rtol`` times the included one, tree by tree
    (so each class of the classifier keeps its own log-probability).
    """
    return [log_margin(train.log_w[t.rows], rtol) for t in train.trees]


def log_margin(log_w: np.ndarray, rtol: float) -> float:
    """``log(rtol) + log(smallest positive weight) - log(total weight)`` of these points."""
    positive = log_w[np.isfinite(log_w)]
    with np.errstate(divide="ignore"):
        return float(np.log(rtol) + positive.min() - logsumexp(positive))


def radius(d_nn, kernel: Kernel, margin, factor: float = 1.0) -> np.ndarray:
    """Search radius per query at bandwidth ``factor`` times the tree's, from ``d_nn``.

    ``d_nn`` is each query's distance to its nearest point of the tree (inf
    if none); the radius grows with ``factor``, so the widest factor's
    neighbourhood holds every narrower one's.
    """
    if kernel.compact:
        return np.full(len(d_nn), factor * kernel.support)
    every = np.broadcast_to(margin == -np.inf, d_nn.shape)  # rtol = 0: every point
    if every.all():
        return np.full(len(d_nn), np.inf)
    s_nn = np.where(np.isfinite(d_nn), d_nn / factor, 0.0) ** 2
    level = kernel.log_profile(s_nn) + np.where(every, 0.0, margin)
    r = factor * np.sqrt(kernel.log_profile_inverse(level))
    r[every] = np.inf
    # Far from every point (s_nn >> |margin|) the margin is lost to rounding
    # and the radius is d_nn itself, which query_radius may round below the
    # nearest point's distance: always reach a hair past the nearest point.
    return np.maximum(r, np.where(np.isfinite(d_nn), d_nn * (1 + 1e-9), 0.0))


def _concat(parts):
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def pair_sq_distances(Q: np.ndarray, X: np.ndarray, row: np.ndarray, col: np.ndarray):
    """``|Q[row] - X[col]|^2`` per pair, by direct differences.

    Compiled where numba is there (no gathered copies).  numpy's ``np.take``
    along axis 0 gathers whole rows (one cache miss per training point, and
    measured 2.5x faster than fancy indexing ``X[col]``).
    """
    kernels = compiled()
    if kernels is not None:
        out = np.empty(len(row))
        kernels.pair_sq_distances(np.ascontiguousarray(Q), np.ascontiguousarray(X), row, col, out)
        return out
    diff = np.take(Q, row, axis=0)
    diff -= np.take(X, col, axis=0)
    return np.einsum("ij,ij->i", diff, diff)


class Neighbours:
    """Every stored point within each query's radius at the widest bandwidth factor.

    One radius query per tree serves every factor: :meth:`at` keeps the
    entries inside a narrower factor's own radius and rescales ``s``.
    """

    def __init__(self, Q, train, kernel, tree_margins, factors, exclude=None, scale=None):
        Q, A = train.split(Q)
        if A is not None and not kernel.compact:
            # Discrete kernels <= 1 scale the excluded mass by at most their largest
            # value and the nearest point's term by at least their smallest.
            spread = discrete_spread(A, train)
            tree_margins = [margin + spread for margin in tree_margins]
        self.kernel, self.margins, self.m = kernel, tree_margins, len(Q)
        widest = float(np.max(factors))
        need_nn = not kernel.compact
        self.d_nn = [t.nearest(Q, exclude) if need_nn else None for t in train.trees]
        if scale is not None and need_nn:  # per-query radii (``_span``): their units
            self.d_nn = [_span.scaled_nearest(d, scale) for d in self.d_nn]
        parts = []
        for t, (tree, margin) in enumerate(zip(train.trees, tree_margins, strict=True)):
            r = radius(self.d_nn[t] if need_nn else np.zeros(len(Q)), kernel, margin, widest)
            parts.append(tree.within(Q, r if scale is None else r * scale))
        row, col = _concat(parts) if parts else (np.empty(0, np.intp),) * 2
        # The tree of each entry, for the narrower factors' radii only (built on need).
        self._counts = [len(p[0]) for p in parts]
        self._keep = None
        if exclude is not None:
            self._keep = col != exclude[row]
            row, col = row[self._keep], col[self._keep]
        self.row, self.col, self.widest = row, col, widest
        self.s = pair_sq_distances(Q, train.X, row, col)
        if scale is not None:
            _span.divide(self.s, scale[row], train.d)

    def at(self, factor: float):
        """``(row, col, s / factor^2)`` of the entries inside the radius at ``factor``."""
        if factor == self.widest:
            s = self.s if factor == 1.0 else self.s / (factor * factor)
            return self.row, self.col, s
        limits = np.stack([
            radius(d if d is not None else np.zeros(self.m), self.kernel, margin, factor) ** 2
            for d, margin in zip(self.d_nn, self.margins, strict=True)
        ])  # fmt: skip
        tree_of = np.repeat(np.arange(len(self._counts)), self._counts)
        if self._keep is not None:
            tree_of = tree_of[self._keep]
        keep = self.s <= limits[tree_of, self.row]
        return self.row[keep], self.col[keep], self.s[keep] / (factor * factor)


def discrete_spread(A: np.ndarray, train) -> np.ndarray:
    """Per query, ``log`` of the smallest over the largest discrete kernel product (<= 0)."""
    bounds = np.append(train.offsets, A.shape[1])
    spread = np.zeros(len(A))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        spread += A[:, lo:hi].min(axis=1) - A[:, lo:hi].max(axis=1)
    return spread


def nearest_entries(Q, train, exclude=None):
    """``(row, col)`` of each query's nearest stored point(s) of positive weight (ties: all).

    The ``h -> 0`` limit that ``fallback="nearest"`` gives a query whose
    compact-kernel support holds no point.
    """
    d_nn = np.min([tree.nearest(Q, exclude) for tree in train.trees], axis=0)
    found = np.isfinite(d_nn)
    # query and query_radius may round a distance differently: search a hair
    # wider, then keep the points at the smallest distance returned.
    r = np.where(found, d_nn * (1 + 1e-9) + 1e-300, 0.0)
    row, col = _concat([tree.within(Q, r) for tree in train.trees])
    sq = pair_sq_distances(Q, train.X, row, col)
    if exclude is not None:
        sq[col == exclude[row]] = np.inf
    nearest = np.full(len(Q), np.inf)
    np.minimum.at(nearest, row, sq)
    tie = (sq == nearest[row]) & np.isfinite(sq)
    return row[tie], col[tie]


def log_kernel_entries(Q, train, kernel, row, col, s, fallback, exclude=None):
    """COO form of :func:`skl_nw._engine._dense.log_kernel_block`: ``(row, col, b, shift, s)``.

    Tree entries are all of positive weight, so the shift is each row's
    largest ``log K`` over the entries the discrete kernels count
    (:func:`~skl_nw._engine._discrete.left_out`: the others get ``b = -inf``);
    empty rows get their nearest counted point(s) with ``b = 0`` (and ``s =
    0``: the ``h -> 0`` limit is locally constant) under ``fallback="nearest"``.
    """
    m = len(Q)
    Q, A = train.split(Q)
    b = kernel.log_profile(s)
    if A is not None:
        D = _discrete.discrete_entries(A, train, row, col)
        best = _discrete.best_discrete(A, train, exclude)
        b += D
        b[_discrete.left_out(D, best[row])] = -np.inf
    shift = np.full(m, -np.inf)
    np.maximum.at(shift, row, b)
    empty = np.flatnonzero(~np.isfinite(shift))
    shift[empty] = 0.0
    b -= shift[row]
    if empty.size and fallback == "nearest":
        ex = None if exclude is None else exclude[empty]
        e_row, e_col = nearest_entries(Q[empty], train, ex)
        e_b = np.zeros(len(e_col))
        if A is not None:  # the nearest counted point(s), weighted by their discrete kernels
            e_row, e_col = _counted_nearest(
                Q[empty], A[empty], train, ex, best[empty], e_row, e_col
            )
            e_b = _discrete.discrete_entries(A[empty], train, e_row, e_col)
            top = np.full(len(empty), -np.inf)
            np.maximum.at(top, e_row, e_b)
            e_b -= top[e_row]
        row = np.concatenate([row, empty[e_row]])
        col = np.concatenate([col, e_col])
        b = np.concatenate([b, e_b])
        s = np.concatenate([s, np.zeros(len(e_col))])
    return row, col, b, shift, s


def _counted_nearest(Q, A, train, exclude, best, row, col):
    """Keep the nearest entries ``(row, col)`` the discrete kernels count; search the rest.

    A row none of whose nearest points of all counts takes its nearest
    counted point(s) (:func:`~skl_nw._engine._discrete.nearest_counted`).
    """
    keep = ~_discrete.left_out(_discrete.discrete_entries(A, train, row, col), best[row])
    row, col = row[keep], col[keep]
    missing = np.setdiff1d(np.arange(len(Q)), row)
    if missing.size:
        ex = None if exclude is None else exclude[missing]
        r, c = _discrete.nearest_counted(Q[missing], A[missing], train, best[missing], ex)
        row, col = np.concatenate([row, missing[r]]), np.concatenate([col, c])
    return row, col


def entry_sums(row, col, t, V, groups, n_groups, m, mult=None):
    """:func:`skl_nw._engine._dense.block_sums` from COO entries ``t`` (log terms).

    Straight from the entries (one compiled pass for the row maxima, one for
    the rest; or numpy's ``maximum.at`` and bincounts): building a sparse
    matrix would sort them first (measured: a tenth of a tree predict at n = 1e6).
    """
    key = row if n_groups == 1 else row * n_groups + groups[col]
    r = np.full(m * n_groups, -np.inf)
    kernels = compiled()
    if kernels is not None:
        scaled = np.zeros((m * n_groups, V.shape[1] + 1))
        factor = np.empty(0) if mult is None else mult
        kernels.coo_log_sums(key, col, t, np.ascontiguousarray(V), factor, r, scaled)
        return r.reshape(m, n_groups), scaled.reshape(m, n_groups, -1)
    np.maximum.at(r, key, t)
    e = np.exp(t - np.where(np.isfinite(r), r, 0.0)[key])
    if mult is not None:
        e *= mult
    scaled = coo_sums(key, col, e, V, m * n_groups)
    return r.reshape(m, n_groups), scaled.reshape(m, n_groups, -1)


def coo_sums(row, col, e, V, m):
    """Return ``[sum e V, sum e]`` per row from COO entries.

    One compiled pass over the entries where numba is there (the same bits);
    else a bincount per column.  A bincount of no entries at all comes back
    as integers, hence the cast.
    """
    kernels = compiled()
    if kernels is not None:
        out = np.zeros((m, V.shape[1] + 1))
        kernels.coo_sums(row, col, e, np.ascontiguousarray(V), out)
        return out
    Vc = np.take(V, col, axis=0)
    columns = [np.bincount(row, weights=e * Vc[:, j], minlength=m) for j in range(V.shape[1])]
    columns.append(np.bincount(row, weights=e, minlength=m))
    return np.column_stack(columns).astype(np.float64, copy=False)


def tree_chunk_rows(probe, train, kernel, tree_margins, budget_mib, factor=1.0) -> int:
    """Rows per tree chunk: the probed neighbour count fills at most half the budget.

    The probe only counts (``query_radius(count_only=True)``: no neighbour
    lists).  A chunk of queries with many more neighbours than the probe can
    exceed the budget; it never holds more than ``rows * n_active`` entries.
    """
    count = 0
    for tree, margin in zip(train.trees, tree_margins, strict=True):
        d_nn = None if kernel.compact else tree.nearest(probe, None)
        r = radius(np.zeros(len(probe)) if d_nn is None else d_nn, kernel, margin, factor)
        count += tree.tree.query_radius(probe, r, count_only=True).sum()
    mean_count = max(count / max(len(probe), 1), 1.0)
    per_neighbour = BYTES_PER_NEIGHBOUR + BYTES_PER_NEIGHBOUR_FEATURE * train.X.shape[1]
    entries = budget_mib * 2**20 / per_neighbour / 2
    return int(np.clip(entries / mean_count, 1, _MAX_TREE_CHUNK))
