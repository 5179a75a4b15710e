"""The kernel significance test of Racine (1997) and Racine, Hart & Li (2006)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone, is_regressor
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, column_or_1d

from .. import _categorical
from .._smoothers._base import power_of_two
from ._bootstrap import scaled_residuals
from ._formulas import wild_multipliers

__all__ = ["SignificanceResult", "significance_test"]

_RESIDUALS = ("wild-unrestricted", "wild", "wild-rademacher", "iid")
# The wild bootstrap's multipliers per choice of residuals: Gaussian ones keep the size
# of the unrestricted-residual test nearest 5% (the sizes measured: docs/inference.md,
# "Inference" in docs/benchmarks.md; ``python -m benchmarks coverage --part test``).
_MULTIPLIERS = {"wild-unrestricted": "gaussian", "wild": "mammen", "wild-rademacher": "rademacher"}
# Bootstrap samples per refit: at most this many doubles of value columns (n x columns).
_BLOCK_DOUBLES = 2**22


@dataclass(frozen=True, eq=False)  # eq would compare the arrays element-wise
class SignificanceResult:
    """Result of :func:`significance_test`.

    Attributes
    ----------
    statistic : float
        ``T = n^-1 sum_i sum_{j in features} (dm/dx_j (x_i))^2``.
    pvalue : float
        ``(1 + #{T* >= T}) / (1 + n_boot)``; reject at level ``alpha`` when
        ``pvalue <= alpha``.
    null_distribution : ndarray of shape (n_boot,)
        The bootstrap statistics ``T*`` under the null hypothesis.
    """

    statistic: float
    pvalue: float
    null_distribution: np.ndarray


def _feature_indices(features, X, n_features: int) -> list[int]:
    names = getattr(X, "columns", None)
    items = [features] if isinstance(features, (str, int, np.integer)) else list(features)
    if not items:
        raise ValueError("features must name at least one column; got an empty list.")
    out = []
    for f in items:
        if isinstance(f, str):
            if names is None or f not in list(names):
                raise ValueError(
                    f"features: {f!r} is not a column name of X (names need a DataFrame)."
                )
            out.append(list(names).index(f))
        elif isinstance(f, (int, np.integer)) and -n_features <= f < n_features:
            out.append(int(f) % n_features)
        else:
            raise ValueError(
                f"features must be column indices in [0, {n_features}) or column names; got {f!r}."
            )
    if len(set(out)) != len(out):
        raise ValueError(f"features must not repeat a column; got {features!r}.")
    return out


def _terms(fitted, X: np.ndarray, features: list[int], cats):
    """Yield the arrays whose mean squares make ``T``: (n, B, ...) each, ``B`` the targets.

    Continuous features give their derivatives, categorical ones the
    changes of the fit when the category is set to each of its values.
    """
    categorical = np.zeros(X.shape[1], bool) if cats is None else cats.mask
    continuous = [j for j in features if not categorical[j]]
    if continuous:
        G = fitted.predict_gradient(X)  # (n, B, d_cont) for 2-D Y, (n, d_cont) for 1-D
        G = G.reshape(len(X), -1, int((~categorical).sum()))
        columns = np.cumsum(~categorical) - 1  # a continuous feature's gradient column
        yield G[:, :, columns[continuous]]
    if len(continuous) < len(features):
        base = fitted.predict(X).reshape(len(X), -1)
        for j in (j for j in features if categorical[j]):
            for level in range(int(cats.sizes[list(cats.columns).index(j)])):
                yield fitted.predict(_with(X, j, level)).reshape(len(X), -1) - base


def _statistics(
    estimator, X: np.ndarray, Y: np.ndarray, features: list[int], cats, unit: float | None = None
) -> tuple[np.ndarray, float]:
    """``T / unit^2`` for each column of ``Y`` (n, B), and ``unit``.

    One fit on all columns (the smoother is linear).  Scale first, square
    later: the terms are divided by ``unit`` before they are squared, a power
    of two near their largest size (found here when None: that of the
    observed statistic, then passed to the bootstrap's), so that derivatives
    of ``y / x`` far from 1 (``x ~ 1e200``) neither underflow nor overflow
    when squared.
    """
    fitted = clone(estimator).fit(X, Y)
    terms = _terms(fitted, X, features, cats)
    if unit is None:
        terms = list(terms)
        unit = float(power_of_two(max(float(np.abs(t).max(initial=0.0)) for t in terms)))
    T = np.zeros(Y.shape[1] if Y.ndim == 2 else 1)
    for term in terms:
        T += ((term / unit) ** 2).reshape(len(X), len(T), -1).sum(axis=2).mean(axis=0)
    return T, unit


def _restricted_fit(estimator, X: np.ndarray, y: np.ndarray, keep: list[int]) -> np.ndarray:
    """In-sample fit of the null model, without the tested features (the mean if none remain)."""
    if not keep:
        return np.full(len(y), y.mean())
    restricted = clone(estimator)
    params = restricted.get_params()
    h = params["bandwidth"]
    if not isinstance(h, str) and np.ndim(h) == 1 and np.size(h) == X.shape[1]:
        restricted.set_params(bandwidth=np.asarray(h)[keep])
    for name in ("categorical_features", "ordered_features"):
        if name in params and np.ndim(params[name]) == 1 and len(params[name]) == X.shape[1]:
            restricted.set_params(**{name: np.asarray(params[name])[keep]})
    return restricted.fit(_only(X, keep), y).predict(_only(X, keep))


def _unrestricted_residuals(estimator, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Residuals of the full fit rescaled to the noise: ``e_i / sqrt(1 - 2 H_ii + sum_j H_ij^2)``.

    They estimate the noise whether or not the null hypothesis holds (the
    restricted fit's residuals also carry the tested effect); the smoother
    shrinks them by that factor (:func:`skl_nw._inference._bootstrap.scaled_residuals`).
    """
    fitted = clone(estimator).fit(X, y)
    w = np.ones(len(y))
    return scaled_residuals(fitted._weights, fitted._training_queries(), y[:, None], w)[0][:, 0]


def _encoded(estimator, X):
    """Return the estimator told its categorical features, ``X`` as floats (codes), them."""
    mixed = hasattr(estimator, "categorical_features")
    cats, Xa = _categorical.encode(estimator, X) if mixed else (None, None)
    if cats is None:
        _categorical.check_numeric(X)
        return estimator, check_array(X, dtype=np.float64), None
    est = clone(estimator).set_params(categorical_features=cats.mask, ordered_features=cats.ordered)
    return est, _declared(Xa, cats), cats


def _declared(Xa: np.ndarray, cats):
    """``Xa`` (codes), or where a pandas dtype declared categories, a frame that declares them.

    The refits learn the categories of what they are given: from codes alone,
    a declared category no row has would be lost (``lambda``'s range and
    ``L`` change with their number) and an ordered feature's positions
    renumbered.  Declared as ``0, ..., c - 1`` they are the codes themselves.
    """
    if not any(cats.declared):
        return Xa
    import pandas as pd  # a declared category came from a pandas dtype

    columns = {}
    for j in range(Xa.shape[1]):
        if not cats.mask[j]:
            columns[j] = Xa[:, j]
            continue
        c = len(cats.categories[list(cats.columns).index(j)])
        columns[j] = pd.Categorical.from_codes(
            Xa[:, j].astype(np.intp), categories=range(c), ordered=bool(cats.ordered[j])
        )
    return pd.DataFrame(columns)


def _with(X, j: int, value):
    """``X`` (array or frame) with column ``j`` set to ``value``: a copy."""
    X = X.copy()
    if hasattr(X, "iloc"):
        X.iloc[:, j] = value
    else:
        X[:, j] = value
    return X


def _only(X, keep: list[int]):
    """Columns ``keep`` of ``X`` (array or frame)."""
    return X.iloc[:, keep] if hasattr(X, "iloc") else X[:, keep]


def significance_test(
    estimator,
    X: ArrayLike,
    y: ArrayLike,
    features,
    n_boot: int = 399,
    random_state=None,
    *,
    residuals: str = "wild-unrestricted",
) -> SignificanceResult:
    """Test whether a kernel regression depends on some of its features.

    The consistent significance test of Racine (1997) and Racine, Hart & Li
    (2006): the null hypothesis is that the regression function ``E[y | x]``
    does not depend on the features tested.  For continuous features the
    statistic is the mean squared partial derivative of the fitted
    regression along them,

    ``T = n^-1 sum_i sum_{j in features} (dm_hat/dx_j (x_i))^2``,

    with exact derivatives (:meth:`NadarayaWatsonRegressor.predict_gradient`);
    a categorical feature ``z`` (the estimator's ``categorical_features``)
    adds ``n^-1 sum_i sum_l (m_hat(x_i, z = l) - m_hat(x_i, z = z_i))^2`` over
    its categories ``l``.
    Its null distribution is bootstrapped as in the paper (method I): the
    restricted model ``m_0`` (the same estimator without the tested features;
    the mean when none remain) is fitted, ``y*_i = m_0(x_i) + u*_i`` with wild
    bootstrap residuals ``u*_i = v_i u_i``, and ``T*`` is recomputed on each
    bootstrap sample with the bandwidth held fixed.  By default (since the
    simulation study of ``benchmarks/bench_coverage.py``) ``u_i`` are the
    *unrestricted* fit's residuals rescaled by
    ``(1 - 2 H_ii + sum_j H_ij^2)^(-1/2)`` (the smoother shrinks them): they
    estimate the noise whether or not the null holds, whereas the restricted
    fit's residuals also carry the tested effect into ``T*``, so that the
    power stops growing with the effect (0.43 against a slope of 20 at
    ``n = 60`` for the local linear fit, 1.00 with the default).  The
    smoother is linear in ``y``, so all the bootstrap samples are fitted at
    once, as the columns of one 2-D target.

    Parameters
    ----------
    estimator : regressor with ``predict_gradient`` and a ``bandwidth`` parameter
        Unfitted, with its bandwidth (e.g. from :class:`BandwidthSearchCV`'s
        ``bandwidth_``; a search itself is refused); cloned and fitted here.
        A per-feature bandwidth array is restricted to the remaining features
        for the null model.
    X : array-like of shape (n_samples, n_features)
        Training inputs.
    y : array-like of shape (n_samples,)
        Targets.
    features : int, str or list of int or str
        The columns tested: indices, or names of the columns of a DataFrame.
    n_boot : int, default=399
        Bootstrap replications.
    random_state : int, RandomState instance or None, default=None
        Seeds the bootstrap.
    residuals : {"wild-unrestricted", "wild", "wild-rademacher", "iid"}, \
            default="wild-unrestricted"
        Bootstrap residuals.  "wild-unrestricted": the unrestricted fit's
        rescaled residuals times standard normal multipliers (see above;
        robust to heteroscedasticity; Gaussian multipliers give the size
        nearest the level, Mammen's over-reject slightly, 6-8% at 5%).  The
        restricted fit's residuals ``y - m_0(x)``:
        "wild" times Mammen's multipliers (the paper's, and the previous
        default; it loses power as the effect grows), "wild-rademacher" times
        Rademacher's (over-rejects: 9-10% at a 5% level at ``n = 60``), "iid"
        centred and resampled with replacement (8% at ``n = 60`` with
        Nadaraya–Watson; not robust to heteroscedasticity).

    Returns
    -------
    SignificanceResult
        ``statistic``, ``pvalue`` and ``null_distribution``.

    Notes
    -----
    The statistic adds squared derivatives in the units of ``y / x_j``, and
    a categorical feature's squared changes in those of ``y``: features in
    different units are weighted by those units, so testing several at once
    depends on them (test one at a time, or standardise).  The test is as
    good as the bandwidth: an oversmoothed fit hides a weak effect.  The
    statistics are compared in units of a power of two near the largest
    observed term, so the p-value does not depend on the units of ``y``,
    nor on those of ``X`` where every tested feature shares them (``X *
    1e200`` gives the p-value of ``X``); the
    reported ``statistic`` and ``null_distribution`` are 0 or inf only where
    ``T`` itself lies outside the float range.

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import NadarayaWatsonRegressor, significance_test
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (100, 2))
    >>> y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.3, 100)   # feature 1 is noise
    >>> reg = NadarayaWatsonRegressor(bandwidth=[0.2, 0.4])
    >>> significance_test(reg, X, y, [0], n_boot=99, random_state=0).pvalue
    0.01
    >>> bool(significance_test(reg, X, y, [1], n_boot=99, random_state=0).pvalue > 0.05)
    True
    """
    # The null model restricts the bandwidth: a search (which delegates predict_gradient
    # to its estimator) has none; its best_estimator_ does.
    if not (
        is_regressor(estimator)
        and hasattr(estimator, "predict_gradient")
        and "bandwidth" in estimator.get_params(deep=False)
    ):
        raise ValueError(
            "estimator must be a regressor with predict_gradient and a bandwidth (e.g. "
            "NadarayaWatsonRegressor, or a BandwidthSearchCV's best_estimator_); got "
            f"{type(estimator).__name__}."
        )
    if estimator.get_params(deep=False).get("robust_iterations", 0):
        raise ValueError(
            "significance_test takes a linear smoother (its bootstrap refits every replicate "
            "at once, as one fit of many outputs); robust_iterations > 0 makes the fit depend "
            "on y through its robustness weights. Test with robust_iterations=0."
        )
    if residuals not in _RESIDUALS:
        raise ValueError(f"residuals must be one of {_RESIDUALS}; got {residuals!r}.")
    if not (isinstance(n_boot, (int, np.integer)) and n_boot >= 1):
        raise ValueError(f"n_boot must be a positive integer; got {n_boot!r}.")
    estimator, Xa, cats = _encoded(estimator, X)
    y = column_or_1d(y, warn=True).astype(np.float64)
    if len(y) != len(Xa):
        raise ValueError(f"X and y have different lengths: {len(Xa)} and {len(y)}.")
    tested = _feature_indices(features, X, Xa.shape[1])
    keep = [j for j in range(Xa.shape[1]) if j not in tested]

    observed, unit = _statistics(estimator, Xa, y, tested, cats)
    if observed[0] == 0 and np.ptp(y) > 0:
        warnings.warn(
            "significance_test: the statistic is 0 (the fitted gradient vanishes at every "
            "training point), so the p-value is 1 whatever the data. A kernel whose profile "
            "is flat inside its support (tophat) gives a piecewise-constant "
            "Nadaraya–Watson fit with derivative 0 wherever it exists; use a smooth kernel "
            "(gaussian, epanechnikov) or a local linear fit (LocalPolynomialRegressor).",
            UserWarning,
            stacklevel=2,
        )
    null_fit = _restricted_fit(estimator, Xa, y, keep)
    if residuals == "wild-unrestricted":
        u = _unrestricted_residuals(estimator, Xa, y)
    else:
        u = y - null_fit
    rng = check_random_state(random_state)
    n = len(y)
    block = max(1, _BLOCK_DOUBLES // (n * (Xa.shape[1] + 1)))
    null = []
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        if residuals == "iid":
            U = (u - u.mean())[rng.randint(0, n, (n, b))]
        else:
            kind = _MULTIPLIERS[residuals]
            U = wild_multipliers(rng, n, b, kind) * u[:, None]
        null.append(_statistics(estimator, Xa, null_fit[:, None] + U, tested, cats, unit)[0])
    null = np.concatenate(null)
    # Compared in units of unit^2 (equivariant); reported in those of (y / x)^2.
    pvalue = (1.0 + np.count_nonzero(null >= observed[0])) / (1.0 + n_boot)
    with np.errstate(over="ignore", under="ignore"):  # a T beyond the float range
        statistic, null = float(observed[0] * unit * unit), null * unit * unit
    return SignificanceResult(statistic, float(pvalue), null)
