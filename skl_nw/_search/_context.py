"""The context of one search: its settings, the data's encoding, the scorer and the units of y.

Every route of :class:`BandwidthSearchCV` (the closed-form grid, GridSearchCV,
L-BFGS-B, Adam, the mixed-data grid, spans, proper scores) is a function of a
:class:`Context` and the data that returns a :class:`Selection`.  Routes read
the settings and use the context's services (candidates, scores, units,
progress); they never reach the search itself, which only builds the context,
picks the route and records the selection (``BandwidthSearchCV.fit``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import is_classifier

from .. import _categorical
from .._inference._formulas import criterion_parts, infinite_criterion, negated_criterion
from .._inference._methods import standardized
from .._smoothers._base import rule_of_thumb
from . import _mixed
from ._progress import Progress
from ._routing import _takes_weights, names_sample_weight
from ._rows import _collapse
from ._scoring import PROBA_FLOOR, _LOOClassifier, _LOORegressor

# Integer weights a scorer without sample_weight sees as repeated rows, up to this many.
_MAX_REPEATED = 1 << 24

__all__ = ["DEFAULT_FACTORS", "Context", "Selection"]

# Default grid: multiples of the per-feature rule of thumb, log-spaced.
# 40 log-spaced multiples from 2^-5.5 = 0.022 to 2^4.25 = 19: a step of 2^(1/4),
# so every other candidate is the bandwidth over sqrt(2), whose Gaussian kernel
# values are the squares of the previous ones (the engine reuses them).
DEFAULT_FACTORS = 2.0 ** (np.arange(-22, 18) / 4)


@dataclass
class Selection:
    """What a route selected: the fitted attributes it sets on the search.

    ``best_params_`` refits the estimator (the skeleton does it) unless the
    route refitted it already (``best_estimator_``: GridSearchCV's routes).
    """

    best_params_: dict
    best_score_: float
    n_iter_: int
    method_: str = "grid"
    best_index_: int | None = None
    cv_results_: dict | None = None
    loss_curve_: list | None = None
    span_: float | None = None
    best_estimator_: object | None = None


@dataclass
class Context:
    """The search's parameters (as given) and the state of one ``fit``.

    Built by :meth:`of` from the search; a route that searches something
    else (a pipeline's last step, L-BFGS-B inside a small grid) runs on
    :meth:`replace`'s copy.
    """

    estimator: object
    method: str
    bandwidths: object
    spans: object
    cv: object
    scoring: object
    criterion: str
    per_feature: object
    max_iter: int
    learning_rate: float
    batch_size: object
    tol: float | None
    n_iter_no_change: int
    random_state: object
    n_jobs: int | None
    verbose: int
    scorer: object = None
    # The state of one fit (no parameters: replace() starts it afresh).
    method_: str | None = field(default=None, init=False)  # the method run, once resolved
    progress: Progress | None = field(default=None, init=False)
    y_unit: float = field(default=1.0, init=False)  # the scaled targets' unit
    # Seconds of predictions and of scoring, and (sigma^2, tr H, n) per block of criteria.
    grid_time: list = field(default_factory=lambda: [0.0, 0.0], init=False)
    criterion_terms: list = field(default_factory=list, init=False)
    encoded: tuple | None = field(default=None, init=False, repr=False)
    # A route's state kept across its candidates (the CRPS pair matrices).
    cache: dict = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def of(cls, search, scorer) -> Context:
        """Return the context of ``search``'s parameters, scoring with ``scorer``.

        The parameters are read as the search's attributes: a subclass's own
        parameters stay on the subclass.
        """
        names = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "scorer"]
        return cls(**{name: getattr(search, name) for name in names}, scorer=scorer)

    def replace(self, **changes) -> Context:
        """Return a fresh context with some parameters changed (no state carried over)."""
        return dataclasses.replace(self, **changes)

    # --------------------------------------------------------- data and candidates
    def categories_of(self, X, w=None):
        """Return the categorical features of ``X`` and X as codes (Nones), once per ``X``.

        ``w``: the fits' weights, whose rows of positive weight hold the
        categories (as the estimator's fit learns them).
        """
        if self.encoded is None or self.encoded[0] is not X or self.encoded[1] is not w:
            self.encoded = (X, w, *_categorical.encode(self.estimator, X, w))
        return self.encoded[2], self.encoded[3]

    def merged(self, X, y: np.ndarray, w: np.ndarray) -> tuple:
        """``X, y, w`` with repeated (x, y) rows merged, their weights summed (``_collapse``)."""
        cats, Xnum = self.categories_of(X, w)
        if cats is None:
            return _collapse(X, y, w)
        return _mixed.collapse(X, Xnum, y, w, _collapse)

    def continuous_mask(self, X) -> np.ndarray | None:
        """Which features of ``X`` are continuous (None: all of them)."""
        cats, _ = self.categories_of(X)
        return None if cats is None else ~cats.mask

    def base_bandwidth(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Return the rule of thumb the default candidates are multiples of."""
        rule = self.estimator.bandwidth
        rule = rule if isinstance(rule, str) else "scott"
        cats, Xnum = self.categories_of(X, w)
        if cats is not None:
            return _mixed.base_bandwidth(cats, Xnum, rule, w)
        return rule_of_thumb(X, rule, w)

    def candidates(self, X: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        """Candidate bandwidth vectors, validated."""
        cats, _ = self.categories_of(X, w)
        if self.bandwidths is None:
            base = self.base_bandwidth(X, w)
            if cats is not None:
                return _mixed.candidates(cats, base, DEFAULT_FACTORS)[0]
            return [factor * base for factor in DEFAULT_FACTORS]
        continuous = np.ones(X.shape[1], bool) if cats is None else ~cats.mask
        candidates = [_candidate(value, X.shape[1], continuous) for value in self.bandwidths]
        if not candidates:
            raise ValueError("bandwidths must hold at least one candidate; got an empty list.")
        return candidates

    # ------------------------------------------------------------- units of y
    def scaled_targets(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Regression targets in units of a power of two near their spread (classes as given).

        The closed-form routes select on these: every leave-one-out prediction,
        fit and residual scales by the unit exactly, so the choice is that of
        ``y`` itself, and the squared residuals neither overflow (``y ~ 1e200``)
        nor underflow (``y ~ 1e-200``).  :meth:`in_y_units` converts back.
        """
        if is_classifier(self.estimator):
            self.y_unit = 1.0
            return y
        self.y_unit = float(standardized(y.reshape(len(y), -1), w)[2].max())
        return y / self.y_unit

    def in_y_units(self, scores):
        """Scores of the scaled targets in the units of ``y`` (see :meth:`scaled_targets`).

        The default squared error and GCV scale by the unit squared (an
        overflow is that of the true value), AICc shifts by ``-2 log unit``; a
        given ``scoring`` already scored predictions in the units of ``y``.
        """
        unit = np.float64(self.y_unit)
        if self.criterion == "aicc":
            return scores - 2.0 * np.log(unit)
        if self.criterion == "gcv" or self.scoring is None:
            with np.errstate(over="ignore"):  # beyond the float range: -inf, as it is
                return scores * unit * unit
        return scores

    def loss_in_y_units(self, loss: float) -> float:
        """Return a squared-error (or log) loss of the scaled targets in the units of ``y``."""
        unit = np.float64(self.y_unit)
        with np.errstate(over="ignore"):
            return float(loss * unit * unit)

    # ------------------------------------------------------------------ scores
    def score(self, base, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        """Score precomputed out-of-sample predictions ``P`` with the scorer."""
        if np.isnan(P).any():  # fallback="nan": some point had no neighbour
            return -np.inf
        if self.scoring is None:
            # The default scores, computed directly: the scorer machinery
            # validates its inputs on every call, a sixth of a small grid's time.
            return float(np.average(_row_scores(base, P, y), weights=w))
        if is_classifier(base):
            return weighted_score(self.scorer, _LOOClassifier(base.classes_), P, y, w)
        P = P[:, 0] if y.ndim == 1 else P
        unit = self.y_unit  # the scorer sees the units of y
        return weighted_score(self.scorer, _LOORegressor(), P * unit, y * unit, w)

    def row_std(self, base, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
        """Weighted standard deviation of the per-row scores (the leave-one-out splits).

        NaN for a given ``scoring`` (a score of one row is not defined for
        every metric) and where some row had no neighbour.
        """
        if self.scoring is not None or np.isnan(P).any():
            return np.nan
        s = _row_scores(base, P, y)
        mean = np.average(s, weights=w)
        return float(np.sqrt(np.average((s - mean) ** 2, weights=w)))

    def criterion_scores(self, fits, hat, yu, wu) -> np.ndarray:
        """Negated in-sample criterion per candidate; keeps its parts for an error message."""
        sigma2, trace, n = criterion_parts(fits, hat, yu.reshape(len(yu), -1), wu)
        self.criterion_terms.append((sigma2, trace, n))
        return negated_criterion(sigma2, trace, n, self.criterion)

    def unscorable(self) -> str:
        """Why no candidate has a finite score (the error message)."""
        if self.criterion != "loo":
            sigma2, trace, n = zip(*self.criterion_terms, strict=True)
            return infinite_criterion(np.concatenate(sigma2), np.concatenate(trace), n[0],
                                      self.criterion)  # fmt: skip
        return (
            "No candidate bandwidth could be scored: with fallback='nan' every candidate "
            "left some training point without a neighbour."
        )


def check_two_points(count: int, who: str, points: str = "training points") -> None:
    """Raise where fewer than 2 ``points`` of positive weight score each other.

    The routes that leave each point out (closed form, spans, the CRPS) say so
    in the words scikit-learn's checks look for ("1 sample").
    """
    if count < 2:
        raise ValueError(
            f"{who} needs at least 2 {points} with positive weight; got {count} (1 sample)."
        )


def _candidate(value, d: int, continuous: np.ndarray) -> np.ndarray:
    """One given candidate as a bandwidth vector of shape (d,), validated."""
    h = np.asarray(value)
    if h.dtype.kind not in "iuf" or h.ndim > 1 or h.size not in (1, d):
        raise ValueError(
            "bandwidths must be a list of positive floats or of arrays of shape "
            f"(n_features,) = ({d},); got {value!r}."
        )
    h = np.broadcast_to(h.astype(np.float64), (d,)).copy()
    if not (np.all(np.isfinite(h)) and np.all(h[continuous] > 0) and np.all(h >= 0)):
        raise ValueError(
            "bandwidths must be finite and positive (lambdas of categorical features: "
            f">= 0); got {value!r}."
        )
    return h


def _row_scores(base, P: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's term of the default score (log-likelihood, or minus squared error)."""
    if is_classifier(base):
        p = P[np.arange(len(P)), np.searchsorted(base.classes_, y)]
        return np.log(np.clip(p, PROBA_FLOOR, 1 - PROBA_FLOOR))
    Y = y.reshape(len(y), -1)
    return -((P - Y) ** 2).mean(axis=1)


def weighted_score(scorer, est, P: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """``scorer(est, P, y)`` with the rows weighted by ``w`` (sample weights, merged counts).

    Equal weights: no weights.  A scorer whose metric takes no
    ``sample_weight`` (a plain callable, ``max_error``) sees integer weights
    as repeated rows; other weights it cannot take raise.
    """
    if np.all(w == w[0]):
        return float(scorer(est, P, y))
    # A plain callable f(est, X, y, sample_weight=...) names the weights itself; a
    # scikit-learn scorer's metric decides (its own __call__ always names them).
    plain = not hasattr(scorer, "_score_func") and names_sample_weight(scorer)
    if plain or _takes_weights(scorer):
        return float(scorer(est, P, y, sample_weight=w))
    if np.all(w == np.round(w)) and w.sum() <= _MAX_REPEATED:
        counts = w.astype(np.intp)
        return float(scorer(est, np.repeat(P, counts, axis=0), np.repeat(y, counts, axis=0)))
    raise ValueError(
        f"scoring={scorer!r} takes no sample_weight, and the leave-one-out scores weight each "
        "row by its sample weight (and repeated rows, merged, by their count). Use a scorer "
        "whose metric takes sample_weight, integer weights, or an integer cv."
    )
