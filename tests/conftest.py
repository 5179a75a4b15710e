"""Shared test helpers: the one naive oracle, written once, straight from the formulas.

Nothing here imports skl_nw.  The reference values of the tests come from
these functions: dense (m, n) matrices of direct differences, linear space
unless a name says otherwise, the leave-one-out point removed by index, and
explicit refits of an estimator (``refit_loo``).
"""

import itertools
import tracemalloc
import zlib

import numpy as np
import pytest
from scipy import integrate
from scipy.special import gammaln, logsumexp
from sklearn.base import clone

# The profiles K(u), u = ||(q - x) / h||, of the issue, written independently of skl_nw._kernels.
PROFILES = {
    "gaussian": lambda u: np.exp(-(u**2) / 2),
    "tophat": lambda u: (u < 1).astype(float),
    "epanechnikov": lambda u: np.maximum(1 - u**2, 0),
    "exponential": lambda u: np.exp(-u),
    "linear": lambda u: np.maximum(1 - u, 0),
    "cosine": lambda u: np.cos(np.pi * u / 2) * (u < 1),
    "tricube": lambda u: np.maximum(1 - u**3, 0) ** 3,
    "biweight": lambda u: np.maximum(1 - u**2, 0) ** 2,
    "triweight": lambda u: np.maximum(1 - u**2, 0) ** 3,
}
# log K(u) of the infinite-support kernels, for sums whose terms underflow.
LOG_PROFILES = {"gaussian": lambda u: -(u**2) / 2, "exponential": lambda u: -u}
ALIASES = {"boxcar": "tophat", "triangular": "linear"}


# dK/ds as functions of s = u^2, written from the profiles above (0 outside the support).
PROFILE_DERIVATIVES = {
    "gaussian": lambda s: -0.5 * np.exp(-s / 2),
    "tophat": lambda s: np.zeros_like(s),
    "epanechnikov": lambda s: -1.0 * (s < 1),
    "exponential": lambda s: -np.exp(-np.sqrt(s)) / (2 * np.sqrt(s)),
    "linear": lambda s: -1.0 / (2 * np.sqrt(s)) * (s < 1),
    "cosine": lambda s: -np.sin(np.pi * np.sqrt(s) / 2) * np.pi / (4 * np.sqrt(s)) * (s < 1),
    "tricube": lambda s: -4.5 * np.sqrt(s) * np.maximum(1 - s**1.5, 0) ** 2,
    "biweight": lambda s: -2 * np.maximum(1 - s, 0),
    "triweight": lambda s: -3 * np.maximum(1 - s, 0) ** 2,
}


def naive_moment_sums(X_train, X_query, bandwidth, kernel, power, V, sample_weight=None):
    """``sum_i w_i K(u_i)^p [V_i, 1]`` per query (``p = "ds"``: ``dK/ds``, 0 at ``s = 0``)."""
    name = ALIASES.get(kernel, kernel)
    s = scaled_distances(X_train, X_query, bandwidth) ** 2
    if power == "ds":
        with np.errstate(divide="ignore", invalid="ignore"):
            K = np.where(s == 0, 0.0, PROFILE_DERIVATIVES[name](s))
    else:
        K = PROFILES[name](np.sqrt(s)) ** power
    w = np.ones(len(X_train)) if sample_weight is None else np.asarray(sample_weight, float)
    E = K * w[None, :]
    return np.column_stack([E @ V, E.sum(axis=1)])


def naive_local_poly(
    X_train, y_train, X_query, bandwidth, kernel="gaussian", degree=1, sample_weight=None
):
    """Local polynomial fit by dense weighted least squares, one ``lstsq`` per query.

    At each query ``q`` the design holds every monomial of total degree
    ``<= degree`` of ``t = (x_i - q) / h`` and the weights are
    ``w_i K(||t_i||)``; returns the intercepts (m,) or (m, k) and the
    gradients ``coef[t_j] / h_j``, (m, d) or (m, k, d).  Points of zero weight
    are dropped first (an underdetermined system is the caller's concern).
    """
    y, Y, h, w, problems = _local_problems(X_train, y_train, X_query, bandwidth, kernel, degree,
                                        sample_weight)  # fmt: skip
    d = len(h)
    pred, grad = [], []
    for W, keep, Phi in problems:
        root = np.sqrt(W[keep])[:, None]
        coef = np.linalg.lstsq(Phi * root, Y[keep] * root, rcond=None)[0]
        pred.append(coef[0])
        grad.append(coef[1 : d + 1].T / h if degree >= 1 else np.full((Y.shape[1], d), np.nan))
    pred, grad = np.array(pred), np.array(grad)
    return (pred[:, 0], grad[:, 0]) if y.ndim == 1 else (pred, grad)


