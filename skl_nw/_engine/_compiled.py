"""Optional compiled kernel (numba): the exponential and the weighted row sums in one pass.

For the Gaussian the engine gets every log weight of a chunk from one GEMM
(see ``_folded.FoldedKeys``); what is left per pair is ``exp`` and two
multiply-adds.  numpy needs two passes over the chunk for that (``np.exp`` in
place, then a matrix-vector product); these kernels read each log weight once
and never write the weights back (1.5-2.5x the pairs per second, see the
Benchmarks page).  ``exp_dot_sums`` goes further: it takes each log weight
itself (``d`` multiply-adds and two adds) in the exponential's pass, and sums
many value columns in tiles of four query rows by three columns (each training
point's columns read once per tile), so no (m, n) block is ever written.  From
``_dense.TILED_MIN_FEATURES`` features the log weights come from register
tiles instead (``_compiled_tiled``: the folded dot product, or direct
differences where the GEMM's rounding bound fails); the paths that need the
squared distances themselves take the direct ones from the same tiles.

The exponential (``_compiled_exp``) is a vectorisable polynomial, not libm's
scalar ``exp`` (2 ulp); below ``-708`` it returns 0 (the engine redoes rows
whose sums underflow in log space).

The binned path's passes (``_compiled_binned``), the local fits' solve
(``_compiled_local``), the window path's sums (``_compiled_window``), the tree
path's sums of COO entries (``_compiled_coo``), the
per-query mixtures of the conditional distributions
(``_compiled_conditional``) and the tiled kernels are re-exported here.  Each kernel
compiles on its first call, for the one signature of :func:`examples`, and is
cached on disk (numba's ``cache=True``: ``__pycache__``, else the user's
cache, or ``NUMBA_CACHE_DIR``).

numba is optional (the ``fast`` extra, also in ``test`` and ``bench``).
Without it, or with ``SKL_NW_DISABLE_NUMBA=1``, the engine does not import
this module and uses its numpy passes; the test suite runs both.
"""

from __future__ import annotations

import numba
import numpy as np

from ._compiled_binned import (
    binned_examples,
    binned_loo,
    combine_spectra,
    linear_bin,
    offset_bin,
    offset_bin_line,
)
from ._compiled_conditional import (
    conditional_examples,
    empirical_quantiles,
    loo_empirical_crps,
    mixture_values,
    smoothed_quantiles,
)
from ._compiled_coo import coo_example, coo_log_sums, coo_sums, pair_sq_distances
from ._compiled_exp import _FAST, _exp_nonpositive
from ._compiled_grid import grid_example, grid_radii, grid_sums
from ._compiled_local import local_example, local_fit
from ._compiled_tiled import (
    _COLUMNS,
    _TILE,
    _tile_columns,
    exp_diff_tiled,
    exp_dot_tiled,
    sq_distances_tiled,
)
from ._compiled_window import window_example, window_moments, window_sums, window_tree_sums

__all__ = [
    "binned_loo",
    "combine_spectra",
    "coo_log_sums",
    "coo_sums",
    "empirical_quantiles",
    "examples",
    "exp_inplace",
    "exp_nonpositive_array",
    "exp_diff_tiled",
    "exp_dot_sums",
    "exp_dot_tiled",
    "exp_dot_sums_coded",
    "exp_sums",
    "exp_sums_chained",
    "exp_sums_coded",
    "grid_radii",
    "grid_sums",
    "linear_bin",
    "local_fit",
    "loo_empirical_crps",
    "loo_grad",
    "mixture_values",
    "offset_bin",
    "offset_bin_line",
    "pair_sq_distances",
    "smoothed_quantiles",
    "sq_distances_tiled",
    "warm_up",
    "window_moments",
    "window_sums",
    "window_tree_sums",
]


@numba.njit(inline="always", fastmath=_FAST)
def _exp_row(a, e):  # pragma: no cover - compiled
    """``e = exp(a)`` elementwise (``a <= 0``); return the sum."""
    den = 0.0
    for j in range(a.size):
        t = _exp_nonpositive(a[j])
        e[j] = t
        den += t
    return den


