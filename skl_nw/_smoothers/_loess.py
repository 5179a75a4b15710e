"""LOESS on the estimators: the span's neighbour count and Cleveland's robustness iterations.

``span`` (NadarayaWatsonRegressor, LocalPolynomialRegressor, ParzenClassifier)
gives each query the radius of its ``k = floor(span * n)`` nearest training rows
in the metric ``||(x - q) / bandwidth_||`` (the engine's ``_span``);
``robust_iterations`` (the two regressors) refits with Cleveland's (1979)
bisquare weights of the in-sample residuals.  The estimators call
:func:`build` instead of their ``_build``; nothing else of theirs knows either.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils._param_validation import Interval

__all__ = [
    "ROBUST_CONSTRAINTS",
    "SPAN_CONSTRAINTS",
    "bisquare",
    "build",
    "neighbour_count",
    "one_target",
]

SPAN_CONSTRAINTS = {"span": [Interval(Real, 0, None, closed="neither"), None]}
ROBUST_CONSTRAINTS = {"robust_iterations": [Interval(Integral, 0, None, closed="left")]}
# Robustness weights are B(e / (_MAD_MULTIPLE * median |e|)), Cleveland's 6.
_MAD_MULTIPLE = 6.0
# median |e| at most this share of max |y| is rounding (an exact fit), and stops the
# iterations as 0 does: the fits' rounding is ~1e-16 to 1e-14 of |y|.  A larger share
# stopped real noise: 1e-10 took y + 1e10 with noise 0.2 for an exact fit.
_ROUNDING_MAD = 2.0**8 * np.finfo(np.float64).eps
# span * n within this relative distance below an integer counts as that integer
# (0.29 * 100 = 28.999999999999996 is 29 rows, as statsmodels' frac * n + 1e-10 rounds).
_COUNT_RTOL = 1e-10


def neighbour_count(span: float, n: int) -> tuple[int, float]:
    """Return ``(k, enlarge)``: ``k = floor(span n)`` in ``[1, n]``; ``sqrt(span)`` beyond 1.

    R's ``loess`` multiplies the squared distance to the farthest row by
    ``span`` when ``span > 1`` (its ``ehg127``), so the radius grows by
    ``sqrt(span)`` in every dimension.

    Examples
    --------
    >>> neighbour_count(0.3, 100), neighbour_count(4.0, 10)
    ((30, 1.0), (10, 2.0))
    """
    k = int(np.floor(span * n * (1.0 + _COUNT_RTOL)))
    return min(max(k, 1), n), float(np.sqrt(span)) if span > 1 else 1.0


def bisquare(u: np.ndarray) -> np.ndarray:
    """Tukey's biweight ``(1 - u^2)^2`` for ``|u| < 1``, else 0 (``inf`` included)."""
    u = np.asarray(u, dtype=np.float64)
    inside = np.abs(u) < 1.0
    return np.where(inside, np.square(1.0 - np.square(np.where(inside, u, 0.0))), 0.0)


def one_target(est, y: np.ndarray) -> np.ndarray:
    """Return ``y``; with robustness iterations a column ``y`` raveled, as the tags say.

    One robustness weight per row: ``multi_output`` is False for such a fit,
    so a column vector is taken as scikit-learn's single-output estimators
    take it (a ``DataConversionWarning``), and more columns raise in
    :func:`build`.
    """
    if getattr(est, "robust_iterations", 0) and y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected (robust_iterations "
            "> 0 takes one target). Please change the shape of y to (n_samples, ), for "
            "example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
        return y[:, 0]
    return y


def _check(est, Xs: np.ndarray, Y: np.ndarray) -> None:
    """Raise the errors of span and robustness, before any work."""
    cats = getattr(est, "_categories", None)
    continuous = Xs.shape[1] if cats is None else int((~cats.mask).sum())
    if getattr(est, "span", None) is not None and continuous == 0:
        raise ValueError(
            "span needs a continuous feature (its radii are distances in them); this X has "
            "categorical features only. Use span=None, which smooths the categories by "
            "their own bandwidths."
        )
    if getattr(est, "robust_iterations", 0) and Y.shape[1] > 1:
        raise ValueError(
            "robust_iterations > 0 takes a 1-D y (one robustness weight per row); got y "
            f"with {Y.shape[1]} columns. Fit one estimator per target, or set "
            "robust_iterations=0."
        )


def _apply_span(est, w: np.ndarray) -> None:
    """Nearest-neighbour radii on the fitted training set (rows of positive ``w`` count)."""
    est.n_neighbors_ = None
    if getattr(est, "span", None) is None:
        return
    counted = w > 0
    k, enlarge = neighbour_count(est.span, int(counted.sum()))
    est._backend = est._backend.with_neighbours(k, enlarge, counted)
    est.n_neighbors_ = k


def build(est, X, Xs: np.ndarray, w: np.ndarray, values: np.ndarray, groups=None) -> None:
    """Build the training set, with the span's radii, then the robustness iterations.

    ``X`` is the input of ``fit`` (the in-sample fits predict it).  Each
    iteration refits with weights ``w * delta``, ``delta = B(e / (6 s))`` of
    the residuals ``e`` of the previous fit at the training rows and ``s``
    their median absolute value (over the rows of positive weight; rows,
    not weights, as LOESS).  The rows that count towards the span stay those
    of positive ``w``: a robustness weight of 0 removes a row from the fits,
    not from the neighbour count.  ``s`` at rounding level (at most
    ``2^8 eps`` of the largest ``|y|``: half the rows fitted exactly) stops the
    iterations: the weights of the last fit stay.  A row without a fit
    (``fallback="nan"``) keeps its weight, and its residual does not count.
    """
    _check(est, Xs, values)
    est._frequency = w  # the sample weights alone, without the robustness weights
    est._build(Xs, w, values, groups)
    _apply_span(est, w)
    iterations = getattr(est, "robust_iterations", None)
    if iterations is None:
        return
    delta = np.ones(len(values))
    rows = w > 0
    flat = _ROUNDING_MAD * float(np.abs(values[rows, 0]).max(initial=0.0))
    for _ in range(iterations):
        e = values[:, 0] - np.reshape(est.predict(X), len(values))
        fitted = np.isfinite(e)
        counted = e[rows & fitted]
        s = float(np.median(np.abs(counted))) if counted.size else 0.0
        if not s > flat:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            delta = np.where(fitted, bisquare(e / s / _MAD_MULTIPLE), delta)
        est._build(Xs, w * delta, values, groups)
        _apply_span(est, w)
    est.robust_weights_ = delta
