"""Conditional distributions and quantiles: speed against predict and statsmodels, and quality.

Run ``python -m benchmarks conditional`` (a few minutes on 2 cores) or
``--quick``.  Prints four markdown tables; ``docs/benchmarks.md`` holds the
published ones.

1. ``predict_quantiles`` (5 levels) against ``predict`` on the same fit,
   ``y_bandwidth = 0`` and the rule of thumb, n = m, d = 2.
2. ``predict_cdf`` at n paired points against statsmodels'
   ``KDEMultivariateConditional.cdf`` at the same fixed bandwidths, d = 2;
   the largest difference of the values.
3. Bandwidth selection at n = 500, d = 2: statsmodels'
   ``KDEMultivariateConditional(bw="cv_ml")`` against
   ``BandwidthSearchCV(criterion="crps")`` (h at a given ``y_bandwidth``, and
   h with ``y_bandwidth`` together).
4. Quality on a heteroscedastic 1-D simulation (n = 2,000 training points,
   20,000 fresh ones): the 5-95% interval's coverage and the mean pinball
   loss over 0.05, 0.5, 0.95 of ``NadarayaWatsonRegressor`` with
   leave-one-out-chosen bandwidths, against quantile-forest's
   ``RandomForestQuantileRegressor`` (defaults, and ``min_samples_leaf``
   tuned by 5-fold cross-validation of the same pinball loss).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor

from ._common import describe, environment, spread, table, timings

TAUS = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
QUALITY_TAUS = np.array([0.05, 0.5, 0.95])


def heteroscedastic(n: int, seed: int):
    """``y = sin(2 x) + (0.1 + 0.4 |x|) e``, x ~ U(-2, 2), e ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    return x[:, None], np.sin(2 * x) + (0.1 + 0.4 * np.abs(x)) * rng.normal(size=n)


def pinball(y, Q, taus) -> float:
    r = y[:, None] - Q
    return float(np.mean(np.maximum(taus * r, (taus - 1) * r)))


def bench_speed(n: int, repeat: int) -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = X[:, 0] + (0.5 + 0.5 * np.abs(X[:, 1])) * rng.normal(size=n)
    rows = []
    for y_bandwidth in (0.0, "scott"):
        reg = NadarayaWatsonRegressor(y_bandwidth=y_bandwidth).fit(X, y)
        reg.predict(X[:10])
        reg.predict_quantiles(X[:10], TAUS)
        _, t_pred = timings(lambda reg=reg: reg.predict(X), repeat)
        Q, t_q = timings(lambda reg=reg: reg.predict_quantiles(X, TAUS), repeat)
        check = ""
        if y_bandwidth != 0:
            check = f"{np.abs(reg.predict_cdf(X[:500], Q[:500]) - TAUS).max():.1e}"
        rows.append([repr(y_bandwidth), f"{reg.y_bandwidth_:.3g}", spread(t_pred), spread(t_q),
                     f"{np.median(t_q) / np.median(t_pred):.1f}×", check])  # fmt: skip
    header = ["y_bandwidth", "h_y", "predict s", "predict_quantiles s", "ratio",
              "max |F(q) - tau|"]  # fmt: skip
    return f"n = m = {n}, d = 2, 5 levels\n\n" + table(header, rows)


def bench_statsmodels_cdf(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.kernel_density import KDEMultivariateConditional

    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 2))
    y = X[:, 0] + rng.normal(size=n)
    h, hy = np.array([0.4, 0.5]), 0.3
    Xq, yq = rng.normal(size=(n, 2)), rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kde = KDEMultivariateConditional(endog=[y], exog=[X[:, 0], X[:, 1]], dep_type="c",
                                         indep_type="cc", bw=[hy, *h])  # fmt: skip
        # Three runs (not one): a single run of statsmodels moved by 1.5x under load.
        ref, t_sm = timings(lambda: kde.cdf(endog_predict=yq, exog_predict=Xq), min(repeat, 3))
    reg = NadarayaWatsonRegressor(h, y_bandwidth=hy).fit(X, y)
    reg.predict_cdf(Xq[:5], yq[:5, None])
    ours, t_ours = timings(lambda: reg.predict_cdf(Xq, yq[:, None])[:, 0], repeat)
    rows = [
        ["statsmodels KDEMultivariateConditional.cdf", spread(t_sm), "1×", ""],
        ["predict_cdf(X, y[:, None])", spread(t_ours),
         f"{np.median(t_sm) / np.median(t_ours):.0f}×", f"{np.abs(ours - ref).max():.1e}"],
    ]  # fmt: skip
    header = ["method", "seconds", "speed-up", "max |difference|"]
    return f"n = {n} training points, {n} paired points, d = 2\n\n" + table(header, rows)


