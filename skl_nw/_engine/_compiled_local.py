"""The local fits' compiled kernel: moment shift and floored solve, query by query, in one pass.

Loaded through :mod:`skl_nw._engine._compiled` (which re-exports it), so that
one import decides whether numba serves the engine.  It computes what
``skl_nw._engine._local_fit._fit_block`` computes with numpy a step at a time over a
block of queries (the binomial shift of the raw moments, the covariance form,
the dead-variance test, the eigenvalue floor and the degree lowering: see
``skl_nw._engine._local_fit.solve``).  It takes under half the numpy steps' time,
most of it the two scalar Cholesky factorisations and the indexed shift terms
(measured once, see docs/benchmarks.md "Local polynomial", "Tuned constants").
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["local_example", "local_fit"]


@numba.njit(inline="always")
def _cholesky(R, r, shift, L, inv):  # pragma: no cover - compiled
    """Cholesky factor of ``R[:r, :r] - shift I`` into ``L`` (``inv``: 1 / its diagonal).

    False if not positive definite (a pivot ``<= 0`` or NaN, as LAPACK's test).
    """
    for j in range(r):
        pivot = R[j, j] - shift
        for k in range(j):
            pivot -= L[j, k] * L[j, k]
        if not pivot > 0.0:
            return False
        L[j, j] = np.sqrt(pivot)
        inv[j] = 1.0 / L[j, j]
        for a in range(j + 1, r):
            below = R[a, j]
            for k in range(j):
                below -= L[a, k] * L[j, k]
            L[a, j] = below * inv[j]
    return True


@numba.njit(inline="always")
def _substitute(L, inv, r, rhs, out):  # pragma: no cover - compiled
    """``out[:r] = (L L')^-1 rhs[:r]``: forward, then back substitution, column by column."""
    for col in range(rhs.shape[1]):
        for a in range(r):
            x = rhs[a, col]
            for b in range(a):
                x -= L[a, b] * out[b, col]
            out[a, col] = x * inv[a]
        for a in range(r - 1, -1, -1):
            x = out[a, col]
            for b in range(a + 1, r):
                x -= L[b, a] * out[b, col]
            out[a, col] = x * inv[a]


@numba.njit(inline="always")
def _shift(raw, i, mono, source, offset, coef, starts, out):  # pragma: no cover - compiled
    """``out[i, g] = sum raw[i, source] (-q)^offset coef`` over the pairs of ``g`` (``Shift``).

    The pairs come sorted by target ``g``, those of ``g`` in ``starts[g]:starts[g + 1]``.
    """
    for c in range(out.shape[2]):
        for g in range(out.shape[1]):
            total = 0.0
            for p in range(starts[g], starts[g + 1]):
                total += raw[i, source[p], c] * (mono[offset[p]] * coef[p])
            out[i, g, c] = total


@numba.njit(inline="always")
def _correlation(Mq, Bq, M, i, mono, gram, noise_terms, dead, R, rhs, ms, live):  # pragma: no cover
    """Fill ``R``, ``rhs = [c / s, mu / s]``, ``ms = [mu, s]`` and ``live`` of query ``i``.

    ``noise_terms = (diag, rounding, extra)``: the variance along column
    ``a`` is dead below ``dead`` times ``Mq + rounding (M + q^2a) + extra``
    at ``diag[a]`` (``extra`` (m, r), or (1, r) for every query).
    """
    diag, rounding, extra = noise_terms
    r, k = gram.shape[0] - 1, Bq.shape[2]
    row = i if extra.shape[0] > 1 else 0
    for a in range(r):
        mu = Mq[i, gram[a + 1, 0], 0]
        var = Mq[i, gram[a + 1, a + 1], 0] - mu * mu
        noise = Mq[i, diag[a], 0] + rounding * (M[i, diag[a], 0] + mono[diag[a]]) + extra[row, a]
        live[a] = var > dead * noise
        ms[a, 0], ms[a, 1] = mu, np.sqrt(var) if live[a] else 1.0
    for a in range(r):
        for b in range(r):
            C = Mq[i, gram[a + 1, b + 1], 0] - ms[a, 0] * ms[b, 0]
            both = live[a] and live[b]
            R[a, b] = 1.0 if a == b else (C / (ms[a, 1] * ms[b, 1]) if both else 0.0)
        for c in range(k):
            centred = Bq[i, a + 1, c] - ms[a, 0] * Bq[i, 0, c]
            rhs[a, c] = centred / ms[a, 1] if live[a] else 0.0
        rhs[a, k] = ms[a, 0] / ms[a, 1] if live[a] else 0.0


@numba.njit(nogil=True, cache=True)
def local_fit(  # pragma: no cover - compiled
    M, B, q, parents, shift, yshift, basis, floor, dead, coef, a, Mq, Bq, rounding, extra
):
    """Local coefficients from raw moments, query by query (``_local_fit.fit_local``).

    ``M`` (m, P2, 1) and ``B`` (m, Py, k) raw moments, ``q`` (m, d) the
    queries; ``parents`` (parent, feature) build the monomials of ``-q`` of
    every moment's degree, ``shift`` and ``yshift`` are the (source, offset,
    coef, starts) pairs of :class:`~skl_nw._engine._local_fit.Shift`, ``basis`` the
    Gram index (P, P), its diagonal past the intercept and the basis sizes
    per degree.  Fills ``coef`` (m, P, k), ``a`` (m, P), ``Mq`` (m, P2, 1) and
    ``Bq`` (m, Py, k); the degree at a query is the highest whose correlation
    matrix has no eigenvalue below ``floor`` (0: the weighted mean), a
    column dead where its variance is below ``dead`` times the noise level
    ``Mq + rounding (M + q^2a) + extra`` (``rounding`` 1 and ``extra`` 0 on
    the exact path; the binned fits' moments carry more).  The
    tuples are unpacked once: numba counts references to each array taken
    out of one, and atomic counts per query cost more than the fit.
    """
    parent, feature = parents
    source, offset, pcoef, starts = shift
    ysource, yoffset, ycoef, ystarts = yshift
    gram, diag, sizes = basis
    r, k = gram.shape[0] - 1, B.shape[2]
    w = max(r, 1)
    mono = np.empty(parent.size + 1)
    R, L, rhs, sol = np.eye(w), np.zeros((w, w)), np.zeros((w, k + 1)), np.zeros((w, k + 1))
    ms, live, inv = np.ones((w, 2)), np.zeros(w, np.bool_), np.ones(w)
    for i in range(q.shape[0]):
        mono[0] = 1.0
        for t in range(parent.size):
            mono[t + 1] = mono[parent[t]] * -q[i, feature[t]]
        _shift(M, i, mono, source, offset, pcoef, starts, Mq)
        _shift(B, i, mono, ysource, yoffset, ycoef, ystarts, Bq)
        _correlation(Mq, Bq, M, i, mono, gram, (diag, rounding, extra), dead, R, rhs, ms, live)
        solved = 0
        for j in range(sizes.size - 1, 0, -1):  # the highest degree first
            size = sizes[j] - 1
            if _cholesky(R, size, floor, L, inv) and _cholesky(R, size, 0.0, L, inv):
                _substitute(L, inv, size, rhs, sol)
                solved = size
                break
        a[i, 0] = 1.0
        for c in range(k):
            coef[i, 0, c] = Bq[i, 0, c]
        for t in range(a.shape[1] - 1):
            a[i, t + 1] = -sol[t, k] / ms[t, 1] if t < solved else 0.0
            a[i, 0] -= ms[t, 0] * a[i, t + 1]
            for c in range(k):
                coef[i, t + 1, c] = sol[t, c] / ms[t, 1] if t < solved else 0.0
                coef[i, 0, c] -= ms[t, 0] * coef[i, t + 1, c]


def local_example() -> tuple:
    """Return arguments of :func:`local_fit`: a one-query problem (see ``_compiled.examples``)."""
    cube, one, zero = np.ones((1, 1, 1)), np.ones(1, np.int64), np.zeros(1, np.int64)
    pairs = [(zero, zero, np.ones(1), np.array(starts, np.int64)) for starts in ([0, 1, 1], [0, 1])]
    basis = (np.zeros((1, 1), np.int64), zero[:0], one)
    return (np.ones((1, 2, 1)), cube, np.zeros((1, 1)), (zero, zero), *pairs, basis, 0.5,
            1e-10, cube.copy(), np.ones((1, 1)), np.empty((1, 2, 1)), cube.copy(), 1.0,
            np.zeros((1, 0)))  # fmt: skip
