"""BandwidthSearchCV's candidates, rules of thumb and scores (a mixin of the search)."""

from __future__ import annotations

import numpy as np
from sklearn.base import is_classifier

from .. import _categorical
from .._inference._methods import standardized
from .._smoothers._base import rule_of_thumb
from . import _mixed
from ._scoring import PROBA_FLOOR, _LOOClassifier, _LOORegressor

__all__ = ["DEFAULT_FACTORS", "_Candidates"]

# Default grid: multiples of the per-feature rule of thumb, log-spaced.
# 40 log-spaced multiples from 2^-5.5 = 0.022 to 2^4.25 = 19: a step of 2^(1/4),
# so every other candidate is the bandwidth over sqrt(2), whose Gaussian kernel
# values are the squares of the previous ones (the engine reuses them).
DEFAULT_FACTORS = 2.0 ** (np.arange(-22, 18) / 4)


class _Candidates:
    """What the routes of :class:`BandwidthSearchCV` score, and how."""

    def _categories_of(self, X):
        """Return the categorical features of ``X`` and X as codes (Nones), once per ``X``.

        The search asks for them in several places about the same array
        (the merged rows): each asks the one encoding, kept until ``fit`` ends.
        """
        cached = getattr(self, "_encoded", None)
        if cached is None or cached[0] is not X:
            cached = self._encoded = (X, *_categorical.encode(self.estimator, X))
        return cached[1], cached[2]

    def _continuous_mask(self, X) -> np.ndarray | None:
        """Which features of ``X`` are continuous (None: all of them)."""
        cats, _ = self._categories_of(X)
        return None if cats is None else ~cats.mask

    def _base_bandwidth(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        rule = self.estimator.bandwidth
        rule = rule if isinstance(rule, str) else "scott"
        cats, Xnum = self._categories_of(X)
        if cats is not None:
            return _mixed.base_bandwidth(cats, Xnum, rule, w)
        return rule_of_thumb(X, rule, w)

    def _candidates(self, X: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        """Candidate bandwidth vectors, validated."""
        cats, _ = self._categories_of(X)
        if self.bandwidths is None:
            base = self._base_bandwidth(X, w)
            if cats is not None:
                return _mixed.candidates(cats, base, DEFAULT_FACTORS)[0]
            return [factor * base for factor in DEFAULT_FACTORS]
        continuous = np.ones(X.shape[1], bool) if cats is None else ~cats.mask
        candidates = []
        for value in self.bandwidths:
            h = np.asarray(value)
            if h.dtype.kind not in "iuf" or h.ndim > 1 or h.size not in (1, X.shape[1]):
                raise ValueError(
                    "bandwidths must be a list of positive floats or of arrays of shape "
                    f"(n_features,) = ({X.shape[1]},); got {value!r}."
                )
            h = np.broadcast_to(h.astype(np.float64), (X.shape[1],)).copy()
            if not (np.all(np.isfinite(h)) and np.all(h[continuous] > 0) and np.all(h >= 0)):
                raise ValueError(
                    "bandwidths must be finite and positive (lambdas of categorical features: "
                    f">= 0); got {value!r}."
                )
            candidates.append(h)
        if not candidates:
            raise ValueError("bandwidths must hold at least one candidate; got an empty list.")
        return candidates

    def _scaled_targets(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Regression targets in units of a power of two near their spread (classes as given).

        The closed-form routes select on these: every leave-one-out prediction,
        fit and residual scales by the unit exactly, so the choice is that of
        ``y`` itself, and the squared residuals neither overflow (``y ~ 1e200``)
        nor underflow (``y ~ 1e-200``).  :meth:`_in_y_units` converts back.
        """
        if is_classifier(self.estimator):
            self._y_unit = 1.0
            return y
        self._y_unit = float(standardized(y.reshape(len(y), -1), w)[2].max())
        return y / self._y_unit

    def _in_y_units(self, scores):
        """Scores of the scaled targets in the units of ``y`` (see :meth:`_scaled_targets`).

        The default squared error and GCV scale by the unit squared (an
        overflow is that of the true value), AICc shifts by ``-2 log unit``; a
        given ``scoring`` already scored predictions in the units of ``y``.
        """
        unit = np.float64(getattr(self, "_y_unit", 1.0))
        if self.criterion == "aicc":
            return scores - 2.0 * np.log(unit)
        if self.criterion == "gcv" or self.scoring is None:
            with np.errstate(over="ignore"):  # beyond the float range: -inf, as it is
                return scores * unit * unit
        return scores

    def _loss_in_y_units(self, loss: float) -> float:
        """Return a squared-error (or log) loss of the scaled targets in the units of ``y``."""
        unit = np.float64(getattr(self, "_y_unit", 1.0))
        with np.errstate(over="ignore"):
            return float(loss * unit * unit)

    def _row_scores(self, base, P: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Each row's term of the default score (log-likelihood, or minus squared error)."""
        if is_classifier(base):
            p = P[np.arange(len(P)), np.searchsorted(base.classes_, y)]
            return np.log(np.clip(p, PROBA_FLOOR, 1 - PROBA_FLOOR))
        Y = y.reshape(len(y), -1)
        return -((P - Y) ** 2).mean(axis=1)

    def _score(self, base, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        """Score precomputed out-of-sample predictions ``P`` with the scorer."""
        if np.isnan(P).any():  # fallback="nan": some point had no neighbour
            return -np.inf
        if self.scoring is None:
            # The default scores, computed directly: the scorer machinery
            # validates its inputs on every call, a sixth of a small grid's time.
            return float(np.average(self._row_scores(base, P, y), weights=w))
        if is_classifier(base):
            return float(self._scorer(_LOOClassifier(base.classes_), P, y, sample_weight=w))
        P = P[:, 0] if y.ndim == 1 else P
        unit = getattr(self, "_y_unit", 1.0)  # the scorer sees the units of y
        return float(self._scorer(_LOORegressor(), P * unit, y * unit, sample_weight=w))

    def _row_std(self, base, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        """Weighted standard deviation of the per-row scores (the leave-one-out splits).

        NaN for a given ``scoring`` (a score of one row is not defined for
        every metric) and where some row had no neighbour.
        """
        if self.scoring is not None or np.isnan(P).any():
            return np.nan
        s = self._row_scores(base, P, y)
        mean = np.average(s, weights=w)
        return float(np.sqrt(np.average((s - mean) ** 2, weights=w)))
