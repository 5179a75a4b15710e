r"""
Learning the attention metric: two directions hidden among 20 features
======================================================================

The target depends on two directions of the inputs,
:math:`y = \sin(2 z_1) + z_2^2 / 2 + \varepsilon` with :math:`z = A^\top x` for two
orthonormal columns :math:`A`, oblique to every one of the 20 standard normal features.
A bandwidth per feature cannot express that: each feature carries a little of the signal.
:class:`~skl_nw.MLKR` learns a projection :math:`W` (2 x 20) by the leave-one-out loss of
Nadaraya–Watson, the scores of attention :math:`-\lVert W q - W x_i \rVert^2 / 2` with one
projection shared by queries and keys. metric-learn's ``MLKR`` (when installed) minimises
the same loss from its own start (PCA: the directions of largest variance, here unrelated to
the signal), with dense :math:`n \times n` matrices; it takes about a minute even at 400
rows, and often stalls near its start.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from skl_nw import MLKR, BandwidthSearchCV, NadarayaWatsonRegressor


def hidden_directions(n, d=20, seed=0):
    rng = np.random.default_rng(seed)
    A = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    X = rng.normal(size=(n, d))
    Z = X @ A
    y = np.sin(2 * Z[:, 0]) + 0.5 * Z[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y, A


X_all, y_all, A = hidden_directions(1000)
X, y, X_test, y_test = X_all[:400], y_all[:400], X_all[400:], y_all[400:]


def test_mse(model, X_test):
    return np.mean((model.predict(X_test) - y_test) ** 2)


# %%
# Three fits
# ----------
# Per-feature bandwidths by L-BFGS on the leave-one-out loss; MLKR with two components
# (its default start is supervised: per-feature bandwidths, then the leading directions of
# that fit's gradients); then Nadaraya–Watson with bandwidth 1 on the learned coordinates.
results = {}
start = time.perf_counter()
per_feature = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y)
results["per-feature\nbandwidths"] = (test_mse(per_feature, X_test), time.perf_counter() - start)

start = time.perf_counter()
mlkr = MLKR(n_components=2, random_state=0).fit(X, y)
elapsed = time.perf_counter() - start
nw = NadarayaWatsonRegressor(bandwidth=1.0).fit(mlkr.transform(X), y)
results["skl_nw MLKR"] = (test_mse(nw, mlkr.transform(X_test)), elapsed)

try:
    import metric_learn
    from metric_learn import _util

    # metric-learn 0.7.0 passes ``force_all_finite`` to scikit-learn's check_X_y, an
    # argument scikit-learn 1.8 renamed ``ensure_all_finite``: rename that one argument.
    def renamed(function):
        def call(*args, **kwargs):
            if "force_all_finite" in kwargs:
                kwargs["ensure_all_finite"] = kwargs.pop("force_all_finite")
            return function(*args, **kwargs)

        return call

    _util.check_X_y, _util.check_array = renamed(_util.check_X_y), renamed(_util.check_array)
    start = time.perf_counter()
    reference = metric_learn.MLKR(n_components=2, random_state=0).fit(X, y)
    elapsed = time.perf_counter() - start
    # Its kernel is exp(-||A d||^2): bandwidth 1 / sqrt(2) on its coordinates.
    nw_ref = NadarayaWatsonRegressor(bandwidth=2**-0.5).fit(reference.transform(X), y)
    results["metric-learn\nMLKR"] = (test_mse(nw_ref, reference.transform(X_test)), elapsed)
except ImportError:
    reference = None

for name, (error, seconds) in results.items():
    print(f"{name.replace(chr(10), ' '):<24} test MSE {error:.4f}   fit {seconds:.2f} s")
print("noise variance          0.0100")

# %%
# The learned embedding
# ---------------------
# Left: the two learned coordinates of the test points, coloured by the target: the sine
# and the parabola appear, up to a rotation (the loss is invariant to rotations of
# :math:`W`). Middle: the principal angles between the learned plane and the true one
# (0 degrees: the same plane). Right: test errors.
fig, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
Z = mlkr.transform(X_test)
points = axes[0].scatter(Z[:, 0], Z[:, 1], c=y_test, s=6, cmap="viridis")
fig.colorbar(points, ax=axes[0], label="y")
axes[0].set(xlabel="learned coordinate 1", ylabel="learned coordinate 2", title="MLKR embedding")

learned = {"skl_nw MLKR": mlkr.components_}
if reference is not None:
    learned["metric-learn MLKR"] = reference.components_
for offset, (name, W) in enumerate(learned.items()):
    basis = np.linalg.qr(W.T)[0]
    cosines = np.clip(np.linalg.svd(basis.T @ A, compute_uv=False), -1, 1)
    angles = np.degrees(np.arccos(cosines))
    axes[1].bar(np.arange(2) + 0.4 * offset - 0.2, angles, width=0.4, label=name)
axes[1].set_xticks([0, 1], ["first", "second"])
axes[1].set(ylabel="principal angle to the true plane (degrees)", title="Directions found")
axes[1].legend()

names = list(results)
axes[2].bar(range(len(names)), [results[n][0] for n in names])
axes[2].axhline(0.01, color="0.4", ls=":", label="noise variance")
axes[2].set_xticks(range(len(names)), names)
axes[2].set(ylabel="test MSE", title="Nadaraya–Watson on each metric")
axes[2].legend()
plt.show()

# %%
# The loss curve of L-BFGS, from the supervised start: each entry one iteration.
fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
ax.semilogy(mlkr.loss_curve_, ".-")
ax.set(xlabel="L-BFGS iteration", ylabel="leave-one-out loss")
plt.show()
