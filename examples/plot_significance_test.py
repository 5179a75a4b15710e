r"""
Which features matter? A significance test next to learned bandwidths
=====================================================================

Two answers to the same question. Gradient descent on the leave-one-out loss gives each
feature its own bandwidth, and a feature that carries no signal drifts to a large one
(:ref:`sphx_glr_auto_examples_plot_relevance_determination.py`). The kernel significance
test of Racine, Hart & Li (:func:`~skl_nw.significance_test`) asks it as a hypothesis test:
is the mean squared partial derivative of the fit along a feature larger than it would be
if the regression did not depend on that feature? Its null distribution comes from a wild
bootstrap of the model fitted without the feature.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, significance_test

rng = np.random.default_rng(0)
n = 200
X = rng.uniform(-1, 1, (n, 4))
# Feature 0 strongly, feature 1 weakly; features 2 and 3 are noise.
y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.3, n)

search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0).fit(X, y)
h = search.bandwidth_
print("per-feature bandwidths:", h.round(2))

# %%
# One test per feature, at the learned bandwidths
# -----------------------------------------------
# The bootstrap samples are fitted all at once (the smoother is linear in ``y``), so 399
# replications take a fraction of a second.
results = [
    significance_test(NadarayaWatsonRegressor(bandwidth=h), X, y, [j], random_state=0)
    for j in range(X.shape[1])
]
for j, r in enumerate(results):
    print(f"feature {j}: statistic {r.statistic:.4f}, p-value {r.pvalue:.3f}")

fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
names = [f"x{j}" for j in range(X.shape[1])]
axes[0].bar(names, h / h.min(), color="C0")
axes[0].set(yscale="log", ylabel="bandwidth / smallest", title="SGD bandwidths")
axes[1].bar(names, [r.pvalue for r in results], color="C1")
axes[1].axhline(0.05, color="k", lw=0.8, ls="--")
axes[1].set(
    yscale="log", ylim=(1e-3, 1.5), ylabel="p-value", title="Significance test (dashed: 5%)"
)
fig.tight_layout()

# %%
# The bootstrap null distribution of the weak feature
# ---------------------------------------------------
# The statistic of ``x1`` against its null distribution: far in the tail, although its
# bandwidth is several times that of ``x0``.
r = results[1]
fig, ax = plt.subplots(figsize=(6, 3))
ax.hist(r.null_distribution, bins=30, color="0.6", label="bootstrap $T^*$ under the null")
ax.axvline(r.statistic, color="C3", label=f"observed $T$ (p = {r.pvalue:.3f})")
ax.set(xlabel="mean squared derivative along x1")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
