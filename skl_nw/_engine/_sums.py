"""The one primitive: kernel-weighted moment sums, on every backend.

For each query ``q``, bandwidth factor ``f``, power ``p`` and group ``g``
(all rows when the sums are not grouped), with ``u_i = |q - x_i| / (f h)``:

``S[q, f, p, g] = sum_{i in g} w_i K(u_i)^p [V_i, 1]``

(the last column is the plain sum of weights).  ``p = 1`` gives pooling and
class sums, ``p = 2`` the ``sum w K^2`` of standard errors, and the
pseudo-power ``p = "ds"`` the sums of ``w dK/ds`` (``s = u^2``, in units of
the factor's bandwidth; 0 at ``s = 0``, where every use multiplies it by
``x - q = 0``) that exact derivatives in the query or the bandwidth need.
Columns of ``V``
such as ``[y, x - q, (x - q) y]`` give local polynomial moments; the
leave-one-out variant drops training row ``i`` from the sums of query ``i``
*by index* (a duplicate of the point still counts).  Every other operation of
the engine is a thin layer over this one, or (attention weights) over the same
per-chunk kernel blocks before their reduction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .._kernels import Kernel
from . import _dense, _discrete, _grid, _span, _tree, _window
from ._chunks import Options, budget, map_chunks, n_queries
from ._plan import Plan, zero_at_zero
from ._train import TrainSet


@dataclass(frozen=True)
class KernelSums:
    """The sums in a safe form: ``S = exp(p * shift + log_scale) * scaled * value_scale``.

    Attributes
    ----------
    shift : ndarray of shape (m, n_factors)
        A per-query offset of ``log K`` (the largest ``log K`` of the row on
        the log-space paths, 0 on the linear ones).  Ratios of sums of one
        power do not depend on it, and relative log sums leave it out, so a
        query far from every point (``log K ~ -1e30``) loses no precision.
    log_scale : ndarray of shape (m, n_factors, n_powers, n_groups)
        ``-inf`` where the sum of weights is exactly 0 (a compact kernel
        with no point in its support and ``fallback="nan"``).
    scaled : ndarray of shape (m, n_factors, n_powers, n_groups, k + 1)
        Finite, with the weight sum (last column) at most ``n``: ratios of
        columns never overflow or underflow.
    value_scale : ndarray of shape (k + 1,)
        Powers of two the value columns were divided by (1 for the last).
    powers : tuple
        The powers, in the order of the third axis (``"ds"`` uses ``p = 1``
        in the formula above).
    """

    shift: np.ndarray
    log_scale: np.ndarray
    scaled: np.ndarray
    value_scale: np.ndarray
    powers: tuple = (1,)

    def ratios(self) -> np.ndarray:
        """Pooled values ``S[..., :k] / S[..., k]`` of power 1, group 0: (m, n_factors, k).

        NaN where the sum of weights is exactly 0 (``fallback="nan"``).
        """
        sums = self.scaled[:, :, 0, 0]
        den = sums[..., -1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = sums[..., :-1] / np.where(den > 0, den, np.nan)
        return pooled * self.value_scale[:-1]


def unit_values(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``V / scale`` with ``|V / scale| <= 2`` per column, and the ``scale``.

    The sums add up to n terms with weights ``<= 1`` before they are
    normalised: values near the float64 maximum would overflow to inf.
    Powers of two scale exactly, so results are otherwise unchanged.
    """
    V = np.asarray(V, dtype=np.float64)
    scale = power_of_two(np.abs(V).max(axis=0, initial=0.0))
    return V / scale, scale


def power_of_two(a: ArrayLike) -> np.ndarray:
    """Return the largest power of two ``<= a`` (elementwise; 1.0 where ``a`` is 0 or not finite).

    A unit to divide by exactly (no rounding, barring subnormals): ``x / power_of_two(max|x|)``
    lies in ``(-2, 2)``.

    Examples
    --------
    >>> power_of_two([3.0, 0.5, 0.0, 1e300]).tolist()[:3]
    [2.0, 0.5, 1.0]
    """
    a = np.asarray(a, dtype=np.float64)
    ok = np.isfinite(a) & (a > 0)
    _, exponent = np.frexp(np.where(ok, a, 1.0))
    return np.where(ok, np.ldexp(1.0, exponent - 1), 1.0)


def _grouped_fast_sums(plan: Plan, Qc: np.ndarray, own):
    """Return grouped sums of the Gaussian, folded where they fit; None as below."""
    if plan.group_folded is None or not plan.fold_groups:
        return _grouped_slope_sums(plan, Qc, own)
    out, redo = plan.group_folded_sums(Qc)
    if 2 * redo.size > len(Qc):  # most rows lie far from some group: no more folding in
        plan.fold_groups = False  # this call (a flag: chunks in flight finish as they are)
    if redo.size:
        part = _grouped_slope_sums(plan, Qc[redo], None)
        if part is None:
            return None
        for whole, piece in zip(out, part, strict=True):
            whole[redo] = piece
    return out


