"""The Taylor cells of the compiled conditional mixtures against direct dense sums."""

import numpy as np
import pytest
from scipy.special import ndtr

from skl_nw import NadarayaWatsonRegressor
from skl_nw._engine._conditional import taylor_cells

numba = pytest.importorskip("numba")


def _dense(X, y, w, Xq, T, h, hy):
    """``F`` and ``f`` of the mixture written out: Gaussian weights in x, normal terms in y."""
    S = (((Xq[:, None] - X[None]) / h) ** 2).sum(-1)
    A = w * np.exp(-0.5 * (S - S.min(1, keepdims=True)))
    A /= A.sum(1, keepdims=True)
    Z = (T[:, :, None] - y[None, None]) / hy
    F = (A[:, None] * ndtr(Z)).sum(-1)
    f = (A[:, None] * np.exp(-0.5 * Z**2)).sum(-1) / (hy * np.sqrt(2 * np.pi))
    return F, f


def _cases():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(400, 2))
    y = np.sin(X[:, 0]) + 0.4 * rng.normal(size=400)
    w = rng.integers(1, 4, 400).astype(float)
    ties = np.round(y, 1)  # heavy ties: about 30 distinct values
    return {
        "wide": (X, y, None, 5.0),  # one or two cells for every row
        "rule": (X, y, None, 0.12),  # a few dozen rows per cell
        "narrow": (X, y, None, 1e-4),  # a cell per row or two
        "ties": (X, ties, None, 0.05),
        "weights": (X, y, w, 0.12),
    }


