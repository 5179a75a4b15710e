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

The solve (:func:`skl_nw._local_solve.solve`) works in the covariance form:
with ``phi = [1, psi]``, weighted means ``mu = E[psi]``, ``ybar = E[y]``,
covariance ``C = Cov(psi)`` and ``c = Cov(psi, y)``, the slopes are
``beta = C^-1 c`` and the fitted value at ``q`` (``t = 0``) is
``ybar - mu . beta``.  A degenerate local design is fitted at a lower degree,
down to the local constant (Nadaraya–Watson), see :func:`solve`.
"""

from __future__ import annotations

import functools
from itertools import combinations_with_replacement
from math import comb as _int_comb

import numpy as np
from scipy.special import comb

from ._chunks import single_threaded_blas
from ._loader import compiled
from ._local_solve import (
    DEAD_VARIANCE,
    EIGEN_FLOOR,
    solve,
)
from ._sums import KernelSums

_EPS = np.finfo(np.float64).eps
# A local fit whose moments about the query carry more relative error than this is
# refitted about an origin of its own (_inference/_recentred.py): the solve amplifies
# the moments' error by its condition (30% from 1e-6 in a local quadratic).
LOST_DIGITS = 1e-9

__all__ = [
    "DEAD_VARIANCE",
    "cancelled",
    "EIGEN_FLOOR",
    "Moments",
    "Shift",
    "blocks",
    "exponents",
    "fit_local",
    "fit_local_units",
    "monomials",
    "query_units",
    "shift",
    "solve",
    "to_units",
    "unit_exponents",
    "usable_degree",
]

# Upper bound on the floats of the per-query temporaries of one block of queries
# (moments, their expansion terms, Gram matrices): blocks stay a few tens of MiB.
_BLOCK_FLOATS = 1 << 22
# Floats of the largest temporaries per block of fit_local (see there): 256 KiB, but
# at least 64 queries a block (a wide basis would otherwise be solved query by query).
_FIT_FLOATS = 1 << 15
_FIT_MIN_ROWS = 64


@functools.cache
def exponents(d: int, degree: int) -> np.ndarray:
    """Exponents of the monomials of total degree ``<= degree`` in ``d`` variables: (P, d).

    Graded order (degree 0, then 1 in feature order, then 2, ...), so the
    basis of a lower degree is a prefix of that of a higher one.
    """
    blocks = [np.zeros((1, d), dtype=np.intp)]
    for k in range(1, degree + 1):
        combos = np.array(list(combinations_with_replacement(range(d), k)), dtype=np.intp)
        block = np.zeros((len(combos), d), dtype=np.intp)
        np.add.at(block, (np.arange(len(combos))[:, None], combos), 1)
        blocks.append(block)
    out = np.concatenate(blocks)
    out.flags.writeable = False
    return out


def _keys(exps: np.ndarray) -> np.ndarray:
    """Hash exponent vectors linearly (uint64, wrapping): ``key(a + b) = key(a) + key(b)``."""
    d = exps.shape[-1]
    # Fixed pseudo-random odd multipliers; _sorted_keys checks the keys are distinct.
    mult = np.random.default_rng(20240531).integers(0, 2**63, d, dtype=np.uint64) | np.uint64(1)
    return (exps.astype(np.uint64) * mult).sum(axis=-1, dtype=np.uint64)


@functools.cache
def _sorted_keys(d: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    keys = _keys(exponents(d, degree))
    order = np.argsort(keys)
    if np.any(np.diff(keys[order]) == 0):  # pragma: no cover - a hash collision
        raise RuntimeError(f"monomial keys collide for d={d}, degree={degree}")
    return keys[order], order


def _lookup(d: int, degree: int, keys: np.ndarray) -> np.ndarray:
    """Index in ``exponents(d, degree)`` of the monomials with these keys (all present)."""
    sorted_keys, order = _sorted_keys(d, degree)
    return order[np.searchsorted(sorted_keys, keys)]


def position(d: int, degree: int, exps: np.ndarray) -> np.ndarray:
    """Index of each exponent vector (rows of ``exps``) in ``exponents(d, degree)``."""
    return _lookup(d, degree, _keys(np.asarray(exps)).ravel())


@functools.cache
def _parents(d: int, degree: int) -> list[tuple[slice, np.ndarray, np.ndarray]]:
    """Per total degree ``k >= 1``: its columns, their parents (degree ``k - 1``) and features."""
    exps = exponents(d, degree)
    if d == 0:  # the constant only
        return []
    feature = np.argmax(exps[1:] > 0, axis=1)
    parent = exps[1:].copy()
    parent[np.arange(len(parent)), feature] -= 1
    parent = position(d, degree, parent)
    bounds = np.searchsorted(exps.sum(axis=1), np.arange(degree + 2))
    return [
        (slice(lo, hi), parent[lo - 1 : hi - 1], feature[lo - 1 : hi - 1])
        for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True)
    ]


def monomials(Z: np.ndarray, degree: int) -> np.ndarray:
    """``Z^a`` for every exponent of ``exponents(d, degree)``: (n, P).

    The columns of each degree are those of one degree lower (their parents)
    times one feature each: one product per degree.
    """
    n, d = Z.shape
    out = np.empty((n, npar(d, degree)))
    out[:, 0] = 1.0
    for cols, parent, feature in _parents(d, degree):
        out[:, cols] = out[:, parent] * Z[:, feature]
    return out


@functools.cache
def shift(d: int, degree: int) -> Shift:
    """Return the :class:`Shift` of ``d`` features up to ``degree`` (built once per process)."""
    return Shift(d, degree)


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
        keys, deg = _keys(exps), exps.sum(axis=1)
        bounds = np.searchsorted(deg, np.arange(degree + 2))
        target, source, offset, coef = [], [], [], []
        # Every pair (e, g - e): e of degree a, g - e of degree b <= degree - a.
        for a in range(degree + 1):
            src = np.arange(bounds[a], bounds[a + 1])
            off = np.arange(bounds[degree - a + 1])
            src, off = (x.ravel() for x in np.meshgrid(src, off, indexing="ij"))
            target.append(_lookup(d, degree, keys[src] + keys[off]))
            source.append(src)
            offset.append(off)
            g, e = exps[src] + exps[off], exps[src]
            coef.append(np.prod(comb(g, e), axis=1))
        target = np.concatenate(target)
        order = np.argsort(target, kind="stable")
        self.d, self.degree, self.size = d, degree, len(exps)
        self.source = np.concatenate(source)[order]
        self.offset = np.concatenate(offset)[order]
        self.coef = np.concatenate(coef)[order]
        self.target = target[order]
        self.pairs = len(target)
        # Pairs sorted by target, every target with at least one (g - 0): each target's
        # pairs start at these columns.
        self.starts = np.searchsorted(self.target, np.arange(self.size))

    def matrix(self, q: np.ndarray) -> np.ndarray:
        """``T`` of shape (m, P, P) with ``phi(z - q) = T phi(z)`` at each query."""
        T = np.zeros((len(q), self.size, self.size))
        T[:, self.target, self.source] = monomials(-q, self.degree)[:, self.offset] * self.coef
        return T

    def __call__(self, M: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Shift ``M`` of shape (m, P, ...) (raw moments) to moments about ``q`` (m, d).

        Each pair's term is one product of a raw moment, a power of ``-q`` and a
        binomial coefficient; each target sums its pairs (a segmented sum, no dense
        pair-to-target matrix: at d = 13, degree 4 that would be 27,405 x 2,380).
        """
        powers = monomials(-q, self.degree)[:, self.offset] * self.coef
        extra = (1,) * (M.ndim - 2)
        terms = M[:, self.source] * powers.reshape(*powers.shape, *extra)
        return np.add.reduceat(terms, self.starts, axis=1)


