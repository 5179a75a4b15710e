"""
Average pooling vs attention pooling
====================================

The textbook experiment: noisy samples of y = 2 sin x + x^0.8 on [0, 5]. Average pooling
predicts the mean target everywhere; Nadaraya–Watson lets each query attend to the training
inputs near it.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import NadarayaWatsonRegressor

rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 50))
y_train = 2 * np.sin(x_train) + x_train**0.8 + rng.normal(0, 0.5, 50)
x_test = np.linspace(0, 5, 50)
truth = 2 * np.sin(x_test) + x_test**0.8

# %%
# Gaussian attention pooling with two bandwidths: a wide kernel averages a lot (towards
# average pooling), a narrow one follows the noise (towards the nearest neighbour).
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, h in zip(axes, [0.2, 1.0], strict=True):
    model = NadarayaWatsonRegressor(bandwidth=h).fit(x_train[:, None], y_train)
    ax.plot(x_test, truth, "k-", label="truth")
    ax.plot(x_train, y_train, "o", color="0.6", ms=4, label="data")
    ax.axhline(y_train.mean(), ls=":", color="0.4", label="average pooling")
    ax.plot(x_test, model.predict(x_test[:, None]), label=f"NW, h = {h}")
    ax.set(title=f"bandwidth {h}", xlabel="x")
    ax.legend(fontsize=8)

# %%
# The attention weights behind the predictions: one row per query, one column per key.
model = NadarayaWatsonRegressor(bandwidth=0.5).fit(x_train[:, None], y_train)
weights = model.attention_weights(x_test[:, None])
fig, ax = plt.subplots(figsize=(5, 4.5))
image = ax.imshow(weights, cmap="Reds", aspect="auto")
ax.set(xlabel="sorted training inputs (keys)", ylabel="sorted queries")
fig.colorbar(image, ax=ax)
plt.show()
