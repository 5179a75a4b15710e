"""The compiled span paths against dense formulas: the window (1-D) and the cell grid (2-D, 3-D).

The block tree (``window_moments`` + ``window_tree_sums``: Taylor-shifted
block moments) and the row-by-row loop (``window_sums``) against
``sum_{|x_i - q| < r, i != own} K(|x_i - q| / r)^p WV_i`` written here with
numpy, on data with ties, radii of zero, rows left out, both powers, and
offsets far from the origin (the moments are about each block's centre).
The grid's radii against a full sort, its sums against dense sums, with ties,
a tight cluster, rows that do not count and queries outside the data (one far outside).
"""

import numpy as np
import pytest

from skl_nw._engine import _window
from skl_nw._engine._loader import compiled

kernels = compiled()
pytestmark = pytest.mark.skipif(kernels is None, reason="the window path is compiled only")

POWER_FORMS = [(3, 3), (2, 2), (2, 3), (2, 0), (1, 1), (2, 1)]


def dense(x, WVT, q, r, own, a, b):
    """(m, 2, c): the sums of K and K^2 over each query's support, its own row dropped; (m,):
    how many rows have a positive kernel weight."""
    d = np.abs(x[None, :] - q[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(r[:, None] > 0, d / r[:, None], np.where(d == 0, 0.0, np.inf))
    inside = (d < r[:, None]) | ((r[:, None] == 0) & (d == 0))
    K = np.where(inside, (1 - np.minimum(u, 1) ** a) ** b, 0.0)
    rows = np.arange(len(q))
    K[rows[own >= 0], own[own >= 0]] = 0.0
    return np.stack([K @ WVT.T, (K * K) @ WVT.T], axis=1), (K > 0).sum(axis=1)


@pytest.mark.parametrize("a, b", POWER_FORMS)
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_block_tree_and_loop_equal_the_dense_sums(rng, a, b, offset):
    for n in (1, 15, 16, 17, 100, 700):
        x = np.sort(np.round(rng.uniform(0, 30, n), 1)) + offset  # ties
        WVT = rng.normal(size=(3, n)) * rng.uniform(0, 1, n)
        m = 40
        q = np.concatenate([x[rng.integers(0, n, m // 2)], rng.uniform(-5, 35, m // 2) + offset])
        k = rng.integers(1, n + 1, m)
        r = np.sort(np.abs(x[None, :] - q[:, None]), axis=1)[np.arange(m), k - 1]
        r[::7] = 0.0  # on top of k rows (or none)
        r[1::9] *= 1.7  # beyond the k-th row
        own = np.where(rng.random(m) < 0.5, rng.integers(0, n, m), -1).astype(np.int64)
        lo = np.searchsorted(x, q - r, side="left").astype(np.int64)
        hi = np.searchsorted(x, q + r, side="right").astype(np.int64)
        want, count = dense(x, WVT, q, r, own, a, b)
        scale = np.abs(WVT).sum() + 1e-300
        for squares in (False, True):
            loop = np.empty((m, 2, 3))
            kernels.window_sums(x, WVT, q, r, lo, hi, own, a, b, squares, loop)
            shifts = _window._shift_tables(a, b, squares)
            tree = kernels.window_moments(x, WVT, shifts.shape[1] - 1, 4)
            fast = np.empty((m, 2, 3))
            kernels.window_tree_sums(x, WVT, *tree, 4, q, r, lo, hi, own, a, b, shifts, fast)
            P = 2 if squares else 1
            assert np.abs(loop[:, :P] - want[:, :P]).max() <= 1e-13 * scale
            assert np.abs(fast[:, :P] - want[:, :P]).max() <= 1e-12 * scale
            # A row-less window is exactly 0 (the fallback rules see it).
            assert (fast[count == 0, :P] == 0).all()


@pytest.mark.parametrize("d", [2, 3])
def test_grid_radii_and_sums_equal_a_full_sort(rng, d):
    """The grid's k-th distances equal a full sort's exactly; its sums the dense ones."""
    from skl_nw._engine import _grid, _span

    for n, k in ((1, 1), (30, 5), (400, 7), (400, 400), (900, 120)):
        X = np.round(rng.uniform(0, 3, (n, d)), 1)  # ties
        X[: n // 3] = 1.0 + 1e-3 * rng.normal(size=(n // 3, d))  # a tight cluster
        counted = np.flatnonzero(rng.random(n) < 0.9)
        grid = _grid.CellGrid(X, counted, k)
        # In this order (the kernel starts each search from the previous query's radius):
        # a far query, then near ones.
        Q = np.vstack([X[rng.integers(0, n, 20)], np.full((1, d), 1e20), X[rng.integers(0, n, 3)],
                       rng.uniform(-2, 5, (16, d))])  # fmt: skip
        own = np.where(rng.random(40) < 0.5, rng.integers(0, n, 40), -1)
        D = np.sqrt(((Q[:, None, :] - X[None, counted, :]) ** 2).sum(-1))
        D[counted[None, :] == own[:, None]] = np.inf
        finite = np.where(np.isfinite(D), D, -1.0)
        kk = min(k, len(counted))
        want = np.where(np.isfinite(D).sum(1) >= kk, np.sort(D, axis=1)[:, kk - 1],
                        finite.max(axis=1, initial=0.0))  # fmt: skip
        skip = np.where(own >= 0, grid.position[np.maximum(own, 0)], -1).astype(np.int64)
        got = np.empty(len(Q))
        kernels.grid_radii(grid.XT, *grid.args(), Q, skip, kk, grid.start(kk), got)
        np.testing.assert_array_equal(got, np.maximum(want, 0.0))
        # Sums over the same radii, widened for some (rows beyond the k-th), every kernel.
        r = got * np.where(np.arange(len(Q)) % 3 == 0, 1.5, 1.0)
        WV = rng.normal(size=(n, 3))
        S = ((Q[:, None, :] - X[None, counted, :]) ** 2).sum(-1)  # as the kernel sums them
        S[~np.isfinite(D)] = np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            u2 = np.where(r[:, None] > 0, S / r[:, None] ** 2, np.where(S == 0, 0.0, np.inf))
        u2[np.abs(u2 - 1.0) <= _span.EDGE] = 1.0  # the k-th row and its ties: on the edge
        groups = np.array([0, 7, 8, 20, 40], np.int64)  # shared lines: any queries may group
        for a, b in POWER_FORMS:
            out = np.empty((len(Q), 2, 3))
            kernels.grid_sums(grid.XT, np.ascontiguousarray(WV[grid.rows]), *grid.args(), Q, r,
                              skip, groups, a, b, True, out)  # fmt: skip
            u = np.sqrt(np.minimum(u2, 1))
            K = np.where(u2 < 1, (1 - u**a) ** b, 0.0)
            want_sums = np.stack([K @ WV[counted], (K * K) @ WV[counted]], axis=1)
            assert np.abs(out - want_sums).max() <= 1e-12 * (np.abs(WV).sum() + 1), (a, b)


def test_grid_groups_are_runs_of_one_cell_cut_to_the_group_size():
    from skl_nw._engine import _grid

    cells = np.repeat([3, 5, 9], [1, 2 * _grid._GROUP + 1, _grid._GROUP])
    bounds = _grid._groups(cells)
    assert bounds[0] == 0 and bounds[-1] == len(cells)
    assert np.diff(bounds).max() == _grid._GROUP and len(bounds) - 1 == 1 + 3 + 1
    for first, stop in zip(bounds[:-1], bounds[1:], strict=True):
        assert len(set(cells[first:stop])) == 1
