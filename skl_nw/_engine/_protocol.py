"""The leave-one-out protocol between a fitted smoother and ``BandwidthSearchCV``.

A fitted estimator's ``_leave_one_out()`` returns an object of this
interface, and the search uses nothing else of the estimator's private
state.  It is documented here once; the implementations (the engine's
:class:`~skl_nw._engine.LeaveOneOut` and
:class:`~skl_nw._engine._mixed.MixedLeaveOneOut`, the local polynomial
fits' and the binned path's) say only how they compute it.  What an
implementation can do beyond the common members is declared by an
attribute, never found out with ``hasattr``:

``takes_lambdas``
    True for the mixed-data objects: ``predictions`` and ``fits`` then take
    ``lambdas`` (every lambda vector from one pass), ``loss_grad``'s
    ``theta`` holds each categorical feature's transformed lambda beside the
    continuous features' log factors, and ``bandwidth_at(theta)`` maps it
    to a bandwidth vector (:class:`MixedLeaveOneOutProtocol`).

``tests/api/test_conformance.py`` runs every implementation through every
member, on every backend, kernel family and data kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = ["LeaveOneOutProtocol", "LossFn", "MixedLeaveOneOutProtocol"]

#: ``loss_fn(P, rows) -> (losses (len(rows),), dloss/dP (len(rows), k))`` of the search.
LossFn = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@runtime_checkable
class LeaveOneOutProtocol(Protocol):
    """Closed-form leave-one-out of a fitted smoother, at multiples of its bandwidth.

    Attributes
    ----------
    targets : ndarray of shape (n, k)
        What the leave-one-out predictions estimate (targets, or one-hot
        labels), in the caller's row order (every array below too).
    takes_lambdas : bool
        Whether the object is a :class:`MixedLeaveOneOutProtocol`.
    """

    targets: np.ndarray
    takes_lambdas: ClassVar[bool]

    def predictions(self, factors, n_jobs=None, rows=None) -> np.ndarray:
        """Leave-one-out predictions at bandwidths ``factor * bandwidth_``: (F, n, k).

        ``rows`` (training row indices) computes those rows' predictions
        only, (F, len(rows), k): what the search times to choose the backend
        and what lets it report progress between blocks of rows.
        """

    def fits(self, factors, n_jobs=None) -> tuple[np.ndarray, np.ndarray]:
        """In-sample fitted values (F, n, k) and hat diagonal (F, n) per multiple.

        ``H_ii`` is the weight of training point ``i`` (its sample weight
        included) in its own fit, so ``tr H = sum_i H_ii``: what the
        in-sample criteria (AICc, GCV) need.
        """

    def loss_grad(
        self, theta: np.ndarray, rows: np.ndarray, loss_fn: LossFn, row_weights: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Weighted leave-one-out loss at training ``rows`` and its gradient in ``theta``.

        ``theta`` holds log factors of the bandwidth (one per feature), so
        the bandwidth is ``exp(theta) * bandwidth_``; the loss is
        ``sum_r row_weights[r] loss_fn(P, rows)[0][r] / sum(row_weights)``.
        """


@runtime_checkable
class MixedLeaveOneOutProtocol(LeaveOneOutProtocol, Protocol):
    """The protocol on mixed data: lambda grids in one pass, lambdas learned by gradient."""

    def predictions(self, factors, n_jobs=None, rows=None, lambdas=None) -> np.ndarray:
        """As :meth:`LeaveOneOutProtocol.predictions`; (L, F, n, k) for ``lambdas`` (L, J)."""

    def fits(self, factors, n_jobs=None, lambdas=None):
        """As :meth:`LeaveOneOutProtocol.fits`; (L, F, ...) arrays for ``lambdas`` (L, J)."""

    def bandwidth_at(self, theta: np.ndarray) -> np.ndarray:
        """Return the bandwidth vector that ``theta`` of :meth:`loss_grad` stands for."""
