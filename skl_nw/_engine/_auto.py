"""The rule of ``algorithm="auto"``, with its measured constants, in one place."""

from __future__ import annotations

import numpy as np

from .._kernels import Kernel
from . import _grid
from ._chunks import single_threaded_blas
from ._dense import gemm_exact, sq_distances
from ._loader import compiled
from ._train import TrainSet
from ._tree import log_margin

# Crossovers measured on the project's 2-core machine over 240 configurations
# (d in 1..12, n in 1e3..1e5, epanechnikov and gaussian, 0.1-10% of the data per
# neighbourhood): ``python -m benchmarks trees --only crossover``; the timings of
# every configuration are docs/_static/benchmarks/auto_*.csv (docs/benchmarks.md,
# "Choosing the algorithm").  With these rules no configuration was more than
# 1.5x slower than the better of brute and tree (with the compiled kernels: a
# validation run after the search over two others).
# The smallest n measured: below it brute force takes well under a millisecond
# per thousand queries, whatever a tree would save.
_TREE_MIN_SAMPLES = 1_000
# A tree pays while a query's neighbourhood (the kernel's support, or the
# truncation radius of an infinite-support kernel) holds at most this share of
# the data, in sets of at least this many points: (largest d, share, smallest n)
# by increasing d; the share shrinks with the dimension, and beyond 12 features
# (not measured) a radius query visits most leaves.
_LIMITS = (
    (5, 0.15, _TREE_MIN_SAMPLES),
    (8, 0.07, _TREE_MIN_SAMPLES),
    (12, 0.03, _TREE_MIN_SAMPLES),
)
# With the compiled kernels brute force runs in register tiles from 4 features on
# (2-10x the passes _LIMITS were measured against), and the Gaussian's in one fused
# pass at any d, folded or not (rows past the folded product's rounding bound take
# direct differences): a tree pays only for smaller neighbourhoods, never beyond 8
# features, and for the Gaussian never beyond 5 nor below 10,000 points.  Measured
# for continuous features without a span (the others keep _LIMITS).
_COMPILED_LIMITS = ((3, 0.15, _TREE_MIN_SAMPLES), (5, 0.03, _TREE_MIN_SAMPLES), (8, 0.005, 30_000))
_COMPILED_GAUSSIAN_LIMITS = ((3, 0.02, 10_000), (5, 0.01, 30_000))
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
    """Whether brute force will take the folded single-GEMM path (``_folded.FoldedKeys``).

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
    3% up to 12); a ball tree otherwise.  With the compiled kernels: 15% up
    to 3 features, 3% up to 5 and 0.5% up to 8 (from 30,000 points), and
    for the Gaussian 2% up to 3 (from 10,000 points), 1% up to 5 (from
    30,000), none beyond.  ``share``: the neighbourhood's share when it is
    known (a nearest-neighbour span with a compact kernel), instead of the
    probe; brute force where the compiled span paths take the sums (a LOESS
    kernel in 1 to 3 dimensions: no tree to build for a fallback).
    ``plain``: no categorical features and no span, the sums the compiled
    limits were measured on (else the others).
    """
    n, d = X.shape
    table = _LIMITS
    if plain and compiled() is not None:
        gaussian = kernel.log_slope is not None
        table = _COMPILED_GAUSSIAN_LIMITS if gaussian else _COMPILED_LIMITS
    limit = next(((share, least) for max_d, share, least in table if d <= max_d), None)
    if limit is None or n < limit[1] or _folds(X, kernel):
        return "brute"
    if share is not None and kernel.power_form is not None and _span_paths(d):
        return "brute"
    if share is None or not kernel.compact:
        share = neighbour_fraction(X, log_w, kernel, rtol)
    if share > limit[0]:
        return "brute"
    return _TREE
