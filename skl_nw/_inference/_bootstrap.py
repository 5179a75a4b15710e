"""Wild bootstrap-t intervals and sup-t bands of a linear smoother, and their t quantiles.

A linear smoother predicts ``m_hat(q) = sum_i l_i(q) y_i`` (attention weights,
or a local polynomial's equivalent kernel).  Everything here takes a callable
``weights(Q) -> (m, n)`` dense array of the ``l_i`` of a few queries (columns
in training order) and works by chunks of queries, so that no
``n_queries x n_train`` matrix outgrows scikit-learn's ``working_memory``.

The bootstrap (Härdle & Marron 1991's wild bootstrap, studentised as in
Hall 1992 and nprobust's sup-t bands, Calonico, Cattaneo & Farrell 2019):

* residuals ``e_i = y_i - m_hat(x_i)`` are rescaled to the noise's size,
  ``e~_i = e_i / sqrt(c_i)`` with ``c_i = 1 - 2 H_ii + sum_j H_ij^2`` the
  variance of a residual per unit noise variance (the smoother shrinks them:
  HC3-like, but exact for a linear smoother);
* the standard error is the residual sandwich ``se(q)^2 = sum_i l_i(q)^2 e~_i^2``
  (robust to heteroscedasticity);
* ``y*_i = m_hat(x_i) + v_i e~_i``, the bandwidth held fixed: the bootstrap
  fit deviates from its mean by ``sum_i l_i v_i e~_i``, and ``se*`` is the
  sandwich of the residuals of its noise, ``(I - H) e*`` over ``sqrt(c)``
  (those of ``y*`` add ``(I - H) m_hat``, the same in every sample: the
  smoother's bias on ``m_hat``, not noise); the interval is ``m_hat -+ c se`` with ``c`` the
  ``1 - alpha`` quantile of ``|T*| = |m_hat* - E* m_hat*| / se*`` (pointwise)
  or of ``max_q |T*(q)|`` (a simultaneous band).

Sample weights are frequency weights, as everywhere in the package: row ``i``
stands for ``w_i`` copies, each of noise variance ``sigma^2``, so that integer
weights give the standard error of repeated rows.  A copy's residual has
variance ``sigma^2 (1 - 2 H_ii / w_i + sum_j H_ij^2 / w_j)``, and the row's
noise in the sandwich, ``sigma^2 / w_i``, is estimated by ``e_i^2 / D_i``,
``D_i`` ``w_i`` times that factor.  The bootstrap draws one multiplier a row
(the sum of its copies' is of variance ``w_i``), whose rows then have noise
``sigma^2 / w_i`` and residual variance ``sigma^2 c_i / w_i``,
``c_i = 1 - 2 H_ii + w_i sum_j H_ij^2 / w_j``.  ``benchmarks/bench_coverage.py``
measures the coverage.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import t as student_t
from sklearn import get_config

from .._smoothers._base import target_frame
from ._formulas import wild_multipliers

__all__ = ["bootstrap_t", "effective_df", "scaled_residuals", "squared_weight_sums", "t_quantile"]

Weights = Callable[[np.ndarray], np.ndarray]

# A bootstrap residual within this share of the sum of its terms' sizes is rounding.
_ROUNDING = 2.0**8 * np.finfo(np.float64).eps


def _row_chunks(m: int, n: int, copies: int = 2):
    """Slices of at most ``working_memory`` worth of ``copies`` (rows, n) float arrays."""
    rows = max(1, int(get_config()["working_memory"] * 2**20 // (8 * copies * max(n, 1))))
    return (slice(s, min(s + rows, m)) for s in range(0, m, rows))


def _unit_exponent(w: np.ndarray) -> int:
    """``u`` of the weights' unit ``2^u <= max w < 2^(u + 1)``: ``w / 2^u`` is exact, near 1."""
    return int(np.frexp(w.max())[1]) - 1


def _inverse(w: np.ndarray) -> np.ndarray:
    """``1 / w`` with 0 for rows of weight 0 (they take no part)."""
    return np.where(w > 0, 1.0 / np.where(w > 0, w, 1.0), 0.0)


