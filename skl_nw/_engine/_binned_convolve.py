"""The binned path's convolution: the kernel's stencil on the grid and its sums over it.

:func:`stencil` samples the kernel on the grid's offsets (one factor per axis
for the Gaussian, whose kernel is a product); :func:`convolve` sums the node
counts against it, directly for a stencil of a few nodes and by ``scipy.fft``
real transforms beyond, one axis at a time for a product stencil, in blocks
of lines that need no temporaries of the grid's size.  :func:`check_grid_size`
bounds every grid the path allocates.
"""

from __future__ import annotations

import numpy as np
import scipy.fft
from scipy import ndimage

from .._kernels import Kernel

__all__ = ["GridSizeError", "check_grid_size", "convolve", "grid_fits", "stencil", "stencil_at"]

# Direct convolution when the stencil has at most this many nodes: its time grows
# with the stencil, the FFT's does not, and they cross between 33 and 65 nodes; see
# ``python -m benchmarks binned`` (its direct-against-FFT table).
_DIRECT_MAX_TAPS = 32
# Values per block of lines in the one-axis-at-a-time FFT (4 MiB of float64).
_FFT_BLOCK_VALUES = 1 << 19
# Largest grid (nodes times value columns, padded) the path allocates: 2 GiB of float64.
_MAX_GRID_VALUES = 1 << 28


class GridSizeError(MemoryError):
    """A binned grid would pass the path's limit (raised before it is allocated)."""


def grid_fits(shape, columns: int) -> bool:
    """Whether a grid of ``shape`` with ``columns`` values a node is within the path's limit."""
    return bool(_grid_values(shape, columns) <= _MAX_GRID_VALUES)  # not for inf or NaN nodes


def _grid_values(shape, columns: int) -> float:
    return float(np.prod(np.array(shape, dtype=float))) * columns


def check_grid_size(shape, columns: int) -> None:
    """Raise a :class:`GridSizeError` naming ``binned_tol`` for a grid over the path's limit."""
    if grid_fits(shape, columns):
        return
    need, nodes = _grid_values(shape, columns), " x ".join(f"{float(s):.0f}" for s in shape)
    raise GridSizeError(
        f"The binned grid would hold {need:.3g} values ({nodes} nodes, {columns} "
        f"column(s)), more than the limit of {_MAX_GRID_VALUES:.3g}: pass a larger "
        "binned_tol or a larger bandwidth, or use an exact algorithm."
    )


def stencil(kernel: Kernel, step: np.ndarray, radius: float, factor: float = 1.0, power: int = 1):
    """Sample the kernel at bandwidth ``factor`` on the grid offsets within ``radius * factor``.

    Returns the ``d``-dimensional stencil over the box of offsets or, for a
    kernel whose profile factors over the axes (``log K = c s``, the
    Gaussian), the list of its ``d`` one-dimensional factors: the stencil is
    their outer product, and it convolves one axis at a time.  ``power=2``
    samples ``K^2`` (the sums of standard errors).
    """
    half = [int(np.ceil(radius * factor / s)) for s in step]
    offsets = [np.arange(-L, L + 1) * s / factor for L, s in zip(half, step, strict=True)]
    if kernel.log_slope is not None:  # K(u) = prod_a K(u_a) exactly
        return [kernel.profile(u**2) ** power for u in offsets]
    axes = np.meshgrid(*offsets, indexing="ij")
    return kernel.profile(sum(a**2 for a in axes)) ** power


