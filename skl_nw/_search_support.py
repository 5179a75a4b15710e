"""What BandwidthSearchCV uses besides its class.

Estimators that score precomputed predictions, losses, the merging of repeated
rows, progress lines, scorer and routing helpers, and the measured choice of
the leave-one-out backend.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.metrics import get_scorer
from sklearn.pipeline import Pipeline
from sklearn.utils.metadata_routing import get_routing_for_object

from ._base import _NWBase
from ._kernels import get_kernel

# Probabilities below this are clipped in the log-loss, as sklearn.metrics.log_loss does.
PROBA_FLOOR = np.finfo(np.float64).eps
# verbose=1 prints at most one progress line per this many seconds (tests set it to 0).
PROGRESS_INTERVAL = 5.0

_ESTIMATOR_ERROR = (
    "estimator must be a NadarayaWatsonRegressor, a ParzenClassifier, a "
    "LocalPolynomialRegressor, or a Pipeline whose last step is one of them; got {}. To "
    "tune a bandwidth after preprocessing, pass make_pipeline(StandardScaler(), "
    "NadarayaWatsonRegressor()) or put BandwidthSearchCV last in the pipeline."
)


def _nw_step(estimator):
    """Return the kernel estimator searched: ``estimator`` or its pipeline's last step.

    A Nadaraya–Watson regressor, a Parzen classifier or a local polynomial
    regressor; None when there is none (any other estimator, or a pipeline
    not ending in one).
    """
    if isinstance(estimator, Pipeline) and estimator.steps:
        estimator = estimator.steps[-1][1]
    return estimator if isinstance(estimator, _NWBase) else None


def _say(message: str) -> None:
    print(f"[BandwidthSearchCV] {message}", flush=True)  # noqa: T201


def _bandwidths(h: np.ndarray, verbose: int) -> str:
    """Format bandwidths for a progress line: their range, or every entry at verbose >= 3."""
    if verbose >= 3:
        return "[" + ", ".join(f"{v:.4g}" for v in h) + "]"
    low, high = float(np.min(h)), float(np.max(h))
    return f"{low:.4g}" if low == high else f"{low:.4g}..{high:.4g}"


def _backend(estimator) -> str:
    """Name the neighbour search a fitted estimator uses, from its public ``tree_``."""
    tree = estimator.tree_
    if tree is None:
        return "brute force"
    return type(tree[0] if isinstance(tree, list) else tree).__name__


class _Progress:
    """The clock of one search and its throttled progress lines (verbose >= 1)."""

    def __init__(self, verbose: int):
        self.verbose = verbose
        self.start = self.last = time.monotonic()

    def update(self, done: int, total: int, unit: str, bound: bool = False) -> None:
        """Report ``done`` of ``total`` units, at most once per ``PROGRESS_INTERVAL``."""
        now = time.monotonic()
        if self.verbose < 1 or done >= total or now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        elapsed = now - self.start
        left = elapsed * (total - done) / done
        _say(
            f"{done}/{total} {unit} ({done / total:.0%}), {elapsed:.1f} s elapsed, "
            f"about {left:.1f} s left{' at most' if bound else ''}"
        )

    def note(self, message: str) -> None:
        """Print ``message``, at most once per ``PROGRESS_INTERVAL`` with the other lines."""
        now = time.monotonic()
        if self.verbose < 1 or now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        _say(f"{message}, {now - self.start:.1f} s elapsed")

    def elapsed(self) -> float:
        return time.monotonic() - self.start


class _DefaultScorer:
    """The default score, asking for the metadata the estimator's ``score`` asks for.

    Negative mean squared error for regressors, negative log-loss for
    classifiers.  Like scikit-learn's default scorer (``estimator.score``), it
    routes as the estimator's ``set_score_request`` says, so metadata routing
    never needs a request on a scorer that the user cannot reach.
    """

    def __init__(self, estimator):
        self.estimator = estimator
        classifier = is_classifier(estimator)
        self.scorer = get_scorer("neg_log_loss" if classifier else "neg_mean_squared_error")
        # Regression residuals are divided by this power of two before squaring (exact):
        # the search sets it near the spread of y and converts the scores back.
        self.unit = 1.0

    def __call__(self, estimator, X, y_true, sample_weight=None):
        if is_classifier(self.estimator):
            weights = {} if sample_weight is None else {"sample_weight": sample_weight}
            return self.scorer(estimator, X, y_true, **weights)
        residual = (np.asarray(y_true) - estimator.predict(X)) / self.unit
        squares = (residual**2).reshape(len(residual), -1).mean(axis=1)
        return -float(np.average(squares, weights=sample_weight))

    def __repr__(self) -> str:
        return f"{self.scorer!r} as {type(self.estimator).__name__}.score"

    def get_metadata_routing(self):
        return get_routing_for_object(self.estimator)


class _Routed(NamedTuple):
    """Where ``fit``'s ``sample_weight`` goes."""

    fit: dict  # to the estimator's (or the pipeline's) fit
    search: dict  # to GridSearchCV.fit
    nw: np.ndarray | None  # the Nadaraya–Watson estimator's fit weights
    score: np.ndarray | None  # the scorer's weights
    pre: dict  # to the pipeline's preceding steps (fit_transform)


