r"""
Learning the bandwidth
======================

The bandwidth is the one parameter of Nadaraya–Watson regression. Minimising the training
loss to choose it fails: each training target :math:`y_i` is part of its own prediction, so
the loss falls to zero as :math:`h \to 0` and the "learned" model interpolates the noise.
Leaving each point out of its own prediction fixes this, and for Nadaraya–Watson the
leave-one-out predictions come in closed form: drop the diagonal of the attention matrix and
renormalise. :class:`~skl_nw.BandwidthSearchCV` minimises that loss on a grid or by gradient
descent.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor


def truth(x):
    return 2 * np.sin(x) + x**0.8


rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 50))
y_train = truth(x_train) + rng.normal(0, 0.5, 50)
X_train = x_train[:, None]
x_test = np.linspace(0, 5, 200)

# %%
# Training loss vs leave-one-out loss
# -----------------------------------
# On a grid of bandwidths: the training loss
# :math:`\frac1n\sum_i (y_i - \hat f_h(x_i))^2`, the leave-one-out loss
# :math:`\frac1n\sum_i (y_i - \hat f_{h,-i}(x_i))^2` (``cv_results_`` of the grid search),
# and, for reference, the error against the noise-free truth, which a user never sees. The
# leave-one-out loss estimates the error on *new noisy* targets, so it sits above the error
# against the truth by about the noise variance, :math:`0.5^2 = 0.25`; what matters is that
# its minimum is in the right place.
grid = np.geomspace(0.002, 3, 50)
search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=grid).fit(X_train, y_train)
loo_loss = -search.cv_results_["mean_test_score"]
train_loss, true_error = [], []
for h in grid:
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X_train, y_train)
    train_loss.append(np.mean((model.predict(X_train) - y_train) ** 2))
    true_error.append(np.mean((model.predict(x_test[:, None]) - truth(x_test)) ** 2))
h_loo = search.bandwidth_[0]
print(f"training loss at h = {grid[0]}: {train_loss[0]:.2e}")
print(f"leave-one-out choice: h = {h_loo:.3f}, LOO loss {-search.best_score_:.3f}")
print(f"best h against the truth on this grid: {grid[np.argmin(true_error)]:.3f}")

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
ax.loglog(grid, train_loss, label="training loss (falls to 0)")
ax.loglog(grid, loo_loss, label="leave-one-out loss")
ax.loglog(grid, true_error, "--", color="0.5", label="error against the truth (unseen)")
ax.loglog(h_loo, -search.best_score_, "o", color="tab:orange", ms=8, label="chosen h")
ax.set(xlabel="bandwidth h", ylabel="mean squared error")
ax.legend()
plt.show()

# %%
# The closed form is the real thing
# ---------------------------------
# The leave-one-out prediction at :math:`x_i` is the prediction of a model refitted
# without row :math:`i`. The grid search never refits; here are the 50 refits, for the
# chosen bandwidth, giving the same loss.
refit = [
    NadarayaWatsonRegressor(bandwidth=h_loo)
    .fit(np.delete(X_train, i, axis=0), np.delete(y_train, i))
    .predict(X_train[i : i + 1])[0]
    for i in range(len(X_train))
]
print(f"LOO loss by 50 refits: {np.mean((np.array(refit) - y_train) ** 2):.6f}")
print(f"closed-form LOO loss:  {-search.best_score_:.6f}")

# %%
# What each choice fits
# ---------------------
# The training-loss "optimum" is the smallest bandwidth on the grid: it interpolates the
# training data, noise included. The leave-one-out choice is near the bandwidth that is best
# against the truth (printed above), with a fit to match.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True, layout="constrained")
for ax, h, title in zip(
    axes, [grid[0], h_loo], ["minimum training loss", "minimum leave-one-out loss"], strict=True
):
    model = NadarayaWatsonRegressor(bandwidth=h).fit(X_train, y_train)
    ax.plot(x_test, truth(x_test), "k-", lw=1, label="truth")
    ax.plot(x_train, y_train, "o", color="0.6", ms=3, label="data")
    ax.plot(x_test, model.predict(x_test[:, None]), color="tab:red", label="fit")
    ax.set(title=f"{title}: h = {h:.3f}", xlabel="x")
axes[0].legend()
plt.show()

# %%
# Gradient descent on the leave-one-out loss
# ------------------------------------------
# ``method="sgd"`` runs Adam on :math:`\log h` with the analytic gradient of the same
# leave-one-out loss (the log keeps :math:`h` positive and makes steps relative). It starts
# from Scott's rule of thumb and stops when the loss no longer improves. With one feature it
# lands within one grid step of the grid's choice, at practically the same loss.
sgd = BandwidthSearchCV(NadarayaWatsonRegressor(), method="sgd", random_state=0)
sgd.fit(X_train, y_train)
print(f"SGD:  h = {sgd.bandwidth_[0]:.3f}, LOO loss {-sgd.best_score_:.5f} ({sgd.n_iter_} epochs)")
print(f"grid: h = {h_loo:.3f}, LOO loss {-search.best_score_:.5f}")

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
ax.plot(np.arange(1, sgd.n_iter_ + 1), sgd.loss_curve_, ".-")
ax.axhline(-search.best_score_, color="tab:orange", ls=":", label="grid minimum")
ax.set(xlabel="epoch", ylabel="leave-one-out loss", title="SGD loss curve")
ax.legend()
plt.show()
