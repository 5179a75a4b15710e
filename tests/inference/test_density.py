"""ParzenClassifier's kernel density estimates against scikit-learn and the dense formula."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity
from sklearn.neighbors._kde import VALID_KERNELS as SKLEARN_KERNELS

from conftest import naive_log_density
from skl_nw import ParzenClassifier
from skl_nw._kernels import kernel_names

NAMES = kernel_names()


def _data(rng, n=90, d=2):
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, "b", "a")
    Q = X[rng.choice(n, 20)] + 0.1 * rng.normal(size=(20, d))  # near the data: densities > 0
    return X, y, Q


# scikit-learn's cosine constant is wrong for even d (tests/engine/test_kernels.py documents it).
# The LOESS family (tricube, biweight, triweight) is not among scikit-learn's kernels.
SKLEARN_RIGHT = [
    (k, d)
    for k in NAMES
    for d in (1, 2, 3)
    if k in SKLEARN_KERNELS and not (k == "cosine" and d % 2 == 0)
]


@pytest.mark.parametrize("kernel, d", SKLEARN_RIGHT)
def test_score_samples_equals_sklearn_kernel_density(rng, kernel, d):
    X, y, Q = _data(rng, d=d)
    clf = ParzenClassifier(bandwidth=0.7, kernel=kernel).fit(X, y)
    want = KernelDensity(kernel=kernel, bandwidth=0.7).fit(X).score_samples(Q)
    assert_allclose(clf.score_samples(Q), want, rtol=1e-8, atol=1e-8)
    for c, label in enumerate(clf.classes_):
        kde = KernelDensity(kernel=kernel, bandwidth=0.7).fit(X[y == label])
        assert_allclose(clf.score_class_samples(Q)[:, c], kde.score_samples(Q), rtol=1e-8,
                        atol=1e-8)  # fmt: skip


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("kernel", NAMES)
def test_per_feature_bandwidths_weights_and_priors_equal_the_formula(rng, kernel, algorithm):
    X, y, Q = _data(rng)
    X[:, 1] *= 10
    Q[:, 1] *= 10
    h, w = [0.8, 7.0], rng.uniform(0.5, 2.0, len(X))
    for priors in (None, [0.8, 0.2]):
        clf = ParzenClassifier(bandwidth=h, kernel=kernel, algorithm=algorithm, priors=priors)
        clf.fit(X, y, sample_weight=w)
        assert_allclose(clf.score_samples(Q), naive_log_density(X, Q, h, kernel, w), rtol=1e-9)
        L = clf.score_class_samples(Q)
        assert L.shape == (20, 2)
        for c, label in enumerate(clf.classes_):
            keep = y == label
            want = naive_log_density(X[keep], Q, h, kernel, w[keep])
            assert_allclose(L[:, c], want, rtol=1e-9)


def test_densities_integrate_to_one_and_the_mixture_adds_up(rng):
    X = rng.normal(size=(40, 1))
    y = (X[:, 0] > 0).astype(int)
    clf = ParzenClassifier(bandwidth=0.4, kernel="epanechnikov").fit(X, y)
    grid = np.linspace(-6, 6, 24001)[:, None]
    step = grid[1, 0] - grid[0, 0]
    assert_allclose(np.exp(clf.score_samples(grid)).sum() * step, 1.0, rtol=1e-4)
    assert_allclose(np.exp(clf.score_class_samples(grid)).sum(0) * step, 1.0, rtol=1e-4)
    share = np.bincount(y) / len(y)
    mix = logsumexp(clf.score_class_samples(grid) + np.log(share), axis=1)
    assert_allclose(clf.score_samples(grid)[np.isfinite(mix)], mix[np.isfinite(mix)])


def test_far_queries_are_finite_or_exactly_minus_inf(rng):
    X, y, _ = _data(rng)
    far = np.array([[1e4, 1e4], [50.0, 0.0]])
    gauss = ParzenClassifier(bandwidth=0.5).fit(X, y)
    assert np.all(np.isfinite(gauss.score_samples(far)))
    assert np.all(gauss.score_samples(far) < gauss.score_samples(X).min())
    compact = ParzenClassifier(bandwidth=0.5, kernel="epanechnikov").fit(X, y)
    assert np.all(compact.score_samples(far) == -np.inf)
    assert np.all(compact.score_class_samples(far) == -np.inf)
