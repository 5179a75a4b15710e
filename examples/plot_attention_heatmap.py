"""
Attention weights as a heatmap
==============================

Every Nadaraya–Watson prediction is a weighted average of the training targets, and
:meth:`~skl_nw.NadarayaWatsonRegressor.attention_weights` returns the weights themselves:
one row per query, one column per training input (key), each row summing to 1. With sorted
queries and sorted keys the matrix shows where each query looks.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import NadarayaWatsonRegressor

rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 50))
y_train = 2 * np.sin(x_train) + x_train**0.8 + rng.normal(0, 0.5, 50)
x_test = np.linspace(0, 5, 50)

# %%
# Two bandwidths
# --------------
# A narrow kernel puts the weight on a few keys close to the query: a thin, bright diagonal.
# A wide kernel spreads it over many keys: a broad, faint band. The colour scale is shared,
# and each column is drawn at the position of its key (the keys are random, not evenly
# spaced).
bandwidths = [0.2, 1.0]
weights = [
    NadarayaWatsonRegressor(bandwidth=h)
    .fit(x_train[:, None], y_train)
    .attention_weights(x_test[:, None])
    for h in bandwidths
]
vmax = max(w.max() for w in weights)
fig, axes = plt.subplots(1, 2, figsize=(10, 4.3), sharey=True, layout="constrained")


def cell_edges(centres):
    """Edges of cells centred on sorted points, so each column sits at its key's x."""
    middle = (centres[1:] + centres[:-1]) / 2
    return np.concatenate([[2 * centres[0] - middle[0]], middle, [2 * centres[-1] - middle[-1]]])


for ax, h, w in zip(axes, bandwidths, weights, strict=True):
    image = ax.pcolormesh(
        cell_edges(x_train), cell_edges(x_test), w, cmap="Reds", vmin=0, vmax=vmax
    )
    ax.set(title=f"h = {h}", xlabel="training input (key) x")
axes[0].set_ylabel("query x")
fig.colorbar(image, ax=axes, label="attention weight")
plt.show()

# %%
# Rows are probability vectors: the weights are non-negative and each row sums to 1, so
# ``attention_weights(X) @ y_train`` is the prediction.
model = NadarayaWatsonRegressor(bandwidth=0.2).fit(x_train[:, None], y_train)
w = model.attention_weights(x_test[:, None])
print("rows sum to 1:", np.allclose(w.sum(axis=1), 1.0))
print("weights @ y equals predict:", np.allclose(w @ y_train, model.predict(x_test[:, None])))

# %%
# One row of the matrix: the weights of the query :math:`q = 2.5` on each key. The Gaussian
# kernel gives the bell shape; its width is the bandwidth, so the effective number of keys
# a query averages over, :math:`1 / \sum_i \alpha_i^2`, grows with :math:`h`.
fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
for h in bandwidths:
    row = NadarayaWatsonRegressor(bandwidth=h).fit(x_train[:, None], y_train)
    row = row.attention_weights([[2.5]])[0]
    ax.plot(x_train, row, "o-", ms=3, label=f"h = {h}: {1 / np.sum(row**2):.1f} effective keys")
ax.axvline(2.5, color="0.5", ls=":")
ax.set(xlabel="training input (key)", ylabel="attention weight of q = 2.5")
ax.legend()
plt.show()
