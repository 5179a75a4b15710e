"""Local fits whose moments lost their digits, refitted about an origin of their own.

A local fit's moments about a query ``q`` come from raw moments about the
training inputs' centre by a binomial expansion (:mod:`skl_nw._engine._local_fit`),
which cancels where ``q`` lies many of its neighbourhood's spreads from that
centre: ``eps (|q| / s)^(2p)`` relative, 30% off in a local quadratic 250
bandwidths out.  :func:`local_fits` finds such queries
(:func:`skl_nw._engine.lost_digits`), groups them by place, and takes each
group's sums again with value columns about the group's own origin, from which
the expansion is short: the engine's one primitive, other value columns.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from .. import _engine
from .._engine import LOST_DIGITS, Moments, lost_digits
from ._local_variance import local_sums

__all__ = ["local_fits", "recentre"]

# Refits cost a pass over the training rows per group: above this many rows times
# groups, the queries are left as they are, and the warning says so.
_REFIT_ROWS = 1 << 27


def local_fits(est, Q: np.ndarray, mom: Moments, degree: int, solve: Callable,
               powers=(1,), values=None, extra=None) -> list[np.ndarray]:  # fmt: skip
    """Run ``solve(q, sums) -> (outputs, Mq)`` over every query; refit the ones that lost digits.

    ``outputs`` is a tuple of arrays with one row per query of the block
    (``q`` centred, as :func:`local_sums` gives it), ``Mq`` the moments about
    ``q``.  Returns the outputs for all of ``Q``.
    """
    train, options = est._exact_train(), est._options()
    out = []

    def refit(rows: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """Fit the queries ``rows`` about ``origin``; return those that lost their digits."""
        still = []
        for block, qo, sums in local_sums(est, Q[rows], mom, powers, values, extra,
                                          origin=origin):  # fmt: skip
            parts, Mq = solve(qo, sums)
            if not out:
                out.extend(np.empty((len(Q), *part.shape[1:])) for part in parts)
            for whole, part in zip(out, parts, strict=True):
                whole[rows[block]] = part
            still.append(rows[block][lost_digits(mom, Mq, Q[rows[block]], qo, train,
                                                 degree, options)])  # fmt: skip
        return np.concatenate(still) if still else np.empty(0, np.intp)

    pending = refit(np.arange(len(Q)), np.zeros(train.d))  # about the centre: one pass
    q = Q[:, : train.d] - train.center
    reach = lambda rows: _engine.reach(Q[rows], train, options)  # noqa: E731
    recentre(pending, q, reach, degree, train.n_samples, refit)
    return out


def recentre(pending, q, reach: Callable, degree: int, n_train: int, refit: Callable,
             once: bool = False) -> None:  # fmt: skip
    """Refit the ``pending`` fits in groups, each about its members' mean; warn for the rest.

    ``q`` (m, d) the fits' places in the centred units, ``reach(rows)`` their
    kernel's reach there, ``refit(rows, origin) -> rows`` refits ``rows``
    about ``origin`` and returns those still flagged.  Groups are as wide as
    the threshold allows for a spread of a quarter of the reach; the fits
    still flagged about their group's origin go to groups 8 times narrower.
    ``once``: one round, no warning (the training rows' own fits, whose
    windows still flagged about their group's mean are their own row alone,
    at the smallest bandwidths a search tries: rounds of narrower groups cost
    a pass each, 10 s for a search of 1 s).
    """
    if not pending.size:  # also every fit of degree 0, which has no expansion to lose
        return
    m, factor = len(q), 0.25 * (LOST_DIGITS / np.finfo(float).eps) ** (1.0 / (2 * degree))
    while pending.size and factor >= 0.1:
        groups = _groups(q[pending], factor * reach(pending))
        if len(groups) * n_train > _REFIT_ROWS:
            break
        still = [refit(pending[g], q[pending[g]].mean(axis=0)) for g in groups]
        pending, factor = np.concatenate(still), factor / 8
        if once:
            return
    if pending.size:
        _warn(len(pending), m, degree)


def _groups(q: np.ndarray, width: np.ndarray) -> list[np.ndarray]:
    """Group the queries within ``width`` of a first one (along every feature): index arrays.

    ``width`` (each query's kernel reach; a pair is within the smaller) keeps
    every member's moments about the group's mean a few spreads from the
    member: the expansion from there loses nothing.
    """
    left, groups = np.arange(len(q)), []
    while left.size:
        near = np.abs(q[left] - q[left[0]]).max(axis=1) <= np.minimum(width[left], width[left[0]])
        groups.append(left[near])
        left = left[~near]
    return groups


def _warn(far: int, m: int, degree: int) -> None:
    warnings.warn(
        f"{far} of {m} queries lie so far from the training inputs' centre, in units of "
        "their neighbourhood's spread, that the moments of their local fit lost most digits "
        f"(about eps (distance / spread)^{2 * degree}), and could not be refitted about "
        "origins of their own (too many groups of them, or windows too narrow): those fits "
        "may be inexact or drop to a lower degree. Widen the bandwidth or span, or predict "
        "fewer such queries at a time.",
        UserWarning,
        stacklevel=5,
    )
