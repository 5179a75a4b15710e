"""KernelQuantileRegressor: conditional quantiles of the attention-weighted distribution."""

from __future__ import annotations

import functools
from numbers import Real

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import _fit_context
from sklearn.metrics import d2_pinball_score
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .._inference._conditional import check_quantiles
from ._nadaraya_watson import NadarayaWatsonRegressor, check_weights

__all__ = ["KernelQuantileRegressor"]


def _of_the_mean(method):
    """Return ``method`` hidden: an ``AttributeError`` on every instance, left out of the docs.

    The conditional mean's methods do not describe the quantile that
    :meth:`KernelQuantileRegressor.predict` returns.
    """
    name = method.__name__

    def check(est) -> bool:
        raise AttributeError(
            f"KernelQuantileRegressor has no {name}: it describes the conditional mean, not "
            "the quantile that predict returns. Use NadarayaWatsonRegressor for the mean's, "
            "and predict_quantiles for the distribution's levels."
        )

    @functools.wraps(method)
    def hidden(self, *args, **kwargs):
        return method(self, *args, **kwargs)

    hidden.unavailable = True  # docs/conf.py leaves it out of the class's page
    return available_if(check)(hidden)


class KernelQuantileRegressor(NadarayaWatsonRegressor):
    """Kernel quantile regression: ``predict`` returns the conditional ``tau``-quantile.

    The attention weights ``alpha_i(x)`` of Nadaraya–Watson regression define
    a predictive distribution ``F(y | x) = sum_i alpha_i(x) G((y - y_i) / h_y)``;
    this regressor predicts its quantile(s), the inverse of ``F`` (see
    :meth:`NadarayaWatsonRegressor.predict_quantiles`).  Every quantile comes
    from the same distribution, so quantiles of several levels never cross.

    Parameters
    ----------
    quantile : float in (0, 1) or array-like of such floats, default=0.5
        The level(s) ``tau``; [0, 1] is allowed with ``y_bandwidth=0``.  A
        list makes :meth:`predict` return one column per level.
    bandwidth, kernel, algorithm, leaf_size, rtol, fallback, n_jobs, binned_tol, \
categorical_features, ordered_features, categorical_kernel, ordered_kernel, \
y_bandwidth, y_kernel
        As :class:`NadarayaWatsonRegressor` (the weights ``alpha_i(x)`` and
        the ``y`` smoothing).

    Attributes
    ----------
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    y_bandwidth_ : float
        The resolved ``y_bandwidth``.
    tree_ : KDTree, BallTree or None
        The tree of the neighbour searches, or None (brute force).
    is_categorical_, is_ordered_ : ndarray of bool of shape (n_features,)
        Which features are categorical, and which of them ordered.
    categories_ : list of ndarray
        The categories of each categorical feature.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    NadarayaWatsonRegressor : The mean, and the whole distribution.
    sklearn.linear_model.QuantileRegressor : Linear quantile regression.

    Notes
    -----
    :meth:`score` is the D² pinball score (the fraction of the pinball loss
    of the constant ``tau``-quantile that the model removes; 1 is best),
    averaged over the levels, not R²: R² rewards the mean, and a good 0.95
    quantile has a poor R² by design, so ``cross_val_score`` and
    ``GridSearchCV`` would select the wrong model under the default score.
    D² keeps R²'s scale (1 best, 0 for a constant), as scikit-learn's
    regressors' ``score`` is read.  ``BandwidthSearchCV(...,
    criterion="pinball")`` chooses the bandwidths by the closed-form
    leave-one-out pinball loss; its default ``criterion="loo"`` would choose
    them for the mean (the squared error of the leave-one-out means).

    The methods of :class:`NadarayaWatsonRegressor` that describe the
    conditional mean (``predict_gradient``, ``predict_interval``,
    ``summary``, and so :func:`significance_test`) are not offered here
    (``AttributeError``): they would not describe the quantile that
    :meth:`predict` returns.  Its distribution's methods
    (``predict_quantiles``, ``predict_cdf``, ``predict_pdf``) and the
    attention weights are.

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import KernelQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 1, (200, 1))
    >>> y = X[:, 0] + X[:, 0] * rng.normal(size=200)
    >>> reg = KernelQuantileRegressor([0.1, 0.9], bandwidth=0.1).fit(X, y)
    >>> reg.predict([[0.2], [0.8]]).round(2)
    array([[-0.19,  0.61],
           [-0.27,  1.9 ]])
    """

    _parameter_constraints: dict = {
        **{
            name: rule
            for name, rule in NadarayaWatsonRegressor._parameter_constraints.items()
            if name not in ("span", "robust_iterations")  # not parameters of quantiles
        },
        "quantile": [Interval(Real, 0, 1, closed="both"), "array-like"],
    }

    predict_gradient = _of_the_mean(NadarayaWatsonRegressor.predict_gradient)
    predict_interval = _of_the_mean(NadarayaWatsonRegressor.predict_interval)
    summary = _of_the_mean(NadarayaWatsonRegressor.summary)

    def __init__(
        self,
        quantile: float | ArrayLike = 0.5,
        *,
        bandwidth: float | ArrayLike | str = "scott",
        kernel: str = "gaussian",
        algorithm: str = "auto",
        leaf_size: int = 40,
        rtol: float = 1e-16,
        fallback: str = "nearest",
        n_jobs: int | None = None,
        binned_tol: float | None = None,
        categorical_features="from_dtype",
        ordered_features="from_dtype",
        categorical_kernel: str = "aitchison_aitken",
        ordered_kernel: str = "wang_van_ryzin",
        y_bandwidth: float | str = "scott",
        y_kernel: str = "gaussian",
    ) -> None:
        super().__init__(
            bandwidth, kernel=kernel, algorithm=algorithm, leaf_size=leaf_size, rtol=rtol,
            fallback=fallback, n_jobs=n_jobs, binned_tol=binned_tol,
            categorical_features=categorical_features, ordered_features=ordered_features,
            categorical_kernel=categorical_kernel, ordered_kernel=ordered_kernel,
            y_bandwidth=y_bandwidth, y_kernel=y_kernel,
        )  # fmt: skip
        self.quantile = quantile

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Store the bandwidth-scaled training set and the sorted targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Targets (one output).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights with a positive sum.

        Returns
        -------
        self : KernelQuantileRegressor
            The fitted estimator.
        """
        X_in = X
        X, y = self._validate_fit(X, y, sample_weight, y_numeric=True)
        self._levels(self.y_bandwidth)  # a bad quantile fails before any work
        return self._fit_validated(X_in, X, y, check_weights(sample_weight, X))

    def _fit_validated(self, X_in, X: np.ndarray, y: np.ndarray, w: np.ndarray):
        """Fit on data that :meth:`_validate_fit` returned (see the regressor's)."""
        self._levels(self.y_bandwidth)  # a bad quantile fails before any work
        Xs, w = self._fit_inputs(X, w, checked=True)
        self._build(Xs, w, y.reshape(len(y), -1))
        self._y_1d = True
        self._fit_distribution(y, w)
        self._levels(self.y_bandwidth_)
        return self

    def _levels(self, y_bandwidth) -> np.ndarray:
        smoothed = isinstance(y_bandwidth, str) or y_bandwidth > 0
        try:
            return check_quantiles(self.quantile, open_interval=smoothed)
        except ValueError as error:
            raise ValueError(str(error).replace("quantiles", "quantile", 1)) from None

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Conditional quantile(s) at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_quantiles)
            One column per level when ``quantile`` is a list.
        """
        check_is_fitted(self)
        Y = self.predict_quantiles(X, self._levels(self.y_bandwidth_))
        return Y if np.ndim(self.quantile) else Y[:, 0]

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Return the D² pinball score of the predictions, averaged over the levels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.
        y : array-like of shape (n_samples,)
            True targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            ``mean over tau of d2_pinball_score(y, predict(X)[:, tau], alpha=tau)``.
        """
        pred = self.predict(X)
        pred = pred.reshape(pred.shape[0], -1)
        levels = self._levels(self.y_bandwidth_)
        y = np.asarray(y, dtype=np.float64)
        return float(np.mean([
            d2_pinball_score(y, pred[:, j], alpha=tau, sample_weight=sample_weight)
            for j, tau in enumerate(levels)
        ]))  # fmt: skip

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags
