"""Bandwidth selection on mixed data: h and lambda together, against statsmodels.

Run ``python -m benchmarks mixed_search`` (about a minute on 2 cores, most of
it statsmodels' search) or ``--quick``.  Prints a markdown table;
``docs/benchmarks.md`` holds the published one.

n = 300 points, one continuous feature and one unordered feature of 3
categories; statsmodels ``KernelReg(var_type="cu", reg_type="lc",
bw="cv_ls")`` (a Nelder–Mead search of the leave-one-out loss) against
``BandwidthSearchCV``'s closed-form grid and its gradient descent.  Every
result is scored by one dense leave-one-out formula written here
(``loo_mse``), independent of both libraries: the Gaussian kernel times the
Aitchison–Aitken kernel, as statsmodels defines them.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor

from ._common import describe, environment, spread, table, timings


def make_data(n: int, seed: int):
    """``y = sin(2 pi x) + 0.5 z + N(0, 0.3^2)``, x ~ U(0, 1), z uniform on 3 categories."""
    rng = np.random.default_rng(seed)
    x, z = rng.uniform(0, 1, n), rng.integers(0, 3, n)
    y = np.sin(2 * np.pi * x) + 0.5 * z + rng.normal(0, 0.3, n)
    return np.column_stack([x, z]).astype(float), y


def loo_mse(X: np.ndarray, y: np.ndarray, h: float, lam: float) -> float:
    """Leave-one-out MSE of local-constant regression, Gaussian x Aitchison–Aitken (c = 3)."""
    K = np.exp(-0.5 * ((X[:, None, 0] - X[None, :, 0]) / h) ** 2)
    K *= np.where(X[:, None, 1] == X[None, :, 1], 1 - lam, lam / 2)
    np.fill_diagonal(K, 0.0)
    return float(np.mean((K @ y / K.sum(axis=1) - y) ** 2))


def bench_selection(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = make_data(n, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        bw = KernelReg(y, X, var_type="cu", reg_type="lc", bw="cv_ls").bw
        t_sm = time.perf_counter() - start
    reference = loo_mse(X, y, *bw)
    rows = [["statsmodels KernelReg(var_type='cu', bw='cv_ls')", f"{t_sm:.3g}", "1.0×",
             np.round(bw, 4), f"{reference:.5f}", ""]]  # fmt: skip
    methods = (
        ("grid (40 h x 7 lambda, closed form)", {"method": "grid"}),
        ("sgd", {"method": "sgd"}),
    )
    for label, params in methods:

        def search(params=params):
            model = BandwidthSearchCV(NadarayaWatsonRegressor(categorical_features=[1]),
                                      random_state=0, **params)  # fmt: skip
            return model.fit(X, y)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted, times = timings(search, repeat)
        mse = loo_mse(X, y, *fitted.bandwidth_)
        rows.append([
            f"skl_nw BandwidthSearchCV {label}", spread(times),
            f"{t_sm / np.median(times):.0f}×", np.round(fitted.bandwidth_, 4),
            f"{mse:.5f}", f"{100 * (mse / reference - 1):+.2f}%",
        ])  # fmt: skip
    return table(["method", "time (s)", "speed-up", "h, lambda", "LOO MSE", "vs statsmodels"],
                 rows)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks mixed_search", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    parser.add_argument("--repeat", type=int, default=7, help="timing repetitions (median)")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    n = 100 if args.quick else 300
    print(describe(environment(("statsmodels",))) + "\n", flush=True)
    print(f"### Selection of h and lambda against statsmodels cv_ls (n = {n})\n", flush=True)
    print(bench_selection(n, repeat), flush=True)


if __name__ == "__main__":
    main()