def _grouped_slope_sums(plan: Plan, Qc: np.ndarray, own):
    """Return grouped sums for ``log K = c s``, or None if a group's sum underflowed.

    ``log K`` is largest at each group's nearest point for every factor, so
    the distances minus that nearest one (per row and group) give kernel
    values ``<= 1``, 1 at that point: one exp per factor and power (or the
    square of another one's, :func:`_dense.square_chains`), no maxima of log
    terms (the general log-space path needs them); the weights multiply the
    value columns.
    """
    train, m = plan.train, len(Qc)
    S = _dense.sq_distances(Qc, train, plan.kernel)
    S[:, ~np.isfinite(train.log_w)] = np.inf
    if own is not None:
        S[np.arange(m), own] = np.inf
    nearest = np.minimum.reduceat(S, plan.starts, axis=1)
    found = np.isfinite(nearest)
    sizes = np.diff(np.append(plan.starts, train.n_samples))
    S -= np.repeat(np.where(found, nearest, 0.0), sizes, axis=1)
    # The row's nearest point of all goes to the shift, so that the log scales of
    # the groups keep their differences however far the query (log K ~ -1e30).
    closest = np.min(nearest, axis=1, keepdims=True, initial=np.inf)
    closest[~np.isfinite(closest)] = 0.0
    nearest -= closest
    w = np.exp(_dense.shifted_log_weights(train.log_w))
    Vw = np.column_stack([plan.V, np.ones(train.n_samples)]) * w[:, None]
    out = plan.empty(m)
    P = plan.shape[1]
    bounds = np.append(plan.starts, train.n_samples)
    slopes = np.array(plan.group_slopes)
    order, squares = _dense.square_chains(slopes)
    E = np.empty_like(S)
    for t, square in zip(order, squares, strict=True):
        f, p = divmod(int(t), P)
        if square:
            np.multiply(E, E, out=E)
        else:
            _dense.exp_into(S, slopes[t], E)
        with np.errstate(invalid="ignore"):  # inf * 0 where a group has no point
            out[1][:, f, p] = np.where(found, slopes[t] * nearest, -np.inf) + plan.lw_max
        out[0][:, f] = plan.kernel.log_slope / plan.factors[f] ** 2 * closest[:, 0]
        for g, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            out[2][:, f, p, g] = E[:, lo:hi] @ Vw[lo:hi]
        if plan.powers[p] == "ds":
            out[2][:, f, p] *= plan.kernel.log_slope
    sums = out[2][..., -1][:, :, plan.plain]  # (m, F, plain powers, G)
    if ((sums < _dense.UNDERFLOW) & found[:, None, None, :]).any():
        return None
    return out


def _dense_sums(plan: Plan, chunk: slice, Qc: np.ndarray):
    train, kernel = plan.train, plan.kernel
    m = len(Qc)
    own = plan.own(chunk)
    if plan.group_slopes is not None:
        out = _grouped_fast_sums(plan, Qc, own)
        if out is not None:
            return out
    out = plan.empty(m)
    fast = plan.fast_sums(Qc, own)
    S, nearest, D = None, {}, None
    for f, factor in enumerate(plan.factors):
        redo = np.arange(m)
        if fast is not None:
            out[2][:, f, :, 0], out[1][:, f, :, 0] = fast[:, f], plan.lw_max
            redo = np.flatnonzero((fast[:, f, plan.plain, -1] < _dense.UNDERFLOW).any(axis=1))
            if redo.size and redo.size < m:  # the distances of the rows to redo alone
                S_r = _dense.sq_distances(Qc[redo], train, kernel)
                D_r = _discrete.discrete_block(Qc[redo], train)
                _redo_in_log_space(plan, out, f, redo, S_r, D_r, own)
                continue
        if S is None and (plan.linear or redo.size):
            S = _dense.sq_distances(Qc, train, kernel, relative=plan.scale is not None)
            D = _discrete.discrete_block(Qc, train)
            if plan.scale is not None:
                _span.divide(S, plan.scale[chunk], train.d)
        if plan.linear:
            S_f = S / factor**2 if factor != 1.0 else S
            K = kernel.profile(S_f)
            dK = zero_at_zero(kernel.derivative(S_f), S_f) if "ds" in plan.powers else None
            if own is not None:
                K[np.arange(m), own] = 0.0
                if dK is not None:
                    dK[np.arange(m), own] = 0.0
            redo = plan.linear_sums(out, f, K, dK, plan.w)
            redo = _empty_rows(plan, out, f, redo, S, own, nearest)
        if redo.size:
            S_r = S if redo.size == m else S[redo]
            D_r = None if D is None else (D if redo.size == m else D[redo])
            _redo_in_log_space(plan, out, f, redo, S_r, D_r, own)
    return out


