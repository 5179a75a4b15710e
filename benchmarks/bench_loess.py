"""LOESS benchmarks: LOWESS against statsmodels (and fastlowess), span selection, 2-D LOESS.

Run ``python -m benchmarks loess`` (minutes: statsmodels' ``lowess`` at n = 1e5
takes a minute or more) or ``--quick`` (small sizes, seconds).  Prints markdown
tables; ``docs/benchmarks.md`` holds the published ones.

1. d = 1, frac = 0.1, it = 3 at the training rows: statsmodels
   ``lowess(delta=0)`` against ``LocalPolynomialRegressor(kernel="tricube",
   span=0.1, robust_iterations=3)``; ``fastlowess`` (the bench extra) at
   ``delta=0`` and at its defaults, each with its largest difference from
   statsmodels in units of the range of y.
2. Span selection at n = 1e4, d = 1 (the default grid, criterion "loo" and "aicc").
3. d = 2, n = 2e4, span = 0.1, degree 2 at the training rows: this package,
   R's ``loess(surface="direct", normalize=FALSE)`` when ``Rscript`` is on the
   path (else a row that says it was not run) and ``fastloess``
   (``surface_mode="direct"``), each time over ours.  ``--previous PATH`` adds
   another checkout of this package (an earlier version) timed on the same
   data in a subprocess, side by side in the same run; ``--only 2d`` runs this
   table alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor

from ._common import describe, environment, spread, table, timings


def make_series(n: int, seed: int):
    """``sin x + x / 5`` on U(0, 10) with N(0, 0.3^2) noise and 2% outliers (+3 to +5)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    y = np.sin(x) + x / 5 + rng.normal(0, 0.3, n)
    bad = rng.choice(n, n // 50, replace=False)
    y[bad] += rng.uniform(3, 5, len(bad))
    return x, y


def _ours(x, y, frac, it, n_jobs):
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=1, span=frac,
                                   robust_iterations=it, n_jobs=n_jobs)  # fmt: skip
    return reg.fit(x[:, None], y).predict(x[:, None])


def _fastlowess(x, y, frac, it, delta):
    import fastlowess

    order = np.argsort(x)
    fit = fastlowess.Lowess(fraction=frac, iterations=it, delta=delta).fit(x[order], y[order])
    out = np.empty(len(x))
    out[order] = np.asarray(fit.y)
    return out


def bench_lowess(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.smoothers_lowess import lowess

    x, y = make_series(n, 0)
    frac, it = 0.1, 3
    theirs, t_sm = timings(lambda: lowess(y, x, frac=frac, it=it, delta=0.0,
                                          return_sorted=False), 1)  # fmt: skip
    span = np.ptp(y)
    rows = [["statsmodels lowess(delta=0)", spread(t_sm), "1.0×", "0"]]
    for n_jobs in (None, -1):
        _ours(x[:200], y[:200], frac, it, n_jobs)  # compile
        fit, t = timings(lambda n_jobs=n_jobs: _ours(x, y, frac, it, n_jobs), repeat)
        label = "skl_nw LocalPolynomialRegressor(tricube, span, robust_iterations)"
        rows.append([label + ("" if n_jobs is None else f", n_jobs={n_jobs}"), spread(t),
                     f"{np.median(t_sm) / np.median(t):.1f}×",
                     f"{np.abs(fit - theirs).max() / span:.1e}"])  # fmt: skip
    try:
        for delta, label in ((0.0, "delta=0"), (None, "defaults")):
            fit, t = timings(lambda delta=delta: _fastlowess(x, y, frac, it, delta), repeat)
            rows.append([f"fastlowess ({label})", spread(t),
                         f"{np.median(t_sm) / np.median(t):.1f}×",
                         f"{np.abs(fit - theirs).max() / span:.1e}"])  # fmt: skip
    except ImportError:
        rows.append(["fastlowess", "not installed", "", ""])
    return table(["method", "time (s)", "speed-up", "max |Δ| / range(y)"], rows)


def bench_selection(n: int, repeat: int) -> str:
    x, y = make_series(n, 1)
    rows = []
    for criterion in ("loo", "aicc"):
        est = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.5)

        def search(criterion=criterion, est=est):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return BandwidthSearchCV(est, criterion=criterion).fit(x[:, None], y)

        fitted, t = timings(search, repeat)
        rows.append([criterion, fitted.n_iter_, spread(t), f"{fitted.span_:.3f}"])
    return table(["criterion", "candidates", "time (s)", "span"], rows)


def _r_loess(X, y, span: float, degree: int):
    """R's ``loess(surface="direct", normalize=FALSE)``: (fitted values, seconds of the call).

    The data go through a temporary CSV; the time is R's own ``system.time``
    of the ``loess`` call (elapsed), so reading the file is not counted.
    """
    names = [f"x{j}" for j in range(X.shape[1])]
    with tempfile.TemporaryDirectory() as folder:
        data, out = os.path.join(folder, "data.csv"), os.path.join(folder, "fit.csv")
        np.savetxt(data, np.column_stack([X, y]), delimiter=",", fmt="%.17g",
                   header=",".join([*names, "y"]), comments="")  # fmt: skip
        script = (
            f'd <- read.csv("{data}"); '
            f"t <- system.time(f <- loess(y ~ {' + '.join(names)}, data = d, span = {span!r}, "
            f'degree = {degree}, normalize = FALSE, surface = "direct"))[["elapsed"]]; '
            f'write.csv(data.frame(fit = fitted(f), t = t), "{out}", row.names = FALSE)'
        )
        subprocess.run(["Rscript", "-e", script], check=True, capture_output=True)
        result = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
    return result[:, 0], float(result[0, 1])