def naive_local_poly_std(
    X_train, y_train, X_query, bandwidth, kernel="gaussian", degree=1, sample_weight=None
):
    """Local polynomial fits and standard errors from the equivalent kernel, dense.

    At each query the weighted least-squares problem of ``naive_local_poly``
    (design ``Phi`` of the monomials of ``t = (x - q) / h``, weights
    ``W = w K``, points of zero weight dropped) is solved by the pseudo-inverse
    ``A = (Phi' W Phi)^+``: coefficients ``beta = A Phi' W y``, hat row
    ``l = e1' A Phi' W``.  The local variance is
    ``sigma^2 = sum_i W_i (y_i - Phi_i beta)^2 / sum_i W_i`` and
    ``se^2 = sigma^2 sum_i l_i^2 / w_i`` (a weight ``w_i`` is ``w_i`` repeated
    rows, each of noise variance ``sigma^2``).  At degree 0 (Nadaraya–Watson)
    the standard errors are :func:`naive_std`'s (the variance about a local
    line).  Returns the fits and standard errors, each (m,) for 1-D y or (m, k).
    """
    y, Y, h, w, problems = _local_problems(X_train, y_train, X_query, bandwidth, kernel, degree,
                                        sample_weight)  # fmt: skip
    fits, ses = [], []
    for W, keep, Phi in problems:
        A = np.linalg.pinv(Phi.T @ (W[keep, None] * Phi))
        beta = A @ Phi.T @ (W[keep, None] * Y[keep])
        hat = (A @ Phi.T * W[keep])[0]
        sigma2 = W[keep] @ (Y[keep] - Phi @ beta) ** 2 / W[keep].sum()
        fits.append(hat @ Y[keep])
        ses.append(np.sqrt(sigma2 * (hat**2 / w[keep]).sum()))
    fits, ses = np.array(fits), np.array(ses)
    if degree == 0:
        ses = naive_std(X_train, Y, X_query, bandwidth, kernel, sample_weight)
    return (fits[:, 0], ses[:, 0]) if y.ndim == 1 else (fits, ses)


def naive_local_poly_loo(X, y, bandwidth, kernel="gaussian", degree=1, sample_weight=None):
    """Leave-one-out ``naive_local_poly`` at every training row, the row removed by index."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    w = None if sample_weight is None else np.asarray(sample_weight, float)
    out = []
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        pred, _ = naive_local_poly(
            X[keep], y[keep], X[i : i + 1], bandwidth, kernel, degree,
            None if w is None else w[keep],
        )  # fmt: skip
        out.append(pred[0])
    return np.array(out)


def log_weights(w):
    """``log w`` with ``log 0 = -inf`` (no warning): sample weights in log space."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(w, dtype=float))


def onehot(y, classes):
    """(n, k) indicator matrix: 1.0 where ``y[i] == classes[c]``."""
    return (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(float)


def scaled_distances(X_train, X_query, bandwidth):
    """Dense (m, n) ``u = ||(q - x_i) / h||``, by direct differences (exact at any offset).

    ``bandwidth`` is a scalar or one value per feature.
    """
    X_train = np.asarray(X_train, float)
    X_query = np.asarray(X_query, float)
    h = np.broadcast_to(np.asarray(bandwidth, float), (X_train.shape[1],))
    return np.sqrt((((X_query[:, None, :] - X_train[None, :, :]) / h) ** 2).sum(-1))


def naive_weights(X_train, X_query, bandwidth, kernel, sample_weight=None):
    """Dense (m, n) attention weights ``w_i K(u_i) / sum_j w_j K(u_j)``, in linear space.

    Only valid where the kernel sums do not underflow (moderate bandwidths); a
    query with no point inside a compact support gets a row of NaN (0 / 0).
    """
    K = PROFILES[ALIASES.get(kernel, kernel)](scaled_distances(X_train, X_query, bandwidth))
    if sample_weight is not None:
        K = K * np.asarray(sample_weight, float)[None, :]
    return K / K.sum(axis=1, keepdims=True)


def naive_predict(X_train, y_train, X_query, bandwidth, kernel="gaussian", sample_weight=None):
    """Nadaraya–Watson prediction ``sum_i alpha_i y_i`` with the weights of ``naive_weights``."""
    return naive_weights(X_train, X_query, bandwidth, kernel, sample_weight) @ np.asarray(
        y_train, float
    )


def softmax_weights(X_train, X_query, bandwidth, kernel, sample_weight=None):
    """The weights of ``naive_weights`` as a softmax of ``log w_i + log K(u_i)``.

    Infinite-support kernels only (``LOG_PROFILES``); exact where the linear-space
    formula gives 0 / 0 (queries many bandwidths from every training point).
    """
    logits = LOG_PROFILES[kernel](scaled_distances(X_train, X_query, bandwidth))
    if sample_weight is not None:
        logits = log_weights(sample_weight)[None, :] + logits
    return np.exp(logits - logsumexp(logits, axis=1, keepdims=True))


def nearest_weights(X_train, X_query, bandwidth=1.0, sample_weight=None):
    """The h -> 0 limit of the weights, i.e. a compact kernel's nearest-point fallback.

    Each row shares the weight among the positive-weight training point(s)
    nearest to the query (in ``u``), in proportion to their sample weights.
    """
    u = scaled_distances(X_train, X_query, bandwidth)
    w = np.ones(u.shape[1]) if sample_weight is None else np.asarray(sample_weight, float)
    u[:, w == 0] = np.inf
    W = np.where(u == u.min(axis=1, keepdims=True), w[None, :], 0.0)
    return W / W.sum(axis=1, keepdims=True)


def naive_loo_weights(X, bandwidth, kernel="gaussian", sample_weight=None):
    """Dense (n, n) leave-one-out weights: row i is ``naive_weights`` of ``x_i`` without row i.

    The point is removed by its index (a zero diagonal), never by its zero
    distance: an exact duplicate of ``x_i`` keeps its weight.
    """
    K = PROFILES[ALIASES.get(kernel, kernel)](scaled_distances(X, X, bandwidth))
    if sample_weight is not None:
        K = K * np.asarray(sample_weight, float)[None, :]
    np.fill_diagonal(K, 0.0)
    return K / K.sum(axis=1, keepdims=True)


def naive_loo_predict(X, y, bandwidth, kernel="gaussian", sample_weight=None):
    """Leave-one-out Nadaraya–Watson predictions with the weights of ``naive_loo_weights``."""
    return naive_loo_weights(X, bandwidth, kernel, sample_weight) @ np.asarray(y, float)


def naive_class_proba(
    X_train,
    y_train,
    X_query,
    bandwidth,
    kernel="gaussian",
    sample_weight=None,
    classes=None,
    priors=None,
):
    """Parzen class probabilities ``p_c ∝ pi_c sum_{y_i = c} w_i K(u_i) / W_c``, linear space.

    ``W_c`` is the total weight of class c; with the empirical priors
    ``pi_c = W_c / W`` (``priors=None``) this is ``naive_weights @ onehot(y)``.
    ``classes`` defaults to the sorted labels.
    """
    classes = np.unique(y_train) if classes is None else classes
    Y = onehot(y_train, classes)
    P = naive_weights(X_train, X_query, bandwidth, kernel, sample_weight) @ Y
    if priors is None:
        return P
    w = np.ones(len(Y)) if sample_weight is None else np.asarray(sample_weight, float)
    P = P * (np.asarray(priors, float) / (w @ Y))
    return P / P.sum(axis=1, keepdims=True)


def naive_log_class_proba(
    X_train,
    y_train,
    X_query,
    bandwidth,
    kernel="gaussian",
    sample_weight=None,
    classes=None,
    priors=None,
):
    """``log naive_class_proba`` in log space: finite where a class's linear sum underflows.

    Per class, the log-sum-exp of ``log w_i + log K(u_i)`` (infinite-support
    kernels only, ``LOG_PROFILES``), plus ``log pi_c - log W_c`` with priors.
    """
    y_train = np.asarray(y_train)
    classes = np.unique(y_train) if classes is None else np.asarray(classes)
    w = np.ones(len(y_train)) if sample_weight is None else np.asarray(sample_weight, float)
    u = scaled_distances(X_train, X_query, bandwidth)
    a = log_weights(w)[None, :] + LOG_PROFILES[kernel](u)
    L = np.column_stack([logsumexp(a[:, y_train == c], axis=1) for c in classes])
    if priors is not None:
        W = np.array([w[y_train == c].sum() for c in classes])
        L = L + np.log(priors) - np.log(W)
    return L - logsumexp(L, axis=1, keepdims=True)


def naive_std(X_train, y_train, X_query, bandwidth, kernel="gaussian", sample_weight=None):
    """Nadaraya–Watson's standard error ``sqrt(sigma^2(q) sum_i alpha_i^2 / w_i)``, dense.

    ``sigma^2(q)`` the normalised weighted residual sum of squares about the
    kernel-weighted least-squares line at ``q`` (Fan & Gijbels 1996):
    ``sum_i alpha_i r_i^2 / (1 - tr(G^-1 G2))``, ``G = Phi' diag(alpha) Phi``,
    ``G2 = Phi' diag(alpha^2 / w) Phi``, ``Phi = [1, X - q]``; one
    ``np.linalg.lstsq`` per query.  ``y_train`` 1-D or 2-D (one standard error
    per column); every neighbourhood must carry a line (``d + 1`` points off
    a hyperplane).
    """
    X_train, X_query = np.asarray(X_train, float), np.asarray(X_query, float)
    K = PROFILES[ALIASES.get(kernel, kernel)](scaled_distances(X_train, X_query, bandwidth))
    w = np.ones(len(X_train)) if sample_weight is None else np.asarray(sample_weight, float)
    y = np.asarray(y_train, float).reshape(len(X_train), -1)
    se = np.empty((len(X_query), y.shape[1]))
    for r, q in enumerate(X_query):
        alpha = K[r] * w / (K[r] @ w)
        Phi = np.column_stack([np.ones(len(X_train)), X_train - q])
        root = np.sqrt(alpha)[:, None]
        beta = np.linalg.lstsq(root * Phi, root * y, rcond=None)[0]
        rss = alpha @ (y - Phi @ beta) ** 2
        G, G2 = Phi.T @ (alpha[:, None] * Phi), Phi.T @ ((alpha**2 / w)[:, None] * Phi)
        sigma2 = rss / (1.0 - np.trace(np.linalg.solve(G, G2)))
        se[r] = np.sqrt(sigma2 * (alpha**2 / w).sum())
    return se[:, 0] if np.ndim(y_train) == 1 else se


def robust_line_residuals(X, y, sample_weight=None, steps=2):
    """``y`` less its robust weighted least-squares line in ``X``, dense (1-D ``y``).

    As documented for the noise variance: the weighted least-squares line,
    refitted ``steps`` times with the sample weights times bisquare weights
    ``(1 - (r / 6 median|r|)^2)_+^2`` (the lower median, weighted by the sample
    weights); ``np.linalg.lstsq`` on the root-weighted design.
    """
    X, y = np.asarray(X, float), np.asarray(y, float)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    Phi = np.column_stack([np.ones(len(y)), X])
    weight = w
    for step in range(steps + 1):
        root = np.sqrt(weight)
        r = y - Phi @ np.linalg.lstsq(root[:, None] * Phi, root * y, rcond=None)[0]
        a, v = np.abs(r)[w > 0], w[w > 0]
        order = np.argsort(a, kind="stable")
        share = np.cumsum(v[order])
        s = 6 * a[order][np.argmax(share >= share[-1] / 2)]
        if step == steps or s == 0:
            return r
        weight = w * np.clip(1 - (r / s) ** 2, 0, None) ** 2


def naive_gradient(X_train, y_train, X_query, bandwidth, kernel="gaussian", sample_weight=None):
    """(m, d) gradient in the query of the Nadaraya–Watson ratio, 1-D y, dense.

    ``dK_i/dq_j = dK/ds (s_i) * 2 (q_j - x_ij) / h_j^2`` (``s = u^2``), and
    ``dm/dq_j = sum_i w_i dK_i/dq_j (y_i - m) / sum_i w_i K_i``.
    """
    name = ALIASES.get(kernel, kernel)
    X_train, X_query = np.asarray(X_train, float), np.asarray(X_query, float)
    h = np.broadcast_to(np.asarray(bandwidth, float), (X_train.shape[1],))
    s = scaled_distances(X_train, X_query, h) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        dK = np.where(s == 0, 0.0, PROFILE_DERIVATIVES[name](s))
    K = PROFILES[name](np.sqrt(s))
    w = np.ones(len(X_train)) if sample_weight is None else np.asarray(sample_weight, float)
    y = np.asarray(y_train, float)
    D = K @ w
    m = (K * w) @ y / D
    diff = X_query[:, None, :] - X_train[None, :, :]  # (m, n, d)
    dKdq = dK[:, :, None] * 2 * diff / h**2
    r = (y[None, :] - m[:, None]) * w[None, :]
    return np.einsum("mnd,mn->md", dKdq, r) / D[:, None]


def naive_local_linear(X_train, y_train, X_query, bandwidth, kernel="gaussian"):
    """Local linear fits and their hat rows ``l(q) = e1' (Z'WZ)^-1 Z'W``, by dense solves.

    Returns the fits (m,), the hat rows (m, n), and the Gram matrices
    ``Z'WZ`` and ``Z'W^2Z`` (m, p, p), ``Z = [1, x - q]``, ``W = diag K``.
    """
    X_train, X_query = np.asarray(X_train, float), np.asarray(X_query, float)
    K = PROFILES[ALIASES.get(kernel, kernel)](scaled_distances(X_train, X_query, bandwidth))
    fits, rows, G1, G2 = [], [], [], []
    for q, k in zip(X_query, K, strict=True):
        Z = np.column_stack([np.ones(len(X_train)), X_train - q])
        A = Z.T @ (k[:, None] * Z)
        row = np.linalg.solve(A, (k[:, None] * Z).T)[0]
        rows.append(row)
        fits.append(row @ y_train)
        G1.append(A)
        G2.append(Z.T @ (k[:, None] ** 2 * Z))
    return np.array(fits), np.array(rows), np.array(G1), np.array(G2)


def naive_log_density(X_train, X_query, bandwidth, kernel, sample_weight=None):
    """Weighted kernel density ``log sum_i w_i K(u_i) / (W prod h_j) / int K``, dense.

    ``int K`` over R^d is the radial integral ``|S^(d-1)| int_0^R K(r) r^(d-1) dr``
    (numerical quadrature of ``PROFILES``); infinite-support kernels in log space.
    """
    name = ALIASES.get(kernel, kernel)
    X_train = np.asarray(X_train, float)
    d = X_train.shape[1]
    h = np.broadcast_to(np.asarray(bandwidth, float), (d,))
    w = np.ones(len(X_train)) if sample_weight is None else np.asarray(sample_weight, float)
    u = scaled_distances(X_train, X_query, h)
    log_k = LOG_PROFILES[name](u) if name in LOG_PROFILES else log_weights(PROFILES[name](u))
    radius = np.inf if name in LOG_PROFILES else 1.0
    radial, _ = integrate.quad(lambda r: PROFILES[name](np.array(r)) * r ** (d - 1), 0, radius)
    log_area = np.log(2) + d / 2 * np.log(np.pi) - gammaln(d / 2)
    log_sum = logsumexp(log_k + log_weights(w)[None, :], axis=1)
    return log_sum - np.log(w.sum()) - np.log(h).sum() - log_area - np.log(radial)


def naive_rule_of_thumb(X, rule="scott", sample_weight=None):
    """Per-feature ``min(std, IQR / 1.349) * factor``, the factor Scott's or Silverman's.

    Scott: ``n^(-1 / (d + 4))``; Silverman: ``(n (d + 2) / 4)^(-1 / (d + 4))``.
    Frequency weights: ``n = sum(w)``, weighted std and inverted-CDF quantiles.
    A feature of zero spread (among the rows of positive weight) gets a scale of 1.0.
    """
    X = np.asarray(X, float)
    d = X.shape[1]
    w = sample_weight
    n = len(X) if w is None else np.sum(w)
    mean = np.average(X, axis=0, weights=w)
    std = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w))
    q25, q75 = np.percentile(X, [25, 75], axis=0, weights=w, method="inverted_cdf")
    scale = np.minimum(std, (q75 - q25) / 1.349)
    support = X if w is None else X[np.asarray(w) > 0]
    scale[np.ptp(support, axis=0) == 0] = 1.0
    if rule == "scott":
        factor = n ** (-1.0 / (d + 4))
    else:
        factor = (n * (d + 2) / 4.0) ** (-1.0 / (d + 4))
    return scale * factor