class _LOORegressor(BaseEstimator):
    """Identity 'estimator' that lets any scorer score precomputed predictions."""

    def predict(self, P):
        return P

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "regressor"
        return tags


class _LOOClassifier(BaseEstimator):
    """Identity classifier: ``predict_proba`` returns the given probabilities."""

    def __init__(self, classes):
        self.classes = classes
        self.classes_ = classes

    def predict_proba(self, P):
        # Pooled one-hot rows sum to 1 up to rounding; metrics reject 1 + 1e-16.
        return np.clip(P, 0.0, 1.0)

    def predict_log_proba(self, P):
        return np.log(np.maximum(P, PROBA_FLOOR))

    def predict(self, P):
        return self.classes_[np.argmax(P, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "classifier"
        return tags


def _squared_error(Y: np.ndarray):
    def loss(P, rows):
        residual = P - Y[rows]
        k = Y.shape[1]
        return (residual**2).sum(axis=1) / k, 2.0 * residual / k

    return loss


def _log_loss(Y: np.ndarray):
    labels = np.argmax(Y, axis=1)

    def loss(P, rows):
        idx = np.arange(len(rows))
        p = np.maximum(P[idx, labels[rows]], PROBA_FLOOR)
        R = np.zeros_like(P)
        R[idx, labels[rows]] = -1.0 / p
        return -np.log(p), R

    return loss


def _collapse(X: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Merge identical (x, y) rows, summing their weights; drop zero weights.

    With frequency weights a row of weight 3 *is* three identical rows, so the
    leave-one-out loss must leave identical rows out together
    (leave-one-location-out); merging them first makes integer weights and
    repeated rows give the same data, and stops exact duplicates from pulling
    the bandwidth to 0.

    The rows come back sorted lexicographically by (x, y), each merged row
    the first of its group (what ``np.unique(axis=0)`` gives, without its
    sort of row records).  A stable sort of the first feature settles the
    common case: no tie there, no duplicate rows, and the labels are never
    sorted.
    """
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    order = np.argsort(X[:, 0], kind="stable")
    first_column = X[order, 0]
    if np.all(first_column[1:] != first_column[:-1]):  # every row distinct
        return X[order], y[order], w[order].astype(np.float64)
    codes = _label_codes(y)
    columns = [X[:, j] for j in range(X.shape[1])] + [codes]
    order, new = _sorted_groups(columns)
    first = order[new]
    weights = np.bincount(np.cumsum(new) - 1, weights=w[order], minlength=len(first))
    return X[first], y[first], weights


def _sorted_groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stable lexicographic order of rows given as columns, and where each run of equal rows starts.

    Returns ``order`` (first column the primary key) and ``new``, True at the
    sorted positions whose row differs from the previous one.
    """
    order = np.lexsort(columns[::-1])
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for column in columns:
        c = column[order]
        new[1:] |= c[1:] != c[:-1]
    return order, new


def _label_codes(y: np.ndarray) -> np.ndarray:
    """Integer codes of the targets' rows, increasing with the rows' sorted order.

    Labels may be strings (object arrays have no lexicographic sort of rows):
    one-dimensional targets through ``np.unique``, numeric rows by a
    lexicographic sort of their columns.
    """
    if y.ndim == 1:
        return np.unique(y, return_inverse=True)[1]
    if y.dtype.kind not in "biuf":
        return np.unique(y, axis=0, return_inverse=True)[1].ravel()
    order, new = _sorted_groups([y[:, j] for j in range(y.shape[1])])
    codes = np.empty(len(y), dtype=np.intp)
    codes[order] = np.cumsum(new) - 1
    return codes


# With algorithm="auto", the closed-form grid times both backends on this share of
# the training rows (at least _PROBE_MIN_ROWS rows) and runs the faster on all of them.
_PROBE_SHARE = 1 / 100
_PROBE_MIN_ROWS = 32
# Below this size algorithm="auto" is brute force at every bandwidth (its own rule).
_PROBE_MIN_SAMPLES = 1_000


def loo_base(estimator, X, y, w, bandwidth, factors, n_jobs):
    """Fit ``estimator`` at ``bandwidth`` to score the candidates ``factors * bandwidth``.

    The backend serves the whole candidate set, so with ``algorithm="auto"``
    it is decided once for that set, by measurement: brute force computes each
    chunk's distances once for every candidate, a tree one radius query at the
    widest candidate's radius, whose neighbours every narrower candidate
    reuses.  Which is cheaper depends on how many neighbours the wide
    candidates have, so both are fitted and timed on an evenly spaced 1% of
    the training rows, and the faster serves all of them (results agree to
    ``rtol`` either way; only the time differs).  For infinite-support
    kernels the tree is timed only where ``algorithm="auto"`` would choose
    one at the widest candidate.

    Returns
    -------
    fitted : estimator
        The fitted estimator, whose ``_leave_one_out()`` the search uses.
    """
    est = clone(estimator).set_params(bandwidth=bandwidth)
    n = len(X)
    params = est.get_params()
    # binned_tol: the user asked for the binned approximation where "auto" takes it.
    if params.get("algorithm") != "auto" or params.get("binned_tol") or n < _PROBE_MIN_SAMPLES:
        return est.fit(X, y, w)
    candidates = ("brute", "ball_tree")
    if not get_kernel(est.get_params()["kernel"]).compact:
        # Infinite support: a tree's narrow candidates are as wide as its truncation
        # radius, so the widest candidate decides; algorithm="auto" at that bandwidth
        # says whether a tree is worth timing at all.
        widest = clone(est).set_params(bandwidth=bandwidth * np.max(factors)).fit(X, y, w)
        if widest.tree_ is None:
            return est.set_params(algorithm="brute").fit(X, y, w)
    probe = np.unique(np.linspace(0, n - 1, max(_PROBE_MIN_ROWS, int(n * _PROBE_SHARE))))
    probe = probe.astype(np.intp)
    best = None
    for algorithm in candidates:
        start = time.perf_counter()
        fitted = clone(est).set_params(algorithm=algorithm).fit(X, y, w)
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        fitted._leave_one_out().predictions(factors, n_jobs=n_jobs, rows=probe)
        cost = fit_time + (time.perf_counter() - start) * n / len(probe)
        if best is None or cost < best[0]:
            best = (cost, fitted)
    return best[1]
