"""Tree-backend benchmarks: KD-tree / Ball-tree against brute force and scikit-learn.

Run ``python -m benchmarks trees`` (about 10 minutes on 2 cores, 6 of them the crossover) or
``python -m benchmarks trees --quick`` (a tiny subset, about 15 s).  Prints
markdown tables; the published ones are CSV files, ``trees_*.csv`` and (the
crossover) ``auto_*.csv`` in ``docs/_static/benchmarks/``, summed up in
``docs/benchmarks.md`` ("Tree backend", "Choosing the algorithm").

1. The reference grid: uniform data in the unit square, Epanechnikov kernel,
   ``h = sqrt(50 / (pi n))`` (about 50 training points inside each query's
   support), m = 100,000 queries, n in {1e5, 1e6}.  Our trees and brute force
   against scikit-learn's ``RadiusNeighborsRegressor`` (the same estimate),
   with ``KNeighborsRegressor(n_neighbors=50)`` and ``KernelDensity`` as
   context; fit and predict timed apart, peak memory of predict, and the
   largest difference between the predictions.
2. Scaling: time against n for brute force and both trees (m = 10,000), the
   log-log slopes, and a plot (``docs/_static/bench_tree_scaling.png``).
3. The crossover behind ``algorithm="auto"``: brute, kd_tree, ball_tree and
   auto over d, kernel, n and the share of the training set inside a query's
   tree-path radius (set through the bandwidth); where auto is more than 1.5x
   slower than the best, and how candidate rules would do on the same timings.

Brute force is timed on a subset of the queries wherever all of them would
take minutes, and scaled linearly to the full count (its cost is exactly
linear in the number of queries: fixed-size chunks, no per-call set-up); the
tables say where.  Every timing is the median of ``--repeat`` rounds, the
methods of one configuration taking turns within each round.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
import time
import tracemalloc
import warnings
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from skl_nw import NadarayaWatsonRegressor, _engine
from skl_nw._engine import _auto
from skl_nw._kernels import get_kernel

from ._common import describe, environment, table, write_json

PLOT = Path(__file__).resolve().parents[1] / "docs" / "_static" / "bench_tree_scaling.png"
TREES = ("kd_tree", "ball_tree")
ALGORITHMS = ("brute", *TREES)
RTOL = 1e-16  # the estimators' default

# ---------------------------------------------------------------- helpers


def side_by_side(methods: dict, repeat: int, budget: float = np.inf) -> dict:
    """Time each method's ``fit`` and ``predict`` in turn, ``repeat`` rounds; medians.

    ``methods`` maps a name to ``(fit, predict)``: ``fit()`` returns a fitted
    model, ``predict(model)`` its output.  The methods take turns within each
    round, so load from other processes falls on all of them alike.  No new
    round starts once ``budget`` seconds have passed (long timings are the
    least noisy).  Returns ``name -> (fit s, predict s, last model, last output)``.
    """
    times = {name: ([], []) for name in methods}
    last = {}
    begin = time.perf_counter()
    for _ in range(repeat):
        if time.perf_counter() - begin > budget:
            break
        for name, (fit, predict) in methods.items():
            start = time.perf_counter()
            model = fit()
            middle = time.perf_counter()
            out = predict(model)
            times[name][0].append(middle - start)
            times[name][1].append(time.perf_counter() - middle)
            last[name] = (model, out)
    return {
        name: (float(np.median(f)), float(np.median(p)), *last[name])
        for name, (f, p) in times.items()
    }


def _status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        return int(re.search(key + r":\s+(\d+)", f.read()).group(1)) / 1024


def peak_memory(fn) -> tuple[float, float]:
    """Peak memory of ``fn()`` above the start, in MiB: (tracemalloc, resident set).

    tracemalloc sees every numpy allocation (and Python's); the resident-set
    peak (Linux: ``/proc/self/clear_refs`` resets ``VmHWM``) also sees C
    allocations such as the trees' own buffers.  NaN where unavailable.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        base = _status_mib("VmRSS")
    except OSError:
        base = None
    fn()
    rss = np.nan if base is None else _status_mib("VmHWM") - base
    tracemalloc.start()
    try:
        fn()
        traced = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return traced, rss


def uniform(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Uniform inputs in the unit cube and a smooth target plus noise."""
    X = rng.uniform(size=(n, d))
    y = np.sin(2 * np.pi * X[:, 0]) * np.cos(2 * np.pi * X[:, -1]) + 0.1 * rng.normal(size=n)
    return X, y


def nw(h: float, kernel: str, algorithm: str, **kwargs) -> NadarayaWatsonRegressor:
    return NadarayaWatsonRegressor(h, kernel=kernel, algorithm=algorithm, **kwargs)


def our_methods(X, y, Q, h, kernel, counts: dict) -> dict:
    """``name -> (fit, predict)`` for ``side_by_side``; ``a`` predicts ``Q[: counts[a]]``."""

    def method(algorithm):
        queries = Q[: counts[algorithm]]
        return (
            lambda: nw(h, kernel, algorithm).fit(X, y),
            lambda model: model.predict(queries),
        )

    return {algorithm: method(algorithm) for algorithm in counts}


def slope(n, t) -> float:
    """Least-squares slope of log t against log n."""
    return float(np.polyfit(np.log(n), np.log(t), 1)[0])


def fmt_s(t: float) -> str:
    return f"{t:.3g}" if t < 100 else f"{t:.0f}"


# ----------------------------------------------- 1. the reference grid


def epanechnikov_weights(h: float):
    """The Epanechnikov kernel as ``RadiusNeighborsRegressor`` weights.

    scikit-learn passes an object array (one array of distances per query);
    numpy applies the arithmetic element by element.
    """
    return lambda dist: 1.0 - (dist / h) ** 2


def sklearn_methods(X, y, Q, h) -> dict:
    """The same estimate with scikit-learn, and two neighbours as context."""
    from sklearn.neighbors import KernelDensity, KNeighborsRegressor, RadiusNeighborsRegressor

    weights = epanechnikov_weights(h)
    return {
        "RadiusNeighborsRegressor": (
            lambda: RadiusNeighborsRegressor(radius=h, weights=weights).fit(X, y),
            lambda model: model.predict(Q),
        ),
        "KNeighborsRegressor(50)": (
            lambda: KNeighborsRegressor(n_neighbors=50).fit(X, y),
            lambda model: model.predict(Q),
        ),
        "KernelDensity.score_samples": (
            lambda: KernelDensity(kernel="epanechnikov", bandwidth=h).fit(X),
            lambda model: model.score_samples(Q),
        ),
    }


def bench_grid(sizes, m: int, brute_queries: int, repeat: int, seed: int):
    speed_rows, memory_rows, accuracy_rows = [], [], []
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        X, y = uniform(n, 2, rng)
        Q = rng.uniform(size=(m, 2))
        h = float(np.sqrt(50 / (np.pi * n)))
        mb = min(brute_queries, m)
        counts = {"brute": mb, **dict.fromkeys((*TREES, "auto"), m)}
        ours = our_methods(X, y, Q, h, "epanechnikov", counts)
        sklearn = sklearn_methods(X, y, Q, h)
        # Brute force over n = 1e6 takes half a minute even on the subset: once.
        brute_repeat = repeat if n * mb <= 5e8 else 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # RadiusNeighborsRegressor: empty neighbourhoods
            timings = side_by_side({"brute": ours.pop("brute")}, brute_repeat)
            timings.update(side_by_side({**ours, **sklearn}, repeat))
        scale = m / mb
        t_brute = timings["brute"][1] * scale
        t_rnr = timings["RadiusNeighborsRegressor"][1]
        t_rnr_total = t_rnr + timings["RadiusNeighborsRegressor"][0]
        for name, (t_fit, t_predict, model, _) in timings.items():
            if name == "brute":
                label = f"skl_nw brute ({mb:,} queries × {scale:g})"
                t_predict = t_brute
            elif name in sklearn:
                label = f"scikit-learn {name}"
            else:
                label = f"skl_nw {name}" + (f" (→ {model._fit_method})" if name == "auto" else "")
            versus_rnr = (
                f"{t_rnr / t_predict:.1f}× / {t_rnr_total / (t_fit + t_predict):.1f}×"
                if name in (*TREES, "auto")
                else "–"
            )
            speed_rows.append(
                [
                    f"{n:.0e}",
                    label,
                    fmt_s(t_fit),
                    fmt_s(t_predict),
                    f"{t_brute / t_predict:.0f}×" if name != "brute" else "1×",
                    versus_rnr,
                ]
            )
        print(f"  grid n={n:.0e}: timings done", flush=True)

        # Peak memory of predict (one untimed run each, and one under tracemalloc).
        fitted = {name: timings[name][2] for name in (*TREES, "auto")}
        for name, model in fitted.items():
            traced, rss = peak_memory(partial(model.predict, Q))
            memory_rows.append([f"{n:.0e}", f"skl_nw {name}", f"{traced:.0f}", f"{rss:.0f}"])
        brute = timings["brute"][2]
        traced, rss = peak_memory(partial(brute.predict, Q[:mb]))
        memory_rows.append(
            [f"{n:.0e}", f"skl_nw brute ({mb:,} queries)", f"{traced:.0f}", f"{rss:.0f}"]
        )
        traced, rss = peak_memory(partial(nw(h, "epanechnikov", "auto").fit, X, y))
        memory_rows.append([f"{n:.0e}", "skl_nw auto: **fit**", f"{traced:.0f}", f"{rss:.0f}"])

        # The same estimate, to rounding.
        p_brute = timings["brute"][3]
        p_rnr = timings["RadiusNeighborsRegressor"][3]
        spread = float(np.ptp(y))
        for name in (*TREES, "auto"):
            p_tree = timings[name][3]
            accuracy_rows.append(
                [
                    f"{n:.0e}",
                    name,
                    f"{np.max(np.abs(p_tree[:mb] - p_brute)) / spread:.1e}",
                    f"{np.nanmax(np.abs(p_tree - p_rnr)) / spread:.1e}",
                    str(int(np.isnan(p_rnr).sum())),
                ]
            )
        print(f"  grid n={n:.0e}: memory done", flush=True)

    speed = table(
        ["n", "method", "fit s", "predict s", "vs brute", "vs RadiusNeighbors (predict / total)"],
        speed_rows,
    )
    memory = table(["n", "call", "tracemalloc peak MiB", "peak RSS increase MiB"], memory_rows)
    accuracy = table(
        [
            "n",
            "tree",
            "max |tree − brute| / ptp(y)",
            "max |tree − RadiusNeighbors| / ptp(y)",
            "RadiusNeighbors NaN rows",
        ],
        accuracy_rows,
    )
    return speed, memory, accuracy


# ------------------------------------------------------------- 2. scaling


def bench_scaling(sizes, m: int, max_pairs: float, repeat: int, seed: int, plot: Path | None):
    rng = np.random.default_rng(seed)
    Q = rng.uniform(size=(m, 2))
    results = {name: ([], []) for name in ("brute", *TREES)}
    rows = []
    for n in sizes:
        X, y = uniform(n, 2, np.random.default_rng(seed + n))
        h = float(np.sqrt(50 / (np.pi * n)))
        mb = int(min(m, max(1, max_pairs // n)))
        counts = {"brute": mb, **dict.fromkeys(TREES, m)}
        methods = our_methods(X, y, Q, h, "epanechnikov", counts)
        timings = side_by_side(methods, repeat)
        row = [f"{n:.0e}", f"{mb:,}"]
        for name, (t_fit, t_predict, *_) in timings.items():
            if name == "brute":
                t_predict *= m / mb
            results[name][0].append(t_fit)
            results[name][1].append(t_predict)
            row += [fmt_s(t_predict)] if name == "brute" else [fmt_s(t_fit), fmt_s(t_predict)]
        best_tree = min(results[t][1][-1] for t in TREES)
        rows.append([*row, f"{results['brute'][1][-1] / best_tree:.1f}×"])
        print(f"  scaling n={n:.0e} done", flush=True)
    header = ["n", "brute queries timed", "brute predict s"]
    for tree in TREES:
        header += [f"{tree} fit s", f"{tree} predict s"]
    timing = table([*header, "brute / best tree"], rows)

    n = np.asarray(sizes, dtype=float)
    large = n >= 1e4
    slope_rows = []
    for name, (fits, predicts) in results.items():
        for what, t in (("predict", predicts), ("fit", fits)):
            if name == "brute" and what == "fit":
                continue
            t = np.asarray(t)
            slope_rows.append(
                [
                    f"{name} {what}",
                    f"{slope(n, t):.2f}",
                    f"{slope(n[large], t[large]):.2f}" if large.sum() >= 2 else "–",
                ]
            )
    slopes = table(["time", "slope, all n", "slope, n ≥ 1e4"], slope_rows)
    if plot is not None:
        plot_scaling(n, results, m, plot)
    return timing, slopes


def plot_scaling(n: np.ndarray, results: dict, m: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"brute": ("C3", "o"), "kd_tree": ("C0", "s"), "ball_tree": ("C2", "^")}
    fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    large = n >= 1e4
    for name, (fits, predicts) in results.items():
        color, marker = styles[name]
        for what, t, line in (("predict", predicts, "-"), ("fit", fits, ":")):
            if name == "brute" and what == "fit":
                continue
            t = np.asarray(t)
            b = slope(n[large], t[large])
            ax.loglog(
                n, t, line, color=color, marker=marker, label=f"{name} {what} (slope {b:.2f})"
            )
    ax.set_xlabel("training points n")
    ax.set_ylabel(f"seconds ({m:,} queries)")
    ax.set_title("Epanechnikov, d = 2, about 50 neighbours per query")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, title="log-log slope fitted for n ≥ 1e4", title_fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"  plot written to {path}", flush=True)


# ----------------------------------------------------------- 3. crossover


def bandwidth_for_fraction(X: np.ndarray, kernel: str, fraction: float, rng) -> float:
    """Bandwidth whose tree-path radius holds ``fraction`` of the data, on average.

    The radius ``r`` is the ``fraction`` quantile of the distances from 200
    uniform probe queries to (up to 20,000 of) the training points.  A compact
    kernel's radius is ``h`` times its support; the Gaussian's, at the default
    ``rtol``, is ``h sqrt(-2 (log rtol - log n))`` (the truncation radius of
    :func:`skl_nw._engine._tree.radius` for uniform weights, taking the
    nearest neighbour at distance 0).
    """
    from scipy.spatial.distance import cdist

    n, d = X.shape
    probes = rng.uniform(size=(200, d))
    sub = X[rng.choice(n, min(n, 20_000), replace=False)]
    r = float(np.quantile(cdist(probes, sub), fraction))
    record = get_kernel(kernel)
    if record.compact:
        return r / record.support
    level = np.log(RTOL) - np.log(n)
    return r / float(np.sqrt(record.log_profile_inverse(np.asarray(level))))


def bench_crossover(dims, kernels, sizes, fractions, m, limits, repeat, seed):
    """One record per configuration: totals (fit + predict) of each algorithm."""
    records = []
    for kernel in kernels:
        for d in dims:
            for n in sizes:
                rng = np.random.default_rng(seed + 1000 * d + n)
                X, y = uniform(n, d, rng)
                Q = rng.uniform(size=(m, d))
                for fraction in fractions:
                    h = bandwidth_for_fraction(X, kernel, fraction, rng)
                    records.append(_crossover_config(X, y, Q, kernel, h, limits, repeat))
                    records[-1].update(kernel=kernel, d=d, n=n, target=fraction)
            print(f"  crossover {kernel} d={d} done", flush=True)
    return records


def fast_brute(Xs: np.ndarray, kernel) -> bool:
    """Whether brute force folds the kernel into one GEMM for queries like the data.

    ``algorithm="auto"``'s own prediction (``skl_nw._engine._auto._folds``): the
    test of ``_folded.FoldedKeys.sums`` with the query norms taken as the 99th
    percentile of the training norms.  Without the compiled kernels, where it
    holds the Gaussian's brute force costs about 2 ns per pair instead of
    10-20; with them its rows past the bound take the same fused pass unfolded.
    """
    return bool(_auto._folds(Xs, kernel))


def _crossover_config(X, y, Q, kernel, h, limits, repeat) -> dict:
    """Time one configuration, large ones on a subset of the queries.

    Brute force predicts at most ``max_pairs / n`` queries, a tree at most
    ``max_pairs / n`` or ``max_entries / (share n)`` but never fewer than
    ``min_tree_queries`` (its chunk sizing probes 256 queries per call, a
    fixed cost that a small subset would inflate when scaled: at 2,000 queries
    it makes a tree up to ~10% slower).  Predict times are scaled to all of Q.
    """
    max_pairs, max_entries, min_tree_queries = limits
    n, m = len(X), len(Q)
    record = get_kernel(kernel)
    Xs, log_w = X / h, np.zeros(n)
    probes = []
    for _ in range(3):
        start = time.perf_counter()
        share = _engine.neighbour_fraction(Xs, log_w, record, RTOL)
        probes.append(time.perf_counter() - start)
    counts = {"brute": int(min(m, max(1, max_pairs // n)))}
    tree_queries = min(max_pairs / n, max_entries / max(share * n, 1.0))
    tree_queries = int(min(m, max(min_tree_queries, tree_queries)))
    counts.update(dict.fromkeys(TREES, tree_queries))
    methods = our_methods(X, y, Q, h, kernel, counts)
    # auto predicts with exactly the code of the algorithm it picks: only its
    # fit (the probe of choose_algorithm, then the chosen set-up) is timed.
    methods["auto"] = (lambda: nw(h, kernel, "auto").fit(X, y), lambda model: None)
    timings = side_by_side(methods, repeat, budget=2.0)
    totals = {}
    for name in ("brute", *TREES):
        t_fit, t_predict, *_ = timings[name]
        totals[name] = t_fit + t_predict * m / counts[name]
    auto_fit, _, auto_model, _ = timings["auto"]
    chosen = auto_model._fit_method
    totals["auto"] = auto_fit + totals[chosen] - timings[chosen][0]
    return {
        "h": h,
        "fraction": share,
        "fast_brute": fast_brute(Xs, record),
        "queries": counts,
        "m": m,
        "totals": totals,
        "auto": chosen,
        "probe": float(np.median(probes)),
        "tree_fits": {t: timings[t][0] for t in TREES},
    }


def best_time(r) -> float:
    return min(r["totals"][a] for a in ALGORITHMS)


def short(name: str) -> str:
    return {"brute": "brute", "kd_tree": "kd", "ball_tree": "ball"}[name]


def crossover_table(records) -> str:
    """Every configuration: the timings, auto's choice and its ratio to the best."""
    rows = []
    for r in records:
        t = r["totals"]
        ratio = t["auto"] / best_time(r)
        rows.append(
            [
                r["kernel"],
                str(r["d"]),
                f"{r['n']:.0e}",
                f"{r['target']:g}",
                f"{r['fraction']:.3g}",
                f"{r['h']:.3g}",
                "yes" if r["fast_brute"] else "",
                *(fmt_s(t[a]) + ("*" if r["queries"][a] < r["m"] else "") for a in ALGORITHMS),
                f"{fmt_s(t['auto'])} ({short(r['auto'])})",
                short(min(ALGORITHMS, key=t.get)),
                f"{t['brute'] / min(t[k] for k in TREES):.2g}",
                f"**{ratio:.2f}**" if ratio > 1.5 else f"{ratio:.2f}",
            ]
        )
    header = [
        "kernel",
        "d",
        "n",
        "target share",
        "measured share",
        "h",
        "fast brute",
        "brute s",
        "kd s",
        "ball s",
        "auto s (→)",
        "best",
        "brute / best tree",
        "auto / best",
    ]
    return table(header, rows)


def crossover_pivot(records) -> str:
    """Speed-up of the better tree over brute force, one row per (kernel, d, n).

    Bold where the current ``algorithm="auto"`` is more than 1.5x slower than
    the fastest of the three; † where brute force folds the Gaussian into one
    GEMM (see :func:`fast_brute`).
    """
    targets = sorted({r["target"] for r in records})
    cells: dict = {}
    for r in records:
        t = r["totals"]
        cell = f"{t['brute'] / min(t[k] for k in TREES):.2g}" + ("†" if r["fast_brute"] else "")
        if t["auto"] > 1.5 * best_time(r):
            cell = f"**{cell}**"
        cells.setdefault((r["kernel"], r["d"], r["n"]), {})[r["target"]] = cell
    rows = [
        [kernel, str(d), f"{n:.0e}", *(row.get(f, "") for f in targets)]
        for (kernel, d, n), row in cells.items()
    ]
    return table(["kernel", "d", "n", *(f"share {f:g}" for f in targets)], rows)


@dataclass(frozen=True)
class Rule:
    """Tree iff ``n >= min_samples`` and the share is within the limit for ``d``.

    ``limits`` holds ``(largest d, share limit)`` pairs by increasing d (beyond
    the last d: brute force); ``fast_limit``, if not None, replaces the limit
    where brute force folds the kernel into one GEMM (:func:`fast_brute`);
    ``min_n``, if not None, holds ``(largest d, smallest n for the Epanechnikov
    kernel, for the Gaussian)`` by increasing d, in place of ``min_samples``;
    ``gaussian``, if not None, ``(largest d, share limit)`` pairs that replace
    ``limits`` for the Gaussian up to their largest d.
    """

    min_samples: int
    limits: tuple[tuple[int, float], ...]
    tree: str
    fast_limit: float | None = None
    min_n: tuple[tuple[int, int, int], ...] | None = None
    gaussian: tuple[tuple[int, float], ...] | None = None

    def choices(self, c: dict) -> tuple[np.ndarray, np.ndarray]:
        """Per configuration (see :func:`columns`): whether the rule probes, and the verdict."""
        limit = np.zeros(len(c["d"]))
        for d, share in reversed(self.limits):
            limit[c["d"] <= d] = share
        for d, share in reversed(self.gaussian or ()):
            limit[(c["d"] <= d) & c["gaussian"]] = share
        if self.fast_limit is not None:
            limit[c["fast"]] = self.fast_limit
        need = np.full(len(c["d"]), self.min_samples)
        for d, compact, gaussian in reversed(self.min_n or ()):
            need[c["d"] <= d] = np.where(c["gaussian"], gaussian, compact)[c["d"] <= d]
        return (c["n"] >= need) & (limit > 0), c["share"] <= limit

    def times(self, c: dict) -> np.ndarray:
        """Total time ``auto`` would take under this rule, from the measured timings."""
        probes, tree = self.choices(c)
        chosen = np.where(probes & tree, c[self.tree], c["brute"])
        return chosen + np.where(probes, c["probe"], 0.0)

    def __str__(self) -> str:
        parts = [f"n ≥ {self.min_samples:,}"] if self.min_samples else []
        # One clause per run of equal limits, named by its largest d.
        runs = [(d, f) for i, (d, f) in enumerate(self.limits)
                if f > 0 and (i + 1 == len(self.limits) or self.limits[i + 1][1] != f)]  # fmt: skip
        parts += [f"share ≤ {f:g} if d ≤ {d}" for d, f in runs]
        parts += [f"Gaussian share ≤ {f:g} if d ≤ {d}" if f else f"Gaussian brute if d ≤ {d}"
                  for d, f in self.gaussian or ()]  # fmt: skip
        for d, compact, gaussian in self.min_n or ():
            if compact and gaussian:
                parts.append(f"n ≥ {compact:,} (Gaussian {gaussian:,}) if d ≤ {d}")
            elif compact or gaussian:
                who = "Gaussian" if gaussian else "non-Gaussian"
                parts.append(f"{who} n ≥ {max(compact, gaussian):,} if d ≤ {d}")
        if self.fast_limit == 0:
            parts.append("brute wherever it folds the Gaussian")
        elif self.fast_limit is not None:
            parts.append(f"share ≤ {self.fast_limit:g} where brute folds the Gaussian")
        return "; ".join(parts) + f" → {self.tree}"


# The rule shipped with the compiled kernels (skl_nw/_engine/_auto.py: _COMPILED_LIMITS,
# _COMPILED_GAUSSIAN_LIMITS; docs/benchmarks.md, "Choosing the algorithm").
PROPOSED = Rule(0, ((3, 0.15), (5, 0.03), (8, 0.005)), "ball_tree", fast_limit=0.0,
                min_n=((3, 0, 10_000), (5, 0, 30_000), (8, 30_000, 0)),
                gaussian=((3, 0.02), (5, 0.01), (8, 0.0)))  # fmt: skip


def columns(records) -> dict:
    """The records as arrays, for evaluating rules at once."""
    c = {key: np.array([r[key] for r in records]) for key in ("n", "d", "probe")}
    c["share"] = np.array([r["fraction"] for r in records])
    c["fast"] = np.array([r["fast_brute"] for r in records])
    c["gaussian"] = np.array([r["kernel"] == "gaussian" for r in records])
    for a in (*ALGORITHMS, "auto"):
        c[a] = np.array([r["totals"][a] for r in records])
    c["best"] = np.min([c[a] for a in ALGORITHMS], axis=0)
    return c


def candidate_rules():
    """Share limits non-increasing in d over the classes d ≤ 3, 5, 8, 12; then the
    proposed rule with other share limits and minimum n for the Gaussian in d ≤ 3."""
    shares = (0.0, 0.01, 0.03, 0.07, 0.15)
    for min_samples, tree, fast in itertools.product((0, 2_000), TREES, (None, 0.0)):
        for limits in itertools.combinations_with_replacement(shares[::-1], 4):
            yield Rule(min_samples, tuple(zip((3, 5, 8, 12), limits, strict=True)), tree, fast)
    for share, n in itertools.product((0.005, 0.01, 0.02, 0.03, 0.05, 0.15), (0, 3_000, 30_000)):
        min_n = ((3, 0, n), *PROPOSED.min_n[1:])
        yield replace(PROPOSED, gaussian=((3, share), *PROPOSED.gaussian[1:]), min_n=min_n)


def evaluate_rules(records, candidates, keep: int) -> str:
    """auto / best under each rule: auto as measured, the proposal, then the best ``keep``."""
    c = columns(records)

    def row(label, ratios, order):
        w = records[int(np.argmax(ratios))]
        where = f"{w['kernel'][:5]}, d={w['d']}, n={w['n']:.0e}, share {w['fraction']:.2g}"
        mean = float(np.exp(np.mean(np.log(ratios))))
        worst, violations = round(float(ratios.max()), 2), int((ratios > 1.5).sum())
        return (order, violations, worst, mean, len(label), label, where)

    proposed = PROPOSED.times(c) / c["best"]
    scored = [row("algorithm='auto' as measured", c["auto"] / c["best"], 0)]
    scored.append(row(f"proposed: {PROPOSED}", proposed, 1))
    seen = {proposed.tobytes()}
    for rule in candidates:
        ratios = rule.times(c) / c["best"]
        if ratios.tobytes() not in seen:  # else: the same choices as a rule listed already
            seen.add(ratios.tobytes())
            scored.append(row(str(rule), ratios, 2))
    scored.sort()  # fewest violations, best worst case, then the simplest
    rows = [
        [label, f"{worst:.2f} ({where})", str(v), f"{mean:.3f}"]
        for _, v, worst, mean, _, label, where in scored[: keep + 2]
    ]
    header = ["rule", "worst auto / best (where)", "configs > 1.5×", "geometric mean"]
    return table(header, rows)


def write_csv(markdown: str, path: Path) -> None:
    """Write a markdown table (:func:`table`) as CSV, without its bold marks."""
    rows = [line.strip("|").split("|") for line in markdown.splitlines() if line.startswith("|")]
    del rows[1]  # the alignment row
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([cell.strip().replace("**", "") for cell in row] for row in rows)
    print(f"Wrote {path}")


# ------------------------------------------------------------------ main


SECTIONS = ("grid", "scaling", "crossover")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks trees", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a tiny subset, under a minute")
    parser.add_argument("--repeat", type=int, default=3, help="timing rounds (median)")
    parser.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="sections to run"
    )
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        help=f"where to save the scaling plot; default {PLOT} (none with --quick)",
    )
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", default=None, help="write the crossover's times as CSV here")
    parser.add_argument(
        "--rules", type=int, default=12, help="candidate rules to list, best worst case first"
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="limit BLAS threads (threadpoolctl) for every method; default: the library's",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    repeat = 1 if quick else args.repeat
    plot = args.plot if args.plot is not None or quick else PLOT

    env = environment()
    blas = "default" if args.blas_threads is None else str(args.blas_threads)
    print(f"{describe(env)}; BLAS threads: {blas}\n", flush=True)
    results = {"environment": env, "blas_threads": args.blas_threads, "repeat": repeat}
    start = time.perf_counter()
    sections = []
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        if "grid" in args.only:
            sizes, m = ((10_000, 100_000), 10_000) if quick else ((100_000, 1_000_000), 100_000)
            speed, memory, accuracy = bench_grid(sizes, m, 2_000, repeat, args.seed)
            title = f"Reference grid: d = 2, Epanechnikov, ~50 neighbours, m = {m:,}"
            sections += [
                (title + ": time", speed),
                (title + ": peak memory", memory),
                (title + ": same estimate", accuracy),
            ]
        if "scaling" in args.only:
            sizes = (1e3, 1e4, 1e5) if quick else (1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6)
            m = 2_000 if quick else 10_000
            timing, slopes = bench_scaling([int(s) for s in sizes], m, 1e8, repeat, args.seed, plot)
            sections += [(f"Scaling, m = {m:,}", timing), ("Log-log slopes", slopes)]
        if "crossover" in args.only:
            if quick:
                grid = ((2, 8), ("epanechnikov", "gaussian"), (3_000,), (0.005, 0.1), 1_000)
            else:
                grid = (
                    (1, 2, 3, 5, 8, 12),
                    ("epanechnikov", "gaussian"),
                    (1_000, 3_000, 10_000, 100_000),
                    (0.001, 0.005, 0.02, 0.05, 0.1),
                    5_000,
                )
            records = bench_crossover(*grid, (1e7, 5e6, 2_000), repeat, args.seed)
            results["crossover"] = records
            times = crossover_table(records)
            sections.append((f"Crossover, m = {grid[-1]:,}", times))
            sections.append(("Crossover: brute / best tree", crossover_pivot(records)))
            rules = evaluate_rules(records, list(candidate_rules()), args.rules)
            sections.append(("Rules for algorithm='auto' on these timings", rules))
            if args.csv:
                write_csv(times, Path(args.csv) / "auto_compiled_times.csv")
    for title, body in sections:
        print(f"\n### {title}\n\n{body}")
    results["tables"] = dict(sections)
    print(f"\nTotal {time.perf_counter() - start:.0f} s")
    write_json(args.json, results)


if __name__ == "__main__":
    main()