def refit_loo(
    estimator, X, y, sample_weight=None, method="predict", groups=None, classes=None, rows=None
):
    """Leave-one-out by explicit refits: ``method`` at ``x_i`` of ``estimator`` fitted without i.

    Each refit is a clone fitted on the other rows (``groups``: without every
    row of i's group).  ``classes`` (sorted) aligns ``predict_proba`` columns
    with them, 0 for a class absent from a refit; ``rows`` limits the rows left out.
    """
    X, y = np.asarray(X), np.asarray(y)
    groups = np.arange(len(X)) if groups is None else np.asarray(groups)
    out = []
    for i in range(len(X)) if rows is None else rows:
        keep = groups != groups[i]
        w = None if sample_weight is None else np.asarray(sample_weight)[keep]
        fitted = clone(estimator).fit(X[keep], y[keep], sample_weight=w)
        result = getattr(fitted, method)(X[i : i + 1])[0]
        if classes is not None:
            aligned = np.zeros(len(classes))
            aligned[np.searchsorted(classes, fitted.classes_)] = result
            result = aligned
        out.append(result)
    return np.array(out)


def naive_linear_bin(X, lo, step, shape, columns):
    """Linear binning from its definition: ``c[k, g] = sum_i prod_a hat(t_ia - g_a) columns[k, i]``.

    ``t_ia = (X_ia - lo_a) / step_a``, ``hat(u) = max(0, 1 - |u|)``, nodes in C
    order over ``shape``: a dense (n, G) matrix of hat products.
    """
    nodes = np.indices(shape).reshape(len(shape), -1).T  # (G, d) node indices
    t = (np.asarray(X) - lo) / step
    hats = np.clip(1 - np.abs(t[:, None, :] - nodes[None, :, :]), 0, None).prod(axis=2)
    return np.asarray(columns) @ hats


