"""Local polynomial fits from kernel moment sums: the monomial basis, moment shifts, the solve.

A local polynomial fit at a query ``q`` is a weighted least-squares problem in
the basis ``phi(t)`` of the monomials ``t^a`` of total degree ``<= p`` in the
centred, bandwidth-scaled offsets ``t = z - q``.  Everything it needs is a
kernel-weighted *moment*: the Gram matrix ``G[a, b] = sum_i w_i K_i t_i^(a + b)``
and the right-hand side ``b[a] = sum_i w_i K_i t_i^a y_i``.  The engine sums raw
monomials of the training inputs ``z`` (one :func:`~skl_nw._engine.kernel_sums`
call for every query); :class:`Shift` turns raw moments into moments in ``t``
by the binomial expansion ``(z - q)^g = sum_{e <= g} C(g, e) (-q)^(g - e) z^e``.

The expansion cancels: its terms are of size ``|q|^|g|`` (``q`` measured from
the training mean, in bandwidths), its result of the size of the local spread,
so moments of degree ``k`` carry a relative error of about
``eps (|q| / spread)^k``: ``1e-12`` for a local-linear fit 100 bandwidths from
the mean.

The solve (:func:`solve`) works in the covariance form: with ``phi = [1, psi]``,
weighted means ``mu = E[psi]``, ``ybar = E[y]``, covariance ``C = Cov(psi)`` and
``c = Cov(psi, y)``, the slopes are ``beta = C^-1 c`` and the fitted value at
``q`` (``t = 0``) is ``ybar - mu . beta``.  A degenerate local design is
regularised toward the local-constant (Nadaraya–Watson) fit, see :func:`solve`.
"""

from __future__ import annotations

import functools
from itertools import combinations_with_replacement
from math import comb

import numpy as np

__all__ = ["DEAD_VARIANCE", "EIGEN_FLOOR", "Shift", "exponents", "monomials", "solve"]

# Eigenvalues of the local correlation matrix of the basis are raised to this floor:
# a ridge along nearly collinear directions only (condition number <= P / 1e-8).
EIGEN_FLOOR = 1e-8
# A basis function whose local variance is below this share of its second moments
# (rounding noise of the moment expansion) is constant over the neighbourhood.
DEAD_VARIANCE = 1e-10


@functools.cache
def exponents(d: int, degree: int) -> np.ndarray:
    """Exponents of the monomials of total degree ``<= degree`` in ``d`` variables: (P, d).

    Graded order (degree 0, then 1 in feature order, then 2, ...), so the
    basis of a lower degree is a prefix of that of a higher one.
    """
    rows = [
        np.bincount(np.array(combo, dtype=np.intp), minlength=d)
        for k in range(degree + 1)
        for combo in combinations_with_replacement(range(d), k)
    ]
    out = np.array(rows, dtype=np.intp).reshape(-1, d)
    out.flags.writeable = False
    return out


@functools.cache
def _index(d: int, degree: int) -> dict:
    return {tuple(e): i for i, e in enumerate(exponents(d, degree))}


def position(d: int, degree: int, exps: np.ndarray) -> np.ndarray:
    """Index of each exponent vector (rows of ``exps``) in ``exponents(d, degree)``."""
    index = _index(d, degree)
    return np.array([index[tuple(e)] for e in np.asarray(exps).reshape(-1, d)], dtype=np.intp)


def monomials(Z: np.ndarray, degree: int) -> np.ndarray:
    """``Z^a`` for every exponent of ``exponents(d, degree)``: (n, P).

    Each column is its parent's (one degree lower) times one feature.
    """
    n, d = Z.shape
    exps = exponents(d, degree)
    out = np.empty((n, len(exps)))
    out[:, 0] = 1.0
    for i in range(1, len(exps)):
        j = int(np.flatnonzero(exps[i])[0])
        parent = exps[i].copy()
        parent[j] -= 1
        out[:, i] = out[:, position(d, degree, parent)[0]] * Z[:, j]
    return out


