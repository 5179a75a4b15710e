"""Draw docs/_static/attention_pooling.png, the figure of the README and of the docs' home page.

Run once after a change that affects it: ``python docs/readme_figure.py``. The data and the
bandwidth are those of the gallery's first two examples.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from skl_nw import NadarayaWatsonRegressor  # noqa: E402


def main(path: Path) -> None:
    rng = np.random.default_rng(0)
    x_train = np.sort(rng.uniform(0, 5, 50))
    y_train = 2 * np.sin(x_train) + x_train**0.8 + rng.normal(0, 0.5, 50)
    x_test = np.linspace(0, 5, 50)
    truth = 2 * np.sin(x_test) + x_test**0.8
    model = NadarayaWatsonRegressor(bandwidth=0.3).fit(x_train[:, None], y_train)
    weights = model.attention_weights(x_test[:, None])

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    ax = axes[0]
    ax.plot(x_test, truth, "k-", lw=1, label="truth")
    ax.plot(x_train, y_train, "o", color="0.6", ms=4, label="training data (keys, values)")
    ax.axhline(y_train.mean(), ls=":", color="tab:blue", label="average pooling")
    ax.plot(x_test, model.predict(x_test[:, None]), color="tab:red", lw=2,
            label="Nadaraya–Watson, h = 0.3")  # fmt: skip
    ax.set(xlabel="x", ylabel="y", title="Attention pooling of the training targets")
    ax.set_ylim(-0.6, 5.8)
    ax.legend(fontsize=8, loc="upper right")

    ax = axes[1]
    middle = (x_train[1:] + x_train[:-1]) / 2
    key_edges = np.concatenate([[2 * x_train[0] - middle[0]], middle,
                                [2 * x_train[-1] - middle[-1]]])  # fmt: skip
    step = x_test[1] - x_test[0]
    query_edges = np.append(x_test - step / 2, x_test[-1] + step / 2)
    image = ax.pcolormesh(key_edges, query_edges, weights, cmap="Reds")
    ax.set(xlabel="training input (key) x", ylabel="query x", title="Attention weights")
    fig.colorbar(image, ax=ax, label="weight (each row sums to 1)")
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "_static" / "attention_pooling.png")
