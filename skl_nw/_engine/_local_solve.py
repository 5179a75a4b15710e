"""The local weighted least-squares solve: the covariance form, the floor, the degree drop.

Split from :mod:`skl_nw._local_fit` (which re-exports it): given the
normalised Gram matrices and right-hand sides of many local problems, solve
each at the highest degree it supports (:func:`solve`), by batched Cholesky
factors that test the eigenvalue floor as they go (:func:`_floored_solve`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEAD_VARIANCE", "EIGEN_FLOOR", "solve"]

# A local problem whose correlation matrix has an eigenvalue below this is solved at a
# lower degree.  The engine's kernel sums carry a relative error of up to ~1e-12 per
# term (its BLAS expansion of the log weights) and a solve amplifies it by up to
# 1 / EIGEN_FLOOR: 1e-4 keeps that below ~1e-8 of the targets' scale.
EIGEN_FLOOR = 1e-4
# A basis function whose local variance is below this share of its second moments
# (rounding noise of the moment expansion) is constant over the neighbourhood.
DEAD_VARIANCE = 1e-10


def _floored_solve(R: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ``R`` (m, r, r) have no eigenvalue below ``EIGEN_FLOOR``, and ``R^-1 rhs`` for them.

    ``R - EIGEN_FLOOR I`` has a Cholesky factor exactly when every eigenvalue
    of ``R`` is above the floor: its factorisation checks each problem, and
    the Cholesky factor of ``R`` solves those that pass.
    """
    m = len(R)
    Rt = np.moveaxis(R, 0, -1)  # (r, r, m): one entry of every problem at a time
    # Both factorisations in one batch (half the vectorised steps).
    L, ok = _cholesky(np.concatenate([Rt - EIGEN_FLOOR * np.eye(R.shape[1])[:, :, None], Rt], 2))
    ok, L = ok[:m], L[..., m:]
    if not ok.all():
        L, rhs = L[..., ok], rhs[ok]
    return ok, np.moveaxis(_substitute(L, np.moveaxis(rhs, 0, -1)), -1, 0)


def _cholesky(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factors of the symmetric ``A`` (r, r, m), and which are positive definite.

    Column by column over the whole batch: about ``r^2 / 2`` vectorised steps,
    where a batched LAPACK call pays a call per problem (at ``r = 3``, 2,000
    problems: a third of the time).  A problem that is not positive definite
    (a pivot ``<= 0`` or NaN, as LAPACK's test) gets a placeholder pivot 1 and
    a meaningless factor.
    """
    r, _, m = A.shape
    L = np.zeros_like(A)
    ok = np.ones(m, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):  # in the meaningless factors
        for j in range(r):
            Lj = L[j, :j]
            pivot = A[j, j] - np.einsum("km,km->m", Lj, Lj)
            ok &= pivot > 0
            L[j, j] = np.sqrt(np.where(pivot > 0, pivot, 1.0))
            below = A[j + 1 :, j] - np.einsum("ikm,km->im", L[j + 1 :, :j], Lj)
            L[j + 1 :, j] = below / L[j, j]
    return L, ok


def _substitute(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve ``L L' x = b`` for the factors ``L`` (r, r, m) and ``b`` (r, c, m): ``x`` (r, c, m)."""
    x = b.copy()
    for i in range(len(L)):
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] /= L[i, i]
    for i in reversed(range(len(L))):
        for j in range(i + 1, len(L)):
            x[i] -= L[j, i] * x[j]
        x[i] /= L[i, i]
    return x


def solve(G: np.ndarray, b: np.ndarray, noise: np.ndarray, sizes: list[int]):
    """Solve the local weighted least-squares problems in the covariance form.

    Parameters
    ----------
    G : ndarray of shape (m, P, P)
        Gram matrices of the basis about each query, normalised by the weight
        sum (``G[:, 0, 0] = 1``).
    b : ndarray of shape (m, P, k)
        Right-hand sides, normalised alike (``b[:, 0] = ybar``).
    noise : ndarray of shape (m, P - 1)
        Size of the terms each basis function's variance was computed from
        (the scale of its rounding error).
    sizes : list of int
        Number of basis functions of degree ``<= p`` for ``p = 0, 1, ...``
        (the graded basis of degree ``p`` is a prefix of the full one).

    Returns
    -------
    coef : ndarray of shape (m, P, k)
        Local coefficients about the query: ``coef[:, 0]`` is the fitted value
        at the query, ``coef[:, 1:]`` the slopes (0 for the terms left out).
    a : ndarray of shape (m, P)
        ``G^-1 e_1`` of the problem solved: ``coef[:, 0] = a . b``.

    Notes
    -----
    A basis function whose local variance is below ``DEAD_VARIANCE`` times
    ``noise`` is constant over the neighbourhood (neighbours on a line, for
    the slope across it) and is left out.  The covariance of the others is
    scaled to unit diagonal (a correlation matrix); each query uses the
    highest degree whose correlation matrix has no eigenvalue below
    ``EIGEN_FLOOR`` (fewer neighbours than coefficients, collinear
    neighbours, one dominant point: the degree drops, down to the weighted
    mean, the Nadaraya–Watson value, at degree 0).  So the solved problems
    are well-conditioned and every result is finite.
    """
    m, P, _ = G.shape
    mu, ybar = G[:, 1:, 0], b[:, 0]
    C = G[:, 1:, 1:] - mu[:, :, None] * mu[:, None, :]
    c = b[:, 1:] - mu[:, :, None] * ybar[:, None, :]
    var = np.diagonal(C, axis1=1, axis2=2)
    live = var > DEAD_VARIANCE * noise
    s = np.sqrt(np.where(live, var, 1.0))
    R = np.where(live[:, :, None] & live[:, None, :], C / (s[:, :, None] * s[:, None, :]), 0.0)
    R[:, np.eye(P - 1, dtype=bool)] = 1.0
    c_s = np.where(live[:, :, None], c / s[:, :, None], 0.0)
    mu_s = np.where(live, mu / s, 0.0)
    beta, a_psi = np.zeros_like(c), np.zeros_like(mu)
    rhs = np.concatenate([c_s, mu_s[:, :, None]], axis=2)
    todo, k = np.arange(m), c.shape[2]
    for size in sizes[:0:-1]:  # the highest degree first
        r = size - 1
        every = len(todo) == m  # no fancy indexing in the usual case
        if every:
            ok, sol = _floored_solve(R[:, :r, :r], rhs[:, :r])
        else:
            ok, sol = _floored_solve(R[todo, :r, :r], rhs[todo, :r])
        rows = slice(None) if every and ok.all() else todo[ok]
        beta[rows, :r] = sol[:, :, :k] / s[rows, :r, None]
        a_psi[rows, :r] = -sol[:, :, k] / s[rows, :r]
        todo = todo[~ok]
    coef = np.empty_like(b)
    coef[:, 1:] = beta
    coef[:, 0] = ybar - (mu[:, :, None] * beta).sum(axis=1)
    a = np.empty((m, P))
    a[:, 1:] = a_psi
    a[:, 0] = 1.0 - (mu * a_psi).sum(axis=1)
    return coef, a