class Shift:
    """Raw moments ``E[z^g]`` -> moments ``E[(z - q)^g]`` about each query (binomial expansion).

    Parameters
    ----------
    d : int
        Number of features.
    degree : int
        Highest total degree of the moments.
    """

    def __init__(self, d: int, degree: int):
        exps = exponents(d, degree)
        target, source, offset, coef = [], [], [], []
        for g, eg in enumerate(exps):
            for e, ee in enumerate(exps):
                if np.all(ee <= eg):
                    target.append(g)
                    source.append(e)
                    offset.append(position(d, degree, eg - ee)[0])
                    pairs = zip(eg, ee, strict=True)
                    coef.append(np.prod([comb(int(a), int(b)) for a, b in pairs]))
        self.d, self.degree, self.size = d, degree, len(exps)
        self.source = np.array(source, dtype=np.intp)
        self.offset = np.array(offset, dtype=np.intp)
        self.coef = np.array(coef, dtype=np.float64)
        # Pairs are grouped by target, in order: one reduceat sums each group.
        self.starts = np.searchsorted(np.array(target), np.arange(len(exps)))
        self.pairs = len(target)

    def __call__(self, M: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Shift ``M`` of shape (m, P, ...) (raw moments) to moments about ``q`` (m, d)."""
        powers = monomials(-q, self.degree)[:, self.offset] * self.coef
        terms = M[:, self.source] * powers.reshape(powers.shape + (1,) * (M.ndim - 2))
        return np.add.reduceat(terms, self.starts, axis=1)


def gram_index(d: int, degree: int) -> np.ndarray:
    """Index of ``t^(a + b)`` in ``exponents(d, 2 * degree)`` for basis pair (a, b): (P, P)."""
    exps = exponents(d, degree)
    total = exps[:, None, :] + exps[None, :, :]
    return position(d, 2 * degree, total.reshape(-1, d)).reshape(len(exps), len(exps))


def solve(G: np.ndarray, b: np.ndarray, noise: np.ndarray):
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

    Returns
    -------
    coef : ndarray of shape (m, P, k)
        Local coefficients about the query: ``coef[:, 0]`` is the fitted value
        at the query, ``coef[:, 1:]`` the slopes.
    a : ndarray of shape (m, P)
        ``G^-1 e_1``, the intercept's row of the (regularised) inverse:
        ``coef[:, 0] = a . b``.

    Notes
    -----
    The covariance ``C`` is scaled to unit diagonal (a correlation matrix)
    and diagonalised.  Eigenvalues below ``EIGEN_FLOOR`` are raised to it: a
    ridge along nearly collinear directions only, which shrinks the slopes
    along them toward 0 and leaves a well-posed problem untouched.  A basis
    function whose variance is below ``DEAD_VARIANCE`` times ``noise`` (it is
    constant over the neighbourhood: one neighbour, neighbours on a line for a
    slope across it) gets a zero slope.  With every slope zero the fit is the
    weighted mean, the Nadaraya–Watson value; the result is always finite.
    """
    mu = G[:, 1:, 0]
    ybar = b[:, 0]
    C = G[:, 1:, 1:] - mu[:, :, None] * mu[:, None, :]
    c = b[:, 1:] - mu[:, :, None] * ybar[:, None, :]
    var = np.diagonal(C, axis1=1, axis2=2)
    live = var > DEAD_VARIANCE * noise
    s = np.sqrt(np.where(live, var, 1.0))
    R = C / (s[:, :, None] * s[:, None, :])
    both = live[:, :, None] & live[:, None, :]
    R = np.where(both, R, 0.0)
    eye = np.eye(R.shape[1], dtype=bool)
    R[:, eye] = np.where(live, np.diagonal(R, axis1=1, axis2=2), 1.0)
    lam, V = np.linalg.eigh(R)
    inv = (V / np.maximum(lam, EIGEN_FLOOR)[:, None, :]) @ np.swapaxes(V, 1, 2)
    c_s = np.where(live[:, :, None], c / s[:, :, None], 0.0)
    mu_s = np.where(live, mu / s, 0.0)
    beta = (inv @ c_s) / s[:, :, None]
    a_psi = -np.einsum("mab,mb->ma", inv, mu_s) / s
    coef = np.empty_like(b)
    coef[:, 1:] = beta
    coef[:, 0] = ybar - np.einsum("ma,mak->mk", mu, beta)
    a = np.empty(G.shape[:2])
    a[:, 1:] = a_psi
    a[:, 0] = 1.0 - np.einsum("ma,ma->m", mu, a_psi)
    return coef, a


def npar(d: int, degree: int) -> int:
    """Return the number of monomials of total degree ``<= degree`` in ``d`` variables."""
    return comb(d + degree, degree)
