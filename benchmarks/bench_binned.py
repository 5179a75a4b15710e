"""Binned path benchmarks: ``algorithm="binned"`` against the exact paths and KDEpy.

Run ``python -m benchmarks binned`` (about 5-8 minutes on 2 cores) or
``python -m benchmarks binned --quick`` (n = 1e5, well under a minute).

1. d = 1, n = 1e7 normal inputs, Gaussian kernel, bandwidth by Scott's rule
   (computed once, outside the timings; its own time is printed), 1e5 queries:
   fit + predict, max error against exact values on a subsample of queries
   (computed by direct summation over every training point within 12
   bandwidths: the rest weighs less than 1e-31 of the total), against KDEpy's
   weighted ``FFTKDE`` (the ratio of two weighted density estimates on a grid,
   interpolated linearly) at equal or better error, and against the exact
   brute-force path (timed on the subsample, extrapolated linearly in m).
2. d = 2, n = 1e7: fit + predict and max error.
3. Time against n for binned, tree and brute (a log-log plot).
4. Leave-one-out bandwidth search (the default 40-candidate grid), d = 1.
5. Direct against FFT convolution by stencil size (the constant of the engine).
6. Local linear (``LocalPolynomialRegressor(degree=1)``), d = 1, n = 1e6 and 1e7:
   binned fit + predict of 1e5 queries, max error against a direct local-linear
   summation on a subsample of queries, and the exact brute-force path (timed on
   a subsample of queries, extrapolated linearly in m).  Then d = 2, n = 1e6,
   bandwidth 0.3, ``binned_tol=1e-3``, degrees 1 and 2: binned fit + predict of
   1e5 queries and the max error against the exact brute-force path on 50.

7. Where Nadaraya–Watson's standard errors leave the exact pass for the grid:
   per configuration (d, n, bandwidth, ``binned_tol``), the grid's time
   (``GridNoise`` and the binned sums, per node), the exact pass's per query
   (on the algorithm the binned fit's exact set takes), the measured crossover
   in queries and the one ``_binning``'s rule (``_NOISE_NODE_PAIRS``) predicts,
   one thread, CPU seconds.

``--only local`` runs section 6 alone, ``--only std`` section 7.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import scipy.fft
from scipy import ndimage

from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    rule_of_thumb,
)

from ._common import describe, environment, spread, table, timings

CUTOFF = 12.0  # bandwidths: exp(-72) ~ 5e-32


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(3 * X[:, 0]) + (0.5 * X[:, 1] ** 2 if d > 1 else 0) + 0.5 * rng.normal(size=n)
    return X, y, rng


def exact_reference(X: np.ndarray, y: np.ndarray, Q: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Gaussian Nadaraya–Watson by direct summation over the points within CUTOFF bandwidths.

    Independent of skl_nw: rows sorted by the first feature, a window per query.
    """
    order = np.argsort(X[:, 0])
    Xs, ys = X[order] / h, y[order]
    out = np.empty(len(Q))
    for t, q in enumerate(Q / h):
        lo, hi = np.searchsorted(Xs[:, 0], [q[0] - CUTOFF, q[0] + CUTOFF])
        s = ((Xs[lo:hi] - q) ** 2).sum(axis=1)
        k = np.exp(-0.5 * s[s < CUTOFF**2])
        out[t] = k @ ys[lo:hi][s < CUTOFF**2] / k.sum()
    return out


def local_linear_reference(X, y, Q, h) -> np.ndarray:
    """Gaussian local-linear fits by direct summation within CUTOFF bandwidths (d = 1).

    Independent of skl_nw: offsets ``t = (x - q) / h`` about each query, the 2 x 2
    weighted least-squares problem in closed form.
    """
    order = np.argsort(X[:, 0])
    xs, ys = X[order, 0] / h[0], y[order]
    out = np.empty(len(Q))
    for j, q in enumerate(Q[:, 0] / h[0]):
        lo, hi = np.searchsorted(xs, [q - CUTOFF, q + CUTOFF])
        t = xs[lo:hi] - q
        k = np.exp(-0.5 * t * t)
        s0, s1, s2 = k.sum(), k @ t, k @ (t * t)
        b0, b1 = k @ ys[lo:hi], k @ (t * ys[lo:hi])
        out[j] = (s2 * b0 - s1 * b1) / (s0 * s2 - s1 * s1)
    return out


