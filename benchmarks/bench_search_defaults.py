"""BandwidthSearchCV's default (``method="auto"``) against the explicit methods, per data kind.

Run ``python -m benchmarks search_defaults`` (a few minutes on 2 cores, most
of it the explicit options the default avoids) or ``--quick``.  Prints a
markdown table; ``docs/benchmarks.md`` holds the published one.

Each case fits on one half of the data and scores the other half (mean
squared error, or log-loss for the classifier), so the quality column is
independent of the leave-one-out machinery being timed:

- three categorical columns and one continuous one (regression);
- two categorical columns with ``cv=3`` (a refit per split and candidate);
- ``ParzenClassifier`` on scikit-learn's digits (64 features);
- continuous features only (the diabetes data).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_diabetes, load_digits
from sklearn.metrics import log_loss, mean_squared_error
from sklearn.model_selection import train_test_split

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier

from ._common import describe, environment, spread, table, timings


def mixed_data(n: int, n_categorical: int, seed: int = 0):
    """``y = sin(2 pi x) + sum_j c_j z_j + N(0, 0.3^2)``, z_j on 3 to 5 categories."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    Z = np.column_stack([rng.integers(0, 3 + j, n) for j in range(n_categorical)])
    y = np.sin(2 * np.pi * x) + Z @ (0.5 / (1 + np.arange(n_categorical))) + rng.normal(0, 0.3, n)
    return np.column_stack([x, Z]).astype(float), y


def cases(quick: bool):
    """(label, estimator, X, y, {option label: search parameters}) for every case."""
    n = 300 if quick else 1200
    X3, y3 = mixed_data(n, 2 if quick else 3)
    X2, y2 = mixed_data(n // 2, 2, seed=1)
    digits = load_digits()
    keep = slice(0, 400 if quick else None)
    Xd, yd = digits.data[keep], digits.target[keep]
    Xb, yb = load_diabetes(return_X_y=True)
    cat3 = list(range(1, X3.shape[1]))
    yield (
        "categorical columns, cv='loo'",
        NadarayaWatsonRegressor(categorical_features=cat3),
        X3,
        y3,
        {"auto": {}, "grid": {"method": "grid"}, "lbfgs": {"method": "lbfgs"}},
    )
    yield (
        "two categorical columns, cv=3",
        NadarayaWatsonRegressor(categorical_features=[1, 2]),
        X2,
        y2,
        {"auto": {"cv": 3}, **({} if quick else {"grid": {"method": "grid", "cv": 3}})},
    )
    yield (
        "ParzenClassifier, digits",
        ParzenClassifier(),
        Xd,
        yd,
        {
            "auto": {},
            "lbfgs (one bandwidth)": {"method": "lbfgs"},
            "lbfgs per feature": {"method": "lbfgs", "per_feature": True},
        },
    )
    yield ("continuous only, diabetes", NadarayaWatsonRegressor(), Xb, yb,
           {"auto": {}, "lbfgs per feature": {"method": "lbfgs"}})  # fmt: skip


def held_out(model, X, y) -> float:
    """Mean squared error, or log-loss for a classifier, on held-out rows."""
    if hasattr(model, "predict_proba"):
        return log_loss(y, model.predict_proba(X), labels=model.classes_)
    return mean_squared_error(y, model.predict(X))


def bench(quick: bool, repeat: int) -> str:
    rows = []
    for label, estimator, X, y, options in cases(quick):
        X_fit, X_test, y_fit, y_test = train_test_split(X, y, test_size=0.5, random_state=0)
        base = None
        for option, params in options.items():

            def search(params=params, estimator=estimator, X=X_fit, y=y_fit):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    return BandwidthSearchCV(estimator, **params).fit(X, y)

            if option == "auto":
                search()  # warm-up, untimed: compiled kernels, caches
            # The explicit grids that the default avoids run once: minutes each.
            fitted, times = timings(search, repeat if option == "auto" else 1)
            base = np.median(times) if base is None else base
            rows.append([label, option, fitted.method_, spread(times),
                         f"{np.median(times) / base:.1f}×",
                         f"{held_out(fitted, X_test, y_test):.4g}"])  # fmt: skip
    header = ["data", "option", "method run", "time (s)", "time / auto", "held-out loss"]
    return table(header, rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks search_defaults", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    parser.add_argument("--repeat", type=int, default=3, help="timing repetitions (median)")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    print(describe(environment()) + "\n", flush=True)
    print("### The default search against the explicit methods (fit on half, score the other)\n")
    print(bench(args.quick, repeat), flush=True)


if __name__ == "__main__":
    main()