def _redo_in_log_space(plan: Plan, out, f: int, redo, S_r, D_r, own) -> None:
    """Fill factor ``f``'s sums of the chunk's rows ``redo`` from their distances ``S_r``."""
    factor = plan.factors[f]
    S_r = S_r / factor**2 if factor != 1.0 else S_r
    ex = None if own is None else own[redo]
    b, shift, empty = _dense.log_kernel_block(
        S_r, plan.train.log_w, plan.kernel, plan.fallback, ex, D_r
    )
    if empty.size and "ds" in plan.powers:  # the h -> 0 limit is locally constant
        S_r = S_r.copy()
        S_r[empty] = 0.0
    part = plan.empty(len(redo))
    plan.log_space(part, f, b, shift, S_r)
    for whole, piece in zip(out, part, strict=True):
        whole[redo, f] = piece[:, f]


def _empty_rows(plan: Plan, out, f: int, redo, S: np.ndarray, own, nearest: dict):
    """Settle the rows of a compact kernel with no point in the support; return the others.

    Their sums are exactly 0: ``fallback="nan"`` keeps them so; ``"nearest"``
    sums the nearest point(s) with ``K = 1``, which no factor changes: the
    chunk computes them once (``nearest`` caches them by row).
    """
    empty = redo[out[2][redo, f, plan.plain[0], 0, -1] == 0.0]
    if not empty.size:
        return redo
    if plan.fallback == "nan":
        out[1][empty, f] = -np.inf
        return np.setdiff1d(redo, empty, assume_unique=True)
    new = np.array([i for i in empty if i not in nearest], dtype=np.intp)
    if new.size:
        ex = None if own is None else own[new]
        b = _dense.nearest_block(S[new], plan.train.log_w, ex)
        part = plan.empty(len(new))
        plan.log_space(part, 0, b, np.zeros(len(new)), np.zeros_like(b))
        for j, i in enumerate(new):
            nearest[i] = (part[1][j, 0], part[2][j, 0])
    for i in empty:
        out[0][i, f] = 0.0
        out[1][i, f], out[2][i, f] = nearest[i]
    return np.setdiff1d(redo, empty, assume_unique=True)


def _tree_sums(plan: Plan, chunk: slice, Qc: np.ndarray, margins):
    """Compute the sums of one chunk on the tree path (compact kernels: linear first)."""
    train, kernel, m = plan.train, plan.kernel, len(Qc)
    own = plan.own(chunk)
    scale = None if plan.scale is None else plan.scale[chunk]
    nb = _tree.Neighbours(Qc, train, kernel, margins, plan.factors, own, scale)
    out = plan.empty(m)
    for f, factor in enumerate(plan.factors):
        row, col, s = nb.at(factor)
        redo = np.arange(m)
        if plan.linear:
            dK = zero_at_zero(kernel.derivative(s), s) if "ds" in plan.powers else None
            w = np.take(plan.w, col)
            redo = plan.linear_sums(out, f, kernel.profile(s), dK, w, row, col, m)
        if not redo.size:
            continue
        if redo.size < m:
            where = np.full(m, -1)
            where[redo] = np.arange(redo.size)
            keep = where[row] >= 0
            row, col, s = where[row[keep]], col[keep], s[keep]
        ex = None if own is None else own[redo]
        row, col, b, shift, s = _tree.log_kernel_entries(
            Qc[redo], train, kernel, row, col, s, plan.fallback, ex
        )
        part = plan.empty(len(redo))
        plan.log_space(part, f, b, shift, s, row, col)
        for whole, piece in zip(out, part, strict=True):
            whole[redo, f] = piece[:, f]
    return out


