"""What both estimators share: rules of thumb, sample weights, validation, engine hand-off."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.metrics import r2_score
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_is_fitted,
    validate_data,
)

from .. import _categorical, _engine
from .._discrete_kernels import DISCRETE_KERNELS
from .._engine import power_of_two
from .._kernels import KERNELS, get_kernel
from . import _binning
from ._backends import BinnedBackend, ExactBackend

__all__ = ["check_weights", "power_of_two", "rule_of_thumb"]

_RULES = ("scott", "silverman")
_ALGORITHMS = ("auto", "brute", "kd_tree", "ball_tree", "binned")
# Scaled coordinates beyond this would overflow when squared and summed.
_MAX_SCALED = 1e150


def _mid_range(X: np.ndarray) -> np.ndarray:
    """Each column's mid-range (0 where its range passes the float maximum, or no rows)."""
    if not len(X):
        return np.zeros(X.shape[1])
    low, high = X.min(axis=0), X.max(axis=0)
    with np.errstate(over="ignore"):
        return np.where(np.isfinite(high - low), 0.5 * low + 0.5 * high, 0.0)


def target_frame(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(centre, unit)`` of targets (n, k): the end of each column's range nearest 0.

    Local polynomial fits are linear in ``y`` and reproduce constants, so
    they are fitted to ``(Y - centre) / unit`` (``unit`` a power of two) and
    read back: the moments ``y t^g`` of ``y + 1e9`` cancelled in the solve
    (0.18 off a local cubic whose targets spread over 2), and those of
    ``y ~ 1e308`` overflowed.  The centre is 0 for a column that takes both
    signs, else the end of its range nearest 0, so that ``|y - centre| <=
    |y|`` for every target: no fit is less exact than without it.
    """
    if not len(Y):
        return np.zeros(Y.shape[1]), np.ones(Y.shape[1])
    low, high = Y.min(axis=0), Y.max(axis=0)
    centre = np.where(low > 0, low, np.where(high < 0, high, 0.0))
    spread = np.maximum(high - centre, centre - low)  # no overflow: one side is 0
    return centre, power_of_two(spread)


def _span_unit(X: np.ndarray, h: np.ndarray) -> float:
    """Return a power of two ``u`` that puts the widest half-range within ``(u h, 4 u h]``.

    From the exponents of the half-ranges and the widths: no quotient to
    overflow, and ``u h`` never passes the half-range (finite).  1.0 without
    a spread.
    """
    if not len(X):
        return 1.0
    with np.errstate(over="ignore"):
        half = 0.5 * X.max(axis=0) - 0.5 * X.min(axis=0)
    spread = half > 0
    if not spread.any():
        return 1.0
    _, e_half = np.frexp(half[spread])
    _, e_h = np.frexp(h[spread])
    return float(np.ldexp(1.0, int(np.max(e_half - e_h)) - 1))


def _weighted_scale(x: np.ndarray, w: np.ndarray) -> float:
    """Robust scale ``min(std, IQR / 1.349)`` of one feature with frequency weights.

    A zero IQR (a feature that is mostly constant) falls back to the standard
    deviation, and a constant feature to 1.0, so the bandwidth is never zero.
    Weighted quantiles use the inverted CDF, so integer weights give exactly
    the scale of the data with repeated rows.
    """
    support = x[w > 0]
    if support.min() == support.max():
        # Zero spread.  Tested exactly: the weighted mean of a constant is not
        # always that constant, and its rounding would give a std of ~1e-16 |x|.
        return 1.0
    # Scale first, square later: in units of a power of two near max |x| (exact),
    # the squares neither overflow (|x| ~ 1e200) nor underflow (|x| ~ 1e-200).
    unit = power_of_two(np.maximum(support.max(), -support.min()))
    x, w = support / unit, w[w > 0] / power_of_two(w.max())  # w.sum() may overflow
    mean = np.average(x, weights=w)
    std = np.sqrt(np.average((x - mean) ** 2, weights=w))
    q1, q3 = np.quantile(x, [0.25, 0.75], weights=w, method="inverted_cdf")
    iqr = (q3 - q1) / 1.349
    positive = [s for s in (std, iqr) if s > 0 and np.isfinite(s)]
    return float(min(positive) * unit) if positive else 1.0


def check_weights(sample_weight: ArrayLike | None, X: np.ndarray) -> np.ndarray:
    """Non-negative float64 sample weights with a positive sum (ones for None)."""
    w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    if not w.sum() > 0:  # older scikit-learn lets all-zero weights through
        raise ValueError("sample_weight must have a positive sum; got all zeros.")
    return w


def rule_of_thumb(
    X: ArrayLike, rule: str = "scott", sample_weight: ArrayLike | None = None
) -> np.ndarray:
    """Per-feature rule-of-thumb bandwidths.

    ``h_j = scale_j * factor``, where ``scale_j = min(std_j, IQR_j / 1.349)``
    is a robust scale of feature ``j`` (so the rule follows each feature's
    units, unlike a single scalar) and the factor is Scott's
    ``n^(-1 / (d + 4))`` or Silverman's ``(n (d + 2) / 4)^(-1 / (d + 4))``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Training inputs.
    rule : {"scott", "silverman"}, default="scott"
        Which factor to use.
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights: ``n = sum(sample_weight)``, weighted std and
        quantiles, so integer weights equal repeated rows.

    Returns
    -------
    ndarray of shape (n_features,)
        Positive bandwidths.  A feature of zero spread gets a scale of 1.0
        (a constant feature shifts every distance equally, so any positive
        bandwidth gives the same Gaussian weights).

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import rule_of_thumb
    >>> X = np.column_stack([np.arange(100.0), 1000 * np.arange(100.0)])
    >>> rule_of_thumb(X).round(2)
    array([   13.4 , 13398.44])
    """
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got {rule!r}.")
    X = check_array(X, dtype=np.float64, input_name="X")  # 2-D, finite, some rows
    w = np.ones(len(X)) if sample_weight is None else check_weights(sample_weight, X)
    d = X.shape[1]
    scales = np.array([_weighted_scale(X[:, j], w) for j in range(d)])
    return scales * rule_factor(w, d, rule)


def rule_factor(w: np.ndarray, d: int, rule: str) -> float:
    """Return the rules' factor ``n^(-1/(d+4))`` (Scott) or ``(n (d+2)/4)^(-1/(d+4))`` (Silverman).

    ``n = sum(w)``: its log taken in units of the largest weight, finite for
    any finite weights.
    """
    unit = power_of_two(w.max())
    total = (w / unit).sum()
    warn_few_observations(total * unit, np.count_nonzero(w))
    log_n = np.log(unit) + np.log(total)
    if rule == "silverman":
        log_n += np.log((d + 2) / 4.0)
    return float(np.exp(-log_n / (d + 4)))


def warn_few_observations(total: float, rows: int) -> None:
    """Warn where frequency weights count ``rows >= 2`` rows as fewer than 2 observations."""
    if total < 2 <= rows:
        warnings.warn(
            f"sample_weight sums to {total:.3g}: the default bandwidths read the weights as "
            f"frequencies (n = sum(sample_weight)), so these {rows} rows count as {total:.3g} "
            "observations and the rules of thumb smooth accordingly. Pass the weights as "
            "counts (for instance divided by their mean) or give the bandwidths.",
            UserWarning,
            stacklevel=3,
        )


def default_lambdas(cats, w: np.ndarray, n_continuous: int, warn: bool) -> np.ndarray:
    """Return the categorical default lambdas at ``n = sum(w)``; warn of few observations."""
    if warn:
        warn_few_observations(w.sum(), np.count_nonzero(w))
    return cats.default_lambdas(w.sum(), n_continuous)


class _RegressorMixin(RegressorMixin):
    """scikit-learn's regressor mixin with an R^2 that does not depend on the scale of y."""

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Return the coefficient of determination R^2 of the predictions of ``X``.

        As :meth:`sklearn.base.RegressorMixin.score`, computed on ``y`` and
        the predictions divided by one power of two near their largest
        magnitude (an exact division, which R^2 does not see), so that the squares of the
        residuals neither overflow (``y ~ 1e200``) nor underflow
        (``y ~ 1e-200``); the weights alike (their sums near ``1e308``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            True targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            R^2 of ``self.predict(X)`` against ``y``.
        """
        pred = self.predict(X)
        Y = np.asarray(y, dtype=np.float64)
        both = np.concatenate([Y.reshape(len(Y), -1), pred.reshape(len(pred), -1)])
        unit = power_of_two(np.abs(both).max()) if both.size else 1.0
        if sample_weight is not None:  # R^2 does not see their scale; their sums stay finite
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            sample_weight = sample_weight / power_of_two(np.abs(sample_weight).max(initial=0.0))
        return float(r2_score(Y / unit, pred / unit, sample_weight=sample_weight))


class _NWBase(BaseEstimator):
    """Shared parameters, validation and scaling of both estimators."""

    #: Whether the binned path also serves the closed-form leave-one-out (the
    #: search's binned grid); a fit whose leave-one-out is exact on every
    #: algorithm says False.
    _binned_leave_one_out: bool = True

    _parameter_constraints: dict = {
        "bandwidth": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions(set(_RULES)),
            "array-like",
        ],
        "kernel": [StrOptions(set(KERNELS))],
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "rtol": [Interval(Real, 0, 1, closed="left")],
        "binned_tol": [Interval(Real, 0, 1, closed="neither"), None],
        "n_jobs": [Integral, None],
        "categorical_features": [StrOptions({"from_dtype"}), "array-like", None],
        "ordered_features": [StrOptions({"from_dtype"}), "array-like", None],
        "categorical_kernel": [StrOptions({n for n, o in DISCRETE_KERNELS if not o})],
        "ordered_kernel": [StrOptions({n for n, o in DISCRETE_KERNELS if o})],
    }

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        # The kernel record holds functions (lambdas); keep its name only, so that
        # pickle and skops.io store plain data (skops cannot load a lambda).
        if "_kernel" in state:
            state = {**state, "_kernel": state["_kernel"].name}
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state.get("_kernel"), str):
            state = {**state, "_kernel": get_kernel(state["_kernel"])}
        if "_fit_method" in state:  # pickled before the backend object: rebuild it
            state = dict(state)
            method, binned = state.pop("_fit_method"), state.pop("_binned", None)
            train = state.pop("_train", None)
            state["_backend"] = (
                BinnedBackend(binned) if method == "binned"
                else ExactBackend(train, method, grouped=isinstance(state.get("tree_"), list))
            )  # fmt: skip
        super().__setstate__(state)

    def _validate_fit(self, X, y, sample_weight=None, **kwargs):
        """``validate_data`` at fit; categorical columns become codes (learned here).

        Sets ``is_categorical_``, ``is_ordered_`` and ``categories_`` (those of
        the rows of positive ``sample_weight``).  Numeric targets
        (``y_numeric=True``: the regressors) come back as float64.
        """
        Xv, y = self._validate_inputs(X, y, sample_weight, **kwargs)
        if kwargs.get("y_numeric"):
            y = np.asarray(y, dtype=np.float64)
        return Xv, y

    def _validate_inputs(self, X, y, sample_weight=None, **kwargs):
        self._categories = _categorical.resolve(self, X)
        cats = getattr(self, "_categories", None)
        _categorical.check_numeric(X, None if cats is None else cats.mask)
        if cats is None:
            Xv, y = validate_data(self, X, y, dtype=np.float64, **kwargs)
            self.is_categorical_ = self.is_ordered_ = np.zeros(Xv.shape[1], bool)
            self.categories_ = []
            return Xv, y
        Xv, y = validate_data(self, X, y, dtype=None, ensure_all_finite=False, **kwargs)
        positive = None if sample_weight is None else check_weights(sample_weight, Xv) > 0
        Xv = cats.fit(X, Xv, positive)
        self.is_categorical_, self.is_ordered_ = cats.mask.copy(), cats.ordered.copy()
        self.categories_ = [c.copy() for c in cats.categories]
        return Xv, y

    def _resolve_bandwidth(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        cats = getattr(self, "_categories", None)
        if cats is None:
            return self._resolve_continuous(X, w)
        h = np.empty(X.shape[1])
        given = not isinstance(self.bandwidth, str) and np.ndim(self.bandwidth) == 1
        cont = ~cats.mask
        if given:
            h[:] = self._resolve_continuous(X, w)
        elif cont.any():
            h[cont] = self._resolve_continuous(X[:, cont], w)
        if not given:  # the rule of thumb has warned of few observations, if it ran
            ruled = cont.any() and isinstance(self.bandwidth, str)
            h[cats.mask] = default_lambdas(cats, w, int(cont.sum()), warn=not ruled)
        cats.check_lambdas(h[cats.mask])
        return h

    def _resolve_continuous(self, X: np.ndarray, w: np.ndarray) -> np.ndarray:
        n_features = X.shape[1]
        if isinstance(self.bandwidth, str):
            return rule_of_thumb(X, self.bandwidth, w)
        h = np.asarray(self.bandwidth)
        if h.dtype.kind not in "iuf":
            raise ValueError(
                "bandwidth must be a positive float, an array of positive floats of "
                f"shape (n_features,) = ({n_features},) or one of {_RULES}; got an "
                f"array of dtype {h.dtype}."
            )
        if h.ndim > 1 or h.size not in (1, n_features) or (h.ndim == 1 and h.size != n_features):
            raise ValueError(
                f"bandwidth must be a scalar or have shape (n_features,) = ({n_features},); "
                f"got shape {h.shape}."
            )
        h = np.broadcast_to(h.astype(np.float64), (n_features,)).copy()
        cats = getattr(self, "_categories", None)
        # All features (a per-feature array holds lambdas too), or the continuous ones only.
        whole = cats is not None and n_features == cats.mask.size
        continuous = h[~cats.mask] if whole else h
        if not (np.all(np.isfinite(h)) and np.all(continuous > 0)):
            raise ValueError(f"bandwidth must be finite and positive; got {h}.")
        return h

    def _scale(self, X: np.ndarray, name: str = "X") -> np.ndarray:
        """Return the engine's queries: ``(X - origin) / bandwidth_``, or with log-kernel rows.

        The second form, ``[(X_cont - origin) / h, log-kernel rows]``, with
        categorical features (see :mod:`skl_nw._categorical`).  Shift first,
        scale later: ``origin``, the training inputs' mid-range, leaves
        coordinates of the data's spread, so that inputs far from 0 (``1e12
        + N(0, 1)``) keep their digits; ``X / h`` rounded them at the offset's
        size (relative errors of 6e-4 at ``h = 0.6``).
        """
        cats = getattr(self, "_categories", None)
        cont = slice(None) if cats is None else ~cats.mask
        Xc = X[:, cont]
        origin = getattr(self, "_origin", None)  # None: a fit pickled before it
        if origin is not None:
            with np.errstate(over="ignore"):  # an overflow is the error raised below
                Xc = Xc - origin
        Xs = self._divide(Xc, self._widths(), name)
        if cats is None:
            return Xs
        rows = cats.log_rows(X[:, cats.mask], self.bandwidth_[cats.mask])
        return np.hstack([Xs, rows])

    def _widths(self) -> np.ndarray:
        """Return the continuous widths of the engine's inputs: ``bandwidth_`` in the span's unit.

        With a span a common multiple of the bandwidths changes no fit (each
        radius is a distance in their metric), so span fits scale by a power
        of two of their own (:func:`_span_unit`): ``bandwidth=1.0`` on inputs
        of 1e-200 or 1e80 keeps its moments and squared distances in range.
        """
        cats = getattr(self, "_categories", None)
        h = self.bandwidth_ if cats is None else self.bandwidth_[~cats.mask]
        return h * getattr(self, "_unit", 1.0)  # None: a fit pickled before it

    @staticmethod
    def _divide(X: np.ndarray, h: np.ndarray, name: str) -> np.ndarray:
        with np.errstate(over="ignore"):  # an overflow is the error raised below
            Xs = X / h
        # max(max, -min): no |Xs| temporary of the data's size (NaN propagates).
        if Xs.size and not np.maximum(Xs.max(), -Xs.min()) < _MAX_SCALED:
            raise ValueError(
                f"{name} divided by bandwidth_ overflows (|x / h| >= {_MAX_SCALED:g}); "
                "choose a larger bandwidth or rescale the features."
            )
        return Xs

    def _fit_inputs(
        self, X: np.ndarray, sample_weight, *, checked: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Resolve kernel and bandwidth; return the scaled X and the sample weights.

        ``checked``: ``sample_weight`` is already :func:`check_weights`'s output.
        """
        w = sample_weight if checked else check_weights(sample_weight, X)
        self._kernel = get_kernel(self.kernel)
        self.bandwidth_ = self._resolve_bandwidth(X, w)
        cats = getattr(self, "_categories", None)
        Xc = X[w > 0][:, slice(None) if cats is None else ~cats.mask]
        self._origin = _mid_range(Xc)
        self._unit = 1.0  # the span's unit of the widths (refits start from 1)
        if getattr(self, "span", None) is not None:
            self._unit = _span_unit(Xc, self._widths())
        return self._scale(X), w

    def _build(self, Xs: np.ndarray, w: np.ndarray, values: np.ndarray, groups=None) -> None:
        """Choose the algorithm (the one place that does); hand the training set to the engine."""
        cats = getattr(self, "_categories", None)
        if cats is not None and self.algorithm == "binned":
            named = ", ".join(cats.label(j) for j in cats.columns)
            raise ValueError(
                "algorithm='binned' takes continuous features only; this X has categorical "
                f"feature(s) {named}. Use algorithm='auto', 'brute' or a tree."
            )
        binned = None if cats is not None else _binning.training(self, Xs, w, values)
        if binned is not None:  # "binned", or "auto" with binned_tol
            self._backend = BinnedBackend(binned)
            self.tree_ = None
            return
        with np.errstate(divide="ignore"):
            log_w = np.log(w)
        discrete = {}
        if cats is not None:
            n_cont = int((~cats.mask).sum())
            discrete = {"codes": cats.codes, "code_rows": Xs[:, n_cont:],
                        "n_categories": cats.sizes}  # fmt: skip
            Xs = Xs[:, :n_cont]
        if self.algorithm != "auto":
            method = self.algorithm
        else:
            span = getattr(self, "span", None)  # a span's neighbourhoods hold its share
            share = None if span is None else min(float(span), 1.0)
            plain = cats is None and span is None
            method = _engine.choose_algorithm(Xs, log_w, self._kernel, self.rtol, share, plain)
        if Xs.shape[1] == 0:  # categorical features only: nothing for a tree to search
            method = "brute"
        train = _engine.prepare_train(
            Xs, log_w=log_w, values=values, groups=groups,
            algorithm=method, leaf_size=self.leaf_size, **discrete,
        )  # fmt: skip
        self._backend = ExactBackend(train, method, grouped=groups is not None)
        self.tree_ = self._backend.trees()

    @property
    def _fit_method(self) -> str:
        """The algorithm the fit chose: "brute", "kd_tree", "ball_tree" or "binned"."""
        return self._backend.method

    def _binned_training(self, Xs: np.ndarray, w: np.ndarray, values: np.ndarray, tol: float):
        """Return the training side of the binned path (pooled kernel sums here)."""
        return _engine.BinnedSums(Xs, w, values, self._kernel, tol, self.rtol)

    def _options(self) -> _engine.Options:
        return _engine.Options(rtol=self.rtol, n_jobs=self.n_jobs)

    def _queries(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        cats = getattr(self, "_categories", None)
        if cats is not None:  # the columns' names and count before their contents
            if not hasattr(X, "columns") and np.ndim(X) != 2:  # as check_array says it
                check_array(X, dtype=None, ensure_all_finite=False, input_name="X")
            validate_data(self, X, reset=False, skip_check_array=True)
        _categorical.check_numeric(X, None if cats is None else cats.mask)
        if cats is None:
            return self._scale(validate_data(self, X, reset=False, dtype=np.float64))
        Xv = validate_data(self, X, reset=False, dtype=None, ensure_all_finite=False)
        return self._scale(cats.encode(X, Xv))

    def _exact_train(self):
        """Return the exact training set (the fitted one, or built from a binned fit).

        What the operations that the binned path does not approximate use
        (attention weights, standard errors, gradients, intervals, densities).
        """
        return self._backend.exact()

    def _attention(self, X: ArrayLike, fallback: str, sparse: bool):
        Q = self._queries(X)
        # The binned path's attention weights are the exact ones (see its docs).
        return _engine.attention(
            Q, self._exact_train(), self._kernel,
            fallback=fallback, sparse=sparse, options=self._options(),
        )  # fmt: skip

    def _loo_attention(self, rows: np.ndarray) -> np.ndarray:
        """Leave-one-out attention weights of the training rows ``rows``: (len(rows), n).

        Row ``j`` drops training row ``rows[j]`` by index (in log space: no
        underflow of its neighbours against it); columns in training order.
        """
        check_is_fitted(self)
        train = self._backend.exact()
        Q = train.queries(rows if train.inverse is None else train.inverse[rows])
        return _engine.attention(
            Q + train.query_center, train, self._kernel,
            fallback=getattr(self, "fallback", "nearest"), options=self._options(), own=rows,
        )  # fmt: skip

    def _leave_one_out(self) -> _engine.LeaveOneOut:
        """Return what BandwidthSearchCV needs: the one protocol between them.

        See :class:`skl_nw._engine.LeaveOneOut` for the interface; the search
        touches no other private attribute of a fitted estimator.
        """
        check_is_fitted(self)
        fallback = getattr(self, "fallback", "nearest")
        loo = self._backend.leave_one_out(self._kernel, fallback, self.rtol)
        cats = getattr(self, "_categories", None)
        # With a span the lambdas are not searched (the span is): no lambda grids.
        if cats is None or getattr(self, "span", None) is not None:
            return loo
        return _engine.MixedLeaveOneOut(loo, cats.kernels, self.bandwidth_, cats.mask)