def naive_node_moments(counts, step, shape, profile, exponent):
    """Moments about every node of binned data: ``sum_g' K(g' - g) (g' - g)^a c_g'``: (k, G).

    ``g' - g`` the offset between nodes in bandwidths (``step`` per axis),
    ``K(u) = profile(|u|)`` (a profile of ``PROFILES``); a dense (G, G) matrix of node pairs.
    """
    nodes = np.indices(shape).reshape(len(shape), -1).T * np.asarray(step)  # (G, d)
    offsets = nodes[None, :, :] - nodes[:, None, :]  # [g, g'] = g' - g
    powers = np.prod(offsets ** np.asarray(exponent), axis=2)
    weights = profile(np.sqrt((offsets**2).sum(axis=2))) * powers
    return np.asarray(counts) @ weights.T


def traced_peak(fn):
    """Call ``fn()``; return its result and the peak bytes it allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - start


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, independent per test.

    The name is the file's and the test's, not the folder's (``tests/`` then the
    file name, as when the tests sat in one folder): moving a file keeps its data.
    """
    path = request.node.nodeid.split("::")[0]
    name = "tests/" + path.rsplit("/", 1)[-1] + request.node.nodeid[len(path) :]
    seed = zlib.crc32(name.encode())
    return np.random.default_rng(seed)


