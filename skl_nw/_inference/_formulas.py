"""Inference formulas shared by the smoothers: gradients, standard errors, intervals, criteria.

Every function here takes kernel sums (:class:`skl_nw._engine.KernelSums`),
Gram matrices or hat weights and returns arrays: none knows an estimator
class, so a new smoother (local polynomial) reuses them with its own sums.
Notation: ``w_i`` frequency weights, ``K_i = K(u_i(q))``, ``D = sum_i w_i K_i``
the weight sum, ``alpha_i = w_i K_i / D`` the attention weights.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "aicc",
    "concentration",
    "criterion_of_outputs",
    "criterion_parts",
    "gcv",
    "infinite_criterion",
    "local_constant_std",
    "local_residual_variance",
    "negated_criterion",
    "nw_gradient",
    "sandwich_factor",
    "sandwich_variance",
    "wild_multipliers",
]

# Relative accuracy, against the local constant's factor, below which a local
# polynomial's sandwich a' G2 a is rounding (sandwich_factor).
_SANDWICH_RESOLUTION = 1e-6

CRITERIA = ("loo", "aicc", "gcv")
MULTIPLIERS = ("rademacher", "mammen")


def _ratio(sums, t: int, cols: slice | list) -> np.ndarray:
    """``S_t[cols] / D`` (power index ``t`` over the power-1 weight sum): (m, n_cols).

    The per-query ``shift`` cancels; only the log scales of the two powers
    enter, so queries far from every point lose no precision.
    """
    sc = sums.scaled[:, 0, :, 0]  # (m, P, k + 1)
    ls = sums.log_scale[:, 0, :, 0]  # (m, P)
    q = 1 if sums.powers[t] == "ds" else int(sums.powers[t])
    den = sc[:, 0, -1]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        factor = np.exp(ls[:, t] - q * ls[:, 0]) / np.where(den > 0, den, np.nan) ** q
        return sc[:, t][:, cols] * sums.value_scale[cols] * factor[:, None]


def nw_gradient(sums, Qc: np.ndarray, k: int, bandwidth: np.ndarray) -> np.ndarray:
    """Exact gradient of the Nadaraya–Watson ratio in the query: (m, k, d).

    ``sums`` has powers ``(1, "ds")`` and value columns ``[Y (k), X (d), X*Y (d*k)]``
    (``X`` the centred scaled training inputs, ``X*Y`` column ``j * k + c`` =
    ``x_j y_c``); ``Qc`` the centred scaled queries.  With ``s = |q - x|^2`` in
    scaled units, ``dK/dq_j = dK/ds * 2 (q_j - x_j) / h_j`` and

    ``dm/dq_j = (2 / h_j) sum_i alpha'_i (q_j - x_ij) (y_i - m(q))``,

    ``alpha'_i = w_i dK/ds_i / D``, expanded into the raw moments of the sums
    (a cancellation of order ``eps * R^2`` for data ``R`` bandwidths wide).
    """
    m, d = Qc.shape
    fit = _ratio(sums, 0, slice(0, k))  # (m, k)
    A = _ratio(sums, 1, list(range(k)) + [-1])  # sum alpha' y, sum alpha'
    B = _ratio(sums, 1, slice(k, k + d))  # sum alpha' x_j
    C = _ratio(sums, 1, slice(k + d, k + d + d * k)).reshape(m, d, k)  # sum alpha' x_j y
    first = Qc[:, :, None] * (A[:, None, :k] - fit[:, None, :] * A[:, None, k:])
    second = C - fit[:, None, :] * B[:, :, None]
    grad = 2.0 * (first - second) / bandwidth[None, :, None]
    return grad.transpose(0, 2, 1)


def local_constant_std(sums, k: int, y_center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit and pointwise standard error of the local-constant smoother: two (m, k) arrays.

    ``sums`` has powers ``(1, 2)`` and value columns ``[y (k), (y - c)^2 (k)]``
    (``c = y_center``, e.g. the mean, against cancellation).  With the local
    variance ``sigma^2(q) = sum_i alpha_i (y_i - m(q))^2`` (R np's
    local-constant formula),

    ``se(q)^2 = sigma^2(q) sum_i w_i K_i^2 / (sum_i w_i K_i)^2``.

    A query with one effective neighbour has ``sigma^2 = 0``, hence ``se = 0``;
    rounding below 0 is clipped, so finite input gives a finite result (NaN
    only where the fit is NaN: no neighbour and ``fallback="nan"``).
    """
    fit = _ratio(sums, 0, slice(0, k))
    second = _ratio(sums, 0, slice(k, 2 * k))  # sum alpha (y - c)^2
    sigma2 = np.maximum(second - (fit - y_center) ** 2, 0.0)
    concentration = _ratio(sums, 1, [-1])  # sum w K^2 / (sum w K)^2
    return fit, np.sqrt(sigma2 * concentration)


