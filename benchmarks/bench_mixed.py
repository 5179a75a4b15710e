"""Mixed-data benchmark: categorical features against the same data without them.

Run ``python -m benchmarks mixed`` (about a minute on 2 cores) or ``--quick``
(n = m = 5,000, seconds).  ``n`` training points and ``m = n`` queries with 3
continuous N(0, 1) features and 2 unordered categorical ones (5 and 12
categories, Aitchison–Aitken kernels), Gaussian kernel, ``algorithm="auto"``.
Each row times one call with the categorical features and the same call on the
3 continuous columns alone, the two taking turns within each of ``--repeat``
rounds; medians.  The target is a mixed predict within 1.5x of the continuous
one: the discrete kernels fold into the same matrix product as extra columns
(one per category), so the ratio is the price of those columns.
"""

from __future__ import annotations

import argparse

import numpy as np

from skl_nw import NadarayaWatsonRegressor

from ._common import describe, environment, table, timings, write_json

N_CATEGORIES = (5, 12)
BANDWIDTH = 0.3  # continuous h (the features are N(0, 1)); lambda 0.3 for both categorical ones


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` with 3 continuous columns then one column of codes per categorical feature."""
    rng = np.random.default_rng(seed)
    codes = [rng.integers(0, c, n) for c in N_CATEGORIES]
    X = np.column_stack([rng.normal(size=(n, 3)), *codes]).astype(float)
    effects = [rng.normal(size=c)[k] for c, k in zip(N_CATEGORIES, codes, strict=True)]
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + sum(effects) + rng.normal(0, 0.1, n)
    return X, y


def estimators() -> dict[str, tuple[NadarayaWatsonRegressor, list[int]]]:
    """Name -> (estimator, the columns of X it takes)."""
    n_cont, n_cat = 3, len(N_CATEGORIES)
    mixed = NadarayaWatsonRegressor(
        bandwidth=[BANDWIDTH] * (n_cont + n_cat),
        categorical_features=list(range(n_cont, n_cont + n_cat)),
    )
    return {
        "continuous only": (NadarayaWatsonRegressor(bandwidth=BANDWIDTH), list(range(n_cont))),
        "mixed": (mixed, list(range(n_cont + n_cat))),
    }


def run(n: int, repeat: int) -> tuple[list[list[str]], dict]:
    X, y = make_data(n, seed=0)
    Q, _ = make_data(n, seed=1)
    ests = estimators()
    for est, cols in ests.values():
        est.fit(X[:, cols], y).predict(Q[:, cols])  # warm-up (numba compilation, BLAS threads)
    calls = {
        "fit + predict": lambda est, cols: est.fit(X[:, cols], y).predict(Q[:, cols]),
        "predict": lambda est, cols: est.predict(Q[:, cols]),
    }
    medians = {call: {name: [] for name in ests} for call in calls}
    for _ in range(repeat):  # side by side: the two estimators take turns in each round
        for call, fn in calls.items():
            for name, (est, cols) in ests.items():
                _, times = timings(lambda fn=fn, est=est, cols=cols: fn(est, cols), 1)
                medians[call][name].append(times[0])
    rows, results = [], {}
    for call, by_name in medians.items():
        t = {name: float(np.median(times)) for name, times in by_name.items()}
        ratio = t["mixed"] / t["continuous only"]
        rows.append([f"{n:,}", call, f"{t['continuous only']:.3g}", f"{t['mixed']:.3g}",
                     f"{ratio:.2f}x"])  # fmt: skip
        results[call] = {**t, "ratio": ratio}
    results["algorithm"] = {name: est._fit_method for name, (est, _) in ests.items()}
    return rows, results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks mixed", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="n = m = 5,000, three rounds")
    parser.add_argument("--repeat", type=int, default=5, help="timing rounds (median)")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    n = 5_000 if args.quick else 20_000
    rows, results = run(n, repeat=3 if args.quick else args.repeat)
    header = ["n = m", "call", "continuous only (s)", "mixed (s)", "mixed / continuous"]
    print(table(header, rows))
    print(f"\nAlgorithm taken: {results['algorithm']}; target: predict within 1.5x.")
    env = environment()
    print(describe(env))
    write_json(args.json, {"n": n, "results": results, "environment": env})
