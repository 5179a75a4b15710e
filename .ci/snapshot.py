"""Snapshot many outputs of the package, to compare two versions of the code side by side.

``python .ci/snapshot.py OUT.npz`` records predictions, standard errors,
intervals, gradients, attention weights, class probabilities, densities,
leave-one-out grid scores and SGD / L-BFGS-B searches (NW, Parzen, local
degree 0-2; continuous and mixed data; every backend including binned) of
the ``skl_nw`` on ``sys.path``; ``python .ci/snapshot.py --compare A.npz
B.npz`` prints the largest relative difference of each output and exits 1
above ``--rtol`` (1e-12).  A restructuring that keeps every result runs it
on the code before and after (``PYTHONPATH=<checkout>``), on both engine
paths (``SKL_NW_DISABLE_NUMBA=1``).
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np


def _data(kind: str, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    if kind == "1d":
        X = x[:, None]
    elif kind == "2d":
        X = np.column_stack([x, rng.uniform(0, 1, n)])
    else:  # mixed: continuous, unordered (3 levels), ordered (4 levels)
        X = np.column_stack([x, rng.integers(0, 3, n), rng.integers(0, 4, n)]).astype(float)
    y = np.sin(5 * x) + 0.2 * X[:, -1] + rng.normal(0, 0.2, n)
    return X, y, (y > np.median(y)).astype(int), X[:: max(1, n // 15)]


def _estimators(skl_nw, kind: str):
    mixed = {"categorical_features": [1, 2], "ordered_features": [2]} if kind == "mixed" else {}
    backends = ["brute", "kd_tree", "ball_tree"] + ([] if kind == "mixed" else ["binned"])
    for backend, kernel in [(b, "gaussian") for b in backends] + [("brute", "epanechnikov")]:
        common = {"algorithm": backend, "kernel": kernel, **mixed}
        yield f"nw-{backend}-{kernel}", skl_nw.NadarayaWatsonRegressor(**common)
        for degree in (0, 1, 2):
            est = skl_nw.LocalPolynomialRegressor(degree=degree, **common)
            yield f"local{degree}-{backend}-{kernel}", est
        yield f"parzen-{backend}-{kernel}", skl_nw.ParzenClassifier(**common)


_REGRESSION = {
    "predict": lambda e, Q: e.predict(Q),
    "std": lambda e, Q: e.predict(Q, return_std=True)[1],
    "interval": lambda e, Q: e.predict_interval(Q),
    "bootstrap": lambda e, Q: e.predict_interval(
        Q, method="bootstrap", n_boot=99, random_state=0
    ),  # fmt: skip
    "gradient": lambda e, Q: e.predict_gradient(Q),
    "attention": lambda e, Q: _dense(e.attention_weights(Q)),
}
_CLASSIFICATION = {
    "proba": lambda e, Q: e.predict_proba(Q),
    "density": lambda e, Q: e.score_samples(Q),
    "class_density": lambda e, Q: e.score_class_samples(Q),
    "attention": lambda e, Q: _dense(e.attention_weights(Q)),
}
_SEARCHES = {
    "grid": {},
    "aicc": {"criterion": "aicc"},
    "sgd": {"method": "sgd", "max_iter": 5, "tol": None, "random_state": 0},
    "lbfgs": {"method": "lbfgs", "max_iter": 10},
}


def _dense(A):
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A)


def _record(out: dict, key: str, fn, *args) -> None:
    """``out[key] = fn(*args)``; an output the code cannot give is recorded as missing."""
    try:
        out[key] = np.asarray(fn(*args), dtype=np.float64)
    except Exception as error:
        out[key + "!error"] = np.array([float(len(type(error).__name__))])


def _search(skl_nw, est, params, X, target) -> np.ndarray:
    """Return the selected bandwidth, the best score and (grid) every candidate's score."""
    s = skl_nw.BandwidthSearchCV(est, **params).fit(X, target)
    scores = s.cv_results_["mean_test_score"] if hasattr(s, "cv_results_") else []
    return np.concatenate([s.bandwidth_, np.atleast_1d(s.best_score_), scores])


def snapshot() -> dict:
    """Return every output of the list in the module's docstring, by name."""
    import skl_nw

    out: dict[str, np.ndarray] = {}
    for kind, n in (("1d", 200), ("2d", 150), ("mixed", 150)):
        X, y, labels, Q = _data(kind, n)
        for name, est in _estimators(skl_nw, kind):
            classifier = name.startswith("parzen")
            target = labels if classifier else y
            fitted = est.fit(X, target)
            for method, fn in (_CLASSIFICATION if classifier else _REGRESSION).items():
                _record(out, f"{kind}/{name}/{method}", fn, fitted, Q)
            if "brute-gaussian" not in name and "binned" not in name:
                continue
            for search, params in _SEARCHES.items():
                if not (classifier and search == "aicc"):
                    _record(out, f"{kind}/{name}/search-{search}", _search, skl_nw, est, params,
                            X, target)  # fmt: skip
    return out


def compare(a: str, b: str, rtol: float) -> int:
    """Print the largest relative difference of the outputs of two snapshots; 1 above rtol."""
    A, B = np.load(a), np.load(b)
    worst, bad = 0.0, []
    for key in sorted(set(A.files) | set(B.files)):
        if key not in A.files or key not in B.files:
            bad.append(f"{key}: only in {'the first' if key in A.files else 'the second'}")
            continue
        x, y = A[key], B[key]
        if x.shape != y.shape:
            bad.append(f"{key}: shapes {x.shape} and {y.shape}")
            continue
        scale = np.maximum(np.abs(x), np.abs(y))
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(scale > 0, np.abs(x - y) / scale, 0.0)
        same_nan = np.isnan(x) == np.isnan(y)
        diff = float(np.nanmax(rel)) if rel.size else 0.0
        worst = max(worst, diff)
        if diff > rtol or not same_nan.all():
            bad.append(f"{key}: largest relative difference {diff:.3g}")
    print(f"{len(A.files)} outputs; largest relative difference {worst:.3g}")
    print("\n".join(bad) if bad else f"all within rtol={rtol:g}")
    return 1 if bad else 0


def main(argv=None) -> int:
    """Record a snapshot, or compare two."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--rtol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.paths, rtol=args.rtol)
    warnings.simplefilter("ignore")
    np.savez(args.paths[0], **snapshot())
    return 0


if __name__ == "__main__":
    sys.exit(main())
