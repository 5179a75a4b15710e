"""Inference benchmarks: the cost of standard errors, gradients and bootstrap intervals.

Run ``python -m benchmarks inference`` (seconds) or ``--quick``.  Each row is
the median wall time of one call on ``n`` training points and ``m = n``
queries (d = 2, Gaussian kernel, brute force) and its ratio to one plain
``predict`` of the same estimator (Nadaraya–Watson, and the local linear
``LocalPolynomialRegressor``): the targets are at most 2x for
``return_std=True`` and about 30x for
``predict_interval(method="bootstrap", n_boot=399)``.
"""

from __future__ import annotations

import argparse

import numpy as np

from skl_nw import LocalPolynomialRegressor, NadarayaWatsonRegressor

from ._common import environment, table, timings


def _calls(reg, Q) -> dict:
    return {
        "predict": lambda: reg.predict(Q),
        "predict(return_std=True)": lambda: reg.predict(Q, return_std=True),
        "predict_gradient": lambda: reg.predict_gradient(Q),
        "predict_interval(normal)": lambda: reg.predict_interval(Q),
        "predict_interval(bootstrap, n_boot=399)": lambda: reg.predict_interval(
            Q, method="bootstrap", n_boot=399, random_state=0
        ),
    }


def run(n: int, repeat: int) -> list[list[str]]:
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (n, 2))
    y = 2 * np.sin(X[:, 0]) + X[:, 1] + rng.normal(0, 0.5, n)
    Q = rng.uniform(0, 5, (n, 2))
    estimators = {
        "Nadaraya–Watson": NadarayaWatsonRegressor(bandwidth=0.3, algorithm="brute"),
        "local linear": LocalPolynomialRegressor(bandwidth=0.3, algorithm="brute"),
    }
    rows = []
    for label, reg in estimators.items():
        reg.fit(X, y)
        base = None
        for name, fn in _calls(reg, Q).items():
            fn()  # warm-up (numba compilation, BLAS threads)
            _, times = timings(fn, repeat)
            t = float(np.median(times))
            base = t if base is None else base
            rows.append([str(n), label, name, f"{t:.4g}", f"{t / base:.1f}x"])
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks inference")
    parser.add_argument("--quick", action="store_true", help="n = 500 only")
    args = parser.parse_args(argv)
    sizes = [500] if args.quick else [500, 2000]
    rows = [row for n in sizes for row in run(n, repeat=3 if args.quick else 7)]
    print(table(["n = m", "estimator", "call", "median s", "/ predict"], rows))
    print()
    print(environment())
