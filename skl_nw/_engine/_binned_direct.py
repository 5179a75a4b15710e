"""Convolutions of the moment stencils, direct where the data occupies few nodes.

An FFT convolution's rounding is relative to the largest values of the whole
output.  The moment stencils ``K(u) u^e`` peak away from their centre (at
``|u| = sqrt(|e|)`` bandwidths for the Gaussian), so where the data spans a
few nodes of an axis (a bandwidth wide against the data, a constant column)
the moments next to the data, of size ``spread^|e|``, drown in rounding of
size ``eps`` times that peak: at 1,000 bandwidths a local quadratic fit lost
every digit.  A direct sum adds only the terms each output is made of, so
each moment keeps its own relative precision, and when the data occupies few
nodes it is also the cheaper one: each nonzero node scatters its stencil.

:func:`convolve_sparse` decides per axis for a stencil that factors over the
axes (the Gaussian: the positions of an axis holding data scatter, line by
line) and once for a ``d``-dimensional stencil (each nonzero node scatters
the whole stencil), by the operation counts below; otherwise it hands over
to :func:`skl_nw._engine._binned_convolve.convolve`.
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from ._binned_convolve import convolve

__all__ = ["convolve_sparse", "sparse_enough"]

# Scatter when (nonzero positions) x (stencil taps) is at most the transform's
# length times its log2: a transform costs a few passes of that many operations,
# a scatter one multiply-add per tap, but numpy's per-node slicing costs more than
# the count says (measured once, see docs/benchmarks.md "Binned path", "Tuned constants").
_SCATTER_PER_FFT_OP = 1.0


def sparse_enough(operations: int, lengths: list[int]) -> bool:
    """Whether ``operations`` multiply-adds cost less than the transforms over ``lengths``."""
    size = float(np.prod([scipy.fft.next_fast_len(n, real=True) for n in lengths]))
    return operations <= _SCATTER_PER_FFT_OP * size * np.log2(max(size, 2.0))


def _scatter_axis(grids: np.ndarray, K: np.ndarray, axis: int, where: np.ndarray) -> np.ndarray:
    """Convolve ``grids`` along ``axis`` with ``K`` ('same'), scattering from ``where``."""
    n, half = grids.shape[axis], len(K) // 2
    out = np.zeros_like(grids)
    for p in where:
        lo, hi = max(p - half, 0), min(p + half + 1, n)
        source = np.take(grids, [p], axis=axis)
        taps = K[lo - p + half : hi - p + half]
        shape = [1] * grids.ndim
        shape[axis] = len(taps)
        index = (slice(None),) * axis + (slice(lo, hi),)
        out[index] += source * taps.reshape(shape)
    return out


def _scatter_nodes(grids: np.ndarray, K: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Convolve ``grids`` (k, *shape) with the ``d``-dimensional ``K`` ('same') from ``nodes``."""
    out = np.zeros_like(grids)
    shape, half = grids.shape[1:], [n // 2 for n in K.shape]
    for node in nodes:
        target, source = [slice(None)], []
        for p, L, n in zip(node, half, shape, strict=True):
            lo, hi = max(p - L, 0), min(p + L + 1, n)
            target.append(slice(lo, hi))
            source.append(slice(lo - p + L, hi - p + L))
        value = grids[(slice(None), *node)].reshape(-1, *[1] * len(shape))
        out[tuple(target)] += value * K[tuple(source)]
    return out


def convolve_sparse(counts: np.ndarray, shape: tuple[int, ...], K):
    """Linear ('same') convolution of each row of ``counts`` (k, G) with the stencil ``K``.

    As :func:`skl_nw._engine._binned_convolve.convolve` (``K`` a ``d``-dimensional
    array or a list of one-dimensional factors; returns the (k, G) sums and
    whether an FFT was used), but by direct scatters from the nonzero
    positions wherever those are few enough to be the cheaper way.
    """
    k = counts.shape[0]
    grids = counts.reshape(k, *shape)
    if not isinstance(K, list):
        nodes = np.argwhere(np.any(grids != 0, axis=0))
        lengths = [n + L // 2 for n, L in zip(shape, K.shape, strict=True)]
        if not sparse_enough(len(nodes) * K.size, lengths):
            return convolve(counts, shape, K)
        return _scatter_nodes(grids, K, nodes).reshape(k, -1), False
    used_fft = False
    for axis, factor in enumerate(K, start=1):
        others = tuple(a for a in range(grids.ndim) if a != axis)
        where = np.flatnonzero(np.any(grids != 0, axis=others))
        if sparse_enough(len(where) * len(factor), [grids.shape[axis] + len(factor) // 2]):
            grids = _scatter_axis(grids, factor, axis, where)
            continue
        moved = np.moveaxis(grids, axis, -1)
        flat = moved.reshape(-1, grids.shape[axis])
        out, fft = convolve(flat, (grids.shape[axis],), [factor])
        used_fft |= fft
        grids = np.moveaxis(out.reshape(moved.shape), -1, axis)
    return np.ascontiguousarray(grids).reshape(k, -1), used_fft