_PREVIOUS = """
import sys, time, numpy as np
from skl_nw import LocalPolynomialRegressor
data = np.load(sys.argv[1])
X, y, repeat = data["X"], data["y"], int(data["repeat"])
reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=2, span=0.1)
reg.fit(X[:300], y[:300]).predict(X[:300])  # compile
times = []
for _ in range(repeat):
    start = time.perf_counter()
    fit = reg.fit(X, y).predict(X)
    times.append(time.perf_counter() - start)
np.savez(sys.argv[2], fit=fit, times=np.array(times))
"""


def _previous(path: str, X, y, repeat: int):
    """The same fit in another checkout of the package (``path``): (fitted values, times)."""
    with tempfile.TemporaryDirectory() as folder:
        data, out = os.path.join(folder, "data.npz"), os.path.join(folder, "out.npz")
        np.savez(data, X=X, y=y, repeat=repeat)
        env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
        subprocess.run([sys.executable, "-c", _PREVIOUS, data, out], check=True, env=env,
                       cwd=folder, capture_output=True)  # fmt: skip
        result = np.load(out)
        return result["fit"], result["times"]


def bench_two_features(n: int, repeat: int, previous: str | None = None) -> str:
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1]) + rng.normal(0, 0.2, n)
    rows, t_ours = [], None
    for n_jobs in (None, -1):  # R and fastloess: one thread
        reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=2, span=0.1, n_jobs=n_jobs)
        reg.fit(X[:300], y[:300]).predict(X[:300])  # compile
        ours, t = timings(lambda reg=reg: reg.fit(X, y).predict(X), repeat)
        t_ours = float(np.median(t)) if t_ours is None else t_ours  # one thread's
        rows.append(["skl_nw LocalPolynomialRegressor(degree=2, span=0.1)"
                     + ("" if n_jobs is None else f", n_jobs={n_jobs}"), spread(t),
                     f"{np.median(t) / t_ours:.2f}×", ""])  # fmt: skip
    if previous is not None:
        fit, t = _previous(previous, X, y, repeat)
        rows.append([f"previous version ({previous})", spread(t), f"{np.median(t) / t_ours:.2f}×",
                     f"{np.abs(fit - ours).max() / np.ptp(y):.1e}"])  # fmt: skip
    if shutil.which("Rscript") is None:
        rows.append(["R loess(surface='direct')", "not run: Rscript is not installed", "", ""])
    else:
        fits, times = zip(*(_r_loess(X, y, 0.1, 2) for _ in range(repeat)), strict=True)
        rows.append(["R loess(surface='direct', normalize=FALSE)", spread(np.array(times)),
                     f"{np.median(times) / t_ours:.1f}×",
                     f"{np.abs(fits[0] - ours).max() / np.ptp(y):.1e}"])  # fmt: skip
    try:
        import fastloess

        model = fastloess.Loess(fraction=0.1, iterations=0, degree="quadratic", dimensions=2,
                                surface_mode="direct", distance_metric="euclidean")  # fmt: skip
        fit, t = timings(lambda: np.asarray(model.fit(X.ravel(), y).y), repeat)  # row-major pairs
        rows.append(["fastloess (surface_mode='direct')", spread(t),
                     f"{np.median(t) / t_ours:.1f}×",
                     f"{np.abs(fit - ours).max() / np.ptp(y):.1e}"])  # fmt: skip
    except ImportError:
        rows.append(["fastloess", "not installed", "", ""])
    except Exception as error:  # an API change of the optional package: say so
        rows.append(["fastloess", f"failed: {error!r}"[:60], "", ""])
    return table(["method", "time (s)", "time / ours", "max |Δ| / range(y) vs ours"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks loess", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions (median)")
    parser.add_argument("--only", choices=["lowess", "selection", "2d"], help="one table only")
    parser.add_argument(
        "--previous",
        metavar="PATH",
        help="2-D table: also time the checkout at PATH (an earlier version)",
    )
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    print(describe(environment(("statsmodels", "fastlowess", "fastloess"))) + "\n", flush=True)
    start = time.perf_counter()
    n1, n2, n3 = (2_000, 1_000, 2_000) if args.quick else (100_000, 10_000, 20_000)
    sections = [
        ("lowess", f"LOWESS at the training rows (n = {n1:,}, frac = 0.1, it = 3)",
         lambda: bench_lowess(n1, repeat)),
        ("selection", f"Span selection, default grid (n = {n2:,}, d = 1)",
         lambda: bench_selection(n2, repeat)),
        ("2d", f"LOESS in two dimensions (n = {n3:,}, span = 0.1, degree 2)",
         lambda: bench_two_features(n3, repeat, args.previous)),
    ]  # fmt: skip
    for name, title, body in sections:
        if args.only not in (None, name):
            continue
        print(f"\n### {title}\n\n{body()}", flush=True)
    print(f"\nTotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
