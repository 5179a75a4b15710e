"""The dense engine against the alternatives: statsmodels, the textbook code, threads, n.

Sections 2-5 of ``python -m benchmarks engine`` (see :mod:`benchmarks.bench_engine`).
"""

from __future__ import annotations

import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from scipy.special import softmax

from skl_nw import NadarayaWatsonRegressor

from ._common import numpy_engine, spread, table, timings
from .bench_engine import gaussian_data


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
