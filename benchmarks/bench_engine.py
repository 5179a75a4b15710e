"""Dense engine benchmarks: throughput against the exp limit, and the alternatives.

Run ``python -m benchmarks engine`` (a few minutes on 2 cores) or with ``--quick``
(smaller sizes, well under a minute).  Every comparison runs both sides in this
one process, one after the other; tables give the median wall time of several
runs with [min, max], and ratios of medians.

1. Throughput of the Gaussian brute-force predict, single thread, as a share of
   ``np.exp``'s own throughput measured in the same run (pairs/s ÷ exp/s), for
   d in 1-64 on both engine paths (section ``exp_limit``); the same ratio for the
   NW and local-linear predicts, Parzen ``predict_proba`` and the leave-one-out
   grid with one and two threads (``paths``); and the compiled passes alone by d,
   the crossover of ``_dense.TILED_MIN_FEATURES`` (``kernels``).  These tables
   time one thread in CPU seconds of the process (the machine is shared).
2. Against statsmodels ``KernelReg(reg_type="lc")`` with the same fixed bandwidths.
3. Against the textbook numpy implementation that materialises the
   (n_queries, n_train) matrix: speed, and peak memory where it cannot run.
4. ``n_jobs=2`` against ``n_jobs=1`` on the brute path.
5. Time against n for brute force, the KD-tree, statsmodels and the textbook
   code (log-log plot with fitted slopes).
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from skl_nw import NadarayaWatsonRegressor

from ._common import describe, environment, numpy_engine, table, timings, write_json


def gaussian_data(n: int, m: int, d: int, seed: int = 0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = np.sin(X[:, 0]) + rng.normal(0, 0.1, n)
    Q = rng.normal(size=(m, d)).astype(dtype)
    return X, y, Q


# ------------------------------------------------------------ 1. exp limit

DIMENSIONS = (1, 2, 4, 8, 16, 32, 64)
# The bandwidth of the throughput tables (the one the dense engine's issue measured):
# in d = 32 and 64 the points lie ~11 and ~16 bandwidths from the centre, where the
# folded GEMM's rounding bound fails and the predict takes direct differences.
BANDWIDTH = 0.5


def cpu_timings(fn, repeat: int) -> tuple[object, np.ndarray]:
    """Like :func:`timings`, in CPU seconds of this process (one thread: the machine's load
    from other processes does not count)."""
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return result, np.array(times)


class ExpRate:
    """``np.exp`` elements per CPU second, one thread, in arrays of one chunk's size."""

    def __init__(self, n: int):
        self.block = np.random.default_rng(1).uniform(-30, 0, size=(64, max(n, 64)))
        self.out = np.empty_like(self.block)

    def __call__(self) -> float:
        reps = max(1, 20_000_000 // self.block.size)  # ~20 ms: a steady reading
        with threadpool_limits(limits=1):
            _, t = cpu_timings(lambda: [np.exp(self.block, out=self.out) for _ in range(reps)], 1)
        return reps * self.block.size / t[0]


def interleaved(fns: dict, pairs, repeat: int, exp_rate: ExpRate, cpu: bool = True):
    """Median pairs/s ÷ median np.exp/s of each function, every one run in turn ``repeat`` times.

    ``pairs``: per call, one number or one per function name.  ``cpu``: CPU
    seconds (one thread), else wall seconds (threads).
    """
    pairs = pairs if isinstance(pairs, dict) else dict.fromkeys(fns, pairs)
    clock = cpu_timings if cpu else timings
    times = {name: [] for name in fns}
    exps = []
    for _ in range(repeat):
        exps.append(exp_rate())
        for name, fn in fns.items():
            times[name].append(clock(fn, 1)[1][0])
    rate = float(np.median(exps))
    return {name: pairs[name] / np.median(t) / rate for name, t in times.items()}, rate


def folded_product(Q: np.ndarray, X: np.ndarray):
    """A call of the float64 product of the folded keys of ``Q`` and ``X``: (m, d + 2) (d + 2, n).

    The dot products whose exponentials the GEMM-fed Gaussian weights take:
    ``[q, -|q|^2 / 2, 1] . [x, 1, -|x|^2 / 2]``.
    """
    left = np.hstack([Q, -0.5 * (Q * Q).sum(1, keepdims=True), np.ones((len(Q), 1))])
    right = np.ascontiguousarray(np.hstack([X, np.ones((len(X), 1)),
                                            -0.5 * (X * X).sum(1, keepdims=True)]).T)  # fmt: skip
    out = np.empty((len(Q), len(X)))
    return lambda: np.dot(left, right, out=out)


def log_weights_call(Q, X, bandwidth):
    """:func:`._log_weights.log_weights_call`, or ``(None, None)`` off the tiled kernels."""
    from skl_nw._engine import _dense

    if _dense.compiled() is None or X.shape[1] < _dense.TILED_MIN_FEATURES:
        return None, None
    from ._log_weights import log_weights_call

    return log_weights_call(Q, X, bandwidth)


def bench_exp_limit(n: int, repeat: int) -> tuple[str, list[dict]]:
    rows, records = [], []
    exp_rate = ExpRate(n)
    with threadpool_limits(limits=1):
        for d in DIMENSIONS:
            X, y, Q = gaussian_data(n, n, d)
            model = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, algorithm="brute", n_jobs=1)
            model.fit(X, y)
            model.predict(Q[:100])

            # Far from the centre (d >= 32) the numpy passes take direct differences, at
            # ~1e7 pairs/s: they run a tenth of the queries (as many pairs/s).
            Qn = Q if d <= 16 else Q[: n // 10]

            def numpy_predict(model=model, Q=Qn):
                with numpy_engine():
                    return model.predict(Q)

            tenth = n // 10 // 32 * 32  # whole groups of the tiled kernels' rows
            weights, path = log_weights_call(Q[:tenth], X, BANDWIDTH)
            fns = {"compiled": lambda model=model, Q=Q: model.predict(Q), "numpy": numpy_predict,
                   "gemm": folded_product(Q[:tenth], X), "weights": weights}  # fmt: skip
            pairs = {"compiled": n * n, "numpy": len(Qn) * n, "gemm": tenth * n,
                     "weights": tenth * n}  # fmt: skip
            if weights is None:  # below the tiled kernels' features, or no numba
                del fns["weights"]
            ratio, rate = interleaved(fns, pairs, repeat, exp_rate)
            c, p, g, w = (ratio.get(k) for k in ("compiled", "numpy", "gemm", "weights"))
            alone = "—" if w is None else f"{w:.2f} ({path})"
            rows.append([str(d), f"{c * rate:.3g}", f"{rate:.3g}", f"**{c:.2f}**", f"{p:.2f}",
                         f"{c / p:.2f}", alone, f"{g:.2f}"])  # fmt: skip
            records.append({"d": d, "exp_per_s": rate, "compiled": c, "numpy": p, "gemm": g,
                            "log_weights": w, "log_weights_path": path})  # fmt: skip
    header = ["d", "pairs/s", "np.exp/s", "compiled ratio", "numpy ratio", "compiled ÷ numpy",
              "log weights alone", "GEMM alone"]  # fmt: skip
    text = (
        f"### Throughput against the exp limit (n = m = {n:,}, Gaussian, h = {BANDWIDTH}, "
        "one thread)\n\n"
        + table(header, rows)
        + f"\n\nMedians of {repeat} runs in turn (CPU seconds); ratio: pairs/s ÷ np.exp "
        "elements/s, measured in the same run.  The numpy passes run a tenth of the queries "
        "where d >= 32.  Log weights alone: the compiled predict's tiles with no exponential "
        "and no sums, on its path (folded dot product or direct differences), for a tenth of "
        "the queries: a ceiling of its design.  GEMM alone: BLAS's float64 product of the "
        "folded keys (d + 2 columns), no exponential, for a tenth of the queries: a ceiling "
        "of a GEMM-fed design."
    )
    return text, records


# ------------------------------------------------- 1b. every operation, both paths


def operations(d: int, sizes: dict, jobs: int) -> dict:
    """The timed operations at ``d``: name -> (function, pairs per call)."""
    from skl_nw import LocalPolynomialRegressor, ParzenClassifier
    from skl_nw._engine import Options, loo_pool, prepare_train
    from skl_nw._kernels import get_kernel

    ops = {}
    n = sizes["nw"]
    X, y, Q = gaussian_data(n, n, d, seed=d)
    nw = NadarayaWatsonRegressor(bandwidth=BANDWIDTH, algorithm="brute", n_jobs=jobs).fit(X, y)
    ops["NW predict"] = (lambda Q=Q: nw.predict(Q), n * n)
    n = sizes["local"]
    X, y, Q = gaussian_data(n, n, d, seed=d)
    local = LocalPolynomialRegressor(bandwidth=BANDWIDTH, degree=1, algorithm="brute",
                                     n_jobs=jobs).fit(X, y)  # fmt: skip
    ops["local linear predict"] = (lambda Q=Q: local.predict(Q), n * n)
    n = sizes["parzen"]
    X, y, Q = gaussian_data(n, n, d, seed=d)
    labels = np.digitize(y, [-0.5, 0.5])
    parzen = ParzenClassifier(bandwidth=BANDWIDTH, algorithm="brute", n_jobs=jobs).fit(X, labels)
    ops["Parzen predict_proba"] = (lambda Q=Q: parzen.predict_proba(Q), n * n)
    n = sizes["loo"]
    X, y, _ = gaussian_data(n, n, d, seed=d)
    train = prepare_train(X / BANDWIDTH, values=y[:, None])
    factors, options = np.geomspace(0.5, 2.0, 10), Options(n_jobs=jobs)
    gaussian = get_kernel("gaussian")
    ops["LOO grid (10 multiples)"] = (
        lambda: loo_pool(train, gaussian, factors, options=options),
        n * n * len(factors),
    )
    return ops


def bench_paths(sizes: dict, repeat: int) -> tuple[str, list[dict]]:
    rows, records = [], []
    exp_rate = ExpRate(sizes["nw"])
    for jobs in (1, 2):
        for d in DIMENSIONS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # local linear: queries outside the data
                ops = operations(d, sizes, jobs)
                for name, (fn, pairs) in ops.items():
                    fn()  # compile, load and warm up

                    def numpy_fn(fn=fn):
                        with numpy_engine():
                            return fn()

                    with threadpool_limits(limits=1):
                        fns = {"compiled": fn, "numpy": numpy_fn}
                        ratio, _ = interleaved(fns, pairs, repeat, exp_rate, cpu=jobs == 1)
                    c, p = ratio["compiled"], ratio["numpy"]
                    rows.append([name, str(jobs), str(d), f"{c:.3f}", f"{p:.3f}", f"{c / p:.2f}"])
                    records.append({"operation": name, "n_jobs": jobs, "d": d,
                                    "compiled": c, "numpy": p})  # fmt: skip
            print(f"  n_jobs={jobs} d={d} done", flush=True)
    header = ["operation", "n_jobs", "d", "compiled", "numpy passes", "compiled ÷ numpy"]
    sized = ", ".join(f"{k} n = m = {v:,}" for k, v in sizes.items())
    text = (
        f"### Every operation, both engine paths (pairs/s ÷ np.exp/s; h = {BANDWIDTH}; {sized})"
        "\n\n"
        + table(header, rows)
        + f"\n\nMedians of {repeat} runs in turn; one thread in CPU seconds, two in wall "
        "seconds (against one-thread np.exp); one BLAS thread.  The LOO grid counts a pair per "
        "bandwidth multiple."
    )
    return text, records


# ------------------------------------------- 1c. the compiled kernels' crossover


def kernel_calls(kernels, d: int, n: int, m: int, rng) -> dict:
    """The compiled passes over the same log weights, one value column (GEMM-fed: not built)."""
    from skl_nw._engine import _dense

    slope = -0.5
    X, Q = 2 * rng.normal(size=(n, d)), 2 * rng.normal(size=(m, d))
    keys = np.ascontiguousarray(np.column_stack([X, slope * (X**2).sum(1)]).T)
    queries = np.column_stack([-2 * slope * Q, slope * (Q**2).sum(1)])
    Xp, Qp = _dense.pad_features(X), _dense.pad_features(Q)
    bits = slope * np.log2(np.e)  # the tiled kernels' log weights (and _gemm_fed's) in bits
    keys_p = np.ascontiguousarray(np.vstack([Xp.T, bits * (X**2).sum(1)]))
    queries_p = np.column_stack([-2 * bits * Qp, bits * (Q**2).sum(1)])
    XT, off = np.ascontiguousarray(Xp.T), np.zeros(n)
    VT, out = np.ascontiguousarray(rng.normal(size=(1, n))), np.empty((m, 2))
    from ._gemm_fed import call

    return {
        "one pass": lambda: kernels.exp_dot_sums(queries, keys, VT, out),
        "tiled dot": lambda: kernels.exp_dot_tiled(queries_p, keys_p, VT, out),
        "tiled differences": lambda: kernels.exp_diff_tiled(Qp, XT, bits, off, VT, out),
        "GEMM-fed": call(Qp, Xp, bits, off, VT, np.empty((m, 2))),
    }


def bench_kernels(n: int, repeat: int) -> tuple[str, list[dict]]:
    """The fused one-pass kernel, the tiled dot product and the tiled differences, by d."""
    from skl_nw._engine import _dense

    kernels = _dense.compiled()
    if kernels is None:
        return "### Compiled kernels\n\nnumba is not available.", []
    rng = np.random.default_rng(0)
    m, rows, records = 512, [], []
    exp_rate = ExpRate(n)
    for d in (1, 2, 3, 4, 5, 8, 16, 32, 64):
        fns = kernel_calls(kernels, d, n, m, rng)
        with threadpool_limits(limits=1):  # the GEMM-fed pass's BLAS
            for fn in fns.values():
                fn()
            ratio, _ = interleaved(fns, m * n, repeat, exp_rate)
        rows.append([str(d)] + [f"{ratio[k]:.2f}" for k in fns])
        records.append({"d": d, **ratio})
    text = (
        f"### Compiled kernels by d (m = {m}, n = {n:,}, one value column; pairs/s ÷ np.exp/s)"
        "\n\n" + table(["d", "one pass", "tiled dot", "tiled differences", "GEMM-fed"], rows)
    )
    return text, records


# Sizes of the table of every operation: each cell runs in about a second or less
# (local linear in d = 64 sums 2,000+ moment columns per pair).
PATH_SIZES = {"nw": 4000, "local": 1000, "parzen": 2000, "loo": 2000}
PATH_SIZES_QUICK = {"nw": 1000, "local": 300, "parzen": 500, "loo": 500}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks engine", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--plot", default=None, help="write the scaling plot to this PNG")
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated sections: "
        "exp_limit,paths,kernels,statsmodels,textbook,threads,scaling",
    )
    parser.add_argument("--csv", default=None, help="write the throughput tables' CSVs here")
    args = parser.parse_args(argv)
    from ._engine_compare import bench_scaling, bench_statsmodels, bench_textbook, bench_threads

    quick = args.quick
    repeat = 3 if quick else 5
    env = environment(("statsmodels",))
    print(describe(env), "\n")
    results = {"environment": env}
    sections = [
        ("exp_limit", lambda: bench_exp_limit(4000 if quick else 20000, 3)),
        ("paths", lambda: bench_paths(PATH_SIZES_QUICK if quick else PATH_SIZES, 3)),
        ("kernels", lambda: bench_kernels(4000 if quick else 20000, repeat)),
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
        if args.csv and name in ("exp_limit", "paths", "kernels") and record:
            path = Path(args.csv) / f"engine_{name}.csv"
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(record[0]))
                writer.writeheader()
                writer.writerows(record)
    write_json(args.json, results)
