"""A float32 screen before the exact pass, measured against the tiled kernels (not in the package).

``python -m benchmarks screen`` times it beside the engine's register-tiled
kernels.  A Gaussian weight ``exp(L)`` more than ``T = log n + SKIP_BELOW``
below its row's largest adds less than ``n e^-T = e^-40`` (eps / 50) of the
row's sum, so the sums without it are the full sums to rounding; at d = 32
and h = 0.5 on standard normal data 88% of the pairs are such.
:func:`exp_screened` finds them from float32 log weights (the folded dot
product of ``_folded.FoldedKeys`` in the tiles of ``_compiled_tiled``, twice
the lanes of float64), skipping a pair only when its screened value lies
below the row's largest by more than ``T`` plus twice the screen's rounding
bound (:func:`margins`); the kept pairs get their exact log weight from direct
differences in float64 (as ``exp_diff_tiled``), then the exponential and the
sums.  It lost to the tiled kernels at every d measured (docs/benchmarks.md,
"Dense engine"), so the engine has none.
"""

from __future__ import annotations

import numba
import numpy as np

from skl_nw._engine._compiled_exp import _FAST, _exp_nonpositive
from skl_nw._engine._compiled_tiled import _BLOCK, _TILE, _dot_block, _group_rows

# Query rows screened together: each block of training points (float32) serves the
# group's tiles while in L1, and the group's screened log weights, (rows, n) float32,
# stay in L2 (16 x 20,000 x 4 bytes = 1.3 MB; 32 and 64 rows measured no faster).
_ROWS = 16


@numba.njit(inline="always", fastmath=_FAST)
def _screen_group(P, KT, tiles, A, T, top):  # pragma: no cover - compiled
    """``T[r, j]``: the group's screened log weights (float32); ``top[r]``: each row's largest."""
    n = KT.shape[1]
    top[:] = -np.inf
    for j0 in range(0, n, _BLOCK):
        jb = min(_BLOCK, n - j0)
        for s in range(0, tiles * _TILE, _TILE):
            _dot_block(P[s : s + _TILE], KT, j0, jb, A)
            for r in range(_TILE):
                a, t, best = A[r], T[s + r, j0 : j0 + jb], top[s + r]
                for j in range(jb):
                    t[j] = a[j]
                    best = max(best, a[j])
                top[s + r] = best


@numba.njit(inline="always", fastmath=_FAST)
def _survivors(t, floor, keep):  # pragma: no cover - compiled
    """Write the indices ``j`` with ``t[j] >= floor`` to ``keep``; return their number."""
    count = 0
    for j in range(t.size):  # branch-free: the kept pairs are too irregular to predict
        keep[count] = j
        count += t[j] >= floor
    return count


@numba.njit(inline="always", fastmath=_FAST)
def _exact_row(q, X, slope, off, keep, count, L):  # pragma: no cover - compiled
    """``L[k] = slope |q - X[keep[k]]|^2 + off[keep[k]]`` by direct differences."""
    for k in range(count):
        j = keep[k]
        x = X[j]
        s = 0.0
        for f in range(x.size):
            v = q[f] - x[f]
            s += v * v
        L[k] = slope * s + off[j]


@numba.njit(inline="always", fastmath=_FAST)
def _row_sums(L, keep, count, VT, out_row):  # pragma: no cover - compiled
    """``out_row = [sum_k e_k VT[:, keep[k]], sum_k e_k]`` with ``e = exp(L)`` (into ``L``)."""
    den = 0.0
    for k in range(count):
        e = _exp_nonpositive(L[k])
        L[k] = e
        den += e
    for o in range(VT.shape[0]):
        v, num = VT[o], 0.0
        for k in range(count):
            num += L[k] * v[keep[k]]
        out_row[o] = num
    out_row[VT.shape[0]] = den


