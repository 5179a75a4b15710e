"""The optional compiled kernel (numba) against numpy and against the naive formulas.

The engine has two implementations of its Gaussian inner loop: the compiled
one-pass kernel (``skl_nw._compiled``) and numpy's passes.  These tests pin
the compiled exponential to ``np.exp``, both paths to each other and to the
textbook formula.  (CI also runs the whole suite once with
``SKL_NW_DISABLE_NUMBA=1``, on the numpy passes alone.)
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose

import skl_nw
from conftest import log_weights, naive_loo_predict, naive_predict, softmax_weights
from skl_nw import (
    BandwidthSearchCV,
    NadarayaWatsonRegressor,
    ParzenClassifier,
    _engine,
)
from skl_nw._engine import _dense, _folded, _local_fit, _local_solve, loo_pool, pool, prepare_train
from skl_nw._kernels import get_kernel

GAUSSIAN = get_kernel("gaussian")


def use_kernels(monkeypatch, module) -> None:
    """Make the dense engine's passes take ``module`` as their compiled kernels (None: numpy)."""
    for engine_module in (_dense, _folded):
        monkeypatch.setattr(engine_module, "compiled", lambda: module)


@pytest.fixture
def compiled(monkeypatch):
    """The compiled kernels, and the engine made to use them (even under SKL_NW_DISABLE_NUMBA).

    The test is skipped only where numba is not installed.
    """
    module = pytest.importorskip("skl_nw._engine._compiled")
    use_kernels(monkeypatch, module)
    return module


def test_polynomial_exp_matches_numpy(compiled, rng):
    x = np.concatenate(
        [
            -rng.uniform(0, 708, 200_000),
            -rng.uniform(0, 1e-3, 1000),
            [0.0, -1e-300, -0.5 * np.log(2), -np.log(2), -707.99, -745.0, -1e300],
            rng.uniform(0, 1e-12, 100),  # rounding in the folded GEMM can give tiny x > 0
        ]
    )
    out = np.empty_like(x)
    compiled.exp_nonpositive_array(x, out)
    inplace = x.copy()
    compiled.exp_inplace(inplace)
    np.testing.assert_array_equal(inplace, out)
    ref = np.exp(x)
    normal = x > -708
    assert np.max(np.abs(out[normal] - ref[normal]) / ref[normal]) < 4 * np.finfo(float).eps
    assert np.all(out[~normal] == 0.0)  # below the normal range: exactly 0, as documented


@pytest.mark.parametrize("r", [1, 3])
def test_floored_solve_passes_exactly_above_the_eigenvalue_floor(rng, r):
    # The local fits' eigenvalue floor: a problem passes exactly when its smallest
    # eigenvalue (numpy.linalg.eigvalsh, the reference) is above EIGEN_FLOOR, and is
    # then solved (numpy.linalg.solve); singular, nearly singular and NaN ones fail.
    m = 400
    A = rng.normal(size=(m, r, r + 2))
    R = A @ A.transpose(0, 2, 1) / (r + 2)
    s = np.sqrt(np.diagonal(R, axis1=1, axis2=2))
    R /= s[:, :, None] * s[:, None, :]  # correlation matrices, as the solve passes
    if r > 1:
        R[:40, -1], R[:40, :, -1] = R[:40, 0], R[:40, 0]  # a repeated column: singular
        R[:40, -1, -1] = 1.0
        R[40:60, 0, 1] = R[40:60, 1, 0] = 1 - 1e-7  # nearly collinear: below the floor
    else:
        R[:40], R[40:60] = 0.0, 1e-7  # singular, and positive but below the floor
    R[60] = np.nan
    rhs = rng.normal(size=(m, r, 2))
    ok, sol = _local_solve._floored_solve(R, rhs)
    finite = np.isfinite(R).all(axis=(1, 2))
    lowest = np.full(m, np.nan)
    lowest[finite] = np.linalg.eigvalsh(R[finite])[:, 0]
    assert np.all(np.abs(lowest[finite] - _local_solve.EIGEN_FLOOR) > 1e-9)  # no borderline case
    expected = finite & (lowest > _local_solve.EIGEN_FLOOR)
    assert 0 < expected.sum() <= m - 61
    np.testing.assert_array_equal(ok, expected)
    assert_allclose(sol, np.linalg.solve(R[expected], rhs[expected]), rtol=1e-9, atol=1e-12)


