r"""
LOWESS with outliers: span chosen by AICc, robustness, intervals
================================================================

A noisy series with a few gross outliers, smoothed three ways: statsmodels' ``lowess``,
:class:`~skl_nw.LocalPolynomialRegressor` with the same settings (tricube kernel,
``span=frac``, ``robust_iterations=it``: the same fitted values), and the same estimator
with its span chosen by AICc and pointwise confidence intervals.
"""

# %%
# The data
# --------
# 300 samples of :math:`f(x) = \sin x + x / 5` on :math:`[0, 10]`, unevenly spaced, with
# noise of standard deviation 0.3, and 15 rows shifted up by 3 to 5.
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, LocalPolynomialRegressor

rng = np.random.default_rng(0)
x = np.sort(10 * rng.beta(1.2, 1.0, 300))
truth = np.sin(x) + x / 5
y = truth + rng.normal(0, 0.3, 300)
outliers = rng.choice(300, 15, replace=False)
y[outliers] += rng.uniform(3, 5, 15)
X = x[:, None]

# %%
# The same fit as statsmodels' lowess
# -----------------------------------
# ``lowess(y, x, frac=0.3, it=3, delta=0)`` and its translation.
lowess = LocalPolynomialRegressor(1.0, kernel="tricube", degree=1, span=0.3, robust_iterations=3)
ours = lowess.fit(X, y).predict(X)
try:
    from statsmodels.nonparametric.smoothers_lowess import lowess as sm_lowess

    theirs = sm_lowess(y, x, frac=0.3, it=3, delta=0.0, return_sorted=False)
    print(f"largest difference from statsmodels: {np.abs(ours - theirs).max():.1e}")
except ImportError:  # statsmodels is optional
    theirs = None
print(f"outliers given no weight: {(lowess.robust_weights_[outliers] == 0).sum()} of 15")

# %%
# The span chosen by AICc, with intervals
# ---------------------------------------
# One fit per candidate span, scored by the corrected AIC from the trace of its smoother
# (computed at its final robustness weights).
search = BandwidthSearchCV(lowess, criterion="aicc").fit(X, y)
best = search.best_estimator_
print(f"span chosen by AICc: {search.span_:.3f} ({best.n_neighbors_} rows per fit)")
grid = np.linspace(x.min(), x.max(), 400)[:, None]
low, high = best.predict_interval(grid).T

fig, ax = plt.subplots(figsize=(8, 4.5))
ax.scatter(x, y, s=8, color="0.65", label="samples")
ax.scatter(x[outliers], y[outliers], s=14, color="tab:red", label="outliers")
ax.plot(x, truth, "k--", lw=1, label="truth")
if theirs is not None:
    ax.plot(x, theirs, color="tab:orange", lw=4, alpha=0.5, label="statsmodels lowess (0.3, 3)")
ax.plot(x, ours, color="tab:blue", lw=1.2, label="LocalPolynomialRegressor, span=0.3")
ax.plot(grid, best.predict(grid), color="tab:green", label=f"span={search.span_:.2f} (AICc)")
ax.fill_between(grid[:, 0], low, high, color="tab:green", alpha=0.2, label="95% interval")
ax.set(xlabel="x", ylabel="y", title="LOWESS as an estimator")
ax.legend(fontsize=8, loc="lower right")
plt.show()
