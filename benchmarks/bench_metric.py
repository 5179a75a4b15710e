"""MLKR, the learned attention metric, against metric-learn's MLKR and per-feature bandwidths.

Run ``python -m benchmarks metric`` (about ten minutes on 2 cores: metric-learn's
fits take most of it, the n = 65,000 fit up to five) or ``--quick`` (seconds:
n = 200, metric-learn stopped after 20 evaluations, the large part at 3,000).
Prints markdown tables; ``docs/benchmarks.md`` holds the published ones.

The problem: ``y = sin(2 z1) + z2^2 / 2 + N(0, 0.1^2)`` where ``z = A^T x``
for two orthonormal directions ``A`` hidden obliquely among d = 20 standard
normal features.  Every model fits on n rows and is scored on 2,000 others
(mean squared error of Nadaraya–Watson on the learned metric, bandwidth 1),
and the training leave-one-out loss of each learned W is computed by the same
formula (metric-learn's kernel ``exp(-||A d||^2)`` is ours at ``W = sqrt(2) A``).

- n = 2,000: skl_nw's ``MLKR(n_components=2)`` (full batch, L-BFGS), median of
  ``--repeat`` fits after one warm-up fit (numba's kernels load once per
  process); metric-learn 0.7.0's ``MLKR(n_components=2)`` once from its own
  start and once from ours (each fit takes minutes); per-feature bandwidths
  from ``BandwidthSearchCV(method="lbfgs")``.  Peak memory is tracemalloc's
  peak of the fit (numpy's allocations).
- n = 65,000 (``--quick``: 3,000): ``MLKR(n_components=2, max_iter=2, n_jobs=-1)``,
  minibatches (two passes over the rows, about 500 Adam steps; ``--large-max-iter
  200`` for MLKR's default, early stopping), in a fresh process whose peak
  resident memory (``ru_maxrss``) is reported;
  metric-learn is not run (one n x n float64 matrix is 34 GB).  The
  per-feature baseline chooses its bandwidths on a 16,000-row subsample
  (``--baseline-rows``: its full-batch L-BFGS over 65,000 rows would take tens
  of minutes) and predicts from all the rows with them.

metric-learn 0.7.0 passes ``force_all_finite`` to scikit-learn's ``check_X_y``
and ``check_array``, which scikit-learn 1.8 renamed ``ensure_all_finite``:
this benchmark patches metric-learn's references to those two functions to
rename that one argument (nothing else changes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from skl_nw import MLKR, BandwidthSearchCV, NadarayaWatsonRegressor, get_kernel
from skl_nw._engine import metric_loss_grad

from ._common import describe, environment, spread, table, timings

N_TEST = 2000


def hidden_directions(n: int, d: int = 20, seed: int = 0):
    """``(X, y)``: y depends on two oblique directions hidden among d features."""
    rng = np.random.default_rng(seed)
    A = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    X = rng.normal(size=(n, d))
    Z = X @ A
    y = np.sin(2 * Z[:, 0]) + 0.5 * Z[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def split(n: int):
    X, y = hidden_directions(n + N_TEST)
    return X[:n], y[:n], X[n:], y[n:]


def test_mse(W, X, y, X_test, y_test) -> float:
    """Test MSE of Nadaraya–Watson with bandwidth 1 on the coordinates ``X W^T``."""
    model = NadarayaWatsonRegressor(bandwidth=1.0).fit(X @ W.T, y)
    return float(np.mean((model.predict(X_test @ W.T) - y_test) ** 2))


def loo_loss(W, X, y) -> float:
    gaussian = get_kernel("gaussian")
    return metric_loss_grad(X - X.mean(axis=0), W, y[:, None], gaussian, grad=False)[0]


def traced(fn):
    """``fn()``, its wall time and tracemalloc's peak in MiB."""
    tracemalloc.start()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, elapsed, peak


def metric_learn_mlkr():
    """metric-learn's MLKR class, with the one-argument patch (module docstring), or None."""
    try:
        import metric_learn
        from metric_learn import _util
    except ImportError:
        return None

    def renamed(function):
        def call(*args, **kwargs):
            if "force_all_finite" in kwargs:
                kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
            return function(*args, **kwargs)

        return call

    if not getattr(_util, "_skl_nw_patched", False):
        _util.check_X_y, _util.check_array = renamed(_util.check_X_y), renamed(_util.check_array)
        _util._skl_nw_patched = True
    return metric_learn.MLKR


