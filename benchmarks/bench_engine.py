"""Dense engine benchmarks: throughput against the exp limit, and the alternatives.

Run ``python -m benchmarks engine`` (a few minutes on 2 cores) or with ``--quick``
(smaller sizes, well under a minute).  Every comparison runs both sides in this
one process, one after the other; tables give the median wall time of several
runs with [min, max], and ratios of medians.

1. Throughput of the Gaussian brute-force predict, single thread, as a share of
   ``np.exp``'s own throughput measured in the same run (pairs/s ÷ exp/s).
2. Against statsmodels ``KernelReg(reg_type="lc")`` with the same fixed bandwidths.
3. Against the textbook numpy implementation that materialises the
   (n_queries, n_train) matrix: speed, and peak memory where it cannot run.
4. ``n_jobs=2`` against ``n_jobs=1`` on the brute path.
5. Time against n for brute force, the KD-tree, statsmodels and the textbook
   code (log-log plot with fitted slopes).
"""

from __future__ import annotations

import argparse
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from scipy.special import softmax
from threadpoolctl import threadpool_limits

from skl_nw import NadarayaWatsonRegressor

from ._common import describe, environment, numpy_engine, spread, table, timings, write_json


def gaussian_data(n: int, m: int, d: int, seed: int = 0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = np.sin(X[:, 0]) + rng.normal(0, 0.1, n)
    Q = rng.normal(size=(m, d)).astype(dtype)
    return X, y, Q


def textbook(X, y, Q, h):
    """The D2L-style implementation: every (query, key) pair at once."""
    scaled = (Q[:, None, :] - X[None, :, :]) / h
    weights = softmax(-0.5 * (scaled**2).sum(axis=-1), axis=1)
    return weights @ y


def peak_mib(fn) -> tuple[object, float]:
    """Result of ``fn`` and the peak of memory it allocated (tracemalloc), in MiB."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return result, peak / 2**20


# ------------------------------------------------------------ 1. exp limit


def bench_exp_limit(n: int, repeat: int) -> tuple[str, list[dict]]:
    rows, records = [], []
    with threadpool_limits(limits=1):
        for dtype, d in [(np.float64, 1), (np.float64, 8), (np.float64, 32), (np.float32, 8)]:
            X, y, Q = gaussian_data(n, n, d, dtype=dtype)
            h = 0.5 * np.sqrt(d)
            model = NadarayaWatsonRegressor(bandwidth=h, algorithm="brute", n_jobs=1).fit(X, y)
            # np.exp over the same number of elements, in arrays of one chunk's size.
            block = np.random.default_rng(1).uniform(-30, 0, size=(64, n)).astype(dtype)
            out = np.empty_like(block)

            def exps(block=block, out=out):
                for _ in range(n // 64):
                    np.exp(block, out=out)

            _, t_exp = timings(exps, repeat)
            _, t_nw = timings(lambda model=model, Q=Q: model.predict(Q), repeat)
            with numpy_engine():
                _, t_np = timings(lambda model=model, Q=Q: model.predict(Q), repeat)
            elements = (n // 64) * 64 * n
            exp_rate = elements / np.median(t_exp)
            pair_rate = n * n / np.median(t_nw)
            ratio = pair_rate / exp_rate
            ratio_np = n * n / np.median(t_np) / exp_rate
            name = np.dtype(dtype).name
            rows.append(
                [
                    str(d),
                    name,
                    spread(t_nw),
                    f"{pair_rate:.3g}",
                    f"{exp_rate:.3g}",
                    f"**{ratio:.2f}**",
                    spread(t_np),
                    f"{ratio_np:.2f}",
                ]
            )
            records.append(
                {
                    "d": d,
                    "dtype": name,
                    "pairs_per_s": pair_rate,
                    "ratio": ratio,
                    "ratio_numpy_passes": ratio_np,
                }
            )
    header = [
        "d",
        "input",
        "predict s",
        "pairs/s",
        "np.exp/s (input dtype)",
        "ratio",
        "numpy passes: predict s",
        "ratio",
    ]
    text = (
        f"### Throughput against the exp limit (n = m = {n:,}, Gaussian, one thread)\n\n"
        + table(header, rows)
        + "\n\nThe engine computes in float64 whatever the input; the float32 row compares "
        "it with float32 `np.exp`, the faster floor it does not use.  The last two columns "
        "run the same predict on the numpy passes (the path without numba)."
    )
    return text, records


# ----------------------------------------------------------- 2. statsmodels


def bench_statsmodels(n: int, repeat: int) -> tuple[str, dict]:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y, Q = gaussian_data(n, n, 3, seed=2)
    h = np.array([0.3, 0.5, 0.8])

    def ours(n_jobs=None):
        est = NadarayaWatsonRegressor(bandwidth=h, algorithm="brute", n_jobs=n_jobs)
        return est.fit(X, y).predict(Q)

    def theirs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return KernelReg(y, X, var_type="ccc", reg_type="lc", bw=h).fit(Q)[0]

    p_ours, t_ours = timings(ours, repeat)
    p_two, t_two = timings(lambda: ours(n_jobs=2), repeat)
    with numpy_engine():
        p_np, t_np = timings(ours, repeat)
    p_sm, t_sm = timings(theirs, 1)

    def difference(p):
        return float(np.max(np.abs(p - p_sm) / np.maximum(np.abs(p_sm), 1e-300)))

    speedup = np.median(t_sm) / np.median(t_ours)
    speedup_np = np.median(t_sm) / np.median(t_np)
    text = f"### Against statsmodels `KernelReg(reg_type='lc')` (n = m = {n:,}, d = 3)\n\n" + table(
        ["implementation", "fit + predict s", "speed-up", "max relative difference"],
        [
            ["statsmodels", spread(t_sm), "1", "-"],
            ["skl_nw", spread(t_ours), f"**{speedup:.0f}×**", f"{difference(p_ours):.1e}"],
            ["skl_nw, numpy passes", spread(t_np), f"{speedup_np:.0f}×", f"{difference(p_np):.1e}"],
            [
                "skl_nw, n_jobs=2",
                spread(t_two),
                f"{np.median(t_sm) / np.median(t_two):.0f}×",
                f"{difference(p_two):.1e}",
            ],
        ],
    )
    return text, {
        "speedup": speedup,
        "speedup_numpy_passes": speedup_np,
        "max_rel_diff": difference(p_ours),
    }


# -------------------------------------------------------------- 3. textbook


def bench_textbook(n_speed: int, n_memory: int, repeat: int) -> tuple[str, dict]:
    X, y, Q = gaussian_data(n_speed, n_speed, 1, seed=3)
    h = 0.2
    model = NadarayaWatsonRegressor(bandwidth=h, algorithm="brute").fit(X, y)
    p_ours, t_ours = timings(lambda: model.predict(Q), repeat)
    p_book, t_book = timings(lambda: textbook(X, y, Q, h), repeat)
    _, book_peak = peak_mib(lambda: textbook(X, y, Q, h))
    diff = float(np.max(np.abs(p_ours - p_book)))

    Xm, ym, Qm = gaussian_data(n_memory, n_memory, 1, seed=4)
    big = NadarayaWatsonRegressor(bandwidth=h, algorithm="brute").fit(Xm, ym)
    (_, our_peak), t_big = timings(lambda: peak_mib(lambda: big.predict(Qm)), 1)
    book_need = book_peak / n_speed**2 * n_memory**2
    rows = [
        [
            f"n = m = {n_speed:,}",
            spread(t_book),
            spread(t_ours),
            f"**{np.median(t_book) / np.median(t_ours):.2f}×**",
            f"{book_peak:,.0f}",
            "-",
        ],
        [
            f"n = m = {n_memory:,}",
            "not run",
            spread(t_big),
            "-",
            f"{book_need:,.0f} (scaled)",
            f"**{our_peak:,.1f}**",
        ],
    ]
    text = (
        "### Against the textbook implementation (materialises the m × n matrix, d = 1)\n\n"
        + table(
            ["size", "textbook s", "skl_nw s", "speed-up", "textbook peak MiB", "skl_nw peak MiB"],
            rows,
        )
        + f"\n\nPredictions agree to {diff:.1e}. Peak memory by tracemalloc; the textbook "
        "peak at the large size is its measured peak at the small size scaled by (n m)."
    )
    return text, {
        "speedup": float(np.median(t_book) / np.median(t_ours)),
        "our_peak_mib": our_peak,
        "textbook_peak_mib_scaled": book_need,
    }


# --------------------------------------------------------------- 4. n_jobs


def bench_threads(n: int, repeat: int) -> tuple[str, dict]:
    X, y, Q = gaussian_data(n, n, 8, seed=5)
    times = {}
    for jobs in (1, 2):
        model = NadarayaWatsonRegressor(bandwidth=1.4, algorithm="brute", n_jobs=jobs).fit(X, y)
        _, times[jobs] = timings(lambda model=model: model.predict(Q), repeat)
    speedup = np.median(times[1]) / np.median(times[2])
    text = f"### Threads (n = m = {n:,}, d = 8, brute force)\n\n" + table(
        ["n_jobs", "predict s", "speed-up"],
        [["1", spread(times[1]), "1"], ["2", spread(times[2]), f"**{speedup:.2f}×**"]],
    )
    return text, {"speedup": speedup}


# -------------------------------------------------------------- 5. scaling


def bench_scaling(sizes, m: int, plot: str | None) -> tuple[str, dict]:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    curves: dict[str, list[tuple[int, float]]] = {}
    for n in sizes:
        X, y, Q = gaussian_data(n, m, 2, seed=n)
        h = np.array([0.1, 0.1])
        for name in ("brute", "kd_tree"):
            model = NadarayaWatsonRegressor(bandwidth=h, algorithm=name).fit(X, y)
            _, t = timings(lambda model=model, Q=Q: model.predict(Q), 3)
            curves.setdefault(f"skl_nw {name}", []).append((n, float(np.median(t))))
        if n * m <= 3e7:
            _, t = timings(lambda X=X, y=y, Q=Q, h=h: textbook(X, y, Q, h), 1)
            curves.setdefault("textbook numpy", []).append((n, float(t[0])))
        if n * m <= 2e7:

            def sm(X=X, y=y, Q=Q, h=h):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return KernelReg(y, X, var_type="cc", reg_type="lc", bw=h).fit(Q)[0]

            _, t = timings(sm, 1)
            curves.setdefault("statsmodels", []).append((n, float(t[0])))
    rows, slopes = [], {}
    for name, points in curves.items():
        ns, ts = np.array(points).T
        slope = float(np.polyfit(np.log(ns), np.log(ts), 1)[0]) if len(ns) > 1 else np.nan
        slopes[name] = slope
        rows.append([name, f"{slope:.2f}"] + [f"{t:.3g}" for t in ts])
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    header = ["implementation", "slope"] + [f"n={n:,}" for n in sizes][: width - 2]
    text = (
        f"### Time against n (m = {m:,} queries, d = 2, Gaussian, h = 0.1)\n\n"
        + table(header, rows)
        + "\n\nSlope: fitted exponent of time ∝ n^slope (log-log least squares)."
    )
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name, points in curves.items():
            ns, ts = np.array(points).T
            ax.loglog(ns, ts, "o-", label=f"{name} (slope {slopes[name]:.2f})")
        ax.set(xlabel="training points n", ylabel="predict seconds", title=f"m = {m:,} queries")
        ax.legend(fontsize=8)
        fig.tight_layout()
        Path(plot).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot, dpi=110)
        plt.close(fig)
        text += f"\n\n![time against n]({Path(plot).name})"
    return text, {"slopes": slopes, "curves": curves}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--plot", default=None, help="write the scaling plot to this PNG")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated sections: exp_limit,statsmodels,textbook,threads,scaling",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    repeat = 3 if quick else 5
    env = environment(("statsmodels",))
    print(describe(env), "\n")
    results = {"environment": env}
    sections = [
        ("exp_limit", lambda: bench_exp_limit(4000 if quick else 20000, repeat)),
        ("statsmodels", lambda: bench_statsmodels(800 if quick else 5000, repeat)),
        (
            "textbook",
            lambda: bench_textbook(1000 if quick else 3000, 8000 if quick else 30000, repeat),
        ),
        ("threads", lambda: bench_threads(4000 if quick else 20000, repeat)),
        (
            "scaling",
            lambda: bench_scaling(
                [1000, 3000, 10000] if quick else [1000, 3000, 10000, 30000, 100000],
                500 if quick else 2000,
                args.plot,
            ),
        ),
    ]
    chosen = None if args.only is None else set(args.only.split(","))
    for name, run in sections:
        if chosen is not None and name not in chosen:
            continue
        text, record = run()
        results[name] = record
        print(text, "\n", flush=True)
    write_json(args.json, results)