def root_in_unit(x: np.ndarray, unit: int) -> np.ndarray:
    """``sqrt(x 2^-unit)``, exact in the power of two: finite wherever the result is."""
    half, odd = divmod(int(unit), 2)
    return np.ldexp(np.sqrt(np.ldexp(x, -odd)), -half)


def concentration(sums) -> np.ndarray:
    """``sum_i w_i K_i^2 / (sum_i w_i K_i)^2 = sum_i alpha_i^2 / w_i`` per query: (m,).

    ``sums`` has powers ``(1, 2)`` (any value columns): Nadaraya–Watson's
    variance per unit noise variance, the inverse of its effective number of
    attended points.
    """
    return _ratio(sums, 1, [-1])[:, 0]


def sandwich_factor(a: np.ndarray, gram_sq: np.ndarray) -> np.ndarray:
    """Return ``a' G2 a`` per query (clipped at 0): ``sum_i l_i^2 / w_i`` of the equivalent kernel.

    Parameters
    ----------
    a : ndarray of shape (m, p)
        ``G^-1 e1`` of the local problem solved (``G`` normalised by the
        weight sum ``D = sum w K``), so that the weight of point ``i`` is
        ``l_i = w_i K_i phi_i . a / D``.
    gram_sq : ndarray of shape (m, p, p)
        ``X' W2 X / D^2`` with ``W2 = diag(w_i K_i^2)``.

    Returns
    -------
    ndarray of shape (m,)
        The variance of the fit per unit noise variance (``w_i`` repeated rows
        of variance ``sigma^2`` each, hence ``l_i^2 / w_i``).  Where the
        sum's terms are so large against the local constant's ``sum_i alpha_i^2
        / w_i`` that their rounding could exceed ``_SANDWICH_RESOLUTION`` of it
        (a slope resolved only by points of relative weight ``1e-9``, whose
        equivalent kernel amplifies them ``1e8``-fold: the computed value was
        0, 1 or 6 by the order of the rows), that local constant's.
    """
    factor = np.einsum("mi,mij,mj->m", a, gram_sq, a)
    size = np.einsum("mi,mij,mj->m", np.abs(a), np.abs(gram_sq), np.abs(a))
    constant = gram_sq[:, 0, 0]
    resolved = size * np.finfo(float).eps <= _SANDWICH_RESOLUTION * constant
    return np.where(resolved, np.maximum(factor, 0.0), constant)


def sandwich_variance(gram: np.ndarray, gram_sq: np.ndarray, sigma2: np.ndarray) -> np.ndarray:
    """``e1' G^-1 G2 G^-1 e1 * sigma^2`` per query: the variance of a local polynomial fit.

    Parameters
    ----------
    gram : ndarray of shape (m, p, p)
        ``X' W X``, the local design weighted by ``w_i K_i`` (intercept first).
    gram_sq : ndarray of shape (m, p, p)
        ``X' W2 X`` with ``W2 = diag(w_i K_i^2)`` (frequency weights count
        once, as repeated rows would).
    sigma2 : ndarray of shape (m,) or (m, k)
        Local residual variance.

    Returns
    -------
    ndarray of shape of ``sigma2``
        With ``p = 1`` it is the local-constant ``sigma^2 sum w K^2 / (sum w K)^2``.
    """
    # G^-1 e1 by a solve (least squares where G is singular: too few neighbours).
    m, p, _ = gram.shape
    e1 = np.zeros((m, p, 1))
    e1[:, 0] = 1.0
    try:
        a = np.linalg.solve(gram, e1)
    except np.linalg.LinAlgError:
        a = np.stack([np.linalg.lstsq(G, e, rcond=None)[0] for G, e in zip(gram, e1, strict=True)])
    factor = sandwich_factor(a[..., 0], gram_sq)
    return factor.reshape(-1, *([1] * (np.ndim(sigma2) - 1))) * sigma2