def section_local(sizes, m, n_check, tol):
    rows = []
    for n in sizes:
        X, y, rng = make_data(n, 1)
        h = rule_of_thumb(X)
        Q = rng.normal(size=(m, 1))
        reference = local_linear_reference(X, y, Q[:n_check], h)

        def run(X=X, y=y, h=h, Q=Q):
            est = LocalPolynomialRegressor(h, algorithm="binned", binned_tol=tol).fit(X, y)
            return est.predict(Q), est

        (P, est), times = timings(run, repeat=3)
        error = np.abs(P[:n_check] - reference).max() / np.ptp(y)
        sub = 20 if n > 10**6 else 100
        brute = LocalPolynomialRegressor(h, algorithm="brute").fit(X, y)
        start = time.perf_counter()
        exact = brute.predict(Q[:sub])
        per_query = (time.perf_counter() - start) / sub
        brute_error = np.abs(exact - reference[:sub]).max() / np.ptp(y)
        rows.append([f"{n:.0e}", f"{est._backend.sums.grid.shape[0]}", f"{np.median(times):.3f}",
                     f"{error:.1e}", f"{per_query * m:.0f} (x {m / sub:g})",
                     f"{brute_error:.0e}", f"{per_query * m / np.median(times):.0f}"])  # fmt: skip
    print(table([f"local linear, d = 1, Gaussian, {m:.0e} queries, binned_tol={tol:g}: n",
                 "nodes", "binned fit + predict (s)", f"max error / range ({n_check} queries)",
                 "exact brute (s, extrapolated)", "brute error / range", "speed-up"],
                rows))  # fmt: skip


def section_local_2d(n, m, n_check, tol, h=0.3):
    X, y, rng = make_data(n, 2)
    Q = rng.normal(size=(m, 2))
    rows = []
    for degree in (1, 2):

        def run(degree=degree):
            params = {"degree": degree, "algorithm": "binned", "binned_tol": tol}
            est = LocalPolynomialRegressor(h, **params).fit(X, y)
            return est.predict(Q), est

        (P, est), times = timings(run, repeat=3)
        exact = LocalPolynomialRegressor(h, degree=degree, algorithm="brute").fit(X, y)
        error = np.abs(P[:n_check] - exact.predict(Q[:n_check])).max() / np.ptp(y)
        shape = " x ".join(str(s) for s in est._backend.sums.grid.shape)
        rows.append([str(degree), shape, spread(times), f"{error:.1e}"])
    print(table([f"local polynomial, d = 2, n = {n:.0e}, h = {h}, {m:.0e} queries, "
                 f"binned_tol={tol:g}: degree", "grid", "binned fit + predict (s)",
                 f"max error / range ({n_check} queries)"], rows))  # fmt: skip


def binned_run(X, y, h, Q, tol):
    def run():
        est = NadarayaWatsonRegressor(h, algorithm="binned", binned_tol=tol).fit(X, y)
        return est.predict(Q), est

    (P, est), times = timings(run, repeat=3)
    return P, est, times


def kdepy_run(x, y, h, q, n_grid):
    from KDEpy import FFTKDE

    def run():
        shift = y.min() - 1.0  # KDEpy needs positive weights
        v = y - shift
        grid, f_w = FFTKDE(bw=h).fit(x).evaluate(n_grid)
        f_v = FFTKDE(bw=h).fit(x, weights=v).evaluate(grid)
        ratio = f_v * v.sum() / (f_w * len(x))
        return np.interp(q, grid, ratio) + shift

    return timings(run, repeat=3)


def section_1d(n, m, n_check, tols, rows_out):
    X, y, rng = make_data(n, 1)
    start = time.perf_counter()
    h = rule_of_thumb(X)
    scott = time.perf_counter() - start
    Q = rng.normal(size=(m, 1))
    check = np.arange(n_check)
    start = time.perf_counter()
    reference = exact_reference(X, y, Q[check], h)
    print(f"exact reference ({n_check} queries, direct summation): "
          f"{time.perf_counter() - start:.1f} s; Scott's rule: {scott:.2f} s")  # fmt: skip
    span = np.ptp(y)
    rows = []
    for tol in tols:
        P, est, times = binned_run(X, y, h, Q, tol)
        error = np.abs(P[check] - reference).max() / span
        nodes = est._backend.sums.grid.shape[0]
        rows.append([f"skl_nw binned, binned_tol={tol:g} ({nodes} nodes)",
                     f"{np.median(times):.3f}", f"{error:.1e}"])  # fmt: skip
    try:
        for n_grid in (2**14, 2**16, 2**18):
            P, times = kdepy_run(X[:, 0], y, float(h[0]), Q[:, 0], n_grid)
            error = np.abs(P[check] - reference).max() / span
            rows.append([f"KDEpy FFTKDE ratio ({n_grid} nodes)",
                         f"{np.median(times):.3f}", f"{error:.1e}"])  # fmt: skip
    except ImportError:
        rows.append(["KDEpy FFTKDE ratio", "not installed", ""])
    sub = min(m, 200)
    brute = NadarayaWatsonRegressor(h, algorithm="brute").fit(X, y)
    start = time.perf_counter()
    brute.predict(Q[:sub])
    per_query = (time.perf_counter() - start) / sub
    rows.append([f"skl_nw exact brute (timed on {sub} queries, x {m / sub:g})",
                 f"{per_query * m:.1f}", "0"])  # fmt: skip
    print(table([f"d = 1, n = {n:.0e}, {m:.0e} queries: method", "fit + predict (s)",
                 "max error / range"], rows))  # fmt: skip
    rows_out.extend(rows)