@numba.njit(nogil=True, fastmath=_FAST)
def exp_screened(P, KT, Q, X, slope, off, margin, VT, out):  # pragma: no cover - compiled
    """``exp_diff_tiled``'s sums over the pairs the screen keeps; return their number.

    ``P`` (m, c + 1) and ``KT`` (c + 1, n), float32: the folded queries and
    keys (``_folded.FoldedKeys``, ``c % 4 == 0``) whose product is the screened
    log weight up to a per-row constant.  ``Q`` (m, c) and ``X`` (n, c),
    float64, and ``slope``, ``off``: the exact log weight
    ``slope |Q_i - X_j|^2 + off_j``.  A pair is kept when its screened log
    weight is at least the row's largest less ``margin[i]``.
    """
    m, n = P.shape[0], KT.shape[1]
    A = np.empty((_TILE, _BLOCK), np.float32)
    G, T = np.empty((_ROWS, P.shape[1]), np.float32), np.empty((_ROWS, n), np.float32)
    top, keep, L = np.empty(_ROWS, np.float32), np.empty(n, np.int64), np.empty(n)
    kept = 0
    for g0 in range(0, m, _ROWS):
        tiles = _group_rows(P, g0, G)
        _screen_group(G, KT, tiles, A, T, top)
        for r in range(min(_ROWS, m - g0)):
            i = g0 + r
            low = np.float64(top[r]) - margin[i]  # rounded down to float32:
            count = _survivors(T[r], np.float32(low - abs(low) * 2.0**-22), keep)
            _exact_row(Q[i], X, slope, off, keep, count, L)
            _row_sums(L, keep, count, VT, out[i])
            kept += count
    return kept


@numba.njit(nogil=True, fastmath=_FAST)
def screen_only(P, KT, top_out):  # pragma: no cover - compiled
    """The float32 screen alone: each row's largest screened log weight into ``top_out``."""
    m, n = P.shape[0], KT.shape[1]
    A = np.empty((_TILE, _BLOCK), np.float32)
    G, T = np.empty((_ROWS, P.shape[1]), np.float32), np.empty((_ROWS, n), np.float32)
    top = np.empty(_ROWS, np.float32)
    for g0 in range(0, m, _ROWS):
        tiles = _group_rows(P, g0, G)
        _screen_group(G, KT, tiles, A, T, top)
        for r in range(min(_ROWS, m - g0)):
            top_out[g0 + r] = top[r]


# T = log n + SKIP_BELOW: the skipped pairs add at most e^-40 (eps / 50) of a row's sum.
SKIP_BELOW = 40.0
# A weight e^-1000 below the largest is 0 in float64: lower offsets enter the screen as this.
OFFSET_CLIP = 1000.0
# The screen's inputs stay below this (float32 overflows at 3.4e38; underflow then adds
# at most 1e30 * 2^-149 = 1.4e-15 a product).
_FLOAT32_MAX = 1e30


def margins(Q, X, slope, off):
    """Each row's margin below its largest screened log weight, or None if the screen is unsafe.

    The float32 dot product of ``c + 1`` terms, inputs rounded to float32,
    differs from the exact one by at most ``gamma`` times the sum of its
    terms' magnitudes, ``gamma = (c + 4) u / (1 - (c + 4) u)``, ``u = 2^-24``
    (taken twice over), and those add up to at most
    ``|slope| (|q|^2 + 2 |x|^2) + |off|`` (offsets clipped at
    ``-OFFSET_CLIP``: clipping only raises a screened value).  A pair is
    skipped only below the largest screened value less ``T``, twice the bound
    and 1, which also covers float32's underflow (an absolute ``2^-149`` an
    input, as long as no input exceeds ``_FLOAT32_MAX``).  None where the
    bound exceeds 1 (far from the centre) or an input leaves that range.
    """
    largest = max(2.0 * abs(slope) * np.abs(Q).max(initial=0.0), np.abs(X).max(initial=0.0))
    if largest > _FLOAT32_MAX:
        return None
    gamma = 2.0 * (Q.shape[1] + 4) * 2.0**-24
    x_part = 2.0 * abs(slope) * np.einsum("ij,ij->i", X, X).max(initial=0.0)
    x_part += min(OFFSET_CLIP, float(-off.min(initial=0.0)))
    bound = gamma * (abs(slope) * np.einsum("ij,ij->i", Q, Q) + x_part)
    if bound.max(initial=0.0) > 1.0:
        return None
    return np.log(max(len(X), 1)) + SKIP_BELOW + 2.0 * bound + 1.0


def screened_call(Q, X, slope, off, VT, out, alone=False):
    """Return a call of :func:`exp_screened` on padded ``Q`` (m, c) and ``X`` (n, c), or None.

    ``alone``: a call of the screen alone (:func:`screen_only`).
    """
    margin = margins(Q, X, slope, off)
    if margin is None:
        return None
    last = slope * np.einsum("ij,ij->i", X, X) + np.maximum(off, -OFFSET_CLIP)
    keys = np.ascontiguousarray(np.vstack([X.T, last]), dtype=np.float32)
    P = np.zeros((len(Q), Q.shape[1] + 1), np.float32)
    P[:, :-1] = -2.0 * slope * Q
    if alone:
        return lambda: screen_only(P, keys, np.empty(len(Q), np.float32))
    return lambda: exp_screened(P, keys, Q, X, slope, off, margin, VT, out)
