r"""
Consistency: shrinking the bandwidth as data grows
==================================================

Nadaraya–Watson regression is consistent: with a bandwidth that shrinks at the right rate,
its error goes to zero as the sample grows. The bias grows like :math:`h^2` and the variance
like :math:`1 / (n h^d)` (a ball of radius :math:`h` holds about :math:`n h^d` training
points), so the best bandwidth and the error it achieves scale as

.. math::

    h_n \propto n^{-1/(d+4)}, \qquad \mathrm{MSE}_n \propto n^{-4/(d+4)}.

The exponent depends on the dimension :math:`d`: the curse of dimensionality. This example
measures both rates for :math:`d = 1, 2, 5`, with the bandwidth chosen by leave-one-out, as a
user would.
"""

# %%
# The experiment
# --------------
# Inputs are uniform on the cube :math:`[0, 1]^d` and the regression function is
# :math:`m(x) = \sum_j \cos(\pi x_j)`, plus Gaussian noise of standard deviation 0.5. The
# function is flat at the faces of the cube: at a boundary, Nadaraya–Watson has a bias of
# order :math:`h\,\partial m/\partial n`, which would otherwise change the rate. For each
# :math:`n` and :math:`d`, :class:`~skl_nw.BandwidthSearchCV` picks one common bandwidth on a
# grid (the features share a scale), and the error is measured against :math:`m` on 1000
# fresh points. Small samples give noisy errors, so they are repeated more often: the error
# is averaged over :math:`3200 / n` data sets (32 at :math:`n = 100`, 2 at :math:`n = 1600`),
# the bandwidth is their geometric mean.
import matplotlib.pyplot as plt
import numpy as np

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor


def m(X):
    return np.cos(np.pi * X).sum(axis=1)


rng = np.random.default_rng(0)
sizes = np.array([100, 200, 400, 800, 1600])
dims = [1, 2, 5]
grid = np.geomspace(0.02, 0.6, 16)
errors, bandwidths = {}, {}
for d in dims:
    X_test = rng.uniform(0, 1, (1000, d))
    errors[d], bandwidths[d] = [], []
    for n in sizes:
        err, h = [], []
        for _ in range(3200 // n):
            X = rng.uniform(0, 1, (n, d))
            y = m(X) + rng.normal(0, 0.5, n)
            search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=grid).fit(X, y)
            err.append(np.mean((search.predict(X_test) - m(X_test)) ** 2))
            h.append(search.bandwidth_[0])
        errors[d].append(np.mean(err))
        bandwidths[d].append(np.exp(np.mean(np.log(h))))


def slope(values):
    return np.polyfit(np.log(sizes), np.log(values), 1)[0]


for d in dims:
    print(
        f"d = {d}: bandwidth slope {slope(bandwidths[d]):+.3f} (theory {-1 / (d + 4):+.3f}), "
        f"error slope {slope(errors[d]):+.3f} (theory {-4 / (d + 4):+.3f})"
    )

# %%
# Measured rates against theory
# -----------------------------
# Solid lines are the measurements, dashed lines the theoretical slopes (drawn through the
# middle of the measurements), and the legends give the fitted slopes. The selected
# bandwidths shrink roughly at the predicted rates, slowly in any dimension. The error falls
# more slowly the higher the dimension, as predicted, but at these sample sizes the measured
# error slopes are steeper than the asymptotic :math:`-4/(d+4)`. The rates are limits, and
# here each query averages over only some tens of training points, far from the asymptotic
# regime.
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
for d, colour in zip(dims, ["tab:blue", "tab:orange", "tab:green"], strict=True):
    for ax, values, rate in [
        (axes[0], errors[d], -4 / (d + 4)),
        (axes[1], bandwidths[d], -1 / (d + 4)),
    ]:
        ax.loglog(sizes, values, "o-", color=colour, label=f"d = {d}: slope {slope(values):+.2f}")
        middle = np.exp(np.mean(np.log(values)) + rate * (np.log(sizes) - np.mean(np.log(sizes))))
        ax.loglog(sizes, middle, "--", color=colour, label=f"theory {rate:+.2f}")
axes[0].set(xlabel="n", ylabel="mean squared error against m", title="Error")
axes[1].set(xlabel="n", ylabel="selected bandwidth", title="Bandwidth (leave-one-out)")
for ax in axes:
    ax.legend(fontsize=8, ncol=1)

# %%
# Reading the curves
# ------------------
# To halve the error, :math:`n` must grow by :math:`2^{(d+4)/4}`: 2.4 times in one dimension,
# 4.8 times in five (asymptotically). Kernel regression is a local method: in high dimension
# every neighbourhood is nearly empty. Two remedies in skl_nw: learn per-feature bandwidths,
# so that irrelevant features stop counting (see
# :ref:`sphx_glr_auto_examples_plot_relevance_determination.py`), and reduce the dimension
# before the regression, in a :class:`~sklearn.pipeline.Pipeline`.
plt.show()