def bench_selection(n: int, repeat: int) -> str:
    from statsmodels.nonparametric.kernel_density import KDEMultivariateConditional

    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(n, 2))
    # Both features matter (with an irrelevant one, cv_ml wanders to h ~ 1e6 for minutes).
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + (0.1 + 0.4 * np.abs(X[:, 0])) * rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kde, t_sm = timings(lambda: KDEMultivariateConditional(
            endog=[y], exog=[X[:, 0], X[:, 1]], dep_type="c", indep_type="cc",
            bw="cv_ml"), 1)  # fmt: skip
    rows = [["statsmodels cv_ml (h, h_y)", spread(t_sm), "1×", np.round(kde.bw, 3)]]
    y_rule = NadarayaWatsonRegressor().fit(X, y).y_bandwidth_
    cases = (
        ("crps, h at y_bandwidth=0", NadarayaWatsonRegressor(y_bandwidth=0.0)),
        ("crps, h at the rule's y_bandwidth", NadarayaWatsonRegressor(y_bandwidth=y_rule)),
        ("crps, h and y_bandwidth", NadarayaWatsonRegressor()),
    )
    for name, est in cases:
        search, t = timings(lambda est=est: BandwidthSearchCV(est, criterion="crps").fit(X, y),
                            repeat)  # fmt: skip
        p = search.best_params_
        rows.append([name, spread(t), f"{np.median(t_sm) / np.median(t):.1f}×",
                     np.round([p["y_bandwidth"], *p["bandwidth"]], 3)])  # fmt: skip
    header = ["method", "seconds", "speed-up", "(h_y, h)"]
    return f"n = {n}, d = 2\n\n" + table(header, rows)


def bench_quality(n: int, n_test: int, quick: bool) -> str:
    X, y = heteroscedastic(n, 3)
    Xt, yt = heteroscedastic(n_test, 4)
    rows = []
    for name, est in (("y_bandwidth=0", NadarayaWatsonRegressor(y_bandwidth=0.0)),
                      ("y_bandwidth chosen", NadarayaWatsonRegressor())):  # fmt: skip
        search, t = timings(lambda est=est: BandwidthSearchCV(est, criterion="crps").fit(X, y), 1)
        Q = search.best_estimator_.predict_quantiles(Xt, QUALITY_TAUS)
        cover = np.mean((yt >= Q[:, 0]) & (yt <= Q[:, 2]))
        rows.append([f"NW, LOO-CRPS, {name}", f"{cover:.3f}", f"{pinball(yt, Q, QUALITY_TAUS):.4f}",
                     f"{np.median(t):.2f}"])  # fmt: skip
    try:
        from quantile_forest import RandomForestQuantileRegressor
        from sklearn.metrics import make_scorer
        from sklearn.model_selection import GridSearchCV
    except ImportError:
        rows.append(["quantile-forest", "not installed", "", ""])
    else:
        scorer = make_scorer(lambda yy, Q: -pinball(yy, Q, QUALITY_TAUS))

        class _Forest(RandomForestQuantileRegressor):
            def predict(self, X):
                return super().predict(X, quantiles=list(QUALITY_TAUS))

        for name, est in (
            ("defaults", _Forest(random_state=0)),
            ("min_samples_leaf by 5-fold CV", GridSearchCV(
                _Forest(random_state=0, n_estimators=20 if quick else 100),
                {"min_samples_leaf": [5, 40] if quick else [1, 5, 10, 20, 40, 80, 160]},
                scoring=scorer, cv=5)),
        ):  # fmt: skip
            fitted, t = timings(lambda est=est: est.fit(X, y), 1)
            Q = fitted.predict(Xt)
            cover = np.mean((yt >= Q[:, 0]) & (yt <= Q[:, 2]))
            rows.append([f"RandomForestQuantileRegressor, {name}", f"{cover:.3f}",
                         f"{pinball(yt, Q, QUALITY_TAUS):.4f}", f"{np.median(t):.2f}"])  # fmt: skip
    header = ["model", "5-95% coverage", "mean pinball (0.05, 0.5, 0.95)", "fit s"]
    return f"n = {n} training points, {n_test} fresh points, 1-D\n\n" + table(header, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks conditional")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args(argv)
    quick = args.quick
    print(describe(environment(("statsmodels", "quantile_forest"))))
    repeat = 1 if quick else 3
    print(bench_speed(500 if quick else 10_000, repeat), "\n")
    try:
        import statsmodels  # noqa: F401
    except ImportError:
        print("statsmodels not installed: its comparisons skipped\n")
    else:
        print(bench_statsmodels_cdf(300 if quick else 2_000, repeat), "\n")
        print(bench_selection(100 if quick else 500, repeat), "\n")
    print(bench_quality(300 if quick else 2_000, 2_000 if quick else 20_000, quick))
