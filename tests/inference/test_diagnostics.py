"""Hat matrix, ``attention_weights`` of the local polynomial and ``summary()``, against dense H.

The oracle builds the smoother matrix explicitly on small n, ``H_ij = l_j(x_i)``:
the attention weights ``w_j K_ij / sum_l w_l K_il`` for Nadaraya–Watson, and
``e_1' (Phi' W Phi)^-1 Phi' W`` for the local polynomial (``Phi`` the monomials
of ``(x_j - x_i) / h``), then every diagnostic from its textbook formula.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.metrics import r2_score

from conftest import PROFILES, _local_problems
from skl_nw import LocalPolynomialRegressor, NadarayaWatsonRegressor


def _dense_hat(X, Q, h, kernel="gaussian", degree=1, w=None):
    """Rows ``l(q)`` of the equivalent kernel at each query: (m, n)."""
    *_, problems = _local_problems(X, X[:, 0], Q, h, kernel, degree, w)
    rows = []
    for W, keep, Phi in problems:
        e1 = np.zeros(Phi.shape[1])
        e1[0] = 1.0
        row = np.zeros(len(X))
        row[keep] = W[keep] * (Phi @ np.linalg.solve(Phi.T @ (W[keep, None] * Phi), e1))
        rows.append(row)
    return np.array(rows)


def _data(rng, n=40, d=1):
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(4 * X[:, 0]) + X[:, -1] ** 2 + rng.normal(0, 0.1, n)
    return X, y


# ------------------------------------------------------- attention_weights
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tophat"])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_local_attention_weights_are_the_equivalent_kernel(rng, kernel, degree, algorithm):
    X, y = _data(rng, n=60, d=2)
    h = np.array([0.6, 0.7])
    w = rng.uniform(0.5, 2.0, len(X))
    Q = rng.uniform(-0.1, 1.1, (9, 2))
    reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel, degree=degree, algorithm=algorithm)
    reg.fit(X, y, w)
    L = reg.attention_weights(Q)
    assert isinstance(L, np.ndarray)
    assert_allclose(L, _dense_hat(X, Q, h, kernel, degree, w), atol=1e-9)
    assert_allclose(L @ y, reg.predict(Q), atol=1e-10)
    assert_allclose(L.sum(axis=1), 1.0, atol=1e-9)
    assert (L < 0).any()  # the local polynomial extrapolates: negative weights
    assert_allclose(reg.attention_weights(Q, sparse=True).toarray(), L, atol=1e-12)


def test_local_constant_attention_weights_are_nadaraya_watsons(rng):
    X, y = _data(rng, d=2)
    Q = rng.uniform(0, 1, (5, 2))
    lp = LocalPolynomialRegressor(bandwidth=0.3, degree=0).fit(X, y)
    nw = NadarayaWatsonRegressor(bandwidth=0.3).fit(X, y)
    assert_allclose(lp.attention_weights(Q), nw.attention_weights(Q), rtol=1e-12)


def test_local_attention_weights_memory_budget_is_nadaraya_watsons(rng):
    X, y = _data(rng, n=2000)
    Q = rng.uniform(0, 1, (100, 1))  # a dense (100, 2000) result: 1.6 MB
    lp = LocalPolynomialRegressor(bandwidth=0.05, kernel="epanechnikov").fit(X, y)
    nw = NadarayaWatsonRegressor(bandwidth=0.05, kernel="epanechnikov").fit(X, y)
    with config_context(working_memory=1):
        for reg in (lp, nw):
            with pytest.raises(MemoryError):
                reg.attention_weights(Q)
        L = lp.attention_weights(Q, sparse=True)
    assert_allclose(L @ y, lp.predict(Q), atol=1e-10)
    assert L.nnz < 0.2 * L.shape[0] * L.shape[1]


# ------------------------------------------------------------------ summary
def _dense_summary(H, y, w):
    n = w.sum()
    fitted = H @ y
    rss = w @ (y - fitted) ** 2
    sigma2, trace = rss / n, np.trace(H)
    loo = (y - fitted) / (1 - np.diag(H))  # the linear-smoother identity
    return {
        "trace": trace,
        "residual_df": n - trace,
        "sigma2": sigma2,
        "r2": r2_score(y, fitted, sample_weight=w),
        "loo_mse": w @ loo**2 / n,
        # Hurvich, Simonoff & Tsai (1998)
        "aicc": np.log(sigma2) + (1 + trace / n) / (1 - (trace + 2) / n),
        "gcv": sigma2 / (1 - trace / n) ** 2,
    }


def _nw_hat(X, h, kernel, w):
    K = PROFILES[kernel](np.sqrt((((X[:, None] - X[None]) / h) ** 2).sum(axis=2))) * w
    return K / K.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("degree", [None, 0, 1, 2])  # None: NadarayaWatsonRegressor
def test_summary_matches_the_dense_hat_matrix(rng, kernel, weighted, degree):
    X, y = _data(rng, n=50, d=2)
    h = np.array([0.5, 0.6])
    w = rng.uniform(0.5, 2.0, len(X)) if weighted else np.ones(len(X))
    if degree is None:
        reg = NadarayaWatsonRegressor(bandwidth=h, kernel=kernel)
        H = _nw_hat(X, h, kernel, w)
    else:
        reg = LocalPolynomialRegressor(bandwidth=h, kernel=kernel, degree=degree)
        H = _dense_hat(X, X, h, kernel, degree, w)
    s = reg.fit(X, y, w if weighted else None).summary()
    for name, value in _dense_summary(H, y, w).items():
        assert_allclose(getattr(s, name), value, rtol=1e-8, err_msg=name)
    assert (s.n, s.n_samples, s.degree, s.kernel) == (w.sum(), 50, degree or 0, kernel)
    assert_allclose(s.bandwidth, h)
    if not weighted and degree:
        assert_allclose(reg.attention_weights(X), H, atol=1e-9)


def test_summary_weights_are_frequency_weights(rng):
    X, y = _data(rng, n=30)
    counts = rng.integers(1, 4, len(X))
    reg = LocalPolynomialRegressor(bandwidth=0.2)
    weighted = reg.fit(X, y, counts).summary()
    repeated = reg.fit(np.repeat(X, counts, axis=0), np.repeat(y, counts)).summary()
    for name in ("n", "trace", "sigma2", "r2", "aicc", "gcv"):
        assert_allclose(getattr(weighted, name), getattr(repeated, name), rtol=1e-9)


@pytest.mark.parametrize("estimator", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_summary_rows_of_weight_zero_are_dropped_rows(rng, estimator):
    # A row of weight 0 far from the others has an empty window: with fallback="nan" its
    # fit is NaN, which 0 * NaN carried into sigma2, r2, the LOO error and the criteria.
    X = np.r_[rng.uniform(0, 1, 40), 3.0][:, None]
    y = np.sin(4 * X[:, 0])
    w = np.r_[np.ones(40), 0.0]
    reg = estimator(bandwidth=0.1, kernel="epanechnikov", fallback="nan")
    weighted = reg.fit(X, y, sample_weight=w).summary()
    dropped = reg.fit(X[:40], y[:40]).summary()
    for name in ("n", "trace", "sigma2", "r2", "loo_mse", "aicc", "gcv"):
        assert_allclose(getattr(weighted, name), getattr(dropped, name), rtol=1e-12)
    assert weighted.n_samples == 41


def test_summary_multi_output_averages_the_targets(rng):
    X, y = _data(rng, n=40)
    Y = np.column_stack([y, np.cos(3 * X[:, 0])])
    reg = LocalPolynomialRegressor(bandwidth=0.2)
    both = reg.fit(X, Y).summary()
    parts = [reg.fit(X, Y[:, j]).summary() for j in range(2)]
    for name in ("sigma2", "r2", "loo_mse"):
        assert_allclose(getattr(both, name), np.mean([getattr(p, name) for p in parts]))
    assert_allclose(both.r2, r2_score(Y, reg.fit(X, Y).predict(X)))


def test_summary_text():
    X = np.linspace(0, 1, 30)[:, None]
    s = LocalPolynomialRegressor(bandwidth=0.1).fit(X, X[:, 0] ** 2).summary()
    text = str(s)
    assert text.startswith("LocalPolynomialRegressor summary")
    assert f"{s.trace:.4f}" in text and "Degree:" in text
    assert repr(s).startswith("SmootherSummary(LocalPolynomialRegressor, n=30, trace=")


def test_summary_with_a_categorical_feature(rng):
    # Local linear in x, Aitchison–Aitken weights (3 categories) on the code u.
    n, h, lam = 45, 0.4, 0.3
    x, u = rng.uniform(0, 1, n), rng.integers(0, 3, n)
    y = np.sin(4 * x) + 0.5 * u + rng.normal(0, 0.1, n)
    X = np.column_stack([x, u]).astype(float)
    reg = LocalPolynomialRegressor(bandwidth=[h, lam], categorical_features=[1]).fit(X, y)
    H = np.empty((n, n))
    for i in range(n):
        W = np.exp(-0.5 * ((x - x[i]) / h) ** 2) * np.where(u == u[i], 1 - lam, lam / 2)
        Phi = np.column_stack([np.ones(n), (x - x[i]) / h])
        H[i] = W * (Phi @ np.linalg.solve(Phi.T @ (W[:, None] * Phi), [1.0, 0.0]))
    s = reg.summary()
    for name, value in _dense_summary(H, y, np.ones(n)).items():
        assert_allclose(getattr(s, name), value, rtol=1e-8, err_msg=name)
    assert_allclose(reg.attention_weights(X), H, atol=1e-10)
