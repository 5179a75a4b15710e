"""Bandwidth search benchmarks: speed and quality of ``BandwidthSearchCV``.

Run ``python -m benchmarks search`` (about 2-5 minutes on 2 cores) or
``python -m benchmarks search --quick`` (n = 200 only, seconds).  Prints
markdown tables; ``docs/benchmarks.md`` ("Bandwidth search") publishes the
timing table and the headlines; the other tables are CSV files in
``docs/_static/benchmarks/`` (``search_loo_mse``, ``search_bandwidths``,
``search_vs_optimum``, ``search_noise_feature``, ``search_mlkr``).

1. Against statsmodels ``KernelReg(reg_type="lc", bw="cv_ls")``: wall time and
   the leave-one-out MSE of the chosen bandwidths, all scored by one
   independent dense formula (``loo_mse`` below).
2. Against metric-learn's ``MLKR`` on scikit-learn's diabetes data: fit time
   and test MSE of Nadaraya–Watson with each learned metric.
3. Quality: grid and SGD against the optimum of a fine brute-force scan, and
   the bandwidth ratio learned for a pure-noise feature.

Every method uses the Gaussian kernel ``exp(-u^2 / 2)``, statsmodels' too.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.optimize import minimize_scalar
from threadpoolctl import threadpool_limits

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor

from ._common import describe, environment, numpy_engine, table, timings

# ---------------------------------------------------------------- helpers


def make_data(n: int, d: int, seed: int, second: str = "weak", noise: float = 0.5):
    """``y = 2 sin x1 + x1^0.8 + N(0, noise^2)`` with x1 ~ U(0, 5).

    For ``d = 2`` the second feature, also U(0, 5), is a weaker signal
    (``second="weak"``: adds ``0.5 cos x2``) or pure noise (``second="noise"``).
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] ** 0.8
    if d > 1 and second == "weak":
        y = y + 0.5 * np.cos(X[:, 1])
    return X, y + rng.normal(0, noise, n)


