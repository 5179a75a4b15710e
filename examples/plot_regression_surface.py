r"""
A regression surface in two dimensions
======================================

With several features, skl_nw gives each feature its own bandwidth: the scaled distance is
:math:`u^2 = \sum_j (q_j - x_{ij})^2 / h_j^2`. Here the two features live on scales that differ
by a factor of ten, and the target varies quickly along the first and slowly along the
second. :class:`~skl_nw.BandwidthSearchCV` with ``method="sgd"`` learns one bandwidth per
feature by minimising the leave-one-out loss.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, rule_of_thumb


def truth(X):
    return np.sin(2 * X[:, 0]) + (X[:, 1] / 20 - 1) ** 2


rng = np.random.default_rng(0)
n = 300
X = np.column_stack([rng.uniform(0, 4, n), rng.uniform(0, 40, n)])
y = truth(X) + rng.normal(0, 0.2, n)

g0, g1 = np.meshgrid(np.linspace(0, 4, 80), np.linspace(0, 40, 80))
grid = np.column_stack([g0.ravel(), g1.ravel()])

# %%
# Rule of thumb vs learned bandwidths
# -----------------------------------
# The rule of thumb already follows each feature's spread (a robust scale times Scott's
# factor :math:`n^{-1/(d+4)}`), but it cannot know how fast the target varies along each
# feature. The learned bandwidths can.
scott = NadarayaWatsonRegressor().fit(X, y)
search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0).fit(X, y)
print("rule of thumb:", rule_of_thumb(X).round(3))
print("learned      :", search.bandwidth_.round(3))
print("learned / rule of thumb:", (search.bandwidth_ / rule_of_thumb(X)).round(2))


def grid_mse(model):
    return np.mean((model.predict(grid) - truth(grid)) ** 2)


# %%
# The surfaces
# ------------
# The training points are drawn over each surface. Both learned bandwidths are smaller than
# the rule of thumb, but the first shrinks far more (the target ripples along it) than the
# second (the target changes slowly along it): the learned surface keeps the ripples that the
# rule of thumb smooths away.
panels = [
    ("truth", truth(grid)),
    (
        f"rule of thumb, h = {np.round(scott.bandwidth_, 2)}\nMSE {grid_mse(scott):.3f}",
        scott.predict(grid),
    ),
    (
        f"learned (SGD), h = {np.round(search.bandwidth_, 2)}\nMSE {grid_mse(search):.3f}",
        search.predict(grid),
    ),
]
fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True, layout="constrained")
levels = np.linspace(-1.2, 2.2, 18)
for ax, (title, values) in zip(axes, panels, strict=True):
    filled = ax.contourf(g0, g1, values.reshape(g0.shape), levels=levels, cmap="viridis")
    ax.scatter(X[:, 0], X[:, 1], s=6, c="white", edgecolors="k", linewidths=0.3)
    ax.set(title=title, xlabel="feature 0")
axes[0].set_ylabel("feature 1 (ten times the scale)")
fig.colorbar(filled, ax=axes, label="y")
plt.show()
