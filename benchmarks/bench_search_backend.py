"""The default search's backend against every explicit one.

``python -m benchmarks search_backend`` (about 15-25 minutes on 2 cores) or
``--quick`` (n = 500, d = 1 and 3, seconds: a smoke run).

``BandwidthSearchCV(NadarayaWatsonRegressor(kernel=k))`` with its defaults
(``method="auto"``, on this continuous data the closed-form leave-one-out over
40 multiples of the rule of thumb, more where the best is an end of them;
``algorithm="auto"``) against the same search with ``algorithm="brute"``,
``"ball_tree"`` and ``"kd_tree"``, on uniform data in [0, 1]^d with a smooth
target.  Up to ``--full-max`` samples every search runs whole; above it, each
explicit backend's time is extrapolated from its leave-one-out predictions at
an evenly spaced 2% of the rows (plus its fit), as stated in the table, and the
default runs whole.  Searches of n = 2,000 are medians of 3 (the trees' single
runs, far slower there).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor
from skl_nw._search._context import DEFAULT_FACTORS

from ._common import describe, environment, table

BACKENDS = ("brute", "ball_tree", "kd_tree")


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    return X, np.sin(6 * X[:, 0]) + X[:, -1] ** 2 + rng.normal(0, 0.1, n)


def whole(X, y, kernel, algorithm, repeat: int = 1) -> tuple[float, object]:
    """Median wall time of ``repeat`` whole searches, and the last search."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel=kernel, algorithm=algorithm))
        search.fit(X, y)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), search


def extrapolated(X, y, kernel, algorithm) -> float:
    """Fit at the first candidate plus 2% of the rows' predictions, scaled to all rows."""
    from skl_nw import rule_of_thumb

    n = len(X)
    first = DEFAULT_FACTORS[0] * rule_of_thumb(X)
    factors = DEFAULT_FACTORS / DEFAULT_FACTORS[0]
    start = time.perf_counter()
    est = NadarayaWatsonRegressor(first, kernel=kernel, algorithm=algorithm).fit(X, y)
    fit = time.perf_counter() - start
    rows = np.unique(np.linspace(0, n - 1, max(32, n // 50)).astype(np.intp))
    start = time.perf_counter()
    est._leave_one_out().predictions(factors, rows=rows)
    return fit + (time.perf_counter() - start) * n / len(rows)


def run(sizes, dims, kernels, full_max: int) -> str:
    # One-time work (numba loading its compiled kernels) is not any search's time.
    whole(*make_data(200, 2), "gaussian", "auto")
    rows = []
    for n in sizes:
        for d in dims:
            X, y = make_data(n, d)
            for kernel in kernels:
                # Medians of 3 where a search takes about a second or less.
                repeat = 3 if n <= 2_000 else 1
                t_default, _ = whole(X, y, kernel, "auto", repeat)
                times = {}
                for algorithm in BACKENDS:
                    if n <= full_max:
                        reps = repeat if algorithm == "brute" else 1
                        times[algorithm] = whole(X, y, kernel, algorithm, reps)[0]
                    else:
                        times[algorithm] = extrapolated(X, y, kernel, algorithm)
                best = min(times, key=times.get)
                rows.append([
                    n, d, kernel, f"{t_default:.3g}",
                    *(f"{times[a]:.3g}" for a in BACKENDS),
                    best, f"{t_default / times[best]:.2f}",
                    "whole" if n <= full_max else "extrapolated",
                ])  # fmt: skip
                print(table(HEADER, rows[-1:]).splitlines()[-1], flush=True)
    return table(HEADER, rows)


HEADER = ["n", "d", "kernel", "default s", "brute s", "ball_tree s", "kd_tree s",
          "best", "default / best", "explicit runs"]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks search_backend")
    parser.add_argument("--quick", action="store_true", help="n = 500, d = 1 and 3")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 50_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[1, 3, 8])
    parser.add_argument("--full-max", type=int, default=10_000)
    args, _ = parser.parse_known_args(argv)
    sizes, dims = ([500], [1, 3]) if args.quick else (args.sizes, args.dims)
    print(describe(environment()), "\n", flush=True)
    print(run(sizes, dims, ["gaussian", "epanechnikov"], args.full_max))


if __name__ == "__main__":
    main()
