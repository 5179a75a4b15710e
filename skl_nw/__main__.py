"""Command line: ``python -m skl_nw demo [--out DIR]``.

The textbook experiment of attention pooling (Dive into Deep Learning,
"Attention Pooling by Similarity"): y = 2 sin x + x^0.8 + noise, 50 sorted
training points on [0, 5] and 50 test points; average pooling against
Nadaraya–Watson with each kernel.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ._estimators import NadarayaWatsonRegressor
from ._kernels import kernel_names


def _truth(x: np.ndarray) -> np.ndarray:
    return 2 * np.sin(x) + x**0.8


def make_data(n_train: int = 50, n_test: int = 50, noise: float = 0.5, seed: int = 0):
    """Sorted training points on [0, 5] with noisy targets, and an even test grid."""
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0, 5, n_train))
    y_train = _truth(x_train) + rng.normal(0, noise, n_train)
    x_test = np.linspace(0, 5, n_test)
    return x_train[:, None], y_train, x_test[:, None], _truth(x_test)


def demo(out: Path | None, bandwidth: float | str = "scott") -> int:
    """Run the experiment, print the table, write the figures if matplotlib is there."""
    X_train, y_train, X_test, y_test = make_data()
    rows = [("average pooling", "-", np.mean((y_train.mean() - y_test) ** 2))]
    models = {}
    for kernel in kernel_names():
        model = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel).fit(X_train, y_train)
        models[kernel] = model
        mse = np.mean((model.predict(X_test) - y_test) ** 2)
        rows.append((f"Nadaraya–Watson, {kernel}", f"{model.bandwidth_[0]:.3f}", mse))

    print("y = 2 sin(x) + x^0.8 + N(0, 0.5^2): 50 training points on [0, 5], 50 test points")
    print(f"{'estimator':<32} {'bandwidth':>9} {'test MSE':>9}")
    for name, h, mse in rows:
        print(f"{name:<32} {h:>9} {mse:>9.4f}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figures (pip install 'skl-nw[plot]').")
        return 0

    out = Path(out or "demo_output")
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(X_test[:, 0], y_test, "k-", lw=2, label="truth")
    ax.plot(X_train[:, 0], y_train, "o", color="0.6", ms=4, label="training data")
    ax.axhline(y_train.mean(), color="0.4", ls=":", label="average pooling")
    for kernel, model in models.items():
        ax.plot(X_test[:, 0], model.predict(X_test), lw=1.2, label=kernel)
    ax.set(xlabel="x", ylabel="y", title="Nadaraya–Watson: attention pooling of the targets")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    predictions = out / "predictions.png"
    fig.savefig(predictions, dpi=120)

    weights = models["gaussian"].attention_weights(X_test)
    fig, ax = plt.subplots(figsize=(5, 4.5))
    image = ax.imshow(weights, cmap="Reds", aspect="auto")
    ax.set(
        xlabel="sorted training inputs (keys)",
        ylabel="sorted test inputs (queries)",
        title="Attention weights, Gaussian kernel",
    )
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    heatmap = out / "attention_weights.png"
    fig.savefig(heatmap, dpi=120)
    plt.close("all")
    print(f"Wrote {predictions} and {heatmap}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m skl_nw``."""
    parser = argparse.ArgumentParser(prog="python -m skl_nw", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("demo", help="average pooling vs Nadaraya–Watson on synthetic data")
    run.add_argument("--out", type=Path, default=None, help="folder for the PNG figures")
    run.add_argument(
        "--bandwidth",
        default="scott",
        help='a positive number, or "scott" / "silverman" (default: scott)',
    )
    args = parser.parse_args(argv)
    bandwidth = args.bandwidth
    if bandwidth not in ("scott", "silverman"):
        try:
            bandwidth = float(bandwidth)
        except ValueError:
            parser.error(f"--bandwidth must be a number, 'scott' or 'silverman'; got {bandwidth!r}")
    return demo(args.out, bandwidth)


if __name__ == "__main__":
    sys.exit(main())
