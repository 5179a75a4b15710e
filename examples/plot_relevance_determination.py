r"""
Relevance determination: which features matter?
================================================

Nadaraya–Watson with one bandwidth per feature measures distance as
:math:`\sum_j (q_j - x_{ij})^2 / h_j^2`. A feature with a huge bandwidth no longer counts
in the distance: the estimator ignores it. Learning the bandwidths by minimising the
leave-one-out loss therefore also selects features, as automatic relevance determination
does for Gaussian processes: a feature that carries no signal only adds noise to the
distances, the loss falls as its bandwidth grows, and gradient descent lets it grow.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, rule_of_thumb

# %%
# Two informative features, four noise features
# ---------------------------------------------
# All six features are uniform on the same interval, so their rules of thumb are alike;
# only the first two enter the target.
rng = np.random.default_rng(0)


def make_data(n):
    X = rng.uniform(-2, 2, (n, 6))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + rng.normal(0, 0.2, n)
    return X, y


X, y = make_data(400)
X_test, y_test = make_data(1000)
truth = np.sin(2 * X_test[:, 0]) + 0.5 * X_test[:, 1] ** 2

# %%
# One common scale vs one bandwidth per feature
# ---------------------------------------------
# The grid search scales the six rules of thumb by one common factor; SGD moves each
# bandwidth on its own. For reference, the oracle that is told which features matter.
common = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
per_feature = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0)
per_feature.fit(X, y)
oracle = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X[:, :2], y)
errors = {
    "one common\nscale (grid)": np.mean((common.predict(X_test) - truth) ** 2),
    "per feature\n(SGD)": np.mean((per_feature.predict(X_test) - truth) ** 2),
    "oracle: first two\nfeatures only": np.mean((oracle.predict(X_test[:, :2]) - truth) ** 2),
}
print("rule of thumb:", rule_of_thumb(X).round(2))
print("common scale :", common.bandwidth_.round(2))
print("per feature  :", per_feature.bandwidth_.round(2), f"({per_feature.n_iter_} epochs)")
for name, error in errors.items():
    print(f"{name.replace(chr(10), ' '):<32} test MSE against the truth {error:.4f}")

# %%
# The learned bandwidths and what they buy
# ----------------------------------------
# Left, on a logarithmic scale: the grid keeps the six rules of thumb in proportion, so the
# noise features count as much as the informative ones. SGD shrinks the bandwidths of the
# two informative features well below the rule of thumb and grows those of the four noise
# features several-fold, to the size of the data's whole range (4): a noise feature then
# barely changes the weights. Right: the error against the noise-free target, where the
# per-feature bandwidths come close to the oracle.
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
features = np.arange(6)
axes[0].bar(features - 0.2, common.bandwidth_, width=0.4, label="one common scale (grid)")
axes[0].bar(features + 0.2, per_feature.bandwidth_, width=0.4, label="per feature (SGD)")
axes[0].set_yscale("log")
axes[0].set_xticks(features, ["x0", "x1", "noise 1", "noise 2", "noise 3", "noise 4"])
axes[0].set(ylabel="bandwidth", title="Learned bandwidths", ylim=(0.1, 30))
axes[0].legend(loc="upper left")
axes[1].bar(range(len(errors)), list(errors.values()), color=["tab:blue", "tab:orange", "0.5"])
axes[1].set_xticks(range(len(errors)), list(errors))
axes[1].set(ylabel="test MSE against the truth", title="What relevance determination buys")
plt.show()

# %%
# The loss curve of the descent, epoch by epoch. It starts from the rules of thumb, at about
# the grid's loss, and ends far below it: the leave-one-out loss itself tells that the noise
# features hurt. (It levels off above the noise variance, :math:`0.2^2 = 0.04`.)
fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
ax.plot(np.arange(1, per_feature.n_iter_ + 1), per_feature.loss_curve_, ".-")
ax.axhline(-common.best_score_, color="tab:blue", ls=":", label="grid, one common scale")
ax.set(xlabel="epoch", ylabel="leave-one-out loss")
ax.legend()
plt.show()