def stencil_at(K, offset) -> float:
    """Return the stencil's value at a node offset from its centre: ``K[centre + offset]``."""
    if isinstance(K, list):
        return float(np.prod([k[len(k) // 2 + e] for k, e in zip(K, offset, strict=True)]))
    return float(K[tuple(np.array(K.shape) // 2 + np.asarray(offset))])


def convolve(counts: np.ndarray, shape: tuple[int, ...], K):
    """Linear ('same') convolution of each row of ``counts`` (k, G) with the stencil ``K``.

    ``K`` as :func:`stencil` returns it: a ``d``-dimensional array, or a list
    of one-dimensional factors (one axis at a time).  Returns the (k, G) sums
    and whether an FFT was used.
    """
    k = counts.shape[0]
    grids = counts.reshape(k, *shape)
    if isinstance(K, list):
        out, used_fft = np.empty_like(grids), False
        for axis, factor in enumerate(K, start=1):  # the first pass reads counts, then in place
            used_fft |= _convolve_axis(grids if axis == 1 else out, factor, axis, out)
        return out.reshape(k, -1), used_fft
    if K.size <= _DIRECT_MAX_TAPS:
        out = np.stack([ndimage.convolve(g, K, mode="constant", cval=0.0) for g in grids])
        return out.reshape(k, -1), False
    half = [n // 2 for n in K.shape]
    size = [scipy.fft.next_fast_len(n + L, real=True) for n, L in zip(shape, half, strict=True)]
    check_grid_size(size, k + 1)
    wrapped = np.zeros(size)
    wrapped[np.ix_(*[np.arange(-L, L + 1) % P for L, P in zip(half, size, strict=True)])] = K
    axes = tuple(range(1, len(shape) + 1))
    padded = np.zeros((k, *size))
    padded[(slice(None), *[slice(0, n) for n in shape])] = grids
    spectrum = scipy.fft.rfftn(padded, axes=axes, overwrite_x=True)
    spectrum *= scipy.fft.rfftn(wrapped)
    out = scipy.fft.irfftn(spectrum, s=size, axes=axes)
    return out[(slice(None), *[slice(0, n) for n in shape])].reshape(k, -1), True


def _convolve_axis(grids: np.ndarray, K: np.ndarray, axis: int, out: np.ndarray) -> bool:
    """Convolve ``grids`` along ``axis`` with the 1-D stencil ``K`` into ``out``; whether by FFT.

    ``out`` may be ``grids`` itself.  The FFT runs on blocks of lines (a few
    MiB each, zero-padded to the transform's length): no temporaries of the
    grid's size, whose first touch costs more than the transforms.
    """
    if K.size <= _DIRECT_MAX_TAPS:
        out[...] = ndimage.convolve1d(grids, K, axis=axis, mode="constant", cval=0.0)
        return False
    n, half = grids.shape[axis], K.size // 2
    size = scipy.fft.next_fast_len(n + half, real=True)
    wrapped = np.zeros(size)
    wrapped[np.arange(-half, half + 1) % size] = K
    spectrum_of_K = scipy.fft.rfft(wrapped).reshape([-1 if a == axis else 1
                                                     for a in range(grids.ndim)])  # fmt: skip
    for block in _blocks(grids.shape, axis, size):
        padded = _padded(grids[block], axis, size)
        spectrum = scipy.fft.rfft(padded, axis=axis, overwrite_x=True)
        spectrum *= spectrum_of_K
        lines = scipy.fft.irfft(spectrum, n=size, axis=axis, overwrite_x=True)
        out[block] = lines[(slice(None),) * axis + (slice(0, n),)]
    return True


def _blocks(shape: tuple[int, ...], axis: int, size: int):
    """Yield index tuples that cut an array of ``shape`` into blocks of whole lines along ``axis``.

    The cut runs along another axis (the first grid axis, or the column axis
    0 in 1-D), so that each block, padded to ``size`` along ``axis``, holds
    about ``_FFT_BLOCK_VALUES`` values.
    """
    cut = next((a for a in range(1, len(shape)) if a != axis), 0)
    per_slice = size * int(np.prod(shape)) // (shape[axis] * shape[cut])
    step = max(1, _FFT_BLOCK_VALUES // max(per_slice, 1))
    for start in range(0, shape[cut], step):
        yield (slice(None),) * cut + (slice(start, start + step),)


def _padded(block: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Return ``block`` zero-padded at the end of ``axis`` to ``size`` (a new array).

    Done here rather than by the transforms' own ``n`` argument: scipy's
    padding copy is some 4 times slower (measured on 2 x 2549 x 2475).
    """
    shape = list(block.shape)
    shape[axis] = size
    out = np.zeros(shape)
    out[(slice(None),) * axis + (slice(0, block.shape[axis]),)] = block
    return out
