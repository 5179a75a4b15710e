"""Discrete kernels as data: one frozen record per categorical kernel, ``DISCRETE_KERNELS``.

Each record gives ``log L(a, b; lambda)`` of one categorical feature and its
derivative in ``lambda``; the product over the categorical features
multiplies the continuous kernel of :mod:`skl_nw._kernels`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._engine import LOG_ZERO  # log 0: see skl_nw._engine._discrete
from ._kernels import copy_fields

__all__ = ["DISCRETE_KERNELS", "LOG_ZERO", "DiscreteKernel", "get_discrete_kernel"]


@dataclass(frozen=True, repr=False)
class DiscreteKernel:
    """A kernel ``L(a, b; lambda)`` for one categorical feature, described as data.

    ``dist`` is ``|a - b|``: the distance between category codes for ordered
    features (a position in the order), and 0 (equal) or 1 (different) for
    unordered ones.  ``c`` is the number of categories of the feature.

    Attributes
    ----------
    name : str
        The kernel's name.
    ordered : bool
        Whether it compares ordered categories (by ``|a - b|``).
    log_value : callable
        ``(lambda, c, dist) -> log L``, floored at ``LOG_ZERO``.
    dlog_dlambda : callable
        ``(lambda, c, dist) -> d log L / d lambda`` (0 where ``L = 0``).
    max_lambda : callable
        ``c -> largest admissible lambda``; at it, an unordered kernel gives
        every category the same weight (the feature is ignored).
    max_closed : bool
        Whether ``max_lambda`` itself is admissible (Wang–van Ryzin: no, its
        weights would all be 0).
    """

    name: str
    ordered: bool
    log_value: Callable
    dlog_dlambda: Callable
    max_lambda: Callable[[int], float]
    max_closed: bool = True

    def __reduce__(self):
        return get_discrete_kernel, (self.name, self.ordered)

    def __getstate__(self) -> dict:
        return {"name": self.name, "ordered": self.ordered}

    def __setstate__(self, state: dict) -> None:
        copy_fields(self, get_discrete_kernel(state["name"], state["ordered"]))

    def __repr__(self) -> str:
        return (
            f"DiscreteKernel({self.name!r}, ordered={self.ordered!r}, "
            f"max_closed={self.max_closed!r})"
        )


def _floored(x) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.nan_to_num(np.log(x), nan=LOG_ZERO), LOG_ZERO)


def _over(a, b) -> np.ndarray:
    """Return ``a / b`` with 0 where ``b = 0`` (a derivative where the kernel value is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def _log_power(lam, dist) -> np.ndarray:
    """``log lambda^dist`` with ``0^0 = 1``, ``log 0`` taken as ``LOG_ZERO`` once per step."""
    with np.errstate(divide="ignore"):
        log_lam = np.maximum(np.log(np.asarray(lam, float)), LOG_ZERO)
    return np.where(dist == 0, 0.0, dist * log_lam)


def _aa_log(lam, c, dist):
    """``log`` of ``1 - lambda`` (same) or ``lambda / (c - 1)`` (different), with ``log 0``.

    At ``lambda = 0`` a mismatch is ``LOG_ZERO - log(c - 1)``: the ``lambda -> 0``
    limit keeps the factor ``1 / (c - 1)``.  One category (``c = 1``): an
    unseen one has weight 0 at any ``lambda``.
    """
    if c <= 1:
        return np.where(dist == 0, _floored(1.0 - lam), LOG_ZERO)
    return np.where(dist == 0, _floored(1.0 - lam), _log_power(lam, 1.0) - np.log(c - 1.0))


DISCRETE_KERNELS: dict[tuple[str, bool], DiscreteKernel] = {
    ("aitchison_aitken", False): DiscreteKernel(
        name="aitchison_aitken",
        ordered=False,
        log_value=_aa_log,
        dlog_dlambda=lambda lam, c, dist: np.where(
            dist == 0, _over(-1.0, 1.0 - lam), _over(1.0, lam)
        ),
        max_lambda=lambda c: (c - 1) / c,
    ),
    ("li_racine", False): DiscreteKernel(
        name="li_racine",
        ordered=False,
        log_value=lambda lam, c, dist: np.where(dist == 0, 0.0, _log_power(lam, 1.0)),
        dlog_dlambda=lambda lam, c, dist: np.where(dist == 0, 0.0, _over(1.0, lam)),
        max_lambda=lambda c: 1.0,
    ),
    ("wang_van_ryzin", True): DiscreteKernel(
        name="wang_van_ryzin",
        ordered=True,
        log_value=lambda lam, c, dist: (
            _floored(np.where(dist == 0, 1.0 - lam, 0.5 * (1.0 - lam))) + _log_power(lam, dist)
        ),
        dlog_dlambda=lambda lam, c, dist: np.where(
            dist == 0, _over(-1.0, 1.0 - lam), _over(-1.0, 1.0 - lam) + _over(dist, lam)
        ),
        max_lambda=lambda c: 1.0,
        max_closed=False,
    ),
    ("li_racine", True): DiscreteKernel(
        name="li_racine",
        ordered=True,
        log_value=lambda lam, c, dist: _log_power(lam, dist),
        dlog_dlambda=lambda lam, c, dist: _over(dist, lam),
        max_lambda=lambda c: 1.0,
    ),
}


def get_discrete_kernel(name: str, ordered: bool) -> DiscreteKernel:
    """Return the discrete kernel record ``name`` for unordered or ordered features.

    Raises
    ------
    ValueError
        If the name is unknown; the message lists the valid names.
    """
    try:
        return DISCRETE_KERNELS[name, ordered]
    except (KeyError, TypeError):
        valid = sorted(n for n, o in DISCRETE_KERNELS if o == ordered)
        which = "ordered_kernel" if ordered else "categorical_kernel"
        raise ValueError(f"Unknown {which}={name!r}; valid kernels are {valid}.") from None
