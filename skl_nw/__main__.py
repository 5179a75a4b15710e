"""Command line: ``python -m skl_nw demo [--out DIR] [--bandwidth H]``.

The textbook experiment of attention pooling (Dive into Deep Learning,
"Attention Pooling by Similarity"): y = 2 sin x + x^0.8 + noise, 50 sorted
training points on [0, 5] and 50 test points; average pooling against
Nadaraya–Watson with each kernel.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from . import __version__
from ._kernels import kernel_names
from ._smoothers._nadaraya_watson import NadarayaWatsonRegressor

_RULES = ("scott", "silverman")
# One look per kernel (colour, line style, marker), so that curves which lie on
# top of each other (epanechnikov, linear, cosine) stay distinguishable.
_STYLES = [
    ("tab:blue", "-", "o"),
    ("tab:orange", "--", "s"),
    ("tab:green", "-.", "^"),
    ("tab:red", ":", "D"),
    ("tab:purple", (0, (5, 1, 1, 1, 1, 1)), "v"),
    ("tab:brown", (0, (8, 2)), "P"),
    ("tab:pink", (0, (1, 1)), "X"),
    ("tab:olive", (0, (3, 1, 3, 3)), "*"),
]


def _bandwidth(text: str) -> float | str:
    """Parse ``--bandwidth``: a positive finite number, or a rule of thumb.

    >>> _bandwidth("0.5"), _bandwidth("silverman")
    (0.5, 'silverman')
    >>> _bandwidth("-1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive finite number or one of ...; got '-1'
    """
    if text in _RULES:
        return text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        choices = ", ".join(repr(rule) for rule in _RULES)
        raise argparse.ArgumentTypeError(
            f"must be a positive finite number or one of {choices}; got {text!r}"
        )
    return value


def _out_dir(text: str) -> Path:
    """Parse ``--out``: a folder that exists or can be created, and is writable."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    path = Path(text)
    parent = path
    while not parent.exists():  # the nearest existing ancestor ("." or "/" at worst)
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{str(parent)!r} exists and is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{str(parent)!r} is not writable")
    return path


def _truth(x: np.ndarray) -> np.ndarray:
    return 2 * np.sin(x) + x**0.8


def make_data(n_train: int = 50, n_test: int = 50, noise: float = 0.5, seed: int = 0):
    """Sorted training points on [0, 5] with noisy targets, and an even test grid."""
    rng = np.random.default_rng(seed)
    x_train = np.sort(rng.uniform(0, 5, n_train))
    y_train = _truth(x_train) + rng.normal(0, noise, n_train)
    x_test = np.linspace(0, 5, n_test)
    return x_train[:, None], y_train, x_test[:, None], _truth(x_test)


def _edges(x: np.ndarray) -> np.ndarray:
    """Cell edges around sorted centres: midpoints inside, half a gap beyond each end."""
    mid = (x[1:] + x[:-1]) / 2
    return np.concatenate([[2 * x[0] - mid[0]], mid, [2 * x[-1] - mid[-1]]])


def _bandwidth_label(bandwidth: float | str, h: float) -> str:
    rule = {"scott": "Scott's rule", "silverman": "Silverman's rule"}.get(bandwidth)
    return f"h = {h:.3f}" + (f" ({rule})" if rule else "")


def demo(out: Path | None, bandwidth: float | str = "scott") -> int:
    """Run the experiment, print the table, write the figures if matplotlib is there."""
    X_train, y_train, X_test, y_test = make_data()
    pooled_mse = np.mean((y_train.mean() - y_test) ** 2)
    rows = [("average pooling", "-", pooled_mse)]
    fits = {}  # kernel -> (model, predictions, test MSE)
    for kernel in kernel_names():
        model = NadarayaWatsonRegressor(bandwidth=bandwidth, kernel=kernel).fit(X_train, y_train)
        y_pred = model.predict(X_test)
        mse = np.mean((y_pred - y_test) ** 2)
        fits[kernel] = (model, y_pred, mse)
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
    data = (X_train, y_train, X_test, y_test, pooled_mse)
    predictions = _plot_predictions(plt, out / "predictions.png", data, fits, bandwidth)
    heatmap = _plot_attention(plt, out / "attention_weights.png", data, fits, bandwidth)
    plt.close("all")
    print(f"Wrote {predictions} and {heatmap}.")
    return 0


def _plot_predictions(plt, path: Path, data, fits: dict, bandwidth) -> Path:
    """Plot every kernel's predictions (test MSE in the legend, bandwidth in the title)."""
    X_train, y_train, X_test, y_test, pooled_mse = data
    x_train, x_test = X_train[:, 0], X_test[:, 0]
    widths = {model.bandwidth_[0] for model, _, _ in fits.values()}
    shared = len(widths) == 1  # the rules of thumb do not depend on the kernel

    fig, ax = plt.subplots(figsize=(9.5, 5))
    ax.plot(x_test, y_test, "k-", lw=3, alpha=0.35, label=r"truth $2 \sin x + x^{0.8}$")
    ax.plot(x_train, y_train, "o", color="0.55", ms=4, label="training data (n = 50)")
    ax.axhline(
        y_train.mean(), color="0.3", ls=(0, (1, 3)), label=f"average pooling (MSE {pooled_mse:.3f})"
    )
    for i, (kernel, (model, y_pred, mse)) in enumerate(fits.items()):
        color, ls, marker = _STYLES[i % len(_STYLES)]
        extra = "" if shared else f", h = {model.bandwidth_[0]:.3f}"
        ax.plot(
            x_test,
            y_pred,
            color=color,
            ls=ls,
            lw=1.6,
            marker=marker,
            ms=6,
            markevery=(i, len(fits)),  # staggered, so overlapping curves show every marker
            label=f"{kernel} (MSE {mse:.3f}{extra})",
        )
    title = "Nadaraya–Watson predictions on 50 test points"
    if shared:
        title += f", bandwidth {_bandwidth_label(bandwidth, widths.pop())}"
    ax.set(xlabel="x", ylabel="y", title=title)
    ax.legend(
        title="in brackets: test MSE",
        fontsize=8,
        title_fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        borderaxespad=0,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _plot_attention(plt, path: Path, data, fits: dict, bandwidth) -> Path:
    """Plot the Gaussian model's attention weights, axes in x units, colour bar labelled."""
    X_train, _, X_test, _, _ = data
    model = fits["gaussian"][0]
    h = _bandwidth_label(bandwidth, model.bandwidth_[0])
    weights = model.attention_weights(X_test)
    fig, ax = plt.subplots(figsize=(6.2, 5))
    # Cells centred on the inputs, in x units (the training inputs are unevenly spaced).
    mesh = ax.pcolormesh(_edges(X_train[:, 0]), _edges(X_test[:, 0]), weights, cmap="Reds")
    ax.plot([0, 5], [0, 5], color="0.3", lw=0.8, ls="--", label="training x = query x")
    ax.set_aspect("equal")
    ax.set(
        xlabel="training x (keys)",
        ylabel="query x (test points)",
        title=f"Attention weights, Gaussian kernel, {h}",
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.colorbar(mesh, ax=ax, label="attention weight (each row sums to 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m skl_nw``; bad options exit with status 2 before any work."""
    parser = argparse.ArgumentParser(prog="python -m skl_nw", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"skl_nw {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("demo", help="average pooling vs Nadaraya–Watson on synthetic data")
    run.add_argument(
        "--out",
        type=_out_dir,
        default="demo_output",
        help="folder for the PNG figures, created if needed (default: demo_output)",
    )
    run.add_argument(
        "--bandwidth",
        type=_bandwidth,
        default="scott",
        help='a positive number, or "scott" / "silverman" (default: scott)',
    )
    args = parser.parse_args(argv)
    return demo(args.out, args.bandwidth)


if __name__ == "__main__":
    sys.exit(main())
