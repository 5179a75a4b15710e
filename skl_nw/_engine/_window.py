"""The window path: kernel sums with nearest-neighbour radii in one dimension, compiled.

With a span (``_span``) and one continuous feature, the rows within a
query's radius ``r_q`` are a window of the rows sorted by their input: two
binary searches find it, and the compiled loop (``_compiled_window``) sums
``w_i K(|x_i - q| / r_q)^p [V_i, 1]`` over it, for kernels of the form
``(1 - u^a)^b`` (``Kernel.power_form``).  Each pair then costs a few flops
where the tree path builds, gathers and reduces COO entries (measured:
``python -m benchmarks loess``).  It serves ungrouped sums of powers 1 and 2
at the bandwidth itself, with or without a row left out per query; anything
else (and a sum that underflows or is empty: the log-space and ``fallback``
rules) takes the other paths.
"""

from __future__ import annotations

from math import comb

import numpy as np

from . import _dense
from ._chunks import Options, budget, map_chunks
from ._loader import compiled

__all__ = ["applies", "window_sums"]

# Queries per compiled call (each worker thread takes whole chunks).
_CHUNK = 4096
# The block tree's smallest blocks hold 2^_MIN_LEVEL rows: a block costs about as
# many flops as 8 to 16 rows summed one by one (degree 9, five value columns), so
# smaller ones would not pay (python -m benchmarks loess).
_MIN_LEVEL = 4


def _shift_tables(a: int, b: int, squares: bool) -> np.ndarray:
    """``T[p, j, m] = C(j + m, j) c_(j+m)`` for ``(1 - u^a)^b`` (and its square), ``c`` in ``u``.

    ``sum_m T[p, j, m] e^m`` is the ``j``-th Taylor coefficient about ``e`` of
    the kernel's ``p``-th power: (1 or 2, D + 1, D + 1).

    Examples
    --------
    >>> T = _shift_tables(3, 3, False)
    >>> T[0, 0, :].tolist()  # the tricube (1 - u^3)^3 = 1 - 3 u^3 + 3 u^6 - u^9
    [1.0, 0.0, 0.0, -3.0, 0.0, 0.0, 3.0, 0.0, 0.0, -1.0]
    """
    powers = (1, 2) if squares else (1,)
    D = a * b * powers[-1]
    coef = np.zeros((len(powers), D + 1))
    for row, p in enumerate(powers):
        for m in range(b * p + 1):
            coef[row, a * m] = comb(b * p, m) * (-1.0) ** m
    T = np.zeros((len(powers), D + 1, D + 1))
    for j in range(D + 1):
        for m in range(D + 1 - j):
            T[:, j, m] = comb(j + m, j) * coef[:, j + m]
    return T


def applies(plan, Q) -> bool:
    """Whether the window path serves this :func:`kernel_sums` call."""
    train = plan.train
    return (
        plan.scale is not None
        and train.d == 1
        and train.codes is None
        and (Q is None or Q.shape[1] == 1)
        and plan.kernel.power_form is not None
        and plan.groups is None
        and set(plan.powers) <= {1, 2}
        and plan.factors == (1.0,)
        and compiled() is not None
    )


def window_sums(plan, Q, rows, options: Options = Options()):  # noqa: B008
    """``(shift, log_scale, scaled)`` of the sums (``_sums.KernelSums``), or None.

    None where some query's weight sum underflows or is empty: the caller then
    takes the general path, which handles those rows.
    """
    train, index = plan.train, plan.train.neighbour_index
    kernels = compiled()
    position = np.full(train.n_samples, -1, dtype=np.int64)
    position[index.order] = np.arange(len(index.order))
    own = plan.own(slice(None))
    own = None if own is None else position[own]
    w = np.exp(_dense.shifted_log_weights(train.log_w))
    WV = np.column_stack([plan.V, np.ones(train.n_samples)])[index.order] * w[index.order, None]
    WVT = np.ascontiguousarray(WV.T)  # each column contiguous: one dot product per column
    x = index.x
    a, b = plan.kernel.power_form
    squares = 2 in plan.powers
    m = len(plan.scale)
    C = WV.shape[1]

    shifts = _shift_tables(a, b, squares)
    degree = shifts.shape[1] - 1
    tree = None
    width = float(x[-1] - x[0]) if len(x) else 0.0
    if width == 0.0 or np.log10(width) * degree < 290:  # the moments' powers stay finite
        tree = kernels.window_moments(x, WVT, degree, _MIN_LEVEL)

    def block(chunk, Qc):
        by_x = np.argsort(Qc[:, 0], kind="stable")  # neighbouring windows stay in the cache
        q, r = np.ascontiguousarray(Qc[by_x, 0]), plan.scale[chunk][by_x]
        lo = np.searchsorted(x, q - r, side="left").astype(np.int64)
        hi = np.searchsorted(x, q + r, side="right").astype(np.int64)
        skip = np.full(len(q), -1, np.int64) if own is None else own[chunk][by_x]
        out = np.empty((len(q), 2, C))
        if tree is None:
            kernels.window_sums(x, WVT, q, r, lo, hi, skip, a, b, squares, out)
        else:
            kernels.window_tree_sums(x, WVT, *tree, _MIN_LEVEL, q, r, lo, hi, skip, a, b,
                                     shifts, out)  # fmt: skip
        out[by_x] = out.copy()
        return out

    return chunked_sums(block, plan, Q, rows, _CHUNK, (m, C), options)


def chunked_sums(block, plan, Q, rows, chunk: int, shape: tuple, options: Options):
    """Run ``block`` over chunks of the queries; return the sums in the engine's layout.

    ``block(chunk, Qc)`` gives each query's plain and squared-kernel sums,
    ``(len(Qc), 2, C)``; ``shape`` is ``(m, C)``.  Returns ``(shift,
    log_scale, scaled)`` (``_sums.KernelSums``), or None where some query's
    weight sum underflows (the caller then takes the general path).  Shared
    by the window path and the grid path (:mod:`skl_nw._engine._grid`).
    """
    train, (m, C) = plan.train, shape
    workers, _ = budget(options)
    out = np.concatenate(map_chunks(block, Q, train, chunk, workers, None, rows) or
                         [np.empty((0, 2, C))])  # fmt: skip
    powers = [0 if p == 1 else 1 for p in plan.powers]
    scaled = out[:, powers][:, None, :, None, :]  # (m, F=1, P, G=1, C)
    if (scaled[..., -1] < _dense.UNDERFLOW).any():
        return None
    log_scale = np.full((m, 1, len(powers), 1), plan.lw_max)  # the weights' shift
    return np.zeros((m, 1)), log_scale, np.ascontiguousarray(scaled)