def _neighbourhood_moments(rng, mom, d, k, m):
    """Raw moments of ``m`` weighted point sets, degenerate ones included, and their queries."""
    M, B = np.empty((m, mom.n_plain)), np.empty((m, mom.n_y, k))
    q = rng.normal(0, 0.5, (m, d))
    for i in range(m):
        size = [1, 2, d + 1, 30][i % 4]  # one point, too few for a line or a quadratic, many
        Z = q[i] + rng.normal(0, 1, (size, d))
        if i % 5 == 0 and d > 1:
            Z[:, 1] = Z[:, 0]  # collinear: no slope across the line
        w = rng.uniform(0.1, 1.0, size)
        if i % 7 == 0:
            w[0] = 1e9  # one dominant point
        Y = rng.normal(size=(size, k))
        M[i] = w @ _local_fit.monomials(Z, mom.top) / w.sum()
        B[i] = np.einsum("i,ig,ik->gk", w, _local_fit.monomials(Z, mom.ytop), Y) / w.sum()
    return M, B, q + 3.0 * (np.arange(m) % 11 == 0)[:, None]  # some queries far away


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize(("d", "degree"), [(1, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2)])
def test_compiled_local_fit_equals_numpy_steps(compiled, rng, monkeypatch, d, degree, k):
    # The compiled pass (shift, covariance form, dead-variance test, eigenvalue floor,
    # degree lowering) query by query against the numpy steps over the batch.
    lf = _local_fit
    mom = lf.Moments(d, 2 * degree, degree)
    M, B, q = _neighbourhood_moments(rng, mom, d, k, 300)
    monkeypatch.setattr(lf, "compiled", lambda: compiled)
    fitted = lf.fit_local(mom, M, B, q, degree)
    monkeypatch.setattr(lf, "compiled", lambda: None)
    expected = lf.fit_local(mom, M, B, q, degree)
    # A dominant point leaves a local variance of ~1e-9 of the second moments: the
    # rounding of either path's moment shift is then amplified ~1e9 (both are right).
    sound = np.arange(len(q)) % 7 != 0
    for got, want in zip(fitted, expected, strict=True):
        assert got.shape == want.shape and np.isfinite(got).all()
        assert_allclose(got[sound], want[sound], rtol=1e-9, atol=1e-9 * np.abs(want).max())
    # The same degree at every query (the same basis functions left out).
    np.testing.assert_array_equal(fitted[1] == 0, expected[1] == 0)
    if degree:  # the degenerate neighbourhoods were fitted at a lower degree
        a = expected[1][:, 1:]
        assert np.any(np.all(a == 0, axis=1)) and np.any(np.all(a != 0, axis=1))


# 14 columns: tiles of four and a partial one; 30: above the fused kernel's limit,
# the compiled exp then a BLAS product.
@pytest.mark.parametrize("k", [1, 3, 14, 30])
def test_exp_sums_compiled_equals_numpy_passes(compiled, rng, monkeypatch, k):
    m, n = 17, 301
    A = -rng.exponential(20.0, (m, n))
    V = rng.normal(size=(n, k))
    fast = _dense.exp_sums(A.copy(), V)
    use_kernels(monkeypatch, None)
    slow = _dense.exp_sums(A.copy(), V)
    E = np.exp(A)  # the independent reference: the formula, dense
    ref = np.column_stack([E @ V, E.sum(axis=1)])
    # Relative to the sum of absolute terms: signed values may cancel in any order of summation.
    scale = np.column_stack([E @ np.abs(V), E.sum(axis=1)])
    assert np.all(np.abs(fast - ref) <= 1e-13 * scale)
    assert np.all(np.abs(slow - ref) <= 1e-13 * scale)