@numba.njit(inline="always", fastmath=_FAST)
def _exp_dot_row(q, KT, e, v, lead):  # pragma: no cover - compiled
    """``e_j = exp(q[:c] . KT[:c, j] + KT[c, j] + q[c])`` (``<= 0``); return ``sum e``, ``sum e v``.

    ``c`` products (the features) plus the point's and the query's constant
    terms (the folded ones): up to three features in one pass, more take a
    pass per feature first.  ``sum e v`` is taken in the same pass when
    ``lead`` (else 0): a column that would otherwise have a pass of its own.
    """
    c, n = KT.shape[0] - 1, KT.shape[1]
    den = num = 0.0
    if c > 3:
        e[:] = KT[c] + q[c]
        for f in range(c):
            for j in range(n):
                e[j] += q[f] * KT[f, j]
        den = _exp_row(e, e)
        if lead:
            for j in range(n):
                num += e[j] * v[j]
        return den, num
    const = q[c]
    q0 = q[0] if c > 0 else 0.0
    q1 = q[1] if c > 1 else 0.0
    q2 = q[2] if c > 2 else 0.0
    k0, k1, k2, off = KT[0], KT[min(1, c)], KT[min(2, c)], KT[c]
    if lead:
        for j in range(n):
            t = _exp_nonpositive(const + off[j] + q0 * k0[j] + q1 * k1[j] + q2 * k2[j])
            e[j] = t
            den += t
            num += t * v[j]
        return den, num
    for j in range(n):
        t = _exp_nonpositive(const + off[j] + q0 * k0[j] + q1 * k1[j] + q2 * k2[j])
        e[j] = t
        den += t
    return den, num


@numba.njit(inline="always", fastmath=_FAST)
def _exp_dot_row_coded(q, KT, e, v, lead, rr, bounds):  # pragma: no cover - compiled
    """:func:`_exp_dot_row` plus ``rr[g]`` in the exponents of cell ``g``'s points.

    The points are sorted by cell (``bounds[g]:bounds[g + 1]``), so the
    discrete kernels are one constant per block and the loop stays vectorised.
    """
    c = KT.shape[0] - 1
    den = num = 0.0
    q0 = q[0] if c > 0 else 0.0
    q1 = q[1] if c > 1 else 0.0
    q2 = q[2] if c > 2 else 0.0
    k0, k1, k2, off = KT[0], KT[min(1, c)], KT[min(2, c)], KT[c]
    for g in range(bounds.size - 1):  # at most three features (see FoldedKeys)
        const, lo, hi = q[c] + rr[g], bounds[g], bounds[g + 1]
        eg, og, a0, a1, a2 = e[lo:hi], off[lo:hi], k0[lo:hi], k1[lo:hi], k2[lo:hi]
        s = 0.0
        for j in range(hi - lo):
            t = _exp_nonpositive(const + og[j] + q0 * a0[j] + q1 * a1[j] + q2 * a2[j])
            eg[j] = t
            s += t
        den += s
    if lead:
        for j in range(e.size):
            num += e[j] * v[j]
    return den, num


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_dot_sums_coded(Qk, KT, VT, RR, bounds, out):  # pragma: no cover - compiled
    """:func:`exp_dot_sums` with ``RR[i, g]`` added to the exponents of cell ``g``.

    ``RR`` (m, n_cells) is each query's log kernel of every cell of categories
    (``<= 0``); the training points come sorted by cell, cell ``g`` in
    ``bounds[g]:bounds[g + 1]``: the discrete kernels cost one add per block.
    """
    m, n = Qk.shape[0], KT.shape[1]
    k = VT.shape[0]
    lead = k % _COLUMNS == 1
    E = np.zeros((_TILE, n))
    for i0 in range(0, m, _TILE):
        rows = min(_TILE, m - i0)
        for r in range(rows):
            i = i0 + r
            den, num = _exp_dot_row_coded(Qk[i], KT, E[r], VT[0], lead, RR[i], bounds)
            out[i, k] = den
            if lead:
                out[i, 0] = num
        _tile_columns(E, rows, VT, out, i0, 1 if lead else 0)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_sums(A, VT, out):  # pragma: no cover - compiled
    """Set ``out[i] = [sum_j e_ij VT[:, j], sum_j e_ij]`` with ``e_ij = exp(A_ij)``, ``A <= 0``."""
    m, n = A.shape
    k = VT.shape[0]
    E = np.zeros((_TILE, n))
    for i0 in range(0, m, _TILE):
        rows = min(_TILE, m - i0)
        if k == 1:  # one pass: the exp and both sums
            for r in range(rows):
                den = num = 0.0
                for j in range(n):
                    t = _exp_nonpositive(A[i0 + r, j])
                    den += t
                    num += t * VT[0, j]
                out[i0 + r, 0], out[i0 + r, 1] = num, den
            continue
        for r in range(rows):
            out[i0 + r, k] = _exp_row(A[i0 + r], E[r])
        _tile_columns(E, rows, VT, out, i0, 0)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_dot_sums(Qk, KT, VT, out):  # pragma: no cover - compiled
    """:func:`exp_sums` of ``A_ij = Qk[i, :c] . KT[:c, j] + KT[c, j] + Qk[i, c]`` (all ``<= 0``).

    The folded keys (``_folded.FoldedKeys``) without their column of ones:
    ``Qk`` (m, c + 1) per query, ``KT`` (c + 1, n) per training point, ``c``
    the number of features; each log weight is taken in the exponential's
    pass (``c`` multiply-adds and two adds) instead of by a GEMM that writes
    the chunk's (m, n) block out and reads it back.
    """
    m, n = Qk.shape[0], KT.shape[1]
    k = VT.shape[0]
    lead = k % _COLUMNS == 1  # the first column in the exponential's pass, the others in tiles
    E = np.zeros((_TILE, n))
    for i0 in range(0, m, _TILE):
        rows = min(_TILE, m - i0)
        for r in range(rows):
            den, num = _exp_dot_row(Qk[i0 + r], KT, E[r], VT[0], lead)
            out[i0 + r, k] = den
            if lead:
                out[i0 + r, 0] = num
        _tile_columns(E, rows, VT, out, i0, 1 if lead else 0)


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_sums_coded(A, VT, R, codes, out):  # pragma: no cover - compiled
    """:func:`exp_sums` of ``A_ij + sum_f R[i, codes[f, j]]`` (discrete kernels by look-up).

    ``R`` holds each query's log-kernel rows and ``codes`` (n_discrete, n)
    each training point's column in them (category code plus the feature's offset): the
    dot product of a log-kernel row with a one-hot code, without the one-hot
    columns in the matrix product.  ``A`` is overwritten.
    """
    m, n = A.shape
    k, J = VT.shape[0], codes.shape[0]
    e = np.empty(n)
    for i in range(m):
        r, x = R[i], A[i]  # A is overwritten, one row at a time
        if J == 1 and k == 1:  # one look-up per pair, fused with the exp and the sums
            c, den, num = codes[0], 0.0, 0.0
            for j in range(n):
                t = _exp_nonpositive(x[j] + r[c[j]])
                den += t
                num += t * VT[0, j]
            out[i, 0], out[i, 1] = num, den
            continue
        for f in range(J):
            c = codes[f]
            for j in range(n):
                x[j] += r[c[j]]
        den = 0.0
        if k == 1:
            num = 0.0
            for j in range(n):
                t = _exp_nonpositive(x[j])
                den += t
                num += t * VT[0, j]
            out[i, 0] = num
        else:
            for j in range(n):
                t = _exp_nonpositive(x[j])
                e[j] = t
                den += t
            for o in range(k):
                num = 0.0
                for j in range(n):
                    num += e[j] * VT[o, j]
                out[i, o] = num
        out[i, k] = den


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_nonpositive_array(x, out):  # pragma: no cover - compiled
    """``out = exp(x)`` elementwise with the kernel's polynomial (for the tests)."""
    for j in range(x.size):
        out[j] = _exp_nonpositive(x[j])


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_inplace(x):  # pragma: no cover - compiled
    """``x = exp(x)`` elementwise, in place (``x <= 0``).

    One array: :func:`exp_nonpositive_array` called with ``out`` = ``x`` fails
    LLVM's run-time overlap check and runs its scalar loop (measured 1.3-1.5x
    slower than ``np.exp`` on a Parzen predict_proba; ``python -m benchmarks
    engine --only paths``).
    """
    for j in range(x.size):
        x[j] = _exp_nonpositive(x[j])