# Discrete kernels L(a, b; lambda) of mixed data, written from their definitions:
# (name, ordered) -> function of the codes a (queries), b (training), lambda and c categories.
DISCRETE_KERNELS = {
    ("aitchison_aitken", False): lambda a, b, lam, c: np.where(a == b, 1 - lam, lam / (c - 1)),
    ("li_racine", False): lambda a, b, lam, c: np.where(a == b, 1.0, lam),
    ("wang_van_ryzin", True): lambda a, b, lam, c: np.where(
        a == b, 1 - lam, 0.5 * (1 - lam) * lam ** np.abs(a - b)
    ),
    ("li_racine", True): lambda a, b, lam, c: lam ** np.abs(a - b),
}


def naive_mixed_kernel(
    X_train, X_query, bandwidth, kinds, kernel="gaussian", categorical_kernel="aitchison_aitken",
    ordered_kernel="wang_van_ryzin", n_categories=None,
):  # fmt: skip
    """Dense (m, n) product kernel on mixed data, in linear space.

    ``kinds`` holds one letter per feature, as statsmodels' ``var_type``:
    ``"c"`` continuous, ``"u"`` unordered and ``"o"`` ordered categorical
    (columns of numeric codes; ordered ones compared by their difference).
    ``bandwidth`` holds ``h`` for continuous features and ``lambda`` for
    categorical ones.  The continuous profile takes the scaled distance of the
    continuous features together; each categorical feature multiplies in its
    discrete kernel, ``c`` being ``n_categories[j]`` or the number of distinct
    training values of feature ``j``.
    """
    X_train, X_query = np.asarray(X_train, float), np.asarray(X_query, float)
    bandwidth = np.broadcast_to(np.asarray(bandwidth, float), (len(kinds),))
    cont = np.array([k == "c" for k in kinds])
    u = scaled_distances(X_train[:, cont], X_query[:, cont], bandwidth[cont])
    K = PROFILES[ALIASES.get(kernel, kernel)](u)
    for j, kind in enumerate(kinds):
        if kind == "c":
            continue
        name = ordered_kernel if kind == "o" else categorical_kernel
        c = len(np.unique(X_train[:, j])) if n_categories is None else n_categories[j]
        a, b = X_query[:, j][:, None], X_train[:, j][None, :]
        K = K * DISCRETE_KERNELS[name, kind == "o"](a, b, bandwidth[j], c)
    return K