# 1 to 3 features: one pass; 5: a pass per feature first.
@pytest.mark.parametrize("c", [1, 2, 3, 5])
@pytest.mark.parametrize("k", [1, 6])
def test_exp_dot_sums_equals_formula(compiled, rng, c, k):
    m, n = 18, 301  # a partial tile of query rows
    Qk = rng.normal(size=(m, c + 1))
    KT = rng.normal(size=(c + 1, n))
    A = Qk[:, :c] @ KT[:c] + Qk[:, c:]
    KT[c] = -A.max(axis=0) - rng.exponential(5.0, n)  # the point's constant: every A <= 0
    A = Qk[:, :c] @ KT[:c] + KT[c] + Qk[:, c:]
    V = rng.normal(size=(n, k))
    out = np.empty((m, k + 1))
    compiled.exp_dot_sums(Qk, KT, np.ascontiguousarray(V.T), out)
    E = np.exp(A)
    ref = np.column_stack([E @ V, E.sum(axis=1)])
    scale = np.column_stack([E @ np.abs(V), E.sum(axis=1)])
    # The dot products round differently from the GEMM: ~eps |Qk| |KT| in each exponent.
    tol = 1e-13 * (1 + np.abs(Qk) @ np.abs(KT)).max()
    assert np.all(np.abs(out - ref) <= tol * scale)


@pytest.mark.parametrize("exclude", [None, 0, 5])
def test_exp_sums_numpy_affine_and_exclusion(rng, monkeypatch, exclude):
    m, n = 17, 301
    A = rng.exponential(2.0, (m, n))
    V = rng.normal(size=(n, 2))
    offset = -rng.exponential(3.0, n)
    own = None if exclude is None else exclude + np.arange(m)
    use_kernels(monkeypatch, None)
    got = _dense.exp_sums(A.copy(), V, slope=-0.37, offset=offset, own=own)
    E = np.exp(-0.37 * A + offset)
    if own is not None:
        E[np.arange(m), own] = 0.0
    assert_allclose(got, np.column_stack([E @ V, E.sum(axis=1)]), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("d", [1, 3, 8])
def test_pool_paths_agree_with_naive(compiled, rng, monkeypatch, d):
    n, m = 400, 150
    X = rng.normal(size=(n, d))
    Q = np.vstack([rng.normal(size=(m - 5, d)), 40 + rng.normal(size=(5, d))])  # 5 underflow
    V = rng.normal(size=(n, 2))
    w = rng.uniform(0.1, 2.0, n)
    w[::7] = 0.0
    h = 0.6 * np.sqrt(d)
    train = prepare_train(X / h, log_w=log_weights(w), values=V)
    fast = pool(Q / h, train, GAUSSIAN)
    use_kernels(monkeypatch, None)
    slow = pool(Q / h, train, GAUSSIAN)
    assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)
    near = slice(0, m - 5)
    assert_allclose(fast[near], naive_predict(X, V, Q[near], h, sample_weight=w), atol=1e-12)
    # The underflowing queries went to the log-space redo: nearest active points dominate.
    assert np.all(np.isfinite(fast))


@pytest.mark.parametrize("d", [1, 4])
def test_loo_paths_agree_with_refits(compiled, rng, monkeypatch, d):
    n = 120
    X = rng.normal(size=(n, d))
    V = rng.normal(size=(n, 1))
    factors = np.array([0.05, 0.5, 1.0, 4.0])
    h = 0.8
    train = prepare_train(X / h, values=V)
    fast = loo_pool(train, GAUSSIAN, factors)
    use_kernels(monkeypatch, None)
    slow = loo_pool(train, GAUSSIAN, factors)
    assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)
    for t, f in enumerate(factors):
        with np.errstate(invalid="ignore"):  # at f = 0.05 some other rows have no weight left
            expected = naive_loo_predict(X, V, h * f)[::11]
        assert_allclose(fast[t, ::11], expected, atol=1e-10)