def run_chunks(Q, train: TrainSet, kernel: Kernel, options: Options, *, dense, tree,
               out=None, factor: float = 1.0, rows=None, fused: bool = False):  # fmt: skip
    """Map ``dense(chunk, Qc)`` or ``tree(chunk, Qc, margins)`` over query chunks.

    The one dispatch between the tree and the brute-force paths: chunk sizes
    come from the memory budget, for trees from the neighbour counts of a
    probe of the queries (at bandwidth multiple ``factor``, the widest used).
    ``Q=None`` queries the stored training rows ``rows`` (all if None).
    ``fused``: brute-force chunks go to a fused compiled kernel, see
    :func:`_dense.dense_chunk_rows`.
    """
    workers, mib = budget(options)
    if not train.trees:
        fused_m = n_queries(Q, train, rows) if fused else None
        chunk = _dense.dense_chunk_rows(train.n_samples, mib, fused_m, workers)
        return map_chunks(dense, Q, train, chunk, workers, out, rows)
    margins = _tree.margins(train, options.rtol)
    source = (train.X if rows is None else train.X[rows]) if Q is None else Q[:, : train.d]
    probe = source[:: max(1, len(source) // _tree.PROBE_QUERIES)][: _tree.PROBE_QUERIES]
    probe = probe if Q is None else probe - train.center
    chunk = (_span.tree_chunk_rows(train, kernel, mib) if train.neighbours is not None  # ~k each
             else _tree.tree_chunk_rows(probe, train, kernel, margins, mib, factor))  # fmt: skip
    return map_chunks(lambda c, Qc: tree(c, Qc, margins), Q, train, chunk, workers, out, rows)


def kernel_sums(
    Q: np.ndarray | None,
    train: TrainSet,
    kernel: Kernel,
    *,
    values: np.ndarray | None = None,
    powers: tuple[int, ...] = (1,),
    factors: tuple[float, ...] | np.ndarray = (1.0,),
    grouped: bool = False,
    loo: bool = False,
    rows: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
    fallback: str = "nearest",
    options: Options = Options(),  # noqa: B008 - frozen
) -> KernelSums:
    """Compute the moment sums ``S[q, f, p, g]`` (module docstring) in a safe form.

    The result is a :class:`KernelSums`.

    Parameters
    ----------
    Q : ndarray of shape (m, d) or None
        Bandwidth-scaled queries; None queries the training points themselves
        (rows of the result in the caller's training order).
    train : TrainSet
        The training side (inputs, log weights, values, groups).
    kernel : Kernel
        The kernel record.
    values : ndarray of shape (n, k), default=None
        Value columns in the caller's row order; None uses ``train.values``.
    powers : tuple, default=(1,)
        Powers ``p`` of the kernel: 1, 2, and ``"ds"`` for ``dK/ds`` (with 1).
    factors : sequence of float, default=(1.0,)
        Bandwidth multiples ``f``; the distances of a chunk serve them all.
    grouped : bool, default=False
        One sum per group of ``train`` (each with its own log scale), or one
        over every row.
    loo : bool, default=False
        With ``Q=None``: drop each training row from its own sums, by index.
    rows : ndarray of int, default=None
        With ``Q=None``: query only these training rows (caller order); the
        result has one row per entry.
    exclude : ndarray of int of shape (m,), default=None
        With ``Q`` given: the training row (caller order) that each query
        drops from its sums, by index (leave-one-out at some training rows:
        pass their inputs as ``Q``).
    fallback : {"nearest", "nan"}, default="nearest"
        Queries with no point of positive weight inside a compact kernel's
        support: the nearest point(s) count with ``K = 1`` (the ``h -> 0``
        limit), or every sum is 0.
    options : Options
        rtol, n_jobs, working_memory.
    """
    if values is None:
        V = train.values
    else:
        V = train.to_stored(np.asarray(values).reshape(train.n_samples, -1))
    V, scale = unit_values(V)
    factors = tuple(float(f) for f in factors)
    stored = None
    if Q is None and rows is not None:
        stored = train.inverse_rows(rows)
    plan = Plan(train, kernel, V, tuple(powers), factors, grouped, loo, fallback, stored, exclude,
                 options, Q)  # fmt: skip
    window = _window.applies(plan, Q) and _window.window_sums(plan, Q, stored, options)
    window = window or (_grid.applies(plan, Q) and _grid.grid_sums(plan, Q, stored, options))
    shift, log_scale, scaled = window or _general_sums(plan, Q, stored, options)
    if plan.scale is not None:  # "ds" in units of each query's own bandwidth
        _span.per_own_bandwidth(scaled, plan.powers, plan.scale)
    if Q is None and rows is None:
        shift, log_scale, scaled = (train.to_caller(a) for a in (shift, log_scale, scaled))
    return KernelSums(shift, log_scale, scaled, np.append(scale, 1.0), plan.powers)


def _general_sums(plan: Plan, Q, stored, options: Options):
    """``(shift, log_scale, scaled)`` from the brute-force or the tree path, chunk by chunk."""
    train, kernel = plan.train, plan.kernel
    shift, log_scale, scaled = plan.empty(len(plan.rows) if Q is None else len(Q))
    parts = run_chunks(
        Q, train, kernel, options,
        dense=lambda c, Qc: _dense_sums(plan, c, Qc),
        tree=lambda c, Qc, margins: _tree_sums(plan, c, Qc, margins),
        factor=max(plan.factors), rows=stored, fused=plan.fused,
    )  # fmt: skip
    for chunk_result, start in zip(parts, _starts(parts), strict=True):
        stop = start + len(chunk_result[0])
        shift[start:stop], log_scale[start:stop], scaled[start:stop] = chunk_result
    return shift, log_scale, scaled


def _starts(parts) -> list[int]:
    return list(np.cumsum([0] + [len(p[0]) for p in parts])[:-1])
