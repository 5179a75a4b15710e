r"""
Dot-product attention on the unit sphere
========================================

For unit vectors the squared distance is an affine function of the dot product,
:math:`\|q - k\|^2 = 2 - 2\, q \cdot k`, so the Gaussian attention weights are

.. math::

    \operatorname{softmax}_i\left(-\frac{\|q - k_i\|^2}{2h^2}\right)
    &= \operatorname{softmax}_i\left(\frac{q \cdot k_i - 1}{h^2}\right) \\
    &= \operatorname{softmax}_i\left(\frac{q \cdot k_i}{h^2}\right),

the softmax being unchanged by a shift common to all keys. The transformer's scaled dot
product, :math:`\operatorname{softmax}(q \cdot k / \sqrt d)`, is Gaussian Nadaraya–Watson
with :math:`h^2 = \sqrt d`. This example checks it numerically, then looks at keys off the
sphere.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from scipy.special import softmax

from skl_nw import NadarayaWatsonRegressor

rng = np.random.default_rng(0)
d, n_keys, n_queries = 16, 40, 5
keys = rng.normal(size=(n_keys, d))
keys /= np.linalg.norm(keys, axis=1, keepdims=True)
queries = rng.normal(size=(n_queries, d))
queries /= np.linalg.norm(queries, axis=1, keepdims=True)
values = rng.normal(size=n_keys)

# %%
# On the sphere: Nadaraya–Watson is scaled dot-product attention
# ---------------------------------------------------------------
# The values do not enter the weights; any targets will do.
h = d**0.25  # h^2 = sqrt(d)
model = NadarayaWatsonRegressor(bandwidth=h).fit(keys, values)
nw_weights = model.attention_weights(queries)
dot_weights = softmax(queries @ keys.T / np.sqrt(d), axis=1)
print(f"largest difference of the weights: {np.abs(nw_weights - dot_weights).max():.1e}")
print(
    f"largest difference of the outputs: "
    f"{np.abs(model.predict(queries) - dot_weights @ values).max():.1e}"
)

# %%
# With :math:`h^2 = \sqrt{d} = 4` and unit vectors the logits :math:`q \cdot k / 4` lie in
# :math:`[-1/4, 1/4]`, so the weights are nearly uniform (about :math:`1/40` each). In a
# transformer, queries and keys are not unit vectors: their norms set the temperature. A
# smaller bandwidth is a lower temperature, and the identity holds for every :math:`h`.
h_sharp = 0.5
sharp = NadarayaWatsonRegressor(bandwidth=h_sharp).fit(keys, values)
dot_sharp = softmax(queries @ keys.T / h_sharp**2, axis=1)
difference = np.abs(sharp.attention_weights(queries) - dot_sharp).max()
print(f"h = {h_sharp}: largest difference {difference:.1e}")

# %%
# Off the sphere: the key norm is a per-key bias
# ----------------------------------------------
# For arbitrary vectors,
# :math:`-\|q - k\|^2 / 2h^2 = q \cdot k / h^2 - \|q\|^2 / 2h^2 - \|k\|^2 / 2h^2`. The query
# term is common to all keys and cancels in the softmax; the key term does not. Gaussian
# Nadaraya–Watson is dot-product attention with a bias :math:`-\|k_i\|^2 / 2h^2` that
# penalises long keys. Giving each key the sample weight :math:`e^{\|k_i\|^2 / 2h^2}`
# cancels the bias, and Nadaraya–Watson reproduces dot-product attention exactly (the weights
# are combined in log space, so large sample weights are harmless).
long_keys = keys * rng.uniform(0.5, 2.0, size=(n_keys, 1))
dot_long = softmax(queries @ long_keys.T / h_sharp**2, axis=1)
plain = NadarayaWatsonRegressor(bandwidth=h_sharp).fit(long_keys, values)
bias_weight = np.exp((long_keys**2).sum(axis=1) / (2 * h_sharp**2))
corrected = NadarayaWatsonRegressor(bandwidth=h_sharp).fit(
    long_keys, values, sample_weight=bias_weight
)
print(
    f"plain NW vs dot product:    {np.abs(plain.attention_weights(queries) - dot_long).max():.1e}"
)
print(
    f"weighted NW vs dot product: "
    f"{np.abs(corrected.attention_weights(queries) - dot_long).max():.1e}"
)

# %%
# The picture
# -----------
# Each dot is the weight of one query on one key: Nadaraya–Watson against the softmax of the
# scaled dot products, on logarithmic axes. On the sphere the dots lie on the diagonal, at
# both temperatures. Off the sphere the plain estimator favours short keys (the colour is the
# key norm) and the per-key sample weights put every dot back on the diagonal.
norms = np.broadcast_to(np.linalg.norm(long_keys, axis=1), dot_long.shape)
panels = [
    (dot_weights, nw_weights, f"unit keys, h² = √d = {h**2:.0f}", None),
    (dot_sharp, sharp.attention_weights(queries), f"unit keys, h² = {h_sharp**2}", None),
    (dot_long, plain.attention_weights(queries), f"keys off the sphere, h² = {h_sharp**2}", norms),
    (dot_long, corrected.attention_weights(queries), "off the sphere, weighted", norms),
]
fig, axes = plt.subplots(2, 2, figsize=(9, 8), layout="constrained")
for ax, (x, y, title, colour) in zip(axes.ravel(), panels, strict=True):
    low, high = min(x.min(), y.min()) / 1.5, max(x.max(), y.max()) * 1.5
    ax.loglog([low, high], [low, high], color="0.7", lw=1)
    if colour is None:
        ax.scatter(x, y, s=10)
    else:
        dots = ax.scatter(x, y, s=10, c=colour, cmap="viridis", vmin=0.5, vmax=2.0)
    ax.set(title=title, xlabel="softmax(q·k / h²)", ylabel="Nadaraya–Watson weight")
fig.colorbar(dots, ax=axes[1, :], label="key norm")
plt.show()
