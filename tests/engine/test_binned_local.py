"""LocalPolynomialRegressor(algorithm="binned") against the exact path."""

import numpy as np
import pytest

from conftest import PROFILES, naive_linear_bin
from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor
from skl_nw._engine._binned import Grid
from skl_nw._engine._binned_local import BinnedLocalFit
from skl_nw._engine._local_fit import Moments, exponents
from skl_nw._kernels import get_kernel

# (kernel, d) -> binned_tol: as in test_binned.py (the tophat's error is first order).
TOLS = {("gaussian", 1): 1e-4, ("epanechnikov", 1): 1e-4, ("tophat", 1): 1e-2,
        ("gaussian", 2): 1e-3, ("epanechnikov", 2): 1e-3, ("tophat", 2): 5e-2}  # fmt: skip
SIZES = {1: 20_000, 2: 30_000}


def _smooth_data(rng, d, n_outputs=2):
    """Dense data: uniform inputs 8 bandwidths (h = 0.5) wide, smooth targets plus noise."""
    n = SIZES[d]
    X = rng.uniform(0, 4, size=(n, d))
    y = np.column_stack(
        [np.sin(2 * X[:, 0] + t) + X[:, -1] + 0.5 * rng.normal(size=n) for t in range(n_outputs)]
    )
    return X, y, rng.uniform(0.5, 2.0, size=n)


def _pair(kernel, degree, tol, X, y, w):
    params = {"bandwidth": 0.5, "kernel": kernel, "degree": degree}
    exact = LocalPolynomialRegressor(algorithm="brute", **params).fit(X, y, w)
    binned = LocalPolynomialRegressor(algorithm="binned", binned_tol=tol, **params).fit(X, y, w)
    return exact, binned


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tophat"])
def test_error_bound(rng, kernel, d, degree):
    # max |binned - exact| <= binned_tol * (max y - min y) per output, queries anywhere in
    # the data's box; weighted, two outputs.  The slopes agree to a few binned_tol of
    # their largest value (a derivative of the binned moments).
    X, y, w = _smooth_data(rng, d)
    tol = TOLS[kernel, d]
    Q = rng.uniform(0, 4, size=(150, d))
    exact, binned = _pair(kernel, degree, tol, X, y, w)
    error = np.abs(binned.predict(Q) - exact.predict(Q)).max(axis=0) / np.ptp(y, axis=0)
    assert np.all(error <= tol), (error, tol)
    G = exact.predict_gradient(Q)
    assert np.abs(binned.predict_gradient(Q) - G).max() <= 10 * tol * np.abs(G).max()
    assert binned._fit_method == "binned" and binned.tree_ is None


def _interpolated_kernel(X, grid, profile, radius):
    """``omega_i(g) = sum_g' hat_g'(x_i) K(g' - g)`` (n, G) and the nodes (G, d).

    The kernel's multilinear interpolant over the nodes, from its definition
    (dense in points and nodes), ``K`` truncated to the box of node offsets
    within ``radius`` (the stencil's).
    """
    nodes = grid.lo + np.indices(grid.shape).reshape(len(grid.shape), -1).T * grid.step
    hats = naive_linear_bin(X, grid.lo, grid.step, grid.shape, np.eye(len(X)))  # (n, G)
    gaps = nodes[None] - nodes[:, None]
    reach = np.ceil(radius / grid.step) * grid.step * (1 + 1e-9)
    inside = np.all(np.abs(gaps) <= reach, axis=2)
    return hats @ (profile(np.sqrt((gaps**2).sum(axis=2))) * inside), nodes