def naive_mixed_weights(X_train, X_query, bandwidth, kinds, sample_weight=None, **kernels):
    """Dense (m, n) attention weights ``w_i K_i / sum_j w_j K_j`` of ``naive_mixed_kernel``."""
    K = naive_mixed_kernel(X_train, X_query, bandwidth, kinds, **kernels)
    if sample_weight is not None:
        K = K * np.asarray(sample_weight, float)[None, :]
    return K / K.sum(axis=1, keepdims=True)


def _local_problems(X_train, y_train, X_query, bandwidth, kernel, degree, sample_weight):
    """Targets, bandwidths, sample weights and, per query, ``W = w K``, the kept rows, ``Phi``."""
    X_train, X_query = np.asarray(X_train, float), np.asarray(X_query, float)
    y = np.asarray(y_train, float)
    Y = y.reshape(len(y), -1)
    d = X_train.shape[1]
    h = np.broadcast_to(np.asarray(bandwidth, float), (d,))
    exps = [
        np.bincount(np.array(c, dtype=int), minlength=d)
        for k in range(degree + 1)
        for c in itertools.combinations_with_replacement(range(d), k)
    ]
    w = np.ones(len(X_train)) if sample_weight is None else np.asarray(sample_weight, float)

    def problems():
        for q in X_query:
            T = (X_train - q) / h
            W = w * PROFILES[ALIASES.get(kernel, kernel)](np.sqrt((T**2).sum(axis=1)))
            keep = W > 0
            yield W, keep, np.column_stack([np.prod(T[keep] ** e, axis=1) for e in exps])

    return y, Y, h, w, problems()
