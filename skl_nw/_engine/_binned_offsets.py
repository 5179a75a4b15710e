"""Moments about grid nodes with the points kept where they are: offset binning.

The binned local polynomial fit needs, at every node ``g``, kernel-weighted
moments ``sum_i w_i K(x_i - g) (x_i - g)^a`` (``|a| <= 2 degree``, and with
``y_i`` for ``|a| <= degree``).  Binning the points onto the nodes and taking
moments of the node positions (``(g' - g)^a`` in place of ``(x_i - g)^a``)
moves every point to a node while its target stays: a linear binning adds
the variance of the hat function, ``step^2 / 6`` per axis, to the local
variance of the inputs.  Where the data spans few nodes (a wide bandwidth, a
constant column) that is not small against the variance itself, and the
slopes come out wrong (by a factor 1.8 at 100 bandwidths, garbage across a
constant column).

Here each point keeps its offset from the nodes it is binned to:

1. *offset binning*: node ``g'`` holds ``c_b(g') = sum_i Lambda_g'(x_i) w_i
   (x_i - g')^b`` for every monomial ``b`` (and ``c_b`` times the centred
   targets), :func:`offset_bin`;
2. *moving the moments*: with ``x_i - g = (g' - g) + (x_i - g')`` the
   binomial expansion gives ``M_a(g) = sum_(b + e = a) C(a, b) sum_g'
   K(g' - g) (g' - g)^e c_b(g')``: one convolution with the moment stencil
   ``K(u) u^e`` per ``e``, of every ``c_b`` with ``|b + e| <= top``,
   :func:`node_moments`.

So ``M_a(g) = sum_i omega_i(g) (x_i - g)^a`` exactly (up to rounding) for
the weights ``omega_i(g) = sum_g' Lambda_g'(x_i) K(g' - g)``: the kernel's
multilinear interpolant, non-negative.  A local polynomial fit is a weighted
least-squares fit, so it reproduces polynomials of its degree whatever the
weights: the binned fit only approximates the weights, never the inputs.
Every term is a product of offsets within the kernel's reach (in
bandwidths): nothing cancels, whatever the bandwidth.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
from scipy.special import comb

from ._binned import _FFT_ROUNDING, Grid
from ._binned_convolve import grid_fits
from ._binned_direct import convolve_sparse, sparse_enough
from ._loader import compiled

__all__ = [
    "moment_stencils",
    "node_moments",
    "node_moments_binning_each",
    "offset_bin",
    "powers",
    "sums_fit",
]

# The compiled offset binning takes the rows in the order of their cell's tile of
# _TILE nodes where its sums exceed _CACHE_BYTES (a counting sort first): each row's
# additions otherwise touch a page per sum; below, the sort costs more than it saves
# (measured once, see docs/benchmarks.md "Binned path", "Tuned constants").
_TILE = 64
_CACHE_BYTES = 8 << 20
# Rows per pass of the numpy offset_bin: at least this many (temporaries that stay in the cache)...
_MIN_ROWS = 1 << 15
# ... and at most this many (a dozen (rows,) temporaries of 8 MiB).
_MAX_ROWS = 1 << 20


def powers(U: np.ndarray, exps: np.ndarray) -> np.ndarray:
    """Return the monomials ``U^a`` for each exponent ``a`` (rows of ``exps``): (r, P)."""
    out = np.ones((len(U), len(exps)))
    for j in range(U.shape[1]):
        for p in range(1, int(exps[:, j].max(initial=0)) + 1):
            out[:, exps[:, j] == p] *= (U[:, j] ** p)[:, None]
    return out


def moment_stencils(K, step: np.ndarray, exps: np.ndarray) -> list:
    """Return the stencils ``K(e) (-e)^a`` for each exponent ``a`` (rows of ``exps``).

    ``K`` as :func:`skl_nw._engine._binned_convolve.stencil` returns it (at factor 1):
    a ``d``-dimensional array over the node offsets ``e`` (in bandwidths), or a
    list of one-dimensional factors, which stay factors (``prod_j K_j(e_j)
    (-e_j)^(a_j)``).  The sign makes the convolution
    ``sum_e T(e) c_(g - e)`` the moment ``sum_g' K(g' - g) (g' - g)^a c_g'``.
    """
    if isinstance(K, list):
        offsets = [(np.arange(len(k)) - len(k) // 2) * s for k, s in zip(K, step, strict=True)]
        return [[k * (-u) ** int(p) for k, u, p in zip(K, offsets, a, strict=True)] for a in exps]
    axes = np.meshgrid(
        *[(np.arange(n) - n // 2) * s for n, s in zip(K.shape, step, strict=True)], indexing="ij"
    )
    return [K * np.prod([(-u) ** int(p) for u, p in zip(axes, a, strict=True)], axis=0)
            for a in exps]  # fmt: skip


def _scatter(out: np.ndarray, flat: np.ndarray, column: np.ndarray) -> None:
    """``out[flat] += column`` with repeated indices: a bincount where the grid is small."""
    if 8 * len(flat) >= out.size:
        out += np.bincount(flat, column, minlength=out.size)
    else:  # a grid much larger than the rows: no grid-sized temporary
        np.add.at(out, flat, column)


def offset_bin(X, w, values, mid, grid: Grid, exps: np.ndarray, n_y: int):
    """Offset binning: ``c_b(g) = sum_i Lambda_g(x_i) w_i (x_i - g)^b [1, V_i - mid]``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Scaled inputs, inside the grid.
    w : ndarray of shape (n,)
        Sample weights.
    values : ndarray of shape (n, k)
        Targets, binned centred on ``mid`` (k,).
    mid : ndarray of shape (k,)
        Centre of each target column.
    grid : Grid
        The grid.
    exps : ndarray of shape (P, d)
        Exponents ``b`` of the offsets, graded (the first ``n_y`` of them also
        with the targets).
    n_y : int
        Number of exponents binned with the targets.

    Returns
    -------
    plain : ndarray of shape (P, G)
        ``c_b`` of the weights.
    targets : ndarray of shape (n_y, k, G)
        ``c_b`` of the weighted centred targets.

    Notes
    -----
    One compiled pass over the rows where numba is available (every
    monomial of a row added node by node), else numpy passes over blocks of
    rows (a scatter per monomial, target and corner).
    """
    kernels = compiled()
    if kernels is None:
        return _offset_bin_numpy(X, w, values, mid, grid, exps, n_y)
    k, P, G = values.shape[1], len(exps), grid.size
    out = np.zeros((P + n_y * k, G))
    X, w, values, mid = (np.asarray(a, dtype=np.float64) for a in (X, w, values, mid))
    shape = np.array(grid.shape, dtype=np.int64)
    if exps.shape[1] == 1 and np.array_equal(exps[:, 0], np.arange(P)):
        kernels.offset_bin_line(X, float(grid.lo[0]), float(grid.step[0]), grid.shape[0], w,
                                values, mid, n_y, out)  # fmt: skip
        return out[:P], out[P:].reshape(n_y, k, G)
    chain, column, target = _chain(exps, n_y, k)
    tile = _TILE if out.nbytes > _CACHE_BYTES else 0
    kernels.offset_bin(X, grid.lo, grid.step, shape, w, values, mid, chain, column, target, tile,
                       out)  # fmt: skip
    return out[:P], out[P:].reshape(n_y, k, G)


def _chain(exps: np.ndarray, n_y: int, k: int):
    """Return the compiled pass's monomials: ``exps`` and those below, graded, from parents.

    Returns ``(parent, axis)`` (monomial ``b > 0`` is monomial ``parent[b]``
    times the offset along ``axis[b]``), and for each monomial its column in
    the output, and that of its first target column (-1: not wanted).
    """
    d, top = exps.shape[1], int(exps.sum(axis=1).max())
    wanted = {tuple(a): i for i, a in enumerate(exps.tolist())}
    every = [a for p in range(top + 1) for a in _graded(d, p)
             if any(all(x <= y for x, y in zip(a, e, strict=True)) for e in wanted)]  # fmt: skip
    index = {a: i for i, a in enumerate(every)}
    parent, axis = np.zeros(len(every), np.int64), np.zeros(len(every), np.int64)
    column, target = np.full(len(every), -1, np.int64), np.full(len(every), -1, np.int64)
    for b, a in enumerate(every):
        if b:
            axis[b] = next(j for j, p in enumerate(a) if p > 0)
            parent[b] = index[tuple(p - (j == axis[b]) for j, p in enumerate(a))]
        if a in wanted:
            column[b] = wanted[a]
            if wanted[a] < n_y:
                target[b] = len(exps) + wanted[a] * k
    return (parent, axis), column, target


def _graded(d: int, p: int) -> list[tuple[int, ...]]:
    """Every exponent tuple of ``d`` axes with total degree ``p``."""
    if d == 1:
        return [(p,)]
    return [(q, *rest) for q in range(p, -1, -1) for rest in _graded(d - 1, p - q)]


def _offset_bin_numpy(X, w, values, mid, grid: Grid, exps: np.ndarray, n_y: int):
    """:func:`offset_bin` by numpy passes over blocks of rows: a scatter per monomial and corner."""
    k, G = values.shape[1], grid.size
    plain, targets = np.zeros((len(exps), G)), np.zeros((n_y, k, G))
    step = int(np.clip(G, _MIN_ROWS, _MAX_ROWS))
    for start in range(0, len(X), step):
        rows = slice(start, start + step)
        base, fractions, _ = grid.cells(X[rows])
        centred = values[rows] - mid
        for corner, flat, weight in grid.corners(base, fractions):
            U = np.column_stack([(f - c) * s for f, c, s in
                                 zip(fractions, corner, grid.step, strict=True)])  # fmt: skip
            terms = powers(U, exps) * (w[rows] * weight)[:, None]
            for b in range(len(exps)):
                _scatter(plain[b], flat, terms[:, b])
            for b in range(n_y):
                for o in range(k):
                    _scatter(targets[b, o], flat, terms[:, b] * centred[:, o])
    return plain, targets


def _pairs(exps: np.ndarray, n_y: int) -> list[tuple[int, int, int, float]]:
    """Every ``(a, b, e, C(a, b))`` with ``b + e = a`` within the moments (indices in ``exps``)."""
    degree = exps.sum(axis=1)
    top = int(degree[-1])
    index = {tuple(a): i for i, a in enumerate(exps.tolist())}
    return [
        (index[tuple((exps[b] + exps[e]).tolist())], b, e,
         float(np.prod(comb(exps[b] + exps[e], exps[b]))))
        for e in range(len(exps)) for b in range(len(exps)) if degree[b] + degree[e] <= top
    ]  # fmt: skip


def node_moments(plain, targets, shape: tuple[int, ...], stencils: list, exps, n_y: int):
    """Moments about every node from the offset-binned sums (:func:`offset_bin`).

    ``M_a(g) = sum_(b + e = a) C(a, b) sum_g' K(g' - g) (g' - g)^e c_b(g')``
    for ``|a| <= top`` (the largest degree in ``exps``) and alike for the
    targets up to the degree of ``exps[n_y - 1]``, with ``stencils`` the
    moment stencils ``K(u) u^e`` (:func:`moment_stencils`) in the order of
    ``exps``.  Where the data occupies few nodes, by direct scatters
    (:func:`~skl_nw._engine._binned_direct.convolve_sparse`: each moment
    keeps its own relative precision); otherwise in the frequency domain,
    one transform per sum, per stencil and per moment, the pairs summed
    there (:func:`_spectral`), or, where its arrays would not fit, one
    convolution per pair (:func:`_per_stencil`).

    Returns
    -------
    M : ndarray of shape (P, G)
        Plain moments about each node.
    B : ndarray of shape (n_y, k, G)
        Target moments about each node.
    error : ndarray of shape (P,)
        Bound on the absolute rounding of each plain moment by the
        transforms (0 where summed directly): ``_FFT_ROUNDING eps log2(size)``
        times ``max |K u^e| sum |c_b|`` over its pairs.
    """
    pairs = _pairs(exps, n_y)
    T0 = stencils[0]
    taps = int(np.prod([len(f) for f in T0] if isinstance(T0, list) else T0.shape))
    nonzero = int(np.count_nonzero(plain[0]))
    columns = plain.shape[0] + targets.shape[0] * targets.shape[1]
    if sparse_enough(nonzero * taps, list(shape)) or not spectral_fits(shape, T0, columns):

        def rows_of(b):
            return np.concatenate([plain[b : b + 1], targets[b]]) if b < n_y else plain[b : b + 1]

        G, k = plain.shape[1], targets.shape[1]
        return _per_stencil(rows_of, len(exps), G, k, shape, stencils, pairs, n_y)
    return _spectral(plain, targets, shape, stencils, pairs, n_y)


def spectral_fits(shape: tuple[int, ...], T0, columns: int) -> bool:
    """Whether the frequency-domain path's arrays fit within the grid limit.

    It holds the sums' spectra, the moments and the sums: about four grids
    (padded by the stencil) per column.
    """
    half = [len(f) // 2 for f in T0] if isinstance(T0, list) else [n // 2 for n in T0.shape]
    return grid_fits([n + L for n, L in zip(shape, half, strict=True)], 4 * columns)


def node_moments_binning_each(bin_one, G: int, k: int, shape, stencils: list, exps, n_y: int):
    """:func:`node_moments` with the offset sums binned one ``b`` at a time, on demand.

    ``bin_one(b)`` returns ``c_b`` and, for ``b < n_y``, its ``k`` target
    sums below it: (1 + k, G) or (1, G).  One pass over the data per ``b``,
    one convolution per pair, and only the moments held: for grids where the
    offset sums would not fit next to them.
    """
    return _per_stencil(bin_one, len(exps), G, k, shape, stencils, _pairs(exps, n_y), n_y)


def sums_fit(shape: tuple[int, ...], columns: int) -> bool:
    """Whether the offset sums fit next to the moments (two grids per column)."""
    return grid_fits(shape, 2 * columns)


def _per_stencil(rows_of, P, G, k, shape, stencils, pairs, n_y):
    """:func:`node_moments` one pair at a time (a convolution each): small temporaries.

    ``rows_of(b)`` gives the sums of ``b`` as :func:`node_moments_binning_each`
    describes.  By direct scatters where the data occupies few nodes, else
    by :func:`~skl_nw._engine._binned_convolve.convolve` (transforms, or a direct
    convolution for a stencil of a few nodes).
    """
    M, B, error = np.zeros((P, G)), np.zeros((n_y, k, G)), np.zeros(P)
    rounding = _FFT_ROUNDING * np.finfo(float).eps * np.log2(max(2 * G, 2))
    for b in sorted({pair[1] for pair in pairs}):
        rows = rows_of(b)
        scale = np.abs(rows[0]).sum()
        for a, _, e, c in (pair for pair in pairs if pair[1] == b):
            S, fft = convolve_sparse(rows if a < n_y else rows[:1], shape, stencils[e])
            M[a] += c * S[0]
            if a < n_y:
                B[a] += c * S[1:]
            if fft:
                error[a] += c * rounding * _peak(stencils[e]) * scale
    return M, B, error


def _peak(T) -> float:
    """Largest ``|value|`` of a stencil (a list of factors: the product of theirs)."""
    return float(np.prod([np.abs(f).max() for f in T]) if isinstance(T, list) else np.abs(T).max())


def _stencil_spectrum(T, size: list[int]) -> np.ndarray:
    """``rfftn`` of the stencil wrapped around a grid of ``size`` (centre at the origin)."""
    if not isinstance(T, list):
        wrapped = np.zeros(size)
        half = [n // 2 for n in T.shape]
        wrapped[np.ix_(*[np.arange(-L, L + 1) % P for L, P in zip(half, size, strict=True)])] = T
        return scipy.fft.rfftn(wrapped)
    out = np.ones(1)
    for axis, (factor, P) in enumerate(zip(T, size, strict=True)):
        wrapped = np.zeros(P)
        wrapped[np.arange(-(len(factor) // 2), len(factor) // 2 + 1) % P] = factor
        last = axis == len(size) - 1
        line = scipy.fft.rfft(wrapped) if last else scipy.fft.fft(wrapped)
        out = out[..., None] * line  # the outer product, axis by axis
    return out


def _spectrum_factors(stencils: list, size: list[int]):
    """Return the stencils' spectra as factors over the axes (P, d, longest), their lengths.

    A stencil given as factors (:func:`moment_stencils`) keeps them: the
    transform of each (complex along all axes but the last, real along the
    last); a ``d``-dimensional one is one factor, its flattened ``rfftn``.
    """
    if not isinstance(stencils[0], list):
        spectra = [_stencil_spectrum(T, size).reshape(1, -1) for T in stencils]
        return np.stack(spectra), np.array([spectra[0].shape[1]], np.int64)
    lengths = [*size[:-1], size[-1] // 2 + 1]
    factors = np.zeros((len(stencils), len(size), max(lengths)), complex)
    for e, T in enumerate(stencils):
        for j, (factor, P) in enumerate(zip(T, size, strict=True)):
            wrapped = np.zeros(P)
            wrapped[np.arange(-(len(factor) // 2), len(factor) // 2 + 1) % P] = factor
            line = scipy.fft.rfft(wrapped) if j == len(size) - 1 else scipy.fft.fft(wrapped)
            factors[e, j, : len(line)] = line
    return factors, np.array(lengths, np.int64)


def _spectral(plain, targets, shape, stencils, pairs, n_y):
    """:func:`node_moments` in the frequency domain: the pairs summed between the transforms.

    The sums are laid out ``[c_b, c_b y_1 .. c_b y_k]`` for each ``b`` with
    target moments, then the plain ``c_b`` of the others, so that what each
    pair multiplies is a slice (no copies of spectra).
    """
    (P, G), k, d = plain.shape, targets.shape[1], len(shape)
    T0 = stencils[0]
    half = [len(f) // 2 for f in T0] if isinstance(T0, list) else [n // 2 for n in T0.shape]
    size = [scipy.fft.next_fast_len(n + L, real=True) for n, L in zip(shape, half, strict=True)]
    axes, crop = tuple(range(1, d + 1)), (slice(None), *[slice(0, n) for n in shape])
    padded = np.zeros((P + n_y * k, *size))
    start = [b * (1 + k) if b < n_y else n_y * k + b for b in range(P)]
    for b in range(P):  # no concatenated copy: on some systems fresh pages cost more than the copy
        padded[(start[b], *crop[1:])] = plain[b].reshape(shape)
        for o in range(k if b < n_y else 0):
            padded[(start[b] + 1 + o, *crop[1:])] = targets[b, o].reshape(shape)
    scale = np.array([np.abs(row).sum() for row in plain])  # row by row: small temporaries
    spectra = scipy.fft.rfftn(padded, axes=axes, overwrite_x=True)
    del padded
    rounding = _FFT_ROUNDING * np.finfo(float).eps * np.log2(max(np.prod(size), 2))
    error = np.zeros(P)
    for t, b, e, c in pairs:
        error[t] += c * rounding * _peak(stencils[e]) * scale[b]
    width = [1 + k if a < n_y else 1 for a in range(P)]
    M, B = np.empty((P, G)), np.empty((n_y, k, G))
    for a, o, out in _inverse(spectra, stencils, pairs, start, width, size):
        target = M[a] if o == 0 else B[a, o - 1]
        target.reshape(shape)[...] = out[crop[1:]]
    return M, B, error


def _inverse(spectra, stencils, pairs, start, width, size):
    """Yield ``(a, o, inverse transform)`` for column ``o`` of each moment ``a``'s slot.

    The pairs are summed between the transforms.

    Compiled (where numba is available): one pass over the spectra, which
    become the moments' in place, the stencils' spectra formed there from
    their factors (:func:`~skl_nw._engine._compiled_binned.combine_spectra`),
    then one inverse transform per slot.  Else a multiply-add per pair.
    """
    kernels_, P = compiled(), len(start)
    if kernels_ is not None:
        factors, lengths = _spectrum_factors(stencils, size)
        table = np.array([pair[:3] for pair in pairs], np.int64)
        kernels_.combine_spectra(spectra.reshape(len(spectra), -1), factors, lengths, table,
                                 np.array([pair[3] for pair in pairs]),
                                 np.array(start, np.int64), np.array(width, np.int64))  # fmt: skip
        for a in range(P):
            for o in range(width[a]):  # one at a time: temporaries the allocator reuses
                yield a, o, scipy.fft.irfftn(spectra[start[a] + o], s=size)
        return
    kernels = [_stencil_spectrum(T, size) for T in stencils]
    buffer = np.empty((max(width), *spectra.shape[1:]), spectra.dtype)
    for a in range(P):
        total = np.zeros((width[a], *spectra.shape[1:]), spectra.dtype)
        for t, b, e, c in pairs:
            if t == a:
                part = np.multiply(spectra[start[b] : start[b] + width[a]], kernels[e],
                                   out=buffer[: width[a]])  # fmt: skip
                part *= c
                total += part
        for o in range(width[a]):
            yield a, o, scipy.fft.irfftn(total[o], s=size)
