r"""
Local linear regression: boundary bias and derivatives
======================================================

Nadaraya–Watson averages the targets near each query. At the edge of the data every
neighbour lies on one side of the query, so the average is pulled toward the inside: the
*boundary bias*. Local linear regression keeps the same attention weights but fits a weighted
least-squares line at each query and predicts its value there; the line follows a slope to
the edge. Its slope is also an estimate of the derivative of the regression function.
"""

# %%
# The data
# --------
# 200 noisy samples of :math:`f(x) = 2\sin x + x^{0.8}` on :math:`[0, 5]`.
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor, NadarayaWatsonRegressor


def truth(x):
    return 2 * np.sin(x) + x**0.8


def derivative(x):
    return 2 * np.cos(x) + 0.8 * x ** (-0.2)


rng = np.random.default_rng(0)
x = rng.uniform(0, 5, 200)
y = truth(x) + rng.normal(0, 0.3, 200)
X = x[:, None]
grid = np.linspace(0.05, 5, 200)[:, None]

# %%
# Boundary bias: Nadaraya–Watson against local linear
# ---------------------------------------------------
# One bandwidth for both, chosen for the local linear fit by closed-form leave-one-out.
search = BandwidthSearchCV(LocalPolynomialRegressor(degree=1)).fit(X, y)
h = search.bandwidth_[0]
nw = NadarayaWatsonRegressor(bandwidth=h).fit(X, y)
ll = search.best_estimator_
print(f"bandwidth h = {h:.3f}")
edge = grid[:, 0] > 4.5
for name, model in (("Nadaraya–Watson", nw), ("local linear", ll)):
    error = model.predict(grid) - truth(grid[:, 0])
    rmse, edge_error = np.sqrt(np.mean(error**2)), np.abs(error[edge]).mean()
    print(f"{name:16s} RMSE {rmse:.3f}, mean |error| at x > 4.5: {edge_error:.3f}")

fig, ax = plt.subplots(figsize=(7, 4))
ax.scatter(x, y, s=8, color="0.7", label="samples")
ax.plot(grid, truth(grid), "k--", label="truth")
ax.plot(grid, nw.predict(grid), label="Nadaraya–Watson (degree 0)")
ax.plot(grid, ll.predict(grid), label="local linear (degree 1)")
ax.set(xlabel="x", ylabel="y", title=f"Same weights, h = {h:.2f}: a mean or a line")
ax.legend()
plt.show()

# %%
# Derivative estimates
# --------------------
# ``predict_gradient`` returns the slope of each local line (degree 1) or of each local
# parabola (degree 2); for degree 0 it is the exact derivative of the Nadaraya–Watson ratio.
# Derivatives need more smoothing than values, so the quadratic fit uses a wider bandwidth.
quad = LocalPolynomialRegressor(bandwidth=1.5 * h, degree=2).fit(X, y)
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(grid, derivative(grid), "k--", label="true derivative")
constant = LocalPolynomialRegressor(bandwidth=h, degree=0).fit(X, y)
ax.plot(grid, constant.predict_gradient(grid)[:, 0], label="degree 0 (derivative of NW)")
ax.plot(grid, ll.predict_gradient(grid)[:, 0], label="degree 1 (local slope)")
ax.plot(grid, quad.predict_gradient(grid)[:, 0], label="degree 2, 1.5 h")
ax.set(xlabel="x", ylabel="df/dx", ylim=(-3, 4), title="Derivative estimates")
ax.legend()
plt.show()
