"""Local polynomial benchmarks: ``LocalPolynomialRegressor`` against statsmodels, and its cost.

Run ``python -m benchmarks local_poly`` (a few minutes on 2 cores, most of it
statsmodels' bandwidth search) or ``--quick`` (smaller sizes, seconds).
Prints markdown tables; ``docs/benchmarks.md`` holds the published ones.

1. Fit + predict at fixed bandwidths against statsmodels
   ``KernelReg(reg_type="ll")`` (n = m = 2,000, d = 3): wall time and the
   largest difference of the predictions.
2. Bandwidth selection against ``KernelReg(reg_type="ll", bw="cv_ls")``
   (n = 300, d = 2): wall time and the leave-one-out MSE of each method's
   bandwidths, all scored by one dense formula written here (``loo_mse``).
3. Predict throughput of degree 0, 1 and 2 (d = 3, Gaussian).

Every method uses the Gaussian kernel ``exp(-u^2 / 2)``, statsmodels' too.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor

from ._common import describe, environment, spread, table, timings


def make_data(n: int, d: int, seed: int):
    """``y = 2 sin x1 + x1^0.8 + 0.5 cos x2 + N(0, 0.25)``, inputs U(0, 5)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] ** 0.8
    if d > 1:
        y = y + 0.5 * np.cos(X[:, 1])
    return X, y + rng.normal(0, 0.5, n)


def loo_mse(X: np.ndarray, y: np.ndarray, h) -> float:
    """Leave-one-out MSE of Gaussian local-linear regression: the one reference formula.

    Dense and independent of skl_nw: per row, the weighted least-squares line
    of the other rows (``numpy.linalg.lstsq``) evaluated at the row.
    """
    Z = np.asarray(X, float) / np.asarray(h, float)
    errors = []
    for i in range(len(Z)):
        T = np.delete(Z, i, axis=0) - Z[i]
        root = np.exp(-0.25 * (T**2).sum(axis=1))[:, None]  # sqrt of the weight
        A = np.column_stack([np.ones(len(T)), T]) * root
        coef = np.linalg.lstsq(A, np.delete(y, i)[:, None] * root, rcond=None)[0]
        errors.append(y[i] - coef[0, 0])
    return float(np.mean(np.square(errors)))


def bench_fit_predict(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = make_data(n, 3, 0)
    Q = make_data(n, 3, 1)[0]
    h = np.array([0.4, 0.6, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm_fit = lambda: KernelReg(y, X, var_type="ccc", reg_type="ll", bw=h).fit(Q)[0]  # noqa: E731
        ours = {
            n_jobs: lambda n_jobs=n_jobs: (
                LocalPolynomialRegressor(h, n_jobs=n_jobs).fit(X, y).predict(Q)
            )
            for n_jobs in (None, -1)
        }
        for fit in ours.values():
            fit()  # warm-up
        # Interleaved, so a slow spell of a shared machine hits every method alike: one
        # statsmodels run, then ten of each of ours (a millisecond-scale call; the median
        # is what counts), ``repeat`` times.
        times = {key: [] for key in ("statsmodels", *ours)}
        for _ in range(repeat):
            theirs, t = timings(sm_fit, 1)
            times["statsmodels"].extend(t)
            for n_jobs, fit in ours.items():
                times[n_jobs].extend(timings(fit, 10)[1])
    t_sm = np.array(times["statsmodels"])
    rows = [["statsmodels KernelReg(reg_type='ll')", spread(t_sm), "1.0×", ""]]
    for n_jobs, fit in ours.items():
        t_ours = np.array(times[n_jobs])
        rows.append([
            "skl_nw LocalPolynomialRegressor(degree=1"
            + ("" if n_jobs is None else f", n_jobs={n_jobs}") + ")", spread(t_ours),
            f"{np.median(t_sm) / np.median(t_ours):.0f}×", f"{np.abs(fit() - theirs).max():.1e}",
        ])  # fmt: skip
    return table(["method", "fit + predict (s)", "speed-up", "largest Δ prediction"], rows)


def bench_selection(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = make_data(n, 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        h_sm = KernelReg(y, X, var_type="cc", reg_type="ll", bw="cv_ls").bw
        t_sm = time.perf_counter() - start
    rows = [["statsmodels KernelReg(reg_type='ll', bw='cv_ls')", f"{t_sm:.3g}", "1.0×",
             np.round(h_sm, 3), f"{loo_mse(X, y, h_sm):.5f}"]]  # fmt: skip
    methods = (
        ("grid (40 multiples, closed form)", {"method": "grid"}),
        ("sgd (per feature)", {"method": "sgd"}),
        ("sgd (tol=1e-6, n_iter_no_change=10)", {"method": "sgd", "tol": 1e-6,
                                                 "n_iter_no_change": 10}),
        ("lbfgs (per feature, full batch)", {"method": "lbfgs"}),
    )  # fmt: skip
    for label, params in methods:

        def search(params=params):
            model = BandwidthSearchCV(LocalPolynomialRegressor(), random_state=0, **params)
            return model.fit(X, y)

        fitted, times = timings(search, repeat)
        rows.append([
            f"skl_nw BandwidthSearchCV {label}", spread(times),
            f"{t_sm / np.median(times):.0f}×", np.round(fitted.bandwidth_, 3),
            f"{loo_mse(X, y, fitted.bandwidth_):.5f}",
        ])  # fmt: skip
    return table(["method", "time (s)", "speed-up", "bandwidths", "LOO MSE"], rows)


def bench_throughput(n: int, repeat: int) -> str:
    X, y = make_data(n, 3, 3)
    Q = make_data(n, 3, 4)[0]
    rows, base = [], None
    for degree in (0, 1, 2):
        reg = LocalPolynomialRegressor(0.5, degree=degree, algorithm="brute").fit(X, y)
        _, t = timings(lambda reg=reg: reg.predict(Q), repeat)
        base = np.median(t) if base is None else base
        rows.append([
            degree, spread(t), f"{n * n / np.median(t) / 1e6:.0f}",
            f"{np.median(t) / base:.2f}×",
        ])  # fmt: skip
    return table(["degree", "predict (s)", "M pairs / s", "time / degree 0"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks local_poly", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions (median)")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    print(describe(environment(("statsmodels",))) + "\n", flush=True)
    start = time.perf_counter()
    sections = [
        (f"Fit + predict against statsmodels (n = m = {500 if args.quick else 2000}, d = 3)",
         bench_fit_predict(500 if args.quick else 2000, repeat)),
        (f"Bandwidth selection against statsmodels cv_ls (n = {100 if args.quick else 300}, d = 2)",
         bench_selection(100 if args.quick else 300, repeat)),
        (f"Predict throughput by degree (n = m = {2000 if args.quick else 20000}, d = 3)",
         bench_throughput(2000 if args.quick else 20000, repeat)),
    ]  # fmt: skip
    for title, body in sections:
        print(f"\n### {title}\n\n{body}", flush=True)
    print(f"\nTotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
