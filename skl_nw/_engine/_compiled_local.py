"""The local fits' compiled kernel: many small floored Cholesky solves in one pass.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports it), so that
one import decides whether numba serves the engine.  The numpy passes of
``skl_nw._local_fit._floored_solve`` compute the same thing a step at a time
over the whole batch; at r = 3 and 2,000 queries they cost about ten times
this kernel, a tenth of a local-linear fit + predict.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["floored_solve"]


@numba.njit(inline="always")
def _cholesky(R, i, shift, L):  # pragma: no cover - compiled
    """Lower Cholesky factor of ``R[i] - shift I`` into ``L``; False if not positive definite."""
    r = L.shape[0]
    for j in range(r):
        pivot = R[i, j, j] - shift
        for k in range(j):
            pivot -= L[j, k] * L[j, k]
        if not pivot > 0.0:  # NaN too, as LAPACK's test
            return False
        L[j, j] = np.sqrt(pivot)
        for a in range(j + 1, r):
            below = R[i, a, j]
            for k in range(j):
                below -= L[a, k] * L[j, k]
            L[a, j] = below / L[j, j]
    return True


@numba.njit(nogil=True, cache=True)
def floored_solve(R, rhs, floor, ok, out):  # pragma: no cover - compiled
    """``ok[i]`` when ``R[i] - floor I`` is positive definite; then ``out[i] = R[i]^-1 rhs[i]``.

    ``R`` (m, r, r) symmetric, ``rhs`` and ``out`` (m, r, c); the rows of
    ``out`` that are not ``ok`` are left as they are.  The eigenvalue test is
    the factorisation of the shifted matrix; the solve is by the Cholesky
    factor of ``R`` itself, forward and back substitution.
    """
    m, r, c = rhs.shape
    L = np.zeros((r, r))
    for i in range(m):
        ok[i] = _cholesky(R, i, floor, L) and _cholesky(R, i, 0.0, L)
        if not ok[i]:
            continue
        for col in range(c):
            for a in range(r):
                x = rhs[i, a, col]
                for b in range(a):
                    x -= L[a, b] * out[i, b, col]
                out[i, a, col] = x / L[a, a]
            for a in range(r - 1, -1, -1):
                x = out[i, a, col]
                for b in range(a + 1, r):
                    x -= L[b, a] * out[i, b, col]
                out[i, a, col] = x / L[a, a]