def small(n: int, repeat: int, quick: bool) -> str:
    X, y, X_test, y_test = split(n)
    MLKR(2, random_state=0, max_iter=2).fit(X[:200], y[:200])  # warm-up: numba's kernels
    ours, times = timings(lambda: MLKR(2, random_state=0).fit(X, y), repeat)
    _, _, peak = traced(lambda: MLKR(2, random_state=0).fit(X, y))
    base, base_times = timings(
        lambda: BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y), 1
    )
    base_mse = float(np.mean((base.predict(X_test) - y_test) ** 2))
    rows = [
        ["skl_nw MLKR (L-BFGS)", spread(times), f"{peak:.0f}", ours.n_iter_,
         f"{loo_loss(ours.components_, X, y):.4f}",
         f"{test_mse(ours.components_, X, y, X_test, y_test):.4f}", ""],
    ]  # fmt: skip
    mse_ours = test_mse(ours.components_, X, y, X_test, y_test)
    reference = metric_learn_mlkr()
    start = MLKR(2, random_state=0, max_iter=0).fit(X, y).components_
    starts = {"its own start (PCA)": "auto", "our start": start / np.sqrt(2)}
    for label, init in starts.items() if reference is not None else ():
        options = {"init": init, "max_iter": 20 if quick else 1000}  # 1000: its default
        fitted, elapsed, peak = traced(lambda o=options: reference(2, **o).fit(X, y))
        W = np.sqrt(2) * fitted.components_
        rows.append([f"metric-learn MLKR, {label}", f"{elapsed:.3g}", f"{peak:.0f}",
                     fitted.n_iter_, f"{loo_loss(W, X, y):.4f}",
                     f"{test_mse(W, X, y, X_test, y_test):.4f}",
                     f"{elapsed / np.median(times):.2g}x"])  # fmt: skip
    rows.append(["per-feature h, BandwidthSearchCV(lbfgs)", spread(base_times), "", "", "",
                 f"{base_mse:.4f}", ""])  # fmt: skip
    header = ["n = " + f"{n:,}", "fit (s)", "peak MiB", "evaluations", "train LOO loss",
              "test MSE", "metric-learn / skl_nw time"]  # fmt: skip
    note = f"\nTest MSE of skl_nw's MLKR / per-feature bandwidths: {mse_ours / base_mse:.3f}" + (
        "" if reference else " (metric-learn not installed: its rows are missing)"
    )
    return table(header, rows) + note


# The n = 65,000 fit runs in a fresh process: its peak RSS is the fit's (and the imports').
_CHILD = """
import json, resource, sys, time
import numpy as np
from benchmarks.bench_metric import split, test_mse
from skl_nw import MLKR
n, kwargs = int(sys.argv[1]), json.loads(sys.argv[2])
X, y, X_test, y_test = split(n)
start = time.perf_counter()
model = MLKR(2, random_state=0, **kwargs).fit(X, y)
elapsed = time.perf_counter() - start
print(json.dumps({"time": elapsed, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "steps": model.n_iter_, "checks": len(model.loss_curve_),
                  "start": model.loss_curve_[0], "best": model.best_loss_,
                  "mse": test_mse(model.components_, X, y, X_test, y_test)}))
"""


def large(n: int, baseline_rows: int, quick: bool, max_iter: int) -> str:
    # Two passes over the training rows (about 500 Adam steps of 256 queries), both cores.
    kwargs = {"batch_size": 128, "max_iter": 2} if quick else {"max_iter": max_iter, "n_jobs": -1}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n), json.dumps(kwargs)],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    X, y, X_test, y_test = split(n)
    rows = min(n, baseline_rows)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs")
    base, base_times = timings(lambda: search.fit(X[:rows], y[:rows]), 1)
    # The bandwidths chosen on the subsample, the fit on every row (as MLKR's).
    full = NadarayaWatsonRegressor(bandwidth=base.bandwidth_).fit(X, y)
    base_mse = float(np.mean((full.predict(X_test) - y_test) ** 2))
    header = [f"n = {n:,}", "fit (s)", "peak RSS MiB", "Adam steps", "held-out loss (start, end)",
              "test MSE"]  # fmt: skip
    body = [
        ["skl_nw MLKR (minibatches)", f"{result['time']:.3g}", f"{result['rss'] / 1024:.0f}",
         result["steps"], f"{result['start']:.4f}, {result['best']:.4f}",
         f"{result['mse']:.4f}"],
        [f"per-feature h (BandwidthSearchCV(lbfgs) on {rows:,} rows), all rows",
         spread(base_times), "",
         "", "", f"{base_mse:.4f}"],
    ]  # fmt: skip
    note = f"\nTest MSE of skl_nw's MLKR / per-feature bandwidths: {result['mse'] / base_mse:.3f}"
    return table(header, body) + note


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks metric", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions (median)")
    parser.add_argument("--only", choices=["small", "large"], help="run one of the two parts")
    parser.add_argument("--baseline-rows", type=int, default=16_000,
                        help="rows of the per-feature baseline at the large n")  # fmt: skip
    parser.add_argument("--large-max-iter", type=int, default=2,
                        help="passes over the rows at the large n (200: the default)")  # fmt: skip
    args = parser.parse_args(argv)
    print(describe(environment(extra=("metric_learn",))) + "\n", flush=True)
    if args.only in (None, "small"):
        print("### Hidden two directions, d = 20: fit and quality\n")
        n, repeat = (200, 1) if args.quick else (2000, args.repeat)
        print(small(n, repeat, args.quick) + "\n", flush=True)
    if args.only in (None, "large"):
        print("### The size metric-learn cannot fit\n")
        n = 3000 if args.quick else 65_000
        print(large(n, args.baseline_rows, args.quick, args.large_max_iter), flush=True)


if __name__ == "__main__":
    main()
