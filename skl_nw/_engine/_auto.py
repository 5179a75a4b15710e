"""The rule of ``algorithm="auto"``, with its measured constants, in one place."""

from __future__ import annotations

import numpy as np

from .._kernels import Kernel
from . import _grid
from ._chunks import single_threaded_blas
from ._dense import TILED_MIN_FEATURES, gemm_exact, sq_distances
from ._loader import compiled
from ._train import TrainSet
from ._tree import log_margin

# Crossovers measured on the project's 2-core machine over 240 configurations
# (d in 1..12, n in 1e3..1e5, epanechnikov and gaussian, 0.1-10% of the data per
# neighbourhood): ``python -m benchmarks trees --only crossover``; the timings of
# every configuration are docs/_static/benchmarks/auto_*.csv (docs/benchmarks.md,
# "Choosing the algorithm").  With these rules no configuration was more than
# 1.5x slower than the better of brute and tree.
# The smallest n measured: below it brute force takes well under a millisecond
# per thousand queries, whatever a tree would save.
_TREE_MIN_SAMPLES = 1_000
# A tree pays while a query's neighbourhood (the kernel's support, or the
# truncation radius of an infinite-support kernel) holds at most this share of
# the data; the share shrinks with the dimension, and beyond 12 features (not
# measured) a radius query visits most leaves.
_TREE_MAX_FRACTION = {5: 0.15, 8: 0.07, 12: 0.03}
# With the compiled kernels, brute force from _dense.TILED_MIN_FEATURES features on
# runs in register tiles (2-10x the passes the shares above were measured against),
# so a tree pays there only for small neighbourhoods: at most these shares, in sets
# of at least _TILED_MIN_SAMPLES points beyond 5 features and, for the Gaussian
# (whose tiles fuse the exponential), at any d; never beyond 8 features.  Measured
# over the same 240 configurations: no configuration more than 1.5x slower than the
# better of brute and tree but three where the Gaussian folds (d = 2, 3; up to 2.8x).
_TILED_MAX_FRACTION = {5: 0.01, 8: 0.005}
_TILED_MIN_SAMPLES = 30_000
# Ball trees beat KD-trees in 236 of the 240 configurations (median 1.29x).
_TREE = "ball_tree"
# Probe: queries from this many training rows, against at most this many keys.
_PROBE_ROWS = 64
_PROBE_KEYS = 16_384


def neighbour_fraction(X: np.ndarray, log_w: np.ndarray, kernel: Kernel, rtol: float) -> float:
    """Mean share of the training set inside a query's tree-path radius.

    Probed by brute force from up to 64 evenly spaced training rows taken as
    queries (each leaving itself out, as a fresh query would) against at most
    16,384 evenly spaced training rows, so the probe's memory is bounded.
    """
    n = len(X)
    keys = np.unique(np.linspace(0, n - 1, min(_PROBE_KEYS, n)).astype(np.intp))
    rows = keys[np.unique(np.linspace(0, len(keys) - 1, min(_PROBE_ROWS, n)).astype(np.intp))]
    train = TrainSet(X[keys])
    with single_threaded_blas():
        S = sq_distances(X[rows] - train.center, train, kernel)
    S[np.arange(len(rows)), np.searchsorted(keys, rows)] = np.inf
    if kernel.compact:
        radius_sq = np.full(len(rows), kernel.support**2)
    else:
        level = kernel.log_profile(S.min(axis=1)) + log_margin(log_w, rtol)
        radius_sq = kernel.log_profile_inverse(level)
    return float(np.mean(S <= radius_sq[:, None]))


def _folds(X: np.ndarray, kernel: Kernel) -> bool:
    """Whether brute force will take the folded single-GEMM path (``_dense.FoldedKeys``).

    Queries are not known at fit: the 99th percentile of the training norms
    stands for theirs.  Folded, brute force costs about 2 ns per pair, so it
    wins over a tree for every neighbourhood size measured.
    """
    if kernel.log_slope is None or not len(X):
        return False
    centred = X - X.mean(axis=0)
    sq_norms = np.einsum("ij,ij->i", centred, centred)
    typical = float(np.percentile(sq_norms, 99))
    return gemm_exact(kernel.log_slope, X.shape[1], float(sq_norms.max()) + typical)


def _span_paths(d: int) -> bool:
    """Whether the compiled window (d = 1) or grid (d = 2, 3) path serves spans in ``d``."""
    return (d == 1 and compiled() is not None) or _grid.usable(d)


def choose_algorithm(
    X: np.ndarray,
    log_w: np.ndarray,
    kernel: Kernel,
    rtol: float,
    share: float | None = None,
    plain: bool = True,
) -> str:
    """Resolve algorithm="auto" for bandwidth-scaled training inputs ``X``.

    Brute force below 1,000 points, above 12 features, when the Gaussian
    folds into one GEMM, or when a query's neighbourhood holds more than a
    dimension-dependent share of the data (15% up to 5 features, 7% up to 8,
    3% up to 12); a ball tree otherwise.  With the compiled kernels, from 4
    features on: at most 1% up to 5 features and 0.5% up to 8 (none beyond),
    in sets of at least 30,000 points beyond 5 features or for the Gaussian.
    ``share``: the neighbourhood's share when it is known (a nearest-neighbour
    span with a compact kernel), instead of the probe; brute force where the
    compiled span paths take the sums (a LOESS kernel in 1 to 3 dimensions:
    no tree to build for a fallback).  ``plain``: no categorical features and
    no span, the sums the tiled limits were measured on (else the earlier ones).
    """
    n, d = X.shape
    tiled = plain and compiled() is not None and d >= TILED_MIN_FEATURES
    table = _TILED_MAX_FRACTION if tiled else _TREE_MAX_FRACTION
    limits = [share for max_d, share in table.items() if d <= max_d]
    if n < _TREE_MIN_SAMPLES or not limits or _folds(X, kernel):
        return "brute"
    if tiled and n < _TILED_MIN_SAMPLES and (d > 5 or kernel.log_slope is not None):
        return "brute"
    if share is not None and kernel.power_form is not None and _span_paths(d):
        return "brute"
    if share is None or not kernel.compact:
        share = neighbour_fraction(X, log_w, kernel, rtol)
    if share > limits[0]:
        return "brute"
    return _TREE