@numba.njit(inline="always", fastmath=_FAST)
def _sq_distances_row(Q, XT, i, s):
    """``s[j] = |Q_i - X_j|^2`` by direct differences, one feature at a time."""
    s[:] = 0.0
    for f in range(Q.shape[1]):
        q = Q[i, f]
        for j in range(XT.shape[1]):
            diff = q - XT[f, j]
            s[j] += diff * diff


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def exp_sums_chained(Q, XT, slopes, squares, w, WVT, own, out):  # pragma: no cover - compiled
    """:func:`exp_sums` for several slopes, from the inputs: ``out[i, t]`` of ``e_ijt``.

    ``e_ijt = w_j exp(slopes[t] |Q_i - X_j|^2)``.
    Squared distances come from direct differences, row by row (exact to
    rounding, never stored).  Candidates run in the order given;
    ``squares[t]`` says that ``slopes[t] == 2 * slopes[t - 1]``, so the kernel
    values are the squares of the previous candidate's: one multiply per pair
    instead of an exp (each squaring doubles the relative error; the caller
    restarts a chain with an exp after at most 6, so it stays below 4e-14).
    The weights ``w`` (``<= 1``) and ``WVT = (w V)^T`` multiply the kernel
    values; ``e_ijt = 0`` for ``j = own[i]`` (leave-one-out by index; -1: none).
    """
    m, d = Q.shape
    n = XT.shape[1]
    k = WVT.shape[0]
    s = np.empty(n)
    e = np.empty(n)
    for i in range(m):
        _sq_distances_row(Q, XT, i, s)
        for t in range(slopes.size):
            den = 0.0
            num = 0.0
            if squares[t]:
                for j in range(n):
                    x = e[j]
                    x = x * x if x > 1e-150 else 0.0  # no subnormals (slow)
                    e[j] = x
                    den += w[j] * x
                    num += WVT[0, j] * x
            else:
                c = slopes[t]
                for j in range(n):
                    x = _exp_nonpositive(c * s[j]) if j != own[i] else 0.0
                    e[j] = x
                    den += w[j] * x
                    num += WVT[0, j] * x
            out[i, t, 0] = num
            out[i, t, k] = den
            for o in range(1, k):
                num = 0.0
                for j in range(n):
                    num += WVT[o, j] * e[j]
                out[i, t, o] = num