@pytest.mark.parametrize("case", ["wide", "rule", "narrow", "ties", "weights"])
def test_cells_equal_the_dense_mixture(case):
    # Values at the data (so a cell straddles t), between, in both tails and far
    # beyond; F and f to 2e-15 absolute, and relatively in the lower tail.
    X, y, w, hy = _cases()[case]
    rng = np.random.default_rng(6)
    reg = NadarayaWatsonRegressor([0.3, 0.5], y_bandwidth=hy).fit(X, y, sample_weight=w)
    Xq = rng.uniform(-2, 2, size=(30, 2))
    span = y.max() - y.min()
    T = np.column_stack([
        rng.choice(y, size=(30, 4)),  # at training targets
        rng.choice(y, size=(30, 2)) + 0.37 * hy,
        rng.uniform(y.min() - 0.2 * span, y.max() + 0.2 * span, size=(30, 6)),
        np.full(30, y.min() - 3 * hy), np.full(30, y.min() - 8 * hy),  # lower tail
        np.full(30, y.max() + 4 * hy),
    ])  # fmt: skip
    F, f = _dense(X, y, 1.0 if w is None else w, Xq, T, np.array([0.3, 0.5]), hy)
    # Several values a query (the cells' moments) and one (paired: the cells' polynomials).
    columns = range(T.shape[1])
    paired = (np.hstack([reg.predict_cdf(Xq, T[:, [j]]) for j in columns]),
              np.hstack([reg.predict_pdf(Xq, T[:, [j]]) for j in columns]))  # fmt: skip
    for F_ours, f_ours in ((reg.predict_cdf(Xq, T), reg.predict_pdf(Xq, T)), paired):
        np.testing.assert_allclose(F_ours, F, rtol=0, atol=2e-15)
        tail = F < 1e-3
        np.testing.assert_allclose(F_ours[tail], F[tail], rtol=1e-11, atol=1e-300)
        np.testing.assert_allclose(f_ours * hy, f * hy, rtol=0, atol=2e-15)
        # Relative below the data; elsewhere both paths leave out the rows more than 8.5
        # y bandwidths below t (an absolute 1e-16 of the weight).
        small = (T < y.min()) & (f * hy < 1e-3)
        np.testing.assert_allclose(f_ours[small], f[small], rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("case", ["wide", "rule", "narrow", "ties", "weights"])
def test_quantiles_by_cells_invert_the_dense_cdf(case):
    X, y, w, hy = _cases()[case]
    rng = np.random.default_rng(7)
    reg = NadarayaWatsonRegressor([0.3, 0.5], y_bandwidth=hy).fit(X, y, sample_weight=w)
    Xq = rng.uniform(-2, 2, size=(25, 2))
    taus = np.array([1e-6, 0.01, 0.3, 0.5, 0.9, 0.999])
    Q = reg.predict_quantiles(Xq, taus)
    assert (np.diff(Q, axis=1) >= 0).all()
    F, _ = _dense(X, y, 1.0 if w is None else w, Xq, Q, np.array([0.3, 0.5]), hy)
    np.testing.assert_allclose(F, np.tile(taus, (25, 1)), rtol=1e-9, atol=1e-12)


def test_cells_at_equals_row_by_row_sums():
    # The kernels themselves: F, sum e phi and sum e phi u from the cells' moments
    # against the rows summed one by one (_mixture_at), on random weights (some
    # zero) over cells of every size, at t on, between and beyond the rows.
    from skl_nw._engine import _compiled_cells as cells
    from skl_nw._engine import _compiled_conditional as kernels

    @numba.njit(fastmath=kernels._FAST, error_model="numpy")
    def both(ts, e, ys, s, starts, centres, inv_h, out):
        M = np.empty((cells.ORDER + 2, centres.size))
        cells.cell_moments(e, s, starts, 0, centres.size, M)
        none = np.empty(0)
        for k in range(ts.size):
            out[0, k, 0], out[0, k, 1], out[0, k, 2] = cells.cells_at(
                ts[k], e, none, centres, starts, M, inv_h, 9.0
            )
            out[1, k, 0], out[1, k, 1], out[1, k, 2] = kernels._mixture_at(
                ts[k], e, none, ys, inv_h, 9.0
            )

    rng = np.random.default_rng(8)
    ys = np.sort(np.concatenate([rng.normal(size=3000), np.full(200, 0.3), [5.0, 9.0]]))
    e = rng.random(ys.size) * (rng.random(ys.size) > 0.2)
    ts = np.concatenate([rng.choice(ys, 50), rng.uniform(-6, 12, 100)])
    for h in (0.02, 0.3, 2.0):
        out = np.empty((2, ts.size, 3))
        both(ts, e, ys, *taylor_cells(ys, 1 / h), 1 / h, out)
        np.testing.assert_allclose(out[0], out[1], rtol=0, atol=1e-15 * e.sum())


def test_taylor_cells_cover_the_rows_within_a_quarter_bandwidth():
    from skl_nw._engine import _compiled_cells, _conditional

    assert _conditional._CELL_HALF == _compiled_cells.CELL_HALF == 0.25  # the order's bound
    rng = np.random.default_rng(9)
    ys = np.sort(np.round(rng.standard_t(2, 5000), 2))
    for h in (1e-300, 1e-3, 0.1, 10.0, 1e6):
        s, starts, centres = taylor_cells(ys, 1 / h)
        assert starts[0] == 0 and starts[-1] == ys.size and (np.diff(starts) > 0).all()
        assert (np.diff(centres) > 0).all()
        assert np.abs(s).max() <= 0.25 + 1e-9  # the grid index rounds: 2e6 cells at 1e-3
        rows = np.repeat(np.arange(centres.size), np.diff(starts))
        np.testing.assert_allclose(centres[rows] + s * h, ys, rtol=0, atol=1e-12 * np.abs(ys).max())


def test_paired_table_polynomials_equal_phi_on_their_interval():
    # Each node's economised polynomial against scipy's ndtr and the normal density,
    # over |x| <= RADIUS (a cell's half-width and half a node step), at every node.
    from skl_nw._engine import _compiled_cells, _compiled_paired

    radius, edge = _compiled_paired.RADIUS, _compiled_cells.CELL_EDGE + _compiled_cells.CELL_HALF
    x = np.linspace(-radius, radius, 41)
    for pdf in (False, True):
        table, u0, inv_step = _compiled_paired.paired_table(pdf)
        u = u0 + np.arange(len(table)) / inv_step
        assert u[0] < -edge and u[-1] > edge  # every cell of a window has a node within a step
        V = np.zeros((len(u), len(x)))
        for p in range(table.shape[1] - 1, -1, -1):
            V = V * x + table[:, [p]]
        Z = u[:, None] - x
        exact = np.exp(-0.5 * Z**2) / np.sqrt(2 * np.pi) if pdf else ndtr(Z)
        np.testing.assert_allclose(V, exact, rtol=0, atol=3e-16)


def test_base2_exponential_matches_numpy():
    from skl_nw._engine._compiled_exp import _exp2_nonpositive

    @numba.njit
    def exp2_array(x, out):
        for j in range(x.size):
            out[j] = _exp2_nonpositive(x[j])

    rng = np.random.default_rng(10)
    x = np.concatenate([-rng.uniform(0, 1021, 100_000), -rng.uniform(0, 1e-3, 1000),
                        [0.0, -0.5, -1.0, -1020.99, -1021.5, -1e300, -np.inf]])  # fmt: skip
    out = np.empty_like(x)
    exp2_array(x, out)
    normal = x > -1021
    ref = np.exp2(x[normal])
    assert np.max(np.abs(out[normal] - ref) / ref) < 4 * np.finfo(float).eps
    assert np.all(out[~normal] == 0.0)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_paired_values_equal_the_dense_mixture_in_hard_cases(d):
    # One value a query (the tabulated polynomials): queries far from every point (the
    # weights underflow and are redone), ties in y, zero sample weights, values at the
    # cells' edges and centres, in both tails and beyond; d = 3 takes the natural pass.
    rng = np.random.default_rng(11)
    n, hy = 600, 0.07
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.round(np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n), 2)  # ties
    w = rng.integers(0, 3, n).astype(float)  # a third of the rows weigh 0
    h = np.linspace(0.3, 0.5, d)
    reg = NadarayaWatsonRegressor(h, y_bandwidth=hy).fit(X, y, sample_weight=w)
    # 13 or more bandwidths from every point: the weights' sum is below e^-600 (redone).
    Xq = np.vstack([rng.uniform(-2, 2, (60, d)), np.full((3, d), 15.0), np.full((3, d), -17.0)])
    cells = taylor_cells(np.sort(y), 1 / hy)[2]
    t = np.concatenate([
        rng.choice(cells, 20) + np.array([-0.25, 0.25])[rng.integers(0, 2, 20)] * hy,  # cell edges
        rng.choice(cells, 10),
        rng.choice(y, 10),
        y.min() - hy * np.array([1.0, 3.0, 6.0, 12.0]),  # lower tail
        y.max() + hy * np.array([1.0, 3.0, 6.0, 12.0]),  # upper tail
        rng.uniform(-3, 3, 18),
    ])  # fmt: skip
    T = rng.permutation(np.resize(t, len(Xq)))[:, None]
    F, f = _dense(X, y, w, Xq, T, h, hy)
    F_ours, f_ours = reg.predict_cdf(Xq, T), reg.predict_pdf(Xq, T)
    np.testing.assert_allclose(F_ours, F, rtol=0, atol=2e-15)
    np.testing.assert_allclose(f_ours * hy, f * hy, rtol=0, atol=2e-15)
    tail = F < 1e-3
    assert tail.sum() >= 5
    np.testing.assert_allclose(F_ours[tail], F[tail], rtol=1e-11, atol=1e-300)
    small = (T < y.min()) & (f * hy < 1e-3)
    np.testing.assert_allclose(f_ours[small], f[small], rtol=1e-11, atol=1e-300)


def test_the_sorted_mixture_is_kept_per_fit_and_not_pickled():
    import pickle

    rng = np.random.default_rng(12)
    X, Xq = rng.normal(size=(300, 2)), rng.normal(size=(20, 2))
    y, t = X[:, 0] + rng.normal(size=300), rng.normal(size=(20, 1))
    reg = NadarayaWatsonRegressor([0.4, 0.5], y_bandwidth=0.3).fit(X, y)
    F = reg.predict_cdf(Xq, t)
    kept = reg._fused(reg._mixture)
    assert reg._fused(reg._mixture) is kept  # one sort and copy of the rows per fit
    copy = pickle.loads(pickle.dumps(reg))
    assert "_fused" not in vars(copy._mixture)
    np.testing.assert_array_equal(copy.predict_cdf(Xq, t), F)
    reg.fit(X, -y)  # a refit: a new mixture, nothing of the old one
    np.testing.assert_allclose(reg.predict_cdf(Xq, -t), 1 - F, rtol=0, atol=1e-14)
