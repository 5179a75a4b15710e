"""What a grid search reports: GridSearchCV's ``cv_results_`` keys, and a best at an end."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import sklearn
from scipy.stats import rankdata

import skl_nw

__all__ = ["caller_level", "edge_of", "grid_results", "rename_results", "warn_at_edge"]

# Frames of these packages are not the user's: ours, and scikit-learn's fit wrapper.
_PACKAGES = tuple(os.path.dirname(os.path.abspath(m.__file__)) for m in (sklearn, skl_nw))


def caller_level() -> int:
    """Return the ``stacklevel`` of the first frame outside this package and scikit-learn.

    The search's routes warn from different depths; the warning names the
    user's line that called ``fit`` (or scikit-learn's function that did).
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGES):
        frame, level = frame.f_back, level + 1
    return level


def grid_results(candidates: list, scores, stds, fit_times, score_times) -> dict:
    """``cv_results_`` of a closed-form grid, with GridSearchCV's keys and meanings.

    Leave-one-out has one split per training row: their scores are not kept
    (``n_samples`` keys), their spread is ``std_test_score``.  Each
    candidate's time is its share of the work done for all of them at once.

    Parameters
    ----------
    candidates : list of ndarray
        The bandwidth vectors, in grid order.
    scores, stds : ndarray of shape (n_candidates,)
        Mean test score and standard deviation of the per-row scores (NaN
        where the score has no per-row terms).
    fit_times, score_times : ndarray of shape (n_candidates,)
        Seconds spent computing each candidate's predictions and scoring them.

    Returns
    -------
    dict of ndarray
    """
    n = len(candidates)
    param = np.ma.MaskedArray(np.empty(n, dtype=object), mask=False)
    param[:] = candidates
    scores = np.asarray(scores, dtype=float)
    return {
        "mean_fit_time": np.asarray(fit_times, dtype=float),
        "std_fit_time": np.zeros(n),
        "mean_score_time": np.asarray(score_times, dtype=float),
        "std_score_time": np.zeros(n),
        "param_bandwidth": param,
        "params": [{"bandwidth": h} for h in candidates],
        "mean_test_score": scores,
        "std_test_score": np.asarray(stds, dtype=float),
        # GridSearchCV ranks ties with method="min".
        "rank_test_score": rankdata(-scores, method="min").astype(np.int32),
    }


def rename_results(results: dict, key: str) -> dict:
    """Return the results with the parameter ``bandwidth`` called ``key`` (a pipeline step)."""
    renamed = {}
    for name, value in results.items():
        if name == "param_bandwidth":
            renamed[f"param_{key}"] = value
        elif name == "params":
            renamed[name] = [{key: p["bandwidth"]} for p in value]
        else:
            renamed[name] = value
    return renamed


def edge_of(candidates: list, best: int, continuous: np.ndarray | None) -> str | None:
    """Whether the best candidate has the grid's smallest or largest bandwidths.

    Candidates are ordered by the geometric mean of their continuous
    bandwidths (lambdas of categorical features left out): "smallest",
    "largest", or None where the best is interior (or every candidate has the
    same scale).
    """
    H = np.asarray(candidates, dtype=float)
    if continuous is not None:
        H = H[:, continuous]
    if H.shape[1] == 0:
        return None
    scale = np.exp(np.log(H).mean(axis=1))
    low, high = scale.min(), scale.max()
    if high <= low * (1 + 1e-9):
        return None
    if scale[best] <= low * (1 + 1e-9):
        return "smallest"
    if scale[best] >= high * (1 - 1e-9):
        return "largest"
    return None


def warn_at_edge(edge: str | None, bandwidths) -> None:
    """Warn that the selected bandwidth is an end of the grid (``edge`` from :func:`edge_of`)."""
    if edge is None:
        return
    beyond = "above" if edge == "largest" else "below"
    grid = "the grid given as bandwidths" if bandwidths is not None else (
        "the default grid, extended as far as it goes")  # fmt: skip
    example = "2.0 ** np.arange(0, 6)" if edge == "largest" else "2.0 ** -np.arange(0, 6)"
    limit = ("a global constant or polynomial fit: the features may not matter"
             if edge == "largest" else "the nearest other point's value")  # fmt: skip
    warnings.warn(
        f"The selected bandwidth is the {edge} candidate of {grid}: the score may still "
        f"improve {beyond} it. Pass bandwidths that reach {beyond} it, e.g. "
        f"bandwidths=[f * search.best_params_['bandwidth'] for f in {example}], or accept "
        f"the limit it tends to ({limit}).",
        UserWarning,
        stacklevel=caller_level(),
    )
