"""The binned path's compiled kernels: binning, the binned leave-one-out, moment spectra.

The linear binning takes one pass adding each row's ``2^d`` hat-function
weights (1.6x numpy's scatter-adds at n = 1e7); the binned leave-one-out
ratios one pass per candidate bandwidth instead of some twenty numpy passes.
The local fits' offset binning (:func:`offset_bin`) adds every offset
monomial of a row in the same pass (numpy: a scatter per monomial and
corner), and :func:`combine_spectra` sums the moments' binomial pairs in the
frequency domain in one pass over the spectra (numpy: a pass per pair).

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports them), so
that one import decides whether numba serves the engine.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "binned_examples",
    "binned_loo",
    "combine_spectra",
    "linear_bin",
    "offset_bin",
    "offset_bin_line",
]


@numba.njit(inline="always")
def _cell(x, lo, inv_step, n):
    """Lowest node of the cell holding ``x`` on an axis of ``n`` nodes, and the fraction."""
    t = (x - lo) * inv_step
    j = min(max(np.floor(t), 0.0), n - 2.0)
    return np.int64(j), min(max(t - j, 0.0), 1.0)


@numba.njit(inline="always")
def _scatter_line(out, o, node, lam, f, v):
    """Add ``lam (1 - f) v`` at ``out[o, node]`` and ``lam f v`` at ``out[o, node + 1]``."""
    out[o, node] += lam * (1.0 - f) * v
    out[o, node + 1] += lam * f * v


@numba.njit(inline="always")
def _scatter_square(out, o, node, stride, lam, f, g, v):
    """Add ``lam v`` over the four nodes of a square cell: two lines ``stride`` apart."""
    _scatter_line(out, o, node, lam * (1.0 - f), g, v)
    _scatter_line(out, o, node + stride, lam * f, g, v)


@numba.njit(nogil=True, cache=True)
def linear_bin(X, lo, inv_step, shape, w, V, mid, out):  # pragma: no cover - compiled
    """Add the linear binning of the rows of ``X`` (1 to 3 features) to ``out`` (k + 1, G).

    Row ``i`` adds ``lambda_c w_i [V_i - mid, 1]`` to the ``2^d`` nodes ``c``
    of its cell on the grid ``lo + j / inv_step`` of ``shape`` (C order),
    ``lambda_c`` the product over axes of ``1 - f`` or ``f`` (in axis order),
    ``f`` the row's fraction of the cell, clipped to the grid as in the
    numpy passes.
    """
    n, d = X.shape
    k = V.shape[1]
    s1 = shape[2] if d == 3 else 1  # the strides of axes 0 and 1 in C order
    s0 = s1 * shape[1] if d > 1 else 1
    for i in range(n):
        j, f0 = _cell(X[i, 0], lo[0], inv_step[0], shape[0])
        base, f1, f2 = j * s0, 0.0, 0.0
        if d > 1:
            j, f1 = _cell(X[i, 1], lo[1], inv_step[1], shape[1])
            base += j * s1
        if d > 2:
            j, f2 = _cell(X[i, 2], lo[2], inv_step[2], shape[2])
            base += j
        for o in range(k + 1):
            v = w[i] * (V[i, o] - mid[o]) if o < k else w[i]
            if d == 1:
                _scatter_line(out, o, base, 1.0, f0, v)
            elif d == 2:
                _scatter_square(out, o, base, s0, 1.0, f0, f1, v)
            else:
                _scatter_square(out, o, base, s1, 1.0 - f0, f1, f2, v)
                _scatter_square(out, o, base + s0, s1, f0, f1, f2, v)


@numba.njit(nogil=True, cache=True)
def binned_loo(flat, lam, pairs, taps, sums, w, V, mid, floor, out, below):  # pragma: no cover
    """Binned leave-one-out ratios at the training points, in one pass.

    Point ``i``'s binned sums are ``S = sum_c lam[c, i] sums[:, flat[c, i]]``
    over its cell's corners; its own binned weight ``own = w_i sum_e
    pairs[e, i] taps[e]`` comes off: ``out[i] = (S_o - own (V_io - mid_o)) /
    (S_k - own) + mid_o``.  ``below[i]`` when the remaining weight sum is not
    above ``floor`` (``out[i]`` is then NaN: the caller redoes the row).
    """
    corners, n = flat.shape
    k = V.shape[1]
    for i in range(n):
        own = 0.0
        for e in range(taps.size):
            own += pairs[e, i] * taps[e]
        own = w[i] * own
        den = 0.0
        for c in range(corners):
            den += lam[c, i] * sums[k, flat[c, i]]
        den -= own
        below[i] = not den > floor
        for o in range(k):
            num = 0.0
            for c in range(corners):
                num += lam[c, i] * sums[o, flat[c, i]]
            num -= own * (V[i, o] - mid[o])
            out[i, o] = num / den + mid[o] if not below[i] else np.nan


@numba.njit(inline="always")
def _base(X, i, lo, step, shape, strides, f):  # pragma: no cover - compiled
    """Flat index of row ``i``'s cell (its lowest node); its fractions into ``f``."""
    base = 0
    for a in range(X.shape[1]):
        j, f[a] = _cell(X[i, a], lo[a], 1.0 / step[a], shape[a])
        base += j * strides[a]
    return base