def _compiled_or_not(monkeypatch, module, compiled: bool):
    """Make ``module`` use the compiled kernels (even under SKL_NW_DISABLE_NUMBA) or numpy."""
    kernels = pytest.importorskip("skl_nw._engine._compiled") if compiled else None
    monkeypatch.setattr(module, "compiled", lambda: kernels)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("path", ["direct", "spectral", "binning_each"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_node_moments_against_their_definition(rng, monkeypatch, kernel, d, path, compiled):
    # Moments about every node with the points where they are and the kernel
    # interpolated, odd ones included (the sign of the stencils), on the separable
    # (Gaussian) and the d-dimensional stencil paths; summed directly, by transforms
    # with the pairs summed between them, or (large grids) one convolution per pair of
    # sums binned one monomial at a time; offset binning and the pairs' sums compiled
    # (even where SKL_NW_DISABLE_NUMBA turns them off) or by numpy.
    from skl_nw._engine import _binned_direct, _binned_local, _binned_offsets

    _compiled_or_not(monkeypatch, _binned_offsets, compiled)
    monkeypatch.setattr(_binned_direct, "_SCATTER_PER_FFT_OP", np.inf if path == "direct" else 0)
    each = []
    if path == "binning_each":  # neither the sums nor the spectra fit beside the moments
        monkeypatch.setattr(_binned_local, "sums_fit", lambda *args: False)
        monkeypatch.setattr(_binned_offsets, "spectral_fits", lambda *args: False)
        binning_each = _binned_local.node_moments_binning_each
        monkeypatch.setattr(_binned_local, "node_moments_binning_each",
                            lambda *args: each.append(1) or binning_each(*args))  # fmt: skip
    X = rng.uniform(0, 1, size=(200, d))
    w, y = rng.uniform(0.5, 2, 200), rng.normal(size=(200, 1))
    fit = BinnedLocalFit(X, w, y, get_kernel(kernel), 0.2, degree=2)  # a coarse grid
    mom = Moments(d, 4, 2)
    M, B, error = fit._moments(mom)
    grid: Grid = fit.grid
    assert grid.size < 2000  # the oracle is dense in node pairs
    assert error.any() if path == "spectral" else not error.any() if path == "direct" else each
    omega, nodes = _interpolated_kernel(X, grid, PROFILES[kernel], fit.radius)
    columns = np.column_stack([y[:, 0] - fit.mid, np.ones(200)]) * w[:, None]  # (n, 2)
    for a, exponent in enumerate(exponents(d, 4)):
        # sum_i omega_i(g) w_i (x_i - g)^a [y_i - mid, 1] at every node g: (2, G)
        expected = columns.T @ (omega * np.prod((X[:, None] - nodes[None]) ** exponent, axis=2))
        scale = np.abs(expected).max()
        np.testing.assert_allclose(M[a], expected[-1], atol=1e-10 * scale)
        if a < mom.n_y:
            np.testing.assert_allclose(B[a], expected[:-1], atol=1e-10 * scale)


@pytest.mark.parametrize("tiled", [True, False])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_compiled_offset_bin_equals_numpy(rng, monkeypatch, d, tiled):
    # The compiled pass against the numpy reference: every monomial of degree <= 4 (2 in
    # 3-D) with two targets on the first, and one monomial alone (the sums binned one at
    # a time); rows in their order or in their cells' tiles.
    from skl_nw._engine import _binned_offsets as bo
    from skl_nw._engine._binned import make_grid

    kernels = pytest.importorskip("skl_nw._engine._compiled")
    monkeypatch.setattr(bo, "_CACHE_BYTES", 0 if tiled else np.inf)
    X = rng.normal(size=(3000, d))
    w, V, mid = rng.uniform(0.5, 2, 3000), rng.normal(size=(3000, 2)), np.array([0.3, -0.1])
    grid = make_grid(X, 0.3, 1.0)
    exps = exponents(d, 4 if d < 3 else 2)
    n_y = len(exponents(d, 1))
    for E, k_y in [(exps, n_y), (exps[-2:-1], 1), (exps[n_y : n_y + 1], 0)]:
        expected = bo._offset_bin_numpy(X, w, V, mid, grid, E, k_y)
        monkeypatch.setattr(bo, "compiled", lambda: kernels)
        got = bo.offset_bin(X, w, V, mid, grid, E, k_y)
        for a, b in zip(got, expected, strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max(initial=0))


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("d", [1, 2])
def test_compiled_node_solve_equals_numpy(rng, monkeypatch, d, degree):
    # The per-node solve, compiled (the exact path's pass with the binned noise level) and
    # with numpy: the same fits, a constant column dead on both.
    import skl_nw._engine._local_fit as lf

    X = rng.uniform(0, 4, size=(2000, d))
    if d == 2:
        X[:, 1] = 1.5
    y = np.sin(2 * X[:, :1]) + 0.1 * rng.normal(size=(2000, 1))
    fits = []
    for compiled in (True, False):
        _compiled_or_not(monkeypatch, lf, compiled)
        fits.append(BinnedLocalFit(X, np.ones(2000), y, get_kernel("gaussian"), 1e-3, degree))
    np.testing.assert_array_equal(fits[0].valid, fits[1].valid)
    scale = np.abs(fits[1].coef).max()
    np.testing.assert_allclose(fits[0].coef, fits[1].coef, rtol=0, atol=1e-9 * scale)
    if d == 2:
        assert not np.any(fits[0].coef[:, 2]), "the constant column's slope is 0"


@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
def test_queries_the_grid_cannot_serve_are_exact(rng, kernel):
    # Far out (and, for the compact kernel, in a gap between clusters with no neighbour
    # within the support): the exact path's values and slopes.  Near the data's edge and
    # in the gap the Gaussian fit extrapolates its line: an error that grows with the
    # distance from the data (here up to about 6 binned_tol at 1.6 bandwidths).
    X = np.concatenate([rng.uniform(0, 1, 3000), rng.uniform(30, 31, 3000)])[:, None]
    y = np.sin(6 * X[:, 0]) + (X[:, 0] > 10)
    Q = np.array([[-50.0], [15.0], [60.0], [-0.1], [1.6], [29.2]])
    tol = 1e-6
    exact, binned = _pair(kernel, 1, tol, X, y, None)
    P, E = binned.predict(Q), exact.predict(Q)
    far = [0, 1, 2, 4, 5] if kernel == "epanechnikov" else [0, 1, 2]
    # The same batch of queries on both sides: a far query's line is extrapolated some
    # thirty bandwidths, which amplifies rounding that BLAS may round differently for
    # another batch size (1e-9 of the value seen on an AVX2 machine).
    np.testing.assert_allclose(P[far], exact.predict(Q[far]), rtol=1e-12)
    np.testing.assert_allclose(binned.predict_gradient(Q[far]), exact.predict_gradient(Q[far]))
    assert np.abs(P - E).max() <= 20 * tol * np.ptp(y)


def test_degree_zero_is_the_binned_nadaraya_watson(rng):
    from skl_nw import NadarayaWatsonRegressor

    X, y, w = _smooth_data(rng, 1)
    Q = rng.uniform(0, 4, size=(100, 1))
    nw = NadarayaWatsonRegressor(0.5, algorithm="brute").fit(X, y, w).predict(Q)
    lp = LocalPolynomialRegressor(0.5, degree=0, algorithm="binned", binned_tol=1e-4)
    assert np.abs(lp.fit(X, y, w).predict(Q) - nw).max() <= 1e-4 * np.ptp(y)


def test_inference_and_leave_one_out_use_the_exact_path(rng):
    X, y, w = _smooth_data(rng, 1, n_outputs=1)
    X, y, w = X[:2000], y[:2000, 0], w[:2000]
    exact, binned = _pair("gaussian", 1, 1e-4, X, y, w)
    Q = rng.uniform(0, 4, size=(20, 1))
    np.testing.assert_allclose(binned.predict(Q, return_std=True)[1],
                               exact.predict(Q, return_std=True)[1])  # fmt: skip
    factors = [0.8, 1.0, 2.0]
    np.testing.assert_allclose(binned._leave_one_out().predictions(factors),
                               exact._leave_one_out().predictions(factors))  # fmt: skip


def test_search_selects_the_exact_choice(rng):
    X = rng.uniform(0, 1, size=(1500, 1))
    y = np.sin(8 * X[:, 0]) + 0.3 * rng.normal(size=1500)
    exact = BandwidthSearchCV(LocalPolynomialRegressor()).fit(X, y)
    binned = BandwidthSearchCV(LocalPolynomialRegressor(algorithm="binned")).fit(X, y)
    assert binned.best_index_ == exact.best_index_
    assert binned.best_estimator_._fit_method == "binned"


def test_auto_bins_only_when_asked_and_errors(rng):
    X = rng.uniform(size=(100_000, 1))
    y = np.sin(6 * X[:, 0])
    assert LocalPolynomialRegressor().fit(X, y)._fit_method != "binned"
    assert LocalPolynomialRegressor(binned_tol=1e-3).fit(X, y)._fit_method == "binned"
    with pytest.raises(ValueError, match="algorithm='binned' supports at most 3 features"):
        LocalPolynomialRegressor(algorithm="binned").fit(rng.normal(size=(50, 4)), y[:50])


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_wide_bandwidths_stay_within_the_tolerance_of_the_exact_fit(rng, kernel, degree):
    # Nodes far apart against the data's spread lose a quadratic to rounding (0.77 of the
    # range of y at 1e6 spreads before the nodes were checked): exact queries there.
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(4 * X[:, 0]) + 0.3 * X[:, 1] ** 2
    for h in 10.0 ** np.arange(0, 13, 2):
        params = {"degree": degree, "bandwidth": h, "kernel": kernel}
        binned = LocalPolynomialRegressor(**params, algorithm="binned", binned_tol=1e-3)
        exact = LocalPolynomialRegressor(**params, algorithm="brute").fit(X, y)
        got = binned.fit(X, y).predict(X)
        np.testing.assert_allclose(got, exact.predict(X), rtol=0, atol=1e-3 * np.ptp(y))