def section_2d(n, m, n_check, tol):
    X, y, rng = make_data(n, 2)
    h = rule_of_thumb(X)
    Q = rng.normal(size=(m, 2))
    reference = exact_reference(X, y, Q[:n_check], h)
    P, est, times = binned_run(X, y, h, Q, tol)
    error = np.abs(P[:n_check] - reference).max() / np.ptp(y)
    print(table([f"d = 2, n = {n:.0e}, {m:.0e} queries", "grid", "fit + predict (s)",
                 f"max error / range ({n_check} queries)"],
                [[f"binned_tol={tol:g}", "x".join(map(str, est._backend.sums.grid.shape)),
                  f"{np.median(times):.3f}", f"{error:.1e}"]]))  # fmt: skip


def section_scaling(sizes, m, plot):
    results = {"binned": [], "kd_tree": [], "brute": []}
    caps = {"binned": max(sizes), "kd_tree": 10**5, "brute": 10**6}
    rows = []
    for n in sizes:
        X, y, rng = make_data(n, 1)
        h = rule_of_thumb(X)
        Q = rng.normal(size=(m, 1))
        row = [f"{n:.0e}"]
        for name, cap in caps.items():
            if n > cap:
                row.append("")
                continue
            extra = {"binned_tol": 1e-6} if name == "binned" else {}
            est = NadarayaWatsonRegressor(h, algorithm=name, **extra)
            _, times = timings(lambda e=est, X=X, y=y, Q=Q: e.fit(X, y).predict(Q), repeat=1)
            results[name].append((n, float(times[0])))
            row.append(f"{times[0]:.3g}")
        rows.append(row)
    print(table(["n (d = 1, Gaussian)", "binned (s)", "kd_tree (s)", "brute (s)"], rows))
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for name, points in results.items():
            ax.loglog(*zip(*points, strict=True), "o-", label=name)
        ax.set(xlabel="training points n", ylabel=f"fit + predict, {m} queries (s)")
        ax.legend()
        fig.savefig(plot, dpi=110, bbox_inches="tight")
        print(f"Wrote {plot}")


def section_search(n):
    X, y, _ = make_data(n, 1)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(algorithm="binned"))
    _, times = timings(lambda: search.fit(X, y), repeat=1)
    print(table([f"LOO search, d = 1, n = {n:.0e}", "candidates", "time (s)", "bandwidth"],
                [["binned, default grid", len(search.cv_results_["params"]),
                  f"{times[0]:.2f}", f"{search.best_params_['bandwidth'][0]:.4g}"]]))  # fmt: skip


def section_convolution(G):
    rng = np.random.default_rng(0)
    c = rng.uniform(size=G)
    rows = []
    for taps in (3, 5, 9, 17, 33, 65):
        K = np.hanning(taps + 2)[1:-1]
        _, direct = timings(lambda K=K: ndimage.convolve(c, K, mode="constant"), repeat=5)
        P = scipy.fft.next_fast_len(G + taps, real=True)

        def fft(K=K, P=P):
            return scipy.fft.irfft(scipy.fft.rfft(c, P) * scipy.fft.rfft(K, P), P)

        _, times = timings(fft, repeat=5)
        rows.append([taps, f"{np.median(direct) * 1e3:.2f}", f"{np.median(times) * 1e3:.2f}"])
    print(table([f"stencil nodes (G = {G})", "direct (ms)", "FFT (ms)"], rows))


STD_CONFIGS = [  # (d, n, bandwidth, binned_tol): grids of 4e3 to 3e6 nodes
    (1, 20_000, 0.01, None), (1, 200_000, 0.002, None), (1, 200_000, 0.0005, None),
    (2, 20_000, 0.05, None), (2, 200_000, 0.05, None), (2, 200_000, 0.008, 1e-2),
    (2, 200_000, 0.03, 1e-2),
]  # fmt: skip


