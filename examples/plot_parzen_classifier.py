"""
Parzen windows vs nearest neighbours
====================================

:class:`~skl_nw.ParzenClassifier` is Nadaraya–Watson regression of one-hot labels: the
probability of a class at a query is the attention weight that falls on the training points
of that class. It is also the Parzen-window classifier, Bayes' rule with a kernel density
estimate per class (the proof is in the user guide). Here it meets
:class:`~sklearn.neighbors.KNeighborsClassifier` on two interleaved half moons.
"""

# %%
import matplotlib.pyplot as plt
from sklearn.datasets import make_moons
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.neighbors import KNeighborsClassifier

from skl_nw import BandwidthSearchCV, ParzenClassifier

X, y = make_moons(n_samples=400, noise=0.3, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)

# %%
# Both models are tuned on the training half
# ------------------------------------------
# The Parzen bandwidth minimises the closed-form leave-one-out log-loss; the number of
# neighbours is chosen by 5-fold cross-validation on the same data.
parzen = BandwidthSearchCV(ParzenClassifier()).fit(X_train, y_train)
knn = GridSearchCV(KNeighborsClassifier(), {"n_neighbors": range(1, 40, 2)}, cv=5)
knn.fit(X_train, y_train)
print(f"Parzen bandwidths: {parzen.bandwidth_.round(3)}")
print(f"neighbours: {knn.best_params_['n_neighbors']}")
print(
    f"test accuracy: Parzen {parzen.score(X_test, y_test):.3f}, "
    f"k-NN {knn.score(X_test, y_test):.3f}"
)

# %%
# Decision regions, shaded by ``predict_proba``
# ---------------------------------------------
# The shading is the probability of the second class; the black line is where it crosses
# one half, the decision boundary. k-NN probabilities are vote fractions, so they change in
# steps of :math:`1/k`; the Parzen probabilities are smooth, because the kernel weights are.
fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True, layout="constrained")
models = [
    (parzen, "Parzen window, h = ({:.2f}, {:.2f})".format(*parzen.bandwidth_)),
    (knn, f"{knn.best_params_['n_neighbors']}-nearest neighbours"),
]
for ax, (model, title) in zip(axes, models, strict=True):
    display = DecisionBoundaryDisplay.from_estimator(
        model,
        X,
        response_method="predict_proba",
        plot_method="pcolormesh",
        cmap="RdBu",
        vmin=0,
        vmax=1,
        alpha=0.8,
        ax=ax,
        grid_resolution=150,
    )
    DecisionBoundaryDisplay.from_estimator(
        model,
        X,
        response_method="predict_proba",
        plot_method="contour",
        levels=[0.5],
        colors="k",
        ax=ax,
        grid_resolution=150,
    )
    ax.scatter(*X_train.T, c=y_train, cmap="RdBu", edgecolors="k", s=18, label="train")
    ax.scatter(*X_test.T, c=y_test, cmap="RdBu", edgecolors="k", s=18, marker="^", label="test")
    ax.set(title=f"{title}: test accuracy {model.score(X_test, y_test):.2f}", xlabel="x0")
axes[0].set_ylabel("x1")
axes[0].legend(loc="lower left")
fig.colorbar(display.surface_, ax=axes, label="P(class 1 | x)")
plt.show()

# %%
# Far from the data
# -----------------
# The Gaussian kernel never vanishes, so far from the training data the probabilities are
# still defined: the class of the nearest training points wins, as the :math:`h \to 0`
# limit of attention pooling does, and the log-probabilities stay finite (computed in log
# space) where a linear-space ratio would underflow to ``0 / 0``. The flip side, visible in
# the corners of the left panel: far from the data the Parzen probabilities saturate at 0 or
# 1. They say which class is nearer, not how sure one should be so far out.
far = [[30.0, 0.0], [-30.0, 0.0]]
print("P(class | far query):\n", parzen.predict_proba(far).round(3))
print("log P(class | far query):\n", parzen.predict_log_proba(far).round(1))
plt.show()