@numba.njit(inline="always")
def _tile_order(X, lo, step, shape, strides, tile):  # pragma: no cover - compiled
    """Return the rows in the order of ``cell // tile`` (a counting sort: two passes)."""
    n, f = X.shape[0], np.zeros(X.shape[1])
    tiles = np.empty(n, np.int64)
    start = np.zeros(shape.prod() // tile + 2, np.int64)
    for i in range(n):
        tiles[i] = _base(X, i, lo, step, shape, strides, f) // tile
        start[tiles[i] + 1] += 1
    for t in range(1, start.size):
        start[t] += start[t - 1]
    order = np.empty(n, np.int64)
    for i in range(n):
        order[start[tiles[i]]] = i
        start[tiles[i]] += 1
    return order


@numba.njit(nogil=True, cache=True)
def offset_bin(X, lo, step, shape, w, V, mid, chain, column, target, tile, out):  # pragma: no cover
    """Add the offset binning of the rows of ``X`` (1 to 3 features) to ``out`` (columns, G).

    Row ``i`` adds, at each node ``g`` of its cell (as :func:`linear_bin`),
    each monomial ``m_b = Lambda_g(x_i) w_i (x_i - g)^b`` in column
    ``column[b]`` and ``m_b (V_io - mid_o)`` in column ``target[b] + o``
    (none where -1).  The monomials are graded, the first 1: ``m_b`` for
    ``b > 0`` is ``m_parent[b]`` times the offset along ``axis[b]``
    (``chain = (parent, axis)``).  With ``tile > 0`` the rows are taken in
    the order of their cell's ``tile`` (``cell // tile``): the additions of
    consecutive rows share cache lines and pages where ``out`` is much
    larger than the cache.
    """
    n, d = X.shape
    parent, axis = chain
    k, P = V.shape[1], parent.size
    strides = np.ones(d, np.int64)
    for a in range(d - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    order = _tile_order(X, lo, step, shape, strides, tile) if tile > 0 else np.empty(0, np.int64)
    f, u, mono, centred = np.zeros(d), np.zeros(d), np.empty(P), np.empty(k)
    for t in range(n):
        i = order[t] if tile > 0 else t
        base = _base(X, i, lo, step, shape, strides, f)
        for o in range(k):
            centred[o] = V[i, o] - mid[o]
        for corner in range(1 << d):
            lam, node = w[i], base
            for a in range(d):
                c = (corner >> (d - 1 - a)) & 1
                lam *= f[a] if c else 1.0 - f[a]
                node += c * strides[a]
                u[a] = (f[a] - c) * step[a]
            mono[0] = lam
            for b in range(1, P):
                mono[b] = mono[parent[b]] * u[axis[b]]
            for b in range(P):
                if column[b] >= 0:
                    out[column[b], node] += mono[b]
                if target[b] >= 0:
                    for o in range(k):
                        out[target[b] + o, node] += mono[b] * centred[o]


@numba.njit(nogil=True, cache=True)
def offset_bin_line(X, lo, step, nodes, w, V, mid, n_y, out):  # pragma: no cover - compiled
    """:func:`offset_bin` in one dimension for the powers ``0 .. P - 1``: (P + n_y k, G).

    Power ``b`` goes to row ``b`` of ``out``, its product with ``V_io - mid_o``
    for ``b < n_y`` to row ``P + b k + o``.  Scalars and fixed indices only:
    faster than the general pass, whose index tables and per-axis arrays numba
    does not keep in registers (measured once, see docs/benchmarks.md "Binned
    path", "Tuned constants").
    """
    n, k, P = X.shape[0], V.shape[1], out.shape[0] - n_y * V.shape[1]
    mono, centred = np.empty(P), np.empty(k)
    inv = 1.0 / step
    for i in range(n):
        j, f = _cell(X[i, 0], lo, inv, nodes)
        for o in range(k):
            centred[o] = V[i, o] - mid[o]
        for c in range(2):
            u = (f - c) * step
            mono[0] = w[i] * (f if c else 1.0 - f)
            for b in range(1, P):
                mono[b] = mono[b - 1] * u
            for b in range(P):
                out[b, j + c] += mono[b]
            if k == 1:  # one output (the common case): no inner loop
                for b in range(n_y):
                    out[P + b, j + c] += mono[b] * centred[0]
                continue
            for b in range(n_y):
                for o in range(k):
                    out[P + b * k + o, j + c] += mono[b] * centred[o]


@numba.njit(nogil=True, cache=True)
def combine_spectra(spectra, factors, lengths, pairs, coef, start, width):  # pragma: no cover
    """Replace the sums' spectra by the moments' in place, one frequency at a time.

    ``spectra`` (C, F) holds the spectrum of each offset sum in the slots
    ``start[b] .. start[b] + width[b]``; afterwards the slots hold the
    moments', ``sum_(pairs (a, b, e)) coef C(a, b) spectra[b] K_e`` in the
    slots of ``a`` (the layout of ``b``: each moment has the widths of its
    sums).  The stencil spectra ``K_e`` over the frequencies (C order over
    ``lengths``) are the outer products of ``factors[e, j, :lengths[j]]``
    (one factor of length F for a stencil that does not factor).
    """
    C, F = spectra.shape
    column = np.empty(C, spectra.dtype)
    kernel = np.empty(factors.shape[0], spectra.dtype)
    index = np.zeros(lengths.size, np.int64)
    for f in range(F):
        for e in range(kernel.size):
            kernel[e] = factors[e, 0, index[0]]
            for j in range(1, lengths.size):
                kernel[e] *= factors[e, j, index[j]]
        for j in range(lengths.size - 1, -1, -1):  # the next frequency's multi-index
            index[j] += 1
            if index[j] < lengths[j]:
                break
            index[j] = 0
        for r in range(C):
            column[r] = spectra[r, f]
            spectra[r, f] = 0.0
        for t in range(pairs.shape[0]):
            a, b = pairs[t, 0], pairs[t, 1]
            factor = coef[t] * kernel[pairs[t, 2]]
            for o in range(width[a]):
                spectra[start[a] + o, f] += factor * column[start[b] + o]


def binned_examples() -> dict:
    """Return the arguments of each kernel on a tiny problem (see ``_compiled.examples``)."""
    grid = np.array([0.0]), np.array([1.0]), np.array([3], np.int64)
    flat, lam = np.zeros((2, 1), np.int64), np.full((2, 1), 0.5)
    return {
        linear_bin: (np.zeros((1, 1)), *grid, np.ones(1), np.ones((1, 1)), np.zeros(1),
                     np.zeros((2, 3))),
        binned_loo: (flat, lam, np.ones((2, 1)), np.ones(2), np.ones((2, 3)), np.ones(1),
                     np.ones((1, 1)), np.zeros(1), 0.0, np.empty((1, 1)), np.empty(1, bool)),
        offset_bin: (np.zeros((1, 1)), *grid, np.ones(1), np.ones((1, 1)), np.zeros(1),
                     (np.zeros(2, np.int64),) * 2, np.zeros(2, np.int64), np.array([2, -1]), 1,
                     np.zeros((3, 3))),
        offset_bin_line: (np.zeros((1, 1)), 0.0, 1.0, 3, np.ones(1), np.ones((1, 1)),
                          np.zeros(1), 1, np.zeros((3, 3))),
        combine_spectra: (np.zeros((2, 2), complex), np.ones((1, 1, 2), complex),
                          np.array([2], np.int64), np.zeros((1, 3), np.int64), np.ones(1),
                          np.array([0, 1], np.int64), np.array([2, 1], np.int64)),
    }  # fmt: skip