def section_std_crossover(configs, m: int = 300):
    """Grid against exact standard errors: the measured crossover and the rule's."""
    from threadpoolctl import threadpool_limits

    from skl_nw._engine import neighbour_fraction
    from skl_nw._smoothers import _binning

    from .bench_engine import cpu_timings

    def timed(fn, pairs_a_node, repeat):
        saved = _binning._NOISE_NODE_PAIRS, _binning._GRID_STD_MIN_RATIO
        _binning._NOISE_NODE_PAIRS = _binning._GRID_STD_MIN_RATIO = pairs_a_node
        try:
            fn()  # compiled, caches warm
            return float(np.median(cpu_timings(fn, repeat)[1]))
        finally:
            _binning._NOISE_NODE_PAIRS, _binning._GRID_STD_MIN_RATIO = saved

    rows = []
    for d, n, h, tol in configs:
        rng = np.random.default_rng(0)
        X = rng.uniform(size=(n, d))
        y = np.sin(6 * X.sum(axis=1)) + rng.normal(0, 0.3, n)
        Q = rng.uniform(0.05, 0.95, size=(m, d))
        est = NadarayaWatsonRegressor(h, algorithm="binned", binned_tol=tol, n_jobs=1).fit(X, y)

        def call(est=est, Q=Q):
            return est.predict(Q, return_std=True)

        with threadpool_limits(limits=1):
            grid = timed(call, -np.inf, 2)
            exact = timed(call, np.inf, 3) / m
        binned = est._backend.sums
        train, G = binned.exact(), binned.grid.size
        share = neighbour_fraction(train.X, train.log_w, binned.kernel, binned.rtol)
        path = f"tree ({share:.1%})" if train.trees else "brute"
        rule = _binning._GRID_STD_MIN_RATIO + _binning._NOISE_NODE_PAIRS * G / n
        rows.append([d, f"{n:,}", h, tol or _binning.DEFAULT_TOL, f"{G:.3g}", path,
                     f"{grid:.3g} ({grid / G * 1e6:.2f} µs a node)",
                     f"{exact * 1e3:.3g} ({exact / n * 1e9:.2f} ns a row)",
                     f"{grid / exact:,.0f}", f"{rule:,.0f}",
                     f"{(grid / exact - _binning._GRID_STD_MIN_RATIO) * n / G:,.0f}"])  # fmt: skip
    print("### Standard errors: grid or exact pass (one thread, CPU seconds)\n")
    header = ["d", "n", "h", "binned_tol", "nodes", "exact path", "grid (s)",
              "exact (ms a query)", "crossover (queries)", "rule's", "pairs a node"]  # fmt: skip
    print(table(header, rows))
    print(
        f"\nGrid: medians of 2 calls of {m} queries; exact: of 3, per query.  Pairs a "
        "node: the exact pass's query-row pairs that cost one node of the grid, the "
        f"quantity of `_NOISE_NODE_PAIRS` (now {_binning._NOISE_NODE_PAIRS})."
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks binned")
    parser.add_argument("--quick", action="store_true", help="n = 1e5 only (seconds)")
    parser.add_argument("--plot", default=None, help="write the scaling plot here (PNG)")
    parser.add_argument("--only", choices=["local", "std"], default=None,
                        help="one section only")  # fmt: skip
    args = parser.parse_args(argv)
    print(describe(environment(extra=("KDEpy",))) + "\n")
    quick = args.quick
    local = ([10**5] if quick else [10**6, 10**7], 10**4 if quick else 10**5,
             100 if quick else 200, 1e-6)  # fmt: skip
    local_2d = (10**5 if quick else 10**6, 10**4 if quick else 10**5, 50, 1e-3)
    std_configs = [(1, 20_000, 0.01, None), (2, 20_000, 0.05, 1e-2)] if quick else STD_CONFIGS
    if args.only == "std":
        section_std_crossover(std_configs)
        return
    if args.only == "local":
        section_local(*local)
        print()
        section_local_2d(*local_2d)
        return
    section_1d(10**5 if quick else 10**7, 10**4 if quick else 10**5, 200 if quick else 2000,
               (1e-5, 1e-6) if quick else (1e-4, 1e-5, 1e-6), [])  # fmt: skip
    print()
    section_2d(10**5 if quick else 10**7, 10**4 if quick else 10**5, 100 if quick else 300,
               1e-3)  # fmt: skip
    print()
    sizes = [10**3, 10**4, 10**5] if quick else [10**3, 10**4, 10**5, 3 * 10**5, 10**6, 10**7]
    plot = args.plot or (None if quick else str(Path("docs/_static/binned_scaling.png")))
    section_scaling(sizes, 1000 if quick else 2000, plot)
    print()
    section_search(10**5 if quick else 10**6)
    print()
    section_convolution(10**5)
    print()
    section_local(*local)
    print()
    section_local_2d(*local_2d)
    print()
    section_std_crossover(std_configs)
