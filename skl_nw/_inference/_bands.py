"""What the intervals need besides the formulas: the bias-corrected sibling fit and the warnings.

Robust bias correction (Calonico, Cattaneo & Farrell 2018) with the pilot
bandwidth equal to the main one (``rho = h / b = 1``) makes the bias-corrected
local polynomial estimate the local polynomial fit of a higher degree at the
same bandwidth (Calonico, Cattaneo & Titiunik 2014 for ``p = 1``), and its
robust variance that fit's variance.  The degree is the next even one
(:func:`corrected_degree`): at an interior point the leading bias of an even
degree ``p`` is of order ``h^(p + 2)``, that of the odd degree ``p + 1``
too, so Nadaraya–Watson's ``h^2`` bias (curvature) is removed by the local
quadratic fit, not the local linear one (which removes its boundary bias
only: ``benchmarks/bench_coverage.py`` covered the peak of ``sin 2 pi x`` 14%
of the time at ``h = 0.06``, ``n = 1000``).  :func:`local_sibling` builds that
fit over the estimator's own fitted training set (no refit, no copy of the
data); the intervals are then the sibling's.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "BIAS_CORRECTIONS",
    "EXTRAPOLATING",
    "corrected_degree",
    "local_sibling",
    "warn_outside",
    "warn_zero_width",
]

BIAS_CORRECTIONS = ("none", "robust")
# Bandwidths beyond the training range before a local polynomial fit is said to extrapolate.
_SLACK = 1.0
#: What the extrapolation warning's message matches (a filter's ``message`` regex).
EXTRAPOLATING = r".* queries lie more than .* outside the range of the training inputs"


def corrected_degree(degree: int) -> int:
    """Return the degree of the robust bias-corrected fit of a degree-``degree`` one: the next even.

    Examples
    --------
    >>> [corrected_degree(p) for p in range(4)]
    [2, 2, 4, 4]
    """
    return degree + 2 if degree % 2 == 0 else degree + 1


def local_sibling(estimator, degree: int):
    """Return a fitted :class:`LocalPolynomialRegressor` of ``degree`` sharing the fit.

    The training set, kernel, bandwidth and categorical encoding are the
    estimator's (a shallow copy: nothing is refitted or copied); ``estimator``
    itself is unchanged.  A binned fit gives its exact training set, as the
    intervals of the binned path do.
    """
    from .._smoothers._local_poly import LocalPolynomialRegressor  # it imports this module

    sibling = LocalPolynomialRegressor.__new__(LocalPolynomialRegressor)
    sibling.__dict__.update(estimator.__dict__)  # shallow: the fitted arrays are shared
    sibling.degree = degree
    sibling._backend = estimator._backend.as_exact()
    return sibling


def warn_zero_width(std: np.ndarray, mean: np.ndarray) -> None:
    """Warn when some intervals have zero width: a standard error of 0 at a finite fit."""
    zero = (std == 0) & np.isfinite(mean)
    if zero.any():
        rows = int(zero.reshape(len(zero), -1).any(axis=1).sum())
        warnings.warn(
            f"{rows} of {len(zero)} queries have a standard error of 0 and a zero-width "
            "interval, which covers nothing: the query has one effective neighbour (a "
            "compact kernel with a single training point, or none, within its support and "
            "the nearest-point fallback; or a query far from the data). Use a wider "
            "bandwidth or an infinite-support kernel (gaussian).",
            UserWarning,
            stacklevel=3,
        )


def warn_outside(Q: np.ndarray, Qtrain: np.ndarray, degree: int) -> None:
    """Warn when a local polynomial fit (``degree >= 1``) is asked far outside the training range.

    ``Q`` and ``Qtrain`` are the continuous columns in units of the bandwidth.
    More than :data:`_SLACK` bandwidths beyond the data (along a feature) the
    fit extrapolates its local polynomial from the edge points, and its
    prediction and standard error are unreliable (x = 1.5 for data on
    [0, 1] at h = 0.05: 13.7 +- 6.2 for sin 2 pi x); within it, the kernel
    still weighs the edge points as at the boundary.
    """
    if degree < 1 or not len(Q) or not len(Qtrain) or not Q.shape[1]:
        return
    lo, hi = Qtrain.min(axis=0) - _SLACK, Qtrain.max(axis=0) + _SLACK
    outside = ((Q < lo) | (Q > hi)).any(axis=1)
    if outside.any():
        warnings.warn(
            f"{int(outside.sum())} of {len(Q)} queries lie more than {_SLACK:g} bandwidth "
            "outside the range of the training inputs: the local polynomial of degree "
            f"{degree} is extrapolated there, and its predictions and standard errors are "
            "unreliable.",
            UserWarning,
            stacklevel=4,
        )