def loo_mse(X: np.ndarray, y: np.ndarray, h) -> float:
    """Leave-one-out MSE of Gaussian Nadaraya–Watson: the one reference formula.

    Dense and independent of skl_nw: all pairwise scaled squared distances,
    the diagonal excluded (-inf log-weight), a max-shifted softmax per row.
    """
    Z = np.asarray(X, dtype=float) / np.asarray(h, dtype=float)
    logits = -0.5 * ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(axis=-1)
    np.fill_diagonal(logits, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    prediction = weights @ y / weights.sum(axis=1)
    return float(np.mean((y - prediction) ** 2))


def timed(fn, repeat: int = 1):
    """Run ``fn`` ``repeat`` times; return (last result, median seconds)."""
    result, times = timings(fn, repeat)
    return result, float(np.median(times))


def search(method: str, **kwargs) -> BandwidthSearchCV:
    return BandwidthSearchCV(NadarayaWatsonRegressor(), method=method, random_state=0, **kwargs)


def fmt_h(h) -> str:
    return "(" + ", ".join(f"{v:.3g}" for v in np.atleast_1d(h)) + ")"


# ------------------------------------------------------- 1. vs statsmodels


def bench_statsmodels(sizes, repeat: int) -> str:
    try:
        from statsmodels.nonparametric.kernel_regression import KernelReg
    except ImportError:
        return "_statsmodels is not installed: section skipped._"
    rows = []
    for d in (1, 2):
        for n in sizes:
            X, y = make_data(n, d, seed=n + d)

            def sm_fit(X=X, y=y, d=d):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # pandas FutureWarning inside statsmodels
                    return KernelReg(y, X, var_type="c" * d, reg_type="lc", bw="cv_ls").bw

            h_sm, t_sm = timed(sm_fit, 1)  # seconds to minutes: once
            grid, t_grid = timed(lambda X=X, y=y: search("grid").fit(X, y), repeat)
            sgd, t_sgd = timed(lambda X=X, y=y: search("sgd").fit(X, y), repeat)
            with numpy_engine():
                _, t_grid_np = timed(lambda X=X, y=y: search("grid").fit(X, y), repeat)
                _, t_sgd_np = timed(lambda X=X, y=y: search("sgd").fit(X, y), repeat)
            mse = [loo_mse(X, y, h) for h in (h_sm, grid.bandwidth_, sgd.bandwidth_)]
            rows.append(
                [
                    str(n),
                    str(d),
                    f"{t_sm:.2f}",
                    f"{t_grid:.3f}",
                    f"{t_sgd:.3f} ({sgd.n_iter_})",
                    f"{t_sm / t_grid:.0f}×",
                    f"{t_sm / t_sgd:.0f}×",
                    f"{t_grid_np:.3f} / {t_sgd_np:.3f}",
                    f"{mse[0]:.4f}",
                    f"{mse[1]:.4f}",
                    f"{mse[2]:.4f}",
                    f"{mse[1] / mse[0]:.4f}",
                    f"{mse[2] / mse[0]:.4f}",
                    f"{fmt_h(h_sm)} {fmt_h(grid.bandwidth_)} {fmt_h(sgd.bandwidth_)}",
                ]
            )
            print(f"  statsmodels n={n} d={d} done ({t_sm:.1f} s)", flush=True)
    header = [
        "n",
        "d",
        "statsmodels s",
        "grid s",
        "sgd s (epochs)",
        "speed-up grid",
        "speed-up sgd",
        "numpy passes: grid / sgd s",
        "LOO MSE sm",
        "LOO MSE grid",
        "LOO MSE sgd",
        "grid / sm",
        "sgd / sm",
        "h: sm, grid, sgd",
    ]
    return table(header, rows)


# ------------------------------------------------------------ 2. vs MLKR


def _metric_learn_shim() -> None:
    """Let metric-learn 0.7 run on scikit-learn >= 1.8.

    metric-learn 0.7 (its latest release) calls ``check_array`` / ``check_X_y``
    with ``force_all_finite``, which scikit-learn 1.8 renamed
    ``ensure_all_finite``; rename the keyword in metric-learn's own imports.
    """
    import functools
    import inspect

    import metric_learn._util as util
    from sklearn.utils import validation

    if "force_all_finite" in inspect.signature(validation.check_X_y).parameters:
        return

    def rename(fn):
        @functools.wraps(fn)
        def wrapper(*args, force_all_finite=True, **kwargs):
            kwargs.setdefault("ensure_all_finite", force_all_finite)
            return fn(*args, **kwargs)

        return wrapper

    if not getattr(util.check_X_y, "_skl_nw_shim", False):
        util.check_array, util.check_X_y = rename(util.check_array), rename(util.check_X_y)
        util.check_X_y._skl_nw_shim = True


def bench_mlkr(repeat: int, max_iter: int = 1000) -> str:
    """NW with MLKR's metric, the grid and the SGD searches; MLKR stops at ``max_iter``."""
    try:
        from metric_learn import MLKR

        _metric_learn_shim()
    except ImportError:
        return "_metric-learn is not installed (`pip install metric-learn`): MLKR section skipped._"
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import mean_squared_error
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    # MLKR's weights are softmax(-||A(x - x')||^2) = Gaussian NW with h = 1/sqrt(2)
    # on the transformed data; scalar candidates keep its metric isotropic.
    h_mlkr = 1 / np.sqrt(2)
    scalar_grid = list(h_mlkr * np.geomspace(0.1, 10, 41))

    def fit_mlkr():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = MLKR(random_state=0, max_iter=max_iter).fit(X_train, y_train)
        model.converged_ = not any("converge" in str(w.message).lower() for w in caught)
        return model

    mlkr, t_mlkr = timed(fit_mlkr, 1)  # about a minute: once
    A_train, A_test = mlkr.transform(X_train), mlkr.transform(X_test)
    grid_on_mlkr, t_grid_on_mlkr = timed(
        lambda: search("grid", bandwidths=scalar_grid).fit(A_train, y_train), repeat
    )
    sgd, t_sgd = timed(lambda: search("sgd").fit(X_train, y_train), repeat)
    grid, t_grid = timed(lambda: search("grid").fit(X_train, y_train), repeat)
    scott, t_scott = timed(lambda: NadarayaWatsonRegressor().fit(X_train, y_train), repeat)
    ridge, t_ridge = timed(lambda: RidgeCV().fit(X_train, y_train), repeat)

    def mse(model, Xt=X_test):
        return mean_squared_error(y_test, model.predict(Xt))

    as_is = NadarayaWatsonRegressor(bandwidth=h_mlkr).fit(A_train, y_train)
    rows = [
        ["MLKR metric, h = 1/√2 (MLKR's own model)", f"{t_mlkr:.2f}", f"{mse(as_is, A_test):.0f}"],
        [
            "MLKR metric + BandwidthSearchCV grid (scalar h)",
            f"{t_mlkr + t_grid_on_mlkr:.2f}",
            f"{mse(grid_on_mlkr, A_test):.0f}",
        ],
        ["BandwidthSearchCV sgd (per-feature h)", f"{t_sgd:.2f}", f"{mse(sgd):.0f}"],
        ["BandwidthSearchCV grid (multiples of Scott)", f"{t_grid:.3f}", f"{mse(grid):.0f}"],
        ["Scott rule", f"{t_scott:.4f}", f"{mse(scott):.0f}"],
        ["(reference) RidgeCV, linear", f"{t_ridge:.4f}", f"{mse(ridge):.0f}"],
        ["(reference) predict the training mean", "–", f"{np.var(y_test - y_train.mean()):.0f}"],
    ]
    n_train, d = X_train.shape
    note = (
        f"diabetes: {n_train} train / {len(X_test)} test rows, {d} standardised features "
        f"(split `random_state=0`); MLKR{' defaults' if max_iter == 1000 else ''} "
        f"(`n_components={mlkr.components_.shape[0]}`, "
        f"`max_iter={max_iter}`): {mlkr.n_iter_} L-BFGS iterations, "
        f"{'converged' if mlkr.converged_ else 'did not converge'}, timed once."
    )
    mean_sq = float(np.mean((y_test - y_test.mean()) ** 2))
    note += f" Test-set variance of y: {mean_sq:.0f}."
    return note + "\n\n" + table(["model", "fit s", "test MSE"], rows)


# --------------------------------------------------------------- 3. quality


def optimum_1d(X, y, h_scale: float) -> tuple[float, float]:
    """Brute-force LOO optimum of a scalar h: 2000-point log scan, then Brent."""
    hs = h_scale * np.geomspace(1e-3, 1e2, 2000)
    losses = np.array([loo_mse(X, y, h) for h in hs])
    k = int(np.argmin(losses))
    lo, hi = np.log(hs[max(k - 1, 0)]), np.log(hs[min(k + 1, len(hs) - 1)])
    result = minimize_scalar(
        lambda t: loo_mse(X, y, np.exp(t)), bounds=(lo, hi), method="bounded",
        options={"xatol": 1e-10},
    )  # fmt: skip
    best = min((result.fun, np.exp(result.x)), (losses[k], hs[k]))
    return float(best[1]), float(best[0])


def bench_quality(seeds) -> tuple[str, str]:
    rows = []
    for seed in seeds:
        X, y = make_data(200, 1, seed=seed)
        h_opt, mse_opt = optimum_1d(X, y, np.std(X))
        grid, sgd = search("grid").fit(X, y), search("sgd").fit(X, y)
        mse_grid, mse_sgd = loo_mse(X, y, grid.bandwidth_), loo_mse(X, y, sgd.bandwidth_)
        rows.append(
            [
                str(seed),
                f"{h_opt:.4f}",
                f"{grid.bandwidth_[0]:.4f}",
                f"{sgd.bandwidth_[0]:.4f}",
                f"{mse_opt:.4f}",
                f"{100 * (mse_grid / mse_opt - 1):+.2f}%",
                f"{100 * (mse_sgd / mse_opt - 1):+.2f}%",
            ]
        )
    header = ["seed", "h opt", "h grid", "h sgd", "LOO MSE opt", "grid vs opt", "sgd vs opt"]
    optimum = table(header, rows)

    rows = []
    for seed in seeds:
        X, y = make_data(200, 2, seed=seed, second="noise")
        sgd = search("sgd").fit(X, y)
        h = sgd.bandwidth_
        rows.append(
            [
                str(seed),
                f"{h[0]:.3g}",
                f"{h[1]:.3g}",
                f"{h[1] / h[0]:.3g}",
                str(sgd.n_iter_),
                f"{loo_mse(X, y, h):.4f}",
                f"{loo_mse(X[:, :1], y, optimum_1d(X[:, :1], y, np.std(X[:, 0]))[0]):.4f}",
            ]
        )
    header = [
        "seed",
        "h signal",
        "h noise",
        "noise / signal",
        "epochs",
        "LOO MSE sgd",
        "LOO MSE opt, signal only",
    ]
    return optimum, table(header, rows)


# ------------------------------------------------------------------ main

SECTIONS = {
    "statsmodels": "statsmodels KernelReg(reg_type='lc', bw='cv_ls')",
    "mlkr": "metric-learn MLKR, diabetes",
    "quality": "Quality: grid and SGD against a brute-force optimum (n = 200)",
}
NOISE_TITLE = "Quality: a pure-noise feature (n = 200, SGD)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks search", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="n = 200 only, one repetition")
    parser.add_argument("--repeat", type=int, default=5, help="timing repetitions (median)")
    parser.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="sections to run"
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="limit BLAS threads (threadpoolctl) for every method; default: the library's",
    )
    args = parser.parse_args(argv)
    sizes = (200,) if args.quick else (200, 400, 800)
    repeat = 1 if args.quick else args.repeat
    seeds = range(2) if args.quick else range(5)

    blas = "default" if args.blas_threads is None else str(args.blas_threads)
    env = environment(("statsmodels", "metric_learn"))
    print(f"{describe(env)}; BLAS threads: {blas}\n", flush=True)
    start = time.perf_counter()
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        sections = []
        if "statsmodels" in args.only:
            sections.append((SECTIONS["statsmodels"], bench_statsmodels(sizes, repeat)))
        if "mlkr" in args.only:
            # --quick: a smoke run, MLKR cut short (a full fit takes about a minute).
            sections.append((SECTIONS["mlkr"], bench_mlkr(repeat, 10 if args.quick else 1000)))
        if "quality" in args.only:
            optimum, noise = bench_quality(seeds)
            sections += [(SECTIONS["quality"], optimum), (NOISE_TITLE, noise)]
    for title, body in sections:
        print(f"\n### {title}\n\n{body}")
    print(f"\nTotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