def local_residual_variance(
    gram: np.ndarray, cross: np.ndarray, second: np.ndarray, coef: np.ndarray, center: np.ndarray
) -> np.ndarray:
    """Local variance ``sum_i alpha_i (y_i - phi_i . beta)^2`` of a local fit, from moments.

    In the covariance form: with ``phi = [1, psi]``, ``mu = E[psi]``,
    ``C = Cov(psi)``, ``c = Cov(psi, y)`` and the slopes ``b = beta[1:]``
    (``E`` the attention-weighted mean), the residual ``y - ybar - (psi - mu) . b``
    has mean square ``Var(y) - 2 b . c + b' C b``.

    Parameters
    ----------
    gram : ndarray of shape (m, p, p)
        ``E[phi phi']`` about the query.
    cross : ndarray of shape (m, p, k)
        ``E[phi y]``.
    second : ndarray of shape (m, k)
        ``E[(y - center)^2]`` (centred against cancellation).
    coef : ndarray of shape (m, p, k)
        The local coefficients ``beta`` (intercept first).
    center : ndarray of shape (k,)
        The centre of ``second``.

    Returns
    -------
    ndarray of shape (m, k)
        The local variance, clipped at 0 (rounding).  At ``p = 1`` the
        local-constant ``E[(y - ybar)^2]``.
    """
    ybar = cross[:, 0]
    var = second - (ybar - center) ** 2
    if gram.shape[1] > 1:
        mu = gram[:, 1:, 0]
        C = gram[:, 1:, 1:] - mu[:, :, None] * mu[:, None, :]
        cov = cross[:, 1:] - mu[:, :, None] * ybar[:, None, :]
        b = coef[:, 1:]
        var = var - 2.0 * np.einsum("mpk,mpk->mk", b, cov)
        var = var + np.einsum("mpk,mpq,mqk->mk", b, C, b)
    return np.maximum(var, 0.0)


def wild_multipliers(rng: np.random.RandomState, n: int, n_boot: int, kind: str) -> np.ndarray:
    """(n, n_boot) independent wild-bootstrap multipliers of mean 0 and variance 1.

    "rademacher": -1 or 1 with probability 1/2; "mammen": Mammen's two-point
    law, ``-(sqrt 5 - 1) / 2`` with probability ``(sqrt 5 + 1) / (2 sqrt 5)``,
    else ``(sqrt 5 + 1) / 2`` (third moment 1 as well); "gaussian": standard
    normal (fourth moment 3, that of Gaussian noise).
    """
    if kind == "gaussian":
        return rng.standard_normal((n, n_boot))
    u = rng.random_sample((n, n_boot))
    if kind == "rademacher":
        return np.where(u < 0.5, -1.0, 1.0)
    r5 = np.sqrt(5.0)
    return np.where(u < (r5 + 1) / (2 * r5), -(r5 - 1) / 2, (r5 + 1) / 2)


def aicc(sigma2: np.ndarray, trace: np.ndarray, n: float) -> np.ndarray:
    """Hurvich, Simonoff & Tsai (1998): ``log sigma^2 + (1 + tr H / n) / (1 - (tr H + 2) / n)``.

    ``+inf`` where the denominator is not positive (``tr H >= n - 2``) or
    ``sigma^2 = 0`` would give ``-inf`` with a degenerate fit.
    """
    den = 1.0 - (trace + 2.0) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.log(sigma2) + (1.0 + trace / n) / den
    return np.where((den > 0) & (sigma2 > 0) & np.isfinite(value), value, np.inf)


def gcv(sigma2: np.ndarray, trace: np.ndarray, n: float) -> np.ndarray:
    """Generalised cross-validation: ``sigma^2 / (1 - tr H / n)^2`` (+inf where ``tr H >= n``)."""
    den = 1.0 - trace / n
    with np.errstate(divide="ignore", invalid="ignore"):
        value = sigma2 / den**2
    return np.where((den > 0) & np.isfinite(value), value, np.inf)


