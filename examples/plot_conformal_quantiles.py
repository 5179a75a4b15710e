r"""
Conformalized quantile regression with MAPIE
============================================

:class:`~skl_nw.KernelQuantileRegressor` is a scikit-learn regressor whose ``predict``
returns a conditional quantile, so it plugs into MAPIE's conformalized quantile regression
(CQR): three quantile models (5%, 95% and the median) are fitted on one part of the data,
and a held-out *conformalization* set widens or narrows their interval by the amount that
makes its coverage hold in finite samples. The kernel quantiles already adapt to the noise;
CQR adds the guarantee. This example needs ``pip install mapie``.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from mapie.regression import ConformalizedQuantileRegressor

from skl_nw import KernelQuantileRegressor


def simulate(n, rng):
    x = rng.uniform(-2, 2, n)
    return x[:, None], np.sin(2 * x) + (0.1 + 0.4 * np.abs(x)) * rng.normal(size=n)


rng = np.random.default_rng(0)
X_train, y_train = simulate(1000, rng)
X_conf, y_conf = simulate(500, rng)
X_test, y_test = simulate(5_000, rng)

# %%
# Three fitted quantile models, in MAPIE's order: lower, upper, median.
models = [
    KernelQuantileRegressor(q, bandwidth=0.1, y_bandwidth=0.05).fit(X_train, y_train)
    for q in (0.05, 0.95, 0.5)
]
cqr = ConformalizedQuantileRegressor(models, confidence_level=0.9, prefit=True)
cqr.conformalize(X_conf, y_conf)
_, intervals = cqr.predict_interval(X_test)
lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]
raw = np.column_stack([m.predict(X_test) for m in models[:2]])


def coverage(lo, hi):
    return np.mean((y_test >= lo) & (y_test <= hi))


print(
    f"kernel quantiles alone: coverage {coverage(*raw.T):.3f}, "
    f"mean width {np.mean(raw[:, 1] - raw[:, 0]):.3f}"
)
print(
    f"conformalized:          coverage {coverage(lower, upper):.3f}, "
    f"mean width {np.mean(upper - lower):.3f}"
)

# %%
# The intervals
# -------------
order = np.argsort(X_test[:2000, 0])
x = X_test[:2000, 0][order]
fig, ax = plt.subplots(figsize=(7, 4))
ax.scatter(X_test[:2000, 0], y_test[:2000], s=3, color="0.6", label="fresh data")
ax.plot(x, raw[:2000, 0][order], "C0--", label="kernel 5% / 95%")
ax.plot(x, raw[:2000, 1][order], "C0--")
ax.fill_between(
    x, lower[:2000][order], upper[:2000][order], alpha=0.3, color="C1", label="conformalized 90%"
)
ax.set(xlabel="x", ylabel="y", title="CQR with KernelQuantileRegressor")
ax.legend(loc="upper left")
plt.show()
