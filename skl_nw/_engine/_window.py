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

import numpy as np

from . import _dense
from ._chunks import Options, budget, map_chunks
from ._loader import compiled

__all__ = ["applies", "window_sums"]

# Queries per compiled call (each worker thread takes whole chunks).
_CHUNK = 4096


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

    def block(chunk, Qc):
        by_x = np.argsort(Qc[:, 0], kind="stable")  # neighbouring windows stay in the cache
        q, r = np.ascontiguousarray(Qc[by_x, 0]), plan.scale[chunk][by_x]
        lo = np.searchsorted(x, q - r, side="left").astype(np.int64)
        hi = np.searchsorted(x, q + r, side="right").astype(np.int64)
        skip = np.full(len(q), -1, np.int64) if own is None else own[chunk][by_x]
        out = np.empty((len(q), 2, C))
        kernels.window_sums(x, WVT, q, r, lo, hi, skip, a, b, squares, out)
        out[by_x] = out.copy()
        return out

    workers, _ = budget(options)
    out = np.concatenate(map_chunks(block, Q, train, _CHUNK, workers, None, rows) or
                         [np.empty((0, 2, C))])  # fmt: skip
    powers = [0 if p == 1 else 1 for p in plan.powers]
    scaled = out[:, powers][:, None, :, None, :]  # (m, F=1, P, G=1, C)
    if (scaled[..., -1] < _dense.UNDERFLOW).any():
        return None
    lw_max = float(train.log_w[np.isfinite(train.log_w)].max(initial=0.0))
    log_scale = np.full((m, 1, len(powers), 1), lw_max)
    return np.zeros((m, 1)), log_scale, np.ascontiguousarray(scaled)
