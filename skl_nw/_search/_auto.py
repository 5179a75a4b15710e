"""``method="auto"`` and ``per_feature="auto"`` of BandwidthSearchCV: the one place they resolve.

The rules, measured on three categorical columns, ``cv=3`` with two, and
ParzenClassifier on load_digits (``python -m benchmarks search_defaults``): the
closed-form grid is one pass for its 40 candidates and
finds the global optimum of one bandwidth scale, so it serves continuous
data; the default grid of mixed data is 40 x 7^J candidates for J categorical
features (13,720 for three: seconds to minutes, and a coarser optimum than
L-BFGS-B reaches in a fraction of a second), so there L-BFGS-B learns every
lambda from the rule of thumb; and a cross-validation that refits on every
split cannot afford that grid at all.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import is_classifier

from .._kernels import get_kernel
from ._paths import robust
from ._results import caller_level

__all__ = ["CENTRED_FACTORS", "resolve_method", "resolve_per_feature"]

# The small grid of a non-leave-one-out cv on mixed data: these multiples of the
# continuous bandwidths found by L-BFGS-B, crossed with each lambda at its value,
# at half of it, and halfway to its largest.
CENTRED_FACTORS = 2.0 ** (np.arange(-2, 3) / 2)


def resolve_method(ctx, cats, loo) -> str:
    """Return the method the search runs: ``method``, or what ``"auto"`` means.

    Parameters
    ----------
    ctx : Context
        The search's parameters.
    cats : categorical spec or None
        The categorical features of the data searched (None: continuous only).
    loo : callable
        Returns the estimator's protocol object fitted at the rule of thumb
        (whether it learns lambdas); called only where that decides.

    Returns
    -------
    str
        "grid", "sgd" or "lbfgs".
    """
    if ctx.method != "auto":
        if ctx.method != "grid":
            _check_fixed_weights(ctx)
            _warn_what_gradients_ignore(ctx)
        return ctx.method
    if robust(ctx.estimator):  # every candidate refitted: a grid
        return "grid"
    # Candidates given, or an in-sample criterion (AICc, GCV): they are scored on a grid.
    if ctx.bandwidths is not None or ctx.criterion != "loo":
        return "grid"
    # Continuous features only: 40 candidates in one closed-form pass, the global optimum
    # of one scale (a gradient method would need per-feature ARD to be worth its cost).
    if cats is None:
        return "grid"
    # A piecewise-constant kernel (tophat) has no gradient: only a grid moves it.
    if _flat(ctx):
        return "grid"
    # Categorical features: L-BFGS-B learns each lambda (the grid is 40 x 7^J candidates).
    return "lbfgs" if loo().takes_lambdas else "grid"


def _check_fixed_weights(ctx) -> None:
    """Raise where a gradient method would follow a loss whose robustness weights are stale."""
    if robust(ctx.estimator):
        raise ValueError(
            f"method={ctx.method!r} follows the leave-one-out gradient at the fit's "
            "robustness weights, but with robust_iterations > 0 those weights change with "
            "the bandwidth. Use method='grid' (or 'auto'), which refits every candidate, "
            "or robust_iterations=0."
        )


def _warn_what_gradients_ignore(ctx) -> None:
    """Warn where a gradient method cannot do what was asked: candidates, or a flat kernel."""
    if ctx.bandwidths is not None:
        warnings.warn(
            f"bandwidths is ignored by method={ctx.method!r}, which follows the gradient of "
            "the leave-one-out loss from the rule of thumb; it applies to method='grid' "
            "(and 'auto').",
            UserWarning,
            stacklevel=caller_level(),
        )
    if _flat(ctx):
        warnings.warn(
            f"method={ctx.method!r} cannot move the tophat kernel's bandwidth: its "
            "leave-one-out loss is piecewise constant (zero gradient), so the search returns "
            "its start, the rule of thumb. Use method='grid'.",
            UserWarning,
            stacklevel=caller_level(),
        )


def _flat(ctx) -> bool:
    """Whether the estimator's kernel is flat on its support (the tophat): no gradient."""
    kernel = get_kernel(ctx.estimator.get_params()["kernel"])
    s = np.array([0.1, 0.5])
    return bool(np.all(kernel.dlog_profile(s) == 0))


def resolve_per_feature(ctx) -> bool:
    """Return ``per_feature``, or what ``"auto"`` means: per feature for regressors only.

    A classifier's log-loss over many features has many shallow directions:
    per-feature bandwidths cost a pass per feature's gradient terms and
    overfit the leave-one-out loss (load_digits: see the module docstring),
    where one common multiple of the rule of thumb is fast and better.
    """
    if ctx.per_feature != "auto":
        return bool(ctx.per_feature)
    return not is_classifier(ctx.estimator)
