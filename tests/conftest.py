"""Shared test helpers: a naive oracle written once, straight from the formulas."""

import tracemalloc
import zlib

import numpy as np
import pytest

# The profiles K(u) of the issue, written independently of skl_nw._kernels.
PROFILES = {
    "gaussian": lambda u: np.exp(-(u**2) / 2),
    "tophat": lambda u: (u < 1).astype(float),
    "epanechnikov": lambda u: np.maximum(1 - u**2, 0),
    "exponential": lambda u: np.exp(-u),
    "linear": lambda u: np.maximum(1 - u, 0),
    "cosine": lambda u: np.cos(np.pi * u / 2) * (u < 1),
}
ALIASES = {"boxcar": "tophat", "triangular": "linear"}


def naive_weights(X_train, X_query, bandwidth, kernel, sample_weight=None):
    """Dense (m, n) attention weights by the textbook formula, in linear space.

    Only valid where the kernel sums do not underflow (moderate bandwidths).
    """
    X_train = np.asarray(X_train, float)
    X_query = np.asarray(X_query, float)
    h = np.broadcast_to(np.asarray(bandwidth, float), (X_train.shape[1],))
    u = np.sqrt((((X_query[:, None, :] - X_train[None, :, :]) / h) ** 2).sum(-1))
    K = PROFILES[ALIASES.get(kernel, kernel)](u)
    if sample_weight is not None:
        K = K * np.asarray(sample_weight, float)[None, :]
    return K / K.sum(axis=1, keepdims=True)


def naive_predict(X_train, y_train, X_query, bandwidth, kernel="gaussian", sample_weight=None):
    """Nadaraya–Watson prediction by the textbook formula."""
    return naive_weights(X_train, X_query, bandwidth, kernel, sample_weight) @ np.asarray(
        y_train, float
    )


def traced_peak(fn):
    """Call ``fn()``; return its result and the peak bytes it allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - start


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: reproducible, independent per test."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