@functools.cache
def gram_index(d: int, degree: int) -> np.ndarray:
    """Index of ``t^(a + b)`` in ``exponents(d, 2 * degree)`` for basis pair (a, b): (P, P)."""
    exps = exponents(d, degree)
    total = exps[:, None, :] + exps[None, :, :]
    return position(d, 2 * degree, total).reshape(len(exps), len(exps))


def npar(d: int, degree: int) -> int:
    """Return the number of monomials of total degree ``<= degree`` in ``d`` variables."""
    return _int_comb(d + degree, degree)


def usable_degree(degree: int, d: int, n_points: int) -> int:
    """Highest degree ``<= degree`` with no more coefficients than ``n_points`` points.

    0 without continuous features (``d = 0``): the local constant.
    """
    degree = degree if d else 0
    while degree > 0 and npar(d, degree) > n_points:
        degree -= 1
    return degree


def blocks(m: int, floats_per_row: int, floats: int = _BLOCK_FLOATS) -> list[slice]:
    """Slices of ``m`` query rows whose temporaries stay within ``floats``."""
    rows = max(1, floats // max(floats_per_row, 1))
    return [slice(s, min(s + rows, m)) for s in range(0, m, rows)]


class Moments:
    """The value columns of one kind of local fit and the moments read back from the sums.

    Plain moments ``E[z^g]`` up to total degree ``top`` and target moments
    ``E[z^g y]`` up to ``ytop`` (``E`` the kernel-weighted mean), in
    bandwidth-scaled units.  A local fit of degree ``p`` needs ``top = 2p``,
    ``ytop = p``; derivatives in the bandwidth need two more of each.

    Parameters
    ----------
    d : int
        Number of features.
    top, ytop : int
        Highest total degree of the plain and of the target moments.
    """

    def __init__(self, d: int, top: int, ytop: int):
        self.d, self.top, self.ytop = d, top, ytop
        self.shift, self.yshift = shift(d, top), shift(d, ytop)
        self.n_plain, self.n_y = npar(d, top), npar(d, ytop)

    def values(self, Z: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Columns ``[z^g (g != 0), y_k z^g]``: (n, n_plain - 1 + n_y * k)."""
        plain = monomials(Z, self.top)[:, 1:]
        ymono = Y[:, None, :] * monomials(Z, self.ytop)[:, :, None]
        return np.column_stack([plain, ymono.reshape(len(Z), -1)])

    @staticmethod
    def columns(sums: KernelSums, f: int, t: int, unit: int = 0) -> np.ndarray:
        """Every column of power index ``t`` over the ``q``-th power of the weight sum.

        ``S_t / D^q`` with ``D = sum w K`` and ``q = 2`` for the power 2 (the
        normalisation of ``sum w K^2 phi phi' / D^2``), else 1; the weight-sum
        column last.  The per-query shift cancels.  ``unit``: the power 2's
        in weights of unit ``2^unit`` (``TrainSet.weight_exponent``), ``2^unit``
        times the plain one, which subnormal weights would overflow.
        """
        sc = sums.scaled[:, f, :, 0]
        total = sc[:, 0, -1]
        q = 2 if sums.powers[t] == 2 else 1
        with np.errstate(invalid="ignore", divide="ignore"):  # 0 / 0: fallback="nan"
            ratio = sc[:, t] / total[:, None] ** q * sums.value_scale
            if t:  # another power: its own log scale
                ls = sums.log_scale[:, f, :, 0]
                shift = (q - 1) * unit * np.log(2.0)
                ratio *= np.exp(ls[:, t] - q * ls[:, 0] + shift)[:, None]
        return ratio

    def read(self, sums: KernelSums, f: int, t: int, k: int, unit: int = 0):
        """Raw moments of power index ``t`` (see :meth:`columns`): (m, P), (m, Py, k)."""
        return self.split(self.columns(sums, f, t, unit), k)

    def split(self, ratio: np.ndarray, k: int):
        """Moments ``M`` (m, P) and ``B`` (m, Py, k) from sums over the weight sum (m, cols + 1).

        The columns of :meth:`values`, the weight-sum column last.
        """
        M = np.empty((len(ratio), self.n_plain))
        M[:, 0] = ratio[:, -1]
        M[:, 1:] = ratio[:, : self.n_plain - 1]
        B = ratio[:, self.n_plain - 1 : self.n_plain - 1 + self.n_y * k]
        return M, B.reshape(len(ratio), self.n_y, k)

    def about(self, M: np.ndarray, B: np.ndarray, q: np.ndarray):
        """Shift raw moments to moments about the queries ``q``."""
        return self.shift(M, q), self.yshift(B, q)

    def rescale(self, M: np.ndarray, B: np.ndarray, factor: float):
        """Moments in units of ``factor`` bandwidths."""
        if factor == 1.0:
            return M, B
        deg = exponents(self.d, self.top).sum(axis=1)
        ydeg = exponents(self.d, self.ytop).sum(axis=1)
        return M / factor**deg, B / factor ** ydeg[:, None]


def fit_local(mom: Moments, M, B, q, degree: int):
    """Local coefficients about ``q`` from raw moments (:func:`solve`): coef, a, Mq, Bq.

    ``coef`` (m, P, k) and ``a = G^-1 e_1`` (m, P) of the problem solved, ``P``
    the size of the basis of ``degree``; ``Mq``, ``Bq`` the moments about ``q``.
    Solved in the units of :func:`fit_local_units`, then brought back to
    bandwidth units: exactly (powers of two), except that terms below the
    float range become 0 and the moments about a query so far away that
    they exceed it become infinite (their callers take in-sample queries).
    """
    coef, a, Mq, Bq, e = fit_local_units(mom, M, B, q, degree)
    basis = unit_exponents(e, mom.d, degree)[:, : a.shape[1]]
    top, ytop = (unit_exponents(e, mom.d, t) for t in (mom.top, mom.ytop))
    with np.errstate(over="ignore"):
        return (
            np.ldexp(coef, -basis[:, :, None]),
            np.ldexp(a, -basis),
            np.ldexp(Mq, top[:, : Mq.shape[1]]),
            np.ldexp(Bq, ytop[:, :, None]),
        )


def cancelled(mom: Moments, Mq: np.ndarray, q: np.ndarray, degree: int) -> tuple:
    """Which queries' moments lost most digits to the expansion, and whether that is known.

    The expansion's terms are of the size of ``|q|^g`` (``q`` from the
    training inputs' centre), its results of ``E|t|^g`` (``t = z - q`` over
    the window): the moments of degree ``2p`` carry a relative error of about
    ``eps (|q|^2 / E|t|^2)^p``, flagged above ``LOST_DIGITS``.  A window
    around ``q`` has ``E|t|^2`` its variance; a query far outside the data,
    about ``|q|^2`` (no loss).  ``resolved``: ``E|t|^2`` kept three digits
    itself, so the flag is sure; otherwise the window may be a single point
    at ``q`` (:func:`skl_nw._engine.lost_digits` then bounds it by the
    kernel's reach).  Both (m,) bool.
    """
    if degree == 0 or mom.d == 0:
        none = np.zeros(len(q), bool)
        return none, none
    second = position(mom.d, mom.top, 2 * np.eye(mom.d, dtype=np.intp))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        near = (Mq[:, second] / Mq[:, :1]).sum(axis=1)  # E|t|^2
        ratio = (q**2).sum(axis=1) / np.maximum(near, np.finfo(float).tiny)
        return _EPS * ratio**degree > LOST_DIGITS, _EPS * ratio < 1e-3


def query_units(q: np.ndarray) -> np.ndarray:
    """Exponents ``e >= 0`` of the units ``2^e <= max(1, |q|)`` of each coordinate: (m, d) int."""
    _, e = np.frexp(np.maximum(np.abs(q), 1.0))
    return e - 1


def unit_exponents(e: np.ndarray, d: int, degree: int) -> np.ndarray:
    """Exponent of the unit of each monomial, ``e . g`` per query and ``g``: (m, npar) int."""
    return e @ exponents(d, degree).T


def to_units(mom: Moments, M: np.ndarray, B: np.ndarray | None, q: np.ndarray, e: np.ndarray):
    """Raw moments and queries in the units ``2^e`` of :func:`query_units`.

    Exact, barring underflow.  ``M`` (m, n_plain), ``B`` (m, n_y, k) or None,
    ``q`` (m, d).
    """
    M = np.ldexp(M, -unit_exponents(e, mom.d, mom.top)[:, : M.shape[1]])
    if B is not None:
        B = np.ldexp(B, -unit_exponents(e, mom.d, mom.ytop)[:, :, None])
    return M, B, np.ldexp(q, -e)


def fit_local_units(mom: Moments, M, B, q, degree: int):
    """:func:`fit_local` in per-query units: coef, a, Mq, Bq and the exponents ``e`` (m, d).

    Scale first, raise to powers later: the moments about ``q`` are
    expanded in powers of ``q`` up to ``2 degree``, which overflow for
    queries ``|q| > 1e308^(1 / (2 degree))`` bandwidths from the training
    mean (``1e77`` at degree 2) although such queries are valid.  In units
    of ``2^e_j ~ |q_j|`` along each feature (:func:`query_units`; 1 where
    ``|q_j| < 2``) every power is at most of order 1, and a feature along
    which the query is far is constant over its neighbourhood, as it is in
    bandwidth units.  The fit at ``q`` (``coef[:, 0]``) is the same; a
    coefficient of the monomial ``t^g`` (of ``coef`` and ``a``) is
    ``2^(e . g)`` times the one in bandwidth units, a moment ``2^(-e . g)``
    times it (:func:`unit_exponents`).  Powers of two scale exactly: near
    queries (``e = 0``) and far ones alike get the bandwidth-unit
    arithmetic, only without overflow.
    """
    e = query_units(q)
    M, B, q = to_units(mom, M, B, q, e)
    return (*_fit_local(mom, M, B, q, degree), e)


def _fit_local(mom: Moments, M, B, q, degree: int):
    """:func:`fit_local` in the given units.

    With numba, one compiled pass query by query
    (``_engine._compiled_local.local_fit``, the same steps).  Otherwise blocks
    of queries whose shift terms fill ``_FIT_FLOATS`` (at least
    ``_FIT_MIN_ROWS`` queries): the temporaries of each (those terms, the Gram
    matrices) are reused by the next from the allocator's free lists.
    Whole-batch temporaries took fresh pages from the OS on every call (a
    local-linear predict at m = 2,000: 500 page faults).  A query with no
    weight (``fallback="nan"``: NaN moments) gets NaN throughout.
    """
    empty = ~(M[:, 0] > 0)
    if empty.any():
        fit = _fit_local(mom, M[~empty], B[~empty], q[~empty], degree)
        out = [np.full((len(q), *part.shape[1:]), np.nan) for part in fit]
        for whole, part in zip(out, fit, strict=True):
            whole[~empty] = part
        return tuple(out)
    if mom.d == 0:  # no continuous feature: the weighted mean, nothing to shift
        return B[:, :1].copy(), np.ones((len(q), 1)), M, B
    kernels = compiled()
    if kernels is not None:
        return _fit_compiled(kernels, mom, M, B, q, degree)
    with single_threaded_blas():  # many small matrices: BLAS threads only spin
        per_row = mom.shift.pairs + mom.yshift.pairs * B.shape[2]
        floats = max(_FIT_FLOATS, _FIT_MIN_ROWS * per_row)
        parts = [
            _fit_block(mom, M[rows], B[rows], q[rows], degree)
            for rows in blocks(len(q), per_row, floats) or [slice(0, 0)]
        ]
    return tuple(np.concatenate(part) for part in zip(*parts, strict=True))


def _fit_block(mom: Moments, M, B, q, degree: int):
    """:func:`fit_local` of one block of queries, with numpy."""
    Mq, Bq = mom.about(M, B, q)
    d = q.shape[1]
    P = npar(d, degree)
    if degree == 0:
        return Bq[:, :1].copy(), np.ones((len(q), 1)), Mq, Bq
    gi, diag, sizes = _basis(d, degree)
    noise = Mq[:, diag] + M[:, diag] + monomials(q, 2 * degree)[:, diag]
    coef, a = solve(Mq[:, gi], Bq[:, :P], noise, sizes.tolist())
    return coef, a, Mq, Bq


def _fit_compiled(kernels, mom: Moments, M, B, q, degree: int, rounding=1.0, extra=None):
    """:func:`fit_local` by the compiled pass (noise level as :func:`solve_about`)."""
    m, P, k = len(q), npar(q.shape[1], degree), B.shape[2]
    coef, a = np.empty((m, P, k)), np.empty((m, P))
    Mq, Bq = np.empty((m, mom.n_plain, 1)), np.empty((m, mom.n_y, k))
    M, B, q = (np.ascontiguousarray(x) for x in (M[:, :, None], B, q))
    tables = _compiled_tables(mom.d, mom.top, mom.ytop, degree)
    extra = np.zeros((1, P - 1)) if extra is None else np.ascontiguousarray(extra, dtype=float)
    kernels.local_fit(M, B, q, *tables, EIGEN_FLOOR, DEAD_VARIANCE, coef, a, Mq, Bq,
                      float(rounding), extra)  # fmt: skip
    return coef, a, Mq[:, :, 0], Bq


def solve_about(mom: Moments, M, B, q, degree: int, rounding: float, extra) -> np.ndarray:
    """Return local coefficients about ``q`` (m, P, k) from moments rounded more than exact sums.

    :func:`solve` after the shift to ``q`` (as :func:`fit_local`, in the
    given units), a column dead where its variance is below
    ``DEAD_VARIANCE`` times ``Mq + rounding (M + q^2a) + extra`` on the
    Gram diagonal (``extra`` (m, P - 1), absolute): the binned local fits'
    moments, summed with other rounding.  Compiled where numba is
    available (one pass), else numpy.
    """
    kernels = compiled()
    if kernels is not None:
        return _fit_compiled(kernels, mom, M, B, q, degree, rounding, extra)[0]
    Mq, Bq = mom.about(M, B, q)
    gi, diag, sizes = _basis(mom.d, degree)
    terms = M[:, diag] + monomials(q, 2 * degree)[:, diag]
    noise = Mq[:, diag] + rounding * terms + extra
    return solve(Mq[:, gi], Bq[:, : npar(mom.d, degree)], noise, sizes.tolist())[0]


@functools.cache
def _compiled_tables(d: int, top: int, ytop: int, degree: int) -> tuple:
    """Return the compiled local fit's index tables: parents, shifts, basis (built once)."""
    if ytop > top:  # pragma: no cover - every Moments has top >= ytop
        raise ValueError(f"the compiled local fit needs top >= ytop; got {top} < {ytop}")
    steps = _parents(d, top)
    parent, feature = (np.array([i for step in steps for i in step[j]], np.int64) for j in (1, 2))
    pairs = [
        (s.source.astype(np.int64), s.offset.astype(np.int64), s.coef.astype(float),
         np.append(s.starts, s.pairs).astype(np.int64))
        for s in (shift(d, top), shift(d, ytop))
    ]  # fmt: skip
    return (parent, feature), *pairs, _basis(d, degree)


@functools.cache
def _basis(d: int, degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the Gram index (P, P), its diagonal past the intercept, the sizes per degree."""
    gi = np.asarray(gram_index(d, degree), np.int64)
    sizes = np.array([npar(d, p) for p in range(degree + 1)], np.int64)
    return gi, np.diagonal(gi)[1:].copy(), sizes