def test_estimators_same_on_both_paths(rng, monkeypatch):
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(scale=0.1, size=300)
    labels = (y > 0).astype(int)
    Q = rng.normal(size=(50, 3))

    def results():
        reg = NadarayaWatsonRegressor(bandwidth=0.5).fit(X, y)
        clf = ParzenClassifier(bandwidth=0.5).fit(X, labels)
        search = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
        return reg.predict(Q), clf.predict_proba(Q), search.bandwidth_, search.best_score_

    fast = results()
    use_kernels(monkeypatch, None)
    slow = results()
    for a, b in zip(fast, slow, strict=True):
        assert_allclose(a, b, rtol=1e-11)


def _child(code: str, **env) -> str:
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.strip()


def test_environment_variable_disables_the_compiled_path():
    code = (
        "import sys; import numpy as np; from skl_nw import NadarayaWatsonRegressor\n"
        "from skl_nw._engine import _dense\n"
        "X = np.linspace(0, 1, 50)[:, None]\n"
        "NadarayaWatsonRegressor(bandwidth=0.1).fit(X, X[:, 0]).predict(X)\n"
        "print(_dense.compiled() is None, 'numba' in sys.modules)"
    )
    assert _child(code, SKL_NW_DISABLE_NUMBA="1") == "True False"