# Residuals within this many units in the last place of max |y| are rounding, not misfit.
ROUNDING_ULPS = 64


def criterion_parts(
    fits: np.ndarray, hat: np.ndarray, Y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Return what the in-sample criteria are made of: ``sigma^2``, ``tr H`` and ``n``.

    Parameters
    ----------
    fits : ndarray of shape (F, n, k)
        In-sample fitted values per candidate.
    hat : ndarray of shape (F, n)
        Hat diagonal ``H_ii`` per candidate (a point's weight in its own fit,
        its frequency weight included, so ``tr H = sum_i H_ii``).
    Y : ndarray of shape (n, k)
        Targets.
    w : ndarray of shape (n,)
        Frequency weights: ``n = sum w`` and ``sigma^2`` the weighted mean
        squared residual of each output.

    Returns
    -------
    sigma2 : ndarray of shape (F, k)
        Residual variance per output (NaN for a candidate with a NaN fit).
    trace : ndarray of shape (F,)
        Trace of the smoother.
    n : float
        The number of observations.
    """
    n = float(w.sum())
    residual = fits - Y[None]
    # A residual within rounding of the targets is 0: a constant y is fitted exactly in
    # exact arithmetic, and its sigma^2 must not depend on the order of the sums.
    rounding = ROUNDING_ULPS * np.finfo(float).eps * np.abs(Y).max(axis=0, initial=0.0)
    residual = np.where(np.abs(residual) <= rounding, 0.0, residual)
    return np.einsum("fnk,n->fk", residual**2, w) / n, hat.sum(axis=1), n


def criterion_of_outputs(sigma2: np.ndarray, trace: np.ndarray, n: float, criterion: str):
    """Return "aicc" or "gcv" per candidate from ``sigma2`` (F, k) per output and ``trace`` (F,).

    Averaged over the outputs: AICc's ``log sigma^2`` per output (its choice
    then does not depend on their units), GCV of their mean ``sigma^2``.
    """
    if criterion == "aicc":
        return aicc(sigma2, trace[:, None], n).mean(axis=1)
    return gcv(sigma2.mean(axis=1), trace, n)


def negated_criterion(sigma2: np.ndarray, trace: np.ndarray, n: float, criterion: str):
    """Return ``-criterion`` per candidate (higher is better), from :func:`criterion_parts`.

    See :func:`criterion_of_outputs`; ``-inf`` for a candidate with a NaN fit.
    """
    value = criterion_of_outputs(sigma2, trace, n, criterion)
    return np.where(np.isnan(sigma2).any(axis=1), -np.inf, -value)


def infinite_criterion(sigma2: np.ndarray, trace: np.ndarray, n: float, criterion: str) -> str:
    """Say why ``criterion`` is infinite at every candidate, from its parts (an error message).

    AICc is infinite where ``n <= tr(H) + 2`` (no degrees of freedom left)
    or the residual variance is 0 (every point fitted exactly, e.g. a
    constant ``y``); GCV where ``n <= tr(H)``.
    """
    reasons = []
    slack = 2.0 if criterion == "aicc" else 0.0
    full = trace + slack >= n
    if full.any():
        reasons.append(
            f"n = {n:.6g} (the sum of the sample weights) <= tr(H){' + 2' if slack else ''} "
            f"for {int(full.sum())} of {len(trace)} candidates (smallest tr(H) "
            f"{np.nanmin(trace):.4g}: too few observations for the smoother's degrees "
            "of freedom)"
        )
    exact = (sigma2 == 0).any(axis=1)
    if criterion == "aicc" and exact.any():
        reasons.append(
            f"the residual variance is 0 for {int(exact.sum())} of {len(sigma2)} candidates "
            "(every point fitted exactly, as with a constant y: log(0) = -inf is no score)"
        )
    if np.isnan(sigma2).any():
        reasons.append(f"{int(np.isnan(sigma2).any(axis=1).sum())} candidates have a NaN fit")
    return (
        f"criterion={criterion!r} is infinite for every candidate bandwidth: "
        + "; ".join(reasons)
        + ". Use criterion='loo', or more (and varied) data."
    )