def scaled_residuals(
    weights: Weights, Qtrain: np.ndarray, Y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return residuals rescaled to a row's noise, ``e / sqrt(D)`` (n, k), and ``c`` (n,).

    ``D_i = w_i - 2 H_ii + w_i sum_j H_ij^2 / w_j`` is ``w_i`` times the
    variance of one of row ``i``'s ``w_i`` copies' residual per unit noise
    variance (``H`` the in-sample weights, by chunks of training rows), so
    that integer weights are repeated rows; ``c_i = D_i - (w_i - 1)`` is
    ``w_i`` times the residual variance of a row of noise ``sigma^2 / w_i``
    (the bootstrap's rows).  ``w_i sum_j H_ij^2 / w_j`` is taken in the
    weights' unit (subnormal weights: ``1 / w`` overflowed).  A row whose
    ``D_i`` is 0 or less (its own only neighbour, or a neighbourhood of
    fewer than about two counted observations) has residual 0.
    """
    n = len(Y)
    unit = np.ldexp(w, -_unit_exponent(w))
    fit, c, inv_w = np.empty_like(Y), np.empty(n), _inverse(unit)
    for rows in _row_chunks(n, n):
        H = weights(Qtrain[rows])
        fit[rows] = H @ Y
        own = H[np.arange(H.shape[0]), np.arange(rows.start, rows.stop)]
        c[rows] = 1.0 - 2.0 * own + unit[rows] * ((H**2) @ inv_w)
    D = c + (w - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        E = (Y - fit) / np.sqrt(np.where(D > 0, D, np.inf))[:, None]
    return np.where(np.isfinite(E), E, 0.0), np.maximum(c, 0.0)


def bootstrap_t(
    weights: Weights,
    Q: np.ndarray,
    Qtrain: np.ndarray,
    Y: np.ndarray,
    w: np.ndarray,
    *,
    n_boot: int,
    rng: np.random.RandomState,
    multipliers: str,
    alpha: float,
    simultaneous: bool,
    block_doubles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit, residual-sandwich standard error and critical value of the bootstrap-t.

    Returns
    -------
    fit, se : ndarray of shape (m, k)
        ``sum_i l_i y_i`` and ``sqrt(sum_i l_i^2 e~_i^2 / w_i)``.
    crit : ndarray of shape (m, k), or (k,) when ``simultaneous``
        The ``1 - alpha`` quantile of ``|T*|`` (pointwise) or of its maximum
        over the queries (queries with ``se = 0`` left out of the maximum).
    """
    # About the targets' mid-range: weights sum to 1 only to their rounding (a local
    # polynomial's equivalent kernel: 3e-14), which y + 1e9 would multiply.
    centre = target_frame(Y)[0]
    Y = Y - centre
    E, c = scaled_residuals(weights, Qtrain, Y, w)
    (n, k), m = Y.shape, len(Q)
    root_c = np.sqrt(np.where(c > 0, c, np.inf))[:, None]
    fit, se = np.empty((m, k)), np.empty((m, k))
    stats = [] if not simultaneous else None
    maxima = []
    block = max(1, block_doubles // max(1, n * k))
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        Es = (wild_multipliers(rng, n, b, multipliers)[:, :, None] * E[:, None, :]).reshape(n, -1)
        R = np.empty_like(Es)  # the bootstrap fits' rescaled residuals
        for rows in _row_chunks(n, n, copies=3):
            H = weights(Qtrain[rows])
            R[rows] = Es[rows] - H @ Es
            # A residual within the rounding of its terms is 0 (a fit that takes up the
            # noise exactly: an isolated pair in a compact kernel); its ~1e-17 made
            # T* ~ 1e16, and the interval +-1e12.
            rounding = _ROUNDING * (np.abs(Es[rows]) + np.abs(H) @ np.abs(Es))
            R[rows] = np.where(np.abs(R[rows]) <= rounding, 0.0, R[rows]) / root_c[rows]
        T = np.empty((m, b, k)) if stats is not None else None
        top = np.zeros((b, k))
        for rows in _row_chunks(m, n):
            L = weights(Q[rows])
            L2 = L**2
            if start == 0:
                fit[rows], se[rows] = L @ Y + centre, np.sqrt(L2 @ E**2)
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.abs(L @ Es) / np.sqrt(L2 @ R**2)
            t = np.where(np.isfinite(t), t, 0.0).reshape(-1, b, k)  # se* = 0: no spread
            t = np.where((se[rows] > 0)[:, None, :], t, 0.0)
            top = np.maximum(top, t.max(axis=0, initial=0.0))
            if T is not None:
                T[rows] = t
        maxima.append(top)
        if stats is not None:
            stats.append(T)
    if simultaneous:
        return fit, se, np.quantile(np.concatenate(maxima), 1.0 - alpha, axis=0)
    return fit, se, np.quantile(np.concatenate(stats, axis=1), 1.0 - alpha, axis=1)


def effective_df(factor: np.ndarray, n_params: int) -> np.ndarray:
    """Residual degrees of freedom of each local fit: ``1 / factor - n_params``, at least 1.

    ``factor = sum_i l_i(q)^2 / w_i`` is the fit's variance per unit noise
    variance, and its inverse the effective number of observations of the fit
    (Kish's, for the equivalent kernel: the number of equally weighted points
    with the same variance), less the local parameters.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        df = 1.0 / factor - n_params
    return np.where(np.isfinite(df), np.maximum(df, 1.0), 1.0)


def squared_weight_sums(weights: Weights, Q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_i l_i(q)^2 / w_i`` per query, by chunks of queries (dense or CSR weights).

    Summed in the weights' unit ``2^u`` (subnormal weights: ``1 / w`` overflowed):
    infinite only where the sum itself passes the float range.
    """
    u = _unit_exponent(w)
    inv_w = _inverse(np.ldexp(w, -u))
    out = np.empty(len(Q))
    for rows in _row_chunks(len(Q), len(w), copies=1):
        L = weights(Q[rows])
        out[rows] = L.multiply(L) @ inv_w if hasattr(L, "multiply") else (L**2) @ inv_w
    with np.errstate(over="ignore"):
        return np.ldexp(out, -u)


def t_quantile(alpha: float, df: np.ndarray) -> np.ndarray:
    """``t_{1 - alpha / 2}`` of Student's law with ``df`` degrees of freedom.

    From the upper tail (``isf``): ``1 - alpha / 2`` rounds to 1 below ``alpha``
    of about 2e-16, where ``ppf`` gave an infinite interval.
    """
    return student_t.isf(alpha / 2.0, df)