def test_square_chains_order_and_length():
    slopes = -0.5 / (2.0 ** (np.arange(-8, 6) / 4)) ** 2  # the default grid's step
    order, squares = _dense.square_chains(slopes)
    assert sorted(order) == list(range(len(slopes)))
    ordered = slopes[order]
    # Every flagged slope doubles the one before it; no chain has more than 6 squarings.
    assert_allclose(ordered[1:][squares[1:]], 2 * ordered[:-1][squares[1:]], rtol=1e-15)
    runs = np.diff(np.flatnonzero(np.append(~squares, True)))
    assert runs.max() == _dense.MAX_SQUARINGS + 1
    assert squares.sum() > len(slopes) // 2  # most candidates are squares
    # Unrelated slopes form chains of one.
    assert not _dense.square_chains(np.array([-1.0, -1.5, -2.9]))[1].any()


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("k", [1, 2])
def test_chained_slopes_equal_separate_exps(compiled, rng, monkeypatch, k, d):
    m, n = 13, 257
    X = rng.normal(size=(n, d))
    X[:3] = X[3]  # duplicates of the query of row 0 (which is X[3])
    train = prepare_train(X)
    Q = train.X[3 : 3 + m]
    V = rng.normal(size=(n, k))
    offset = np.log(rng.uniform(0.05, 1.0, n))
    offset[5] = -1e300  # a zero weight
    slopes = -0.5 / (2.0 ** (np.arange(-12, 10) / 4)) ** 2
    slopes = np.append(slopes, -0.3)  # one outside every chain
    XT = np.ascontiguousarray(train.X.T)
    args = (Q, train, XT, V, slopes, offset, 3 + np.arange(m), GAUSSIAN)
    fast = _dense.exp_sums_slopes(*args)
    use_kernels(monkeypatch, None)
    slow = _dense.exp_sums_slopes(*args)
    assert fast.shape == (m, len(slopes), k + 1)
    assert_allclose(fast, slow, rtol=1e-12, atol=1e-13)  # numerators may cancel
    # The formula, dense: own point (index 3 + i) left out, duplicates kept.
    S = ((Q[:, None, :] - train.X[None]) ** 2).sum(-1)
    for t, c in enumerate(slopes):
        E = np.exp(c * S + offset)
        E[np.arange(m), 3 + np.arange(m)] = 0.0
        assert_allclose(fast[:, t], np.column_stack([E @ V, E.sum(1)]), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("far", [False, True])
def test_loo_loss_grad_same_on_both_paths(compiled, rng, monkeypatch, task, far):
    from skl_nw._search._scoring import _log_loss, _squared_error

    n, d = 150, 3
    X = rng.normal(size=(n, d)) * [1.0, 3.0, 0.2]
    if far:  # one point whose every weight underflows: the numpy log-space path takes over
        X[0] = 1e3
    if task == "regression":
        V = np.column_stack([np.sin(X[:, 0]), X[:, 1]]) + 0.1 * rng.normal(size=(n, 2))
        loss_fn = _squared_error(V)
    else:
        V = np.eye(3)[rng.integers(0, 3, n)]
        loss_fn = _log_loss(V)
    w = rng.uniform(0.2, 3.0, n)
    rows = rng.permutation(n)[:64]
    rows[0] = 0
    train = prepare_train(X / [0.5, 1.0, 0.3], log_w=np.log(w), values=V)
    args = (train, GAUSSIAN, rows, loss_fn, w[rows])
    fast = _engine.loo_loss_grad(*args)
    use_kernels(monkeypatch, None)
    slow = _engine.loo_loss_grad(*args)
    assert_allclose(fast[0], slow[0], rtol=1e-12)
    assert_allclose(fast[1], slow[1], rtol=1e-10, atol=1e-12 * np.abs(slow[1]).max())


def _assert_falls_back(rng, monkeypatch, break_numba, warning=None):
    """Break numba with ``break_numba()``, reload the kernels: numpy gives the same predictions.

    ``warning`` (a regex) is the RuntimeWarning expected on the way; None: silence.
    """
    X = rng.normal(size=(60, 2))
    y = rng.normal(size=60)
    expected = NadarayaWatsonRegressor(bandwidth=0.4).fit(X, y).predict(X)
    monkeypatch.delenv("SKL_NW_DISABLE_NUMBA", raising=False)
    break_numba()
    _dense.compiled.cache_clear()
    try:
        if warning is None:
            assert _dense.compiled() is None
        else:
            with pytest.warns(RuntimeWarning, match=warning):
                assert _dense.compiled() is None
        got = NadarayaWatsonRegressor(bandwidth=0.4).fit(X, y).predict(X)
    finally:
        _dense.compiled.cache_clear()
    assert_allclose(got, expected, rtol=1e-12)


def _forget_compiled_module(monkeypatch):
    """Make the next ``from . import _compiled`` execute the module again."""
    monkeypatch.delitem(sys.modules, "skl_nw._engine._compiled", raising=False)
    monkeypatch.delattr(skl_nw._engine, "_compiled", raising=False)


def test_missing_numba_falls_back_to_numpy(rng, monkeypatch):
    def uninstall():
        monkeypatch.setitem(sys.modules, "numba", None)  # import numba -> ImportError
        _forget_compiled_module(monkeypatch)

    _assert_falls_back(rng, monkeypatch, uninstall)


def test_broken_numba_warns_and_falls_back(rng, monkeypatch):
    # numba installed but unusable (e.g. no writable cache directory raises at
    # decoration): a RuntimeWarning naming the cause, then the numpy passes.
    import types

    def njit(*args, **kwargs):
        raise RuntimeError("cannot cache function: no locator available")

    def break_decoration():
        fake = types.ModuleType("numba")
        fake.njit = njit
        core = types.ModuleType("numba.core")
        core.types = types.SimpleNamespace(float64=None, int64=None)
        extending = types.ModuleType("numba.extending")
        extending.intrinsic = lambda fn: fn
        for name, module in [("numba", fake), ("numba.core", core), ("numba.extending", extending)]:
            monkeypatch.setitem(sys.modules, name, module)
        _forget_compiled_module(monkeypatch)

    _assert_falls_back(
        rng, monkeypatch, break_decoration, "numba is installed but its kernels failed"
    )


def test_failed_compilation_warns_and_falls_back(rng, monkeypatch):
    # The engine compiles the smallest kernel (the exponential every kernel inlines)
    # when it loads them (warm_up), so a compilation error warns there instead of
    # failing a predict.
    module = pytest.importorskip("skl_nw._engine._compiled")

    def fail():
        raise RuntimeError("LLVM ERROR: simulated")

    _assert_falls_back(
        rng, monkeypatch, lambda: monkeypatch.setattr(module, "warm_up", fail), "simulated"
    )


_EVERY_PATH = """
import numba, numpy as np, pandas as pd, warnings
from skl_nw import (BandwidthSearchCV, LocalPolynomialRegressor, NadarayaWatsonRegressor,
                    ParzenClassifier)
from skl_nw._engine import _compiled, _dense

warnings.simplefilter("ignore")
_dense.compiled()  # loads the module and runs warm_up
examples = _compiled.examples()
rng = np.random.default_rng(0)
X, Q = rng.uniform(size=(400, 2)), rng.uniform(size=(50, 2))
y = np.sin(4 * X[:, 0])
Y = np.column_stack([y, y**2])
local = [LocalPolynomialRegressor(0.2, degree=p) for p in (0, 1, 2)]
for est in (NadarayaWatsonRegressor(0.2), *local):
    for target in (y, Y):
        est.fit(X, target).predict(Q, return_std=True)
        est.predict_gradient(Q)
        est.predict_interval(Q)
    BandwidthSearchCV(est, method="lbfgs").fit(X, y)
    BandwidthSearchCV(est, method="sgd", max_iter=5).fit(X, y)
    BandwidthSearchCV(est).fit(X, y)
ParzenClassifier(0.2).fit(X, y > 0).predict_proba(Q)
frame = pd.DataFrame({"x": X[:, 0], "c": pd.Categorical(rng.integers(0, 3, 400))})
for est in (NadarayaWatsonRegressor(), LocalPolynomialRegressor()):
    est.set_params(categorical_features="from_dtype").fit(frame, y).predict(frame[:50])
    BandwidthSearchCV(est).fit(frame, y)
NadarayaWatsonRegressor(0.05, algorithm="binned").fit(X[:, :1], y).predict(Q[:, :1])
for hy in (0.0, 0.1):  # the conditional distributions' per-query kernels
    dist = NadarayaWatsonRegressor(0.2, y_bandwidth=hy).fit(X, y)
    dist.predict_quantiles(Q, [0.1, 0.5])
    if hy:
        dist.predict_cdf(Q, [0.0, 0.5]), dist.predict_pdf(Q, y[:50, None])
X5 = rng.normal(size=(300, 5))  # the tiled kernels; far queries take direct differences
for est in (NadarayaWatsonRegressor(0.5, algorithm="brute"),
            LocalPolynomialRegressor(1.0, algorithm="brute")):
    est.fit(X5, X5[:, 0]).predict(X5[:40])
    est.predict(X5[:40] + 100.0)
ParzenClassifier(0.5).fit(X5, X5[:, 0] > 0).predict_proba(X5[:40] + 100.0)  # distances, tiled
for kernel, args in examples.items():
    signature = tuple(numba.typeof(a) for a in args)
    new = [s for s in kernel.signatures if s != signature]
    if new:
        print(kernel.__name__, new)
"""


def test_every_path_calls_the_kernels_with_their_example_types(compiled):
    # Each kernel compiles (or loads from the cache) on its first call, for one
    # signature, that of its tiny example arguments (warm_up(every=True) compiles those):
    # the estimators' paths (values, standard errors, gradients, intervals, every search
    # method, mixed data, binned) must pass those types only, or a predict would compile
    # a second version.  In a fresh interpreter.
    result = subprocess.run(
        [sys.executable, "-c", _EVERY_PATH], capture_output=True, text=True, timeout=600,
        env={**os.environ, "SKL_NW_DISABLE_NUMBA": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "", result.stdout


def test_warm_up_every_compiles_each_kernel_for_its_example(compiled):
    import numba

    compiled.warm_up(every=True)
    examples = compiled.examples()
    assert set(examples) == {
        getattr(compiled, name) for name in compiled.__all__ if name not in ("examples", "warm_up")
    }
    for kernel, args in examples.items():
        assert tuple(numba.typeof(a) for a in args) in kernel.signatures, kernel.__name__


# Feature counts padded to fours (4, 8, 12), partial tiles and groups of query rows
# (m = 37), a partial block of training points (n = 601), value columns that take
# the exponential's pass alone (k = 1), with tiles (k = 4) and without (k = 2, 6).
@pytest.mark.parametrize("c", [4, 8, 12])
@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_tiled_kernels_equal_formula(compiled, rng, c, k):
    m, n = 37, 601
    X, Q = rng.normal(size=(n, c)), rng.normal(size=(m, c))
    slope, off = -0.3, -rng.exponential(1.0, n)
    V = rng.normal(size=(n, k))
    VT = np.ascontiguousarray(V.T)
    S = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    E = np.exp(slope * S + off)
    ref = np.column_stack([E @ V, E.sum(axis=1)])
    scale = np.column_stack([E @ np.abs(V), E.sum(axis=1)])
    # The kernels take their log weights in bits (base 2).
    bits, off_bits = slope * np.log2(np.e), off * np.log2(np.e)
    keys = np.vstack([X.T, bits * (X**2).sum(axis=1) + off_bits])
    queries = np.column_stack([-2.0 * bits * Q, bits * (Q**2).sum(axis=1)])
    for kernel, args in [
        (compiled.exp_dot_tiled, (queries, keys)),
        (compiled.exp_diff_tiled, (Q, np.ascontiguousarray(X.T), bits, off_bits)),
    ]:
        out = np.full((m, k + 1), np.nan)
        kernel(*args, VT, out)
        assert np.all(np.abs(out - ref) <= 1e-13 * (1 + S.max()) * scale)


@pytest.mark.parametrize("d", [4, 5, 12])
def test_tiled_squared_distances_equal_differences(compiled, rng, d):
    # Far from the origin (1e6 +- 1e3: the expansion |q|^2 - 2 q.x + |x|^2 would lose
    # every digit), partial tiles and groups (m = 37), a partial block (n = 601).
    m, n = 37, 601
    X, Q = 1e6 + 1e3 * rng.normal(size=(n, d)), 1e6 + 1e3 * rng.normal(size=(m, d))
    S = np.full((m, n), np.nan)
    XT = np.ascontiguousarray(_dense.pad_features(X).T)
    compiled.sq_distances_tiled(_dense.pad_features(Q), XT, S)
    expected = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    assert_allclose(S, expected, rtol=1e-14)


@pytest.mark.parametrize("d", [4, 9])
def test_parzen_far_from_the_centre_equals_formula_on_both_paths(compiled, rng, monkeypatch, d):
    # Queries 30 bandwidths out: the squared distances by direct differences (compiled
    # tiles, or numpy's feature-by-feature passes), the grouped sums per class.
    X, y = rng.normal(size=(500, d)), rng.integers(0, 3, 500)
    Q = rng.normal(size=(40, d)) + 30 * 0.7
    model = ParzenClassifier(bandwidth=0.7, algorithm="brute").fit(X, y)
    fast = model.predict_proba(Q)
    use_kernels(monkeypatch, None)
    assert_allclose(fast, model.predict_proba(Q), rtol=1e-11, atol=1e-12)
    log_k = -0.5 * ((Q[:, None, :] - X[None]) ** 2).sum(axis=2) / 0.7**2
    weights = np.exp(log_k - log_k.max(axis=1, keepdims=True))
    expected = weights @ np.eye(3)[y] / weights.sum(axis=1, keepdims=True)
    assert_allclose(fast, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("d", [3, 4, 5, 9, 16])
def test_compiled_predict_matches_numpy_in_more_dimensions(compiled, rng, monkeypatch, d):
    # Either side of TILED_MIN_FEATURES, padded feature counts (5, 9), and a local fit.
    X, Q = rng.normal(size=(700, d)), rng.normal(size=(50, d))
    y = np.sin(X[:, 0]) + X[:, -1]
    h = 0.3 * np.sqrt(d)
    models = [
        NadarayaWatsonRegressor(bandwidth=h, algorithm="brute").fit(X, y),
        skl_nw.LocalPolynomialRegressor(bandwidth=2 * h, algorithm="brute").fit(X, y),
    ]
    fast = [model.predict(Q) for model in models]
    use_kernels(monkeypatch, None)
    for model, p in zip(models, fast, strict=True):
        assert_allclose(p, model.predict(Q), rtol=1e-11, atol=1e-12)
    assert_allclose(fast[0], naive_predict(X, y, Q, h), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_rows_past_the_gemm_bound_take_direct_differences_alone(compiled, rng, monkeypatch, d):
    # Data spread so wide in bandwidth units that the folded product's rounding bound
    # admits the queries near the centre and not those near the edges: only the latter
    # go to the direct differences (the others still fold), and every row stays exact.
    spread = {1: 40.0, 2: 27.0, 3: 21.0, 5: 15.0}[d]
    X, Q = rng.uniform(-spread, spread, (400, d)), rng.uniform(-spread, spread, (120, d))
    y = np.column_stack([np.cos(X[:, 0] / 7), X.sum(axis=1) / spread])
    model = NadarayaWatsonRegressor(bandwidth=1.0, algorithm="brute").fit(X, y)
    centre = X.mean(axis=0)  # the engine's: bandwidth units about the training mean
    max_sq = ((X - centre) ** 2).sum(axis=1).max()
    fold = _dense.gemm_exact(0.5, d, ((Q - centre) ** 2).sum(axis=1) + max_sq)
    assert 0 < fold.sum() < len(Q)  # the set-up holds both kinds of row
    direct, original = [], _folded.FoldedKeys.direct_sums

    def spy(self, Q, **kwargs):
        direct.append(len(Q))
        return original(self, Q, **kwargs)

    monkeypatch.setattr(_folded.FoldedKeys, "direct_sums", spy)
    pred = model.predict(Q)
    assert sum(direct) == len(Q) - fold.sum()
    assert_allclose(pred, softmax_weights(X, Q, 1.0, "gaussian") @ y, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("d", [1, 3])
def test_rows_past_the_gemm_bound_are_redone_alone_on_the_numpy_passes(rng, monkeypatch, d):
    # The same set-up on numpy's passes: the rows past the bound come back from the
    # folded product as zero sums and only they take distances and the log-space pass.
    spread = {1: 40.0, 3: 21.0}[d]
    X, Q = rng.uniform(-spread, spread, (400, d)), rng.uniform(-spread, spread, (120, d))
    y = np.cos(X[:, 0] / 7)
    use_kernels(monkeypatch, None)
    model = NadarayaWatsonRegressor(bandwidth=1.0, algorithm="brute").fit(X, y)
    centre = X.mean(axis=0)
    max_sq = ((X - centre) ** 2).sum(axis=1).max()
    fold = _dense.gemm_exact(0.5, d, ((Q - centre) ** 2).sum(axis=1) + max_sq)
    assert 0 < fold.sum() < len(Q)
    rows, original = [], _dense.sq_distances

    def spy(Q, train, kernel):
        rows.append(len(Q))
        return original(Q, train, kernel)

    monkeypatch.setattr(_dense, "sq_distances", spy)
    pred = model.predict(Q)
    assert sum(rows) == len(Q) - fold.sum()
    assert_allclose(pred, softmax_weights(X, Q, 1.0, "gaussian") @ y, rtol=1e-11, atol=1e-12)
