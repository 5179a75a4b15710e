"""The engine's one primitive, kernel_sums, against the dense formula on every path.

Every operation (pooling, class sums, leave-one-out, standard errors, local
polynomial moments, derivatives) is a layer over these sums, so they are
pinned here for every kernel, power, path (brute, compiled, trees), bandwidth
factor, and for the leave-one-out and grouped variants.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from conftest import log_weights, naive_moment_sums
from skl_nw._engine import Options, kernel_sums, prepare_train
from skl_nw._kernels import KERNELS, kernel_names

NAMES = kernel_names()
PATHS = ["brute", "kd_tree"]


def _absolute(sums):
    """The sums the safe form stands for: exp(p * shift + log_scale) * scaled * value_scale."""
    p = np.array([1.0 if q == "ds" else q for q in sums.powers])[None, None, :, None]
    scale = np.exp(p * sums.shift[:, :, None, None] + sums.log_scale)
    return scale[..., None] * sums.scaled * sums.value_scale


def _problem(rng, n=300, d=2, m=40):
    X = rng.normal(size=(n, d))
    V = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    w = rng.uniform(0.2, 2.0, n)
    w[::17] = 0.0
    Q = np.vstack([X[:5] + 1e-3, rng.normal(size=(m - 5, d))])
    return X, V, w, Q


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", NAMES)
def test_powers_and_factors_equal_the_dense_formula(rng, kernel, algorithm):
    X, V, w, Q = _problem(rng)
    h, factors, powers = 0.8, (0.7, 1.0, 1.6), (1, 2, "ds")
    train = prepare_train(X / h, log_w=log_weights(w), values=V, algorithm=algorithm)
    # fallback="nan": a query with no point in a compact support has sums of 0.
    sums = kernel_sums(Q / h, train, KERNELS[kernel], powers=powers, factors=factors,
                       fallback="nan", options=Options(rtol=0.0))  # fmt: skip
    got = _absolute(sums)
    assert got.shape == (len(Q), len(factors), len(powers), 1, 3)
    for f, factor in enumerate(factors):
        for t, p in enumerate(powers):
            want = naive_moment_sums(X, Q, h * factor, kernel, p, V, w)
            assert_allclose(got[:, f, t, 0], want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", NAMES)
def test_leave_one_out_drops_the_row_by_index(rng, kernel, algorithm):
    X, V, w, _ = _problem(rng, n=120)
    X[7] = X[8]  # a duplicate still counts
    h = 0.9
    train = prepare_train(X / h, log_w=log_weights(w), values=V, algorithm=algorithm)
    sums = kernel_sums(None, train, KERNELS[kernel], powers=(1, 2), loo=True,
                       fallback="nan", options=Options(rtol=0.0))  # fmt: skip
    got = _absolute(sums)
    for t, p in enumerate((1, 2)):
        for i in (0, 7, 8, 50):
            keep = np.arange(len(X)) != i
            want = naive_moment_sums(X[keep], X[i : i + 1], h, kernel, p, V[keep], w[keep])
            assert_allclose(got[i, 0, t, 0], want[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_grouped_sums_have_one_log_scale_per_group(rng, kernel):
    X, V, w, Q = _problem(rng, n=200)
    X[100:] += 60.0  # group 1 is far from every query: its linear sum underflows
    groups = (np.arange(200) >= 100).astype(int)
    train = prepare_train(X, log_w=log_weights(w), groups=groups)
    sums = kernel_sums(
        Q, train, KERNELS[kernel], values=np.empty((200, 0)), grouped=True, fallback="nan"
    )
    assert sums.log_scale.shape == (len(Q), 1, 1, 2)
    near = _absolute(sums)[:, 0, 0, 0, 0]
    assert_allclose(near, naive_moment_sums(X[:100], Q, 1.0, kernel, 1, V[:100, :0], w[:100])[:, 0],
                    rtol=1e-10)  # fmt: skip
    if kernel == "gaussian":  # finite log sum where the plain sum is 0
        log_far = sums.log_scale[:, 0, 0, 1] + np.log(sums.scaled[:, 0, 0, 1, 0])
        assert np.all(np.isfinite(log_far)) and np.all(log_far < -1000)


def test_ds_needs_power_one():
    train = prepare_train(np.zeros((3, 1)), values=np.ones((3, 1)))
    with pytest.raises(ValueError, match="powers"):
        kernel_sums(np.zeros((1, 1)), train, KERNELS["gaussian"], powers=("ds",))