@numba.njit(nogil=True, cache=True, fastmath=_FAST)
def loo_grad(Q, XT, slope, w, VT, R, RP, own, row_coef, grad):  # pragma: no cover - compiled
    """Add the leave-one-out gradient terms of the rows of ``Q`` to ``grad``, per feature.

    For ``log K = slope * s``: with ``e_ij = w_j exp(slope s_ij)`` (0 for
    ``j = own[i]``), ``u_ij = R_i . V_j`` and the caller's
    ``row_coef[i] = r_i slope / sum_j e_ij``,
    ``grad_f += -2 sum_ij row_coef_i e_ij (u_ij - RP_i) (Q_if - X_jf)^2``.
    """
    m, d = Q.shape
    n = XT.shape[1]
    k = VT.shape[0]
    s = np.empty(n)
    c = np.empty(n)
    for i in range(m):
        _sq_distances_row(Q, XT, i, s)
        c[:] = -RP[i]
        for o in range(k):
            r = R[i, o]
            for j in range(n):
                c[j] += r * VT[o, j]
        for j in range(n):
            c[j] *= w[j] * _exp_nonpositive(slope * s[j])
        if own[i] >= 0:
            c[own[i]] = 0.0
        for f in range(d):
            q = Q[i, f]
            acc = 0.0
            for j in range(n):
                diff = q - XT[f, j]
                acc += c[j] * diff * diff
            grad[f] += -2.0 * row_coef[i] * acc


def examples() -> dict:
    """Return tiny arguments of every kernel, of the types the engine passes (its signature)."""
    row, col, own = np.zeros((1, 2)), np.zeros((2, 1)), np.full(1, -1)
    keys, values, bounds = np.zeros((2, 3)), np.zeros((1, 3)), np.array([0, 3], np.int64)
    return {
        exp_nonpositive_array: (np.zeros(2), np.empty(2)),
        exp_inplace: (np.zeros(2),),
        exp_sums: (row, row, np.empty((1, 2))),
        exp_dot_sums: (row, keys, values, np.empty((1, 2))),
        exp_dot_tiled: (np.zeros((1, 5)), np.zeros((5, 3)), values, np.empty((1, 2))),
        exp_diff_tiled: (np.zeros((1, 4)), np.zeros((4, 3)), -0.5, np.zeros(3), values,
                         np.empty((1, 2))),
        sq_distances_tiled: (np.zeros((1, 4)), np.zeros((4, 3)), np.empty((1, 3))),
        exp_dot_sums_coded: (row, keys, values, np.zeros((1, 1)), bounds, np.empty((1, 2))),
        exp_sums_coded: (row, row, row, np.zeros((1, 2), np.int64), np.empty((1, 2))),
        exp_sums_chained: (row, col, np.array([-0.5, -1.0]), np.array([False, True]),
                           np.ones(1), np.ones((1, 1)), own, np.empty((1, 2, 2))),
        loo_grad: (row, col, -0.5, np.ones(1), np.ones((1, 1)), np.ones((1, 1)), np.zeros(1),
                   own, np.zeros(1), np.zeros(2)),
        local_fit: local_example(),
        **binned_examples(),
        **window_example(),
        **grid_example(),
        **conditional_examples(),
        **coo_example(),
    }  # fmt: skip


def warm_up(every: bool = False) -> None:
    """Compile (or load from the cache) the smallest kernel, or with ``every`` all of them.

    The engine calls ``warm_up()`` when it loads this module: the polynomial
    exponential, with the intrinsics that every kernel inlines, so that a
    failed compilation or cache surfaces there (the engine then uses numpy).
    The other kernels compile when a path first calls them (under numba's
    lock: worker threads wait for one compilation).
    """
    for kernel, args in examples().items():
        if every or kernel is exp_nonpositive_array:
            kernel(*args)
