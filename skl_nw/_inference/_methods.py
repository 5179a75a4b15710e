"""Public inference methods of the estimators, as mixins over a few private hooks.

``_SmootherInferenceMixin`` gives a regressor ``predict_gradient``,
``predict_interval`` and the ``return_std`` part of ``predict`` from hooks
(``_targets``, ``_smooth``, ``_mean_std``, ``_gradient``; for the intervals
``_weights`` (dense smoother weights of a few queries), ``_training_queries``,
``_n_local_params``, ``_local_degree`` and ``_check_extrapolation``);
``_NWInferenceMixin`` implements them for Nadaraya–Watson with
:func:`skl_nw._engine.kernel_sums`, and another linear smoother (local
polynomial) implements its own.  ``_DensityMixin`` gives the Parzen
classifier its kernel density estimates.  The formulas are in
:mod:`skl_nw._inference._formulas`, the bootstrap-t in :mod:`skl_nw._inference._bootstrap`, the
bias-corrected sibling fit and the warnings in :mod:`skl_nw._inference._bands`.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sklearn import get_config
from sklearn.utils import check_random_state

from .. import _engine
from .._engine import npar
from .._smoothers._base import power_of_two
from ._bands import BIAS_CORRECTIONS, corrected_degree, local_sibling, warn_zero_width
from ._bootstrap import bootstrap_t, effective_df, t_quantile
from ._formulas import MULTIPLIERS, concentration, nw_gradient
from ._local_variance import line_std, noise_units, zero_lambda_cells

# Above this many value columns the smoother is applied as attention weights @ V.
_FEW_COLUMNS = 8
# Bootstrap value columns per kernel_sums call: at most this many doubles (n x columns).
_BOOT_BLOCK_DOUBLES = 2**23


def standardized(Y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Z``, ``center`` and ``scale`` (k,) with ``Y = center + scale * Z``, ``max |Z| <= 1``-ish.

    Scale first, square later: the squares of ``Y - center`` overflow from
    ``|y| ~ 1e155`` and underflow below ``1e-155``; those of ``Z`` do
    neither, and a standard error in units of ``Z`` times ``scale`` is
    equivariant in ``y``.  Both units are powers of two (exact divisions):
    one near ``max |y|`` (so that the centring cannot overflow), then one
    near ``max |y - center|`` (so that the spread is of order 1).  Rows of
    weight 0 take no part in either.

    Examples
    --------
    >>> Y = np.array([[1e200], [3e200]])
    >>> Z, center, scale = standardized(Y, np.ones(2))
    >>> np.allclose(center + scale * Z, Y), bool(np.abs(Z).max() <= 2)
    (True, True)
    """
    live = w > 0
    unit = power_of_two(np.abs(Y[live]).max(axis=0))
    Y0 = Y / unit
    center0 = Y0[live].mean(axis=0)
    spread = power_of_two(np.abs(Y0[live] - center0).max(axis=0))
    return (Y0 - center0) / spread, center0 * unit, spread * unit


def _check_interval_args(alpha, method, n_boot, multipliers, simultaneous, bias_correction) -> None:
    if not (isinstance(alpha, Real) and 0 < alpha < 1):
        raise ValueError(f"alpha must be a float in (0, 1); got {alpha!r}.")
    if method not in ("normal", "bootstrap"):
        raise ValueError(f"method must be 'normal' or 'bootstrap'; got {method!r}.")
    if not (isinstance(n_boot, Integral) and not isinstance(n_boot, bool) and n_boot >= 1):
        raise ValueError(f"n_boot must be a positive integer; got {n_boot!r}.")
    if multipliers not in MULTIPLIERS:
        raise ValueError(f"multipliers must be one of {MULTIPLIERS}; got {multipliers!r}.")
    if not isinstance(simultaneous, (bool, np.bool_)):
        raise ValueError(f"simultaneous must be True or False; got {simultaneous!r}.")
    if simultaneous and method != "bootstrap":
        raise ValueError(
            "simultaneous=True needs method='bootstrap' (the sup-t band's critical value "
            f"is bootstrapped); got method={method!r}."
        )
    if bias_correction not in BIAS_CORRECTIONS:
        raise ValueError(
            f"bias_correction must be one of {BIAS_CORRECTIONS}; got {bias_correction!r}."
        )


class _SmootherInferenceMixin:
    """Gradients and intervals of a fitted linear smoother (see the module docstring)."""

    def _shaped(self, A: np.ndarray) -> np.ndarray:
        """(m, k, ...) -> (m, ...) when the training targets were 1-D."""
        return A[:, 0] if self._y_1d else A

    def predict_gradient(self, X: ArrayLike) -> np.ndarray:
        """Exact gradient of the fitted regression function at each query.

        ``d m / d x_j`` of the prediction (the ratio of kernel sums
        differentiated in closed form, no finite differences).  The tophat
        kernel's fit is piecewise constant: its gradient is 0 wherever it
        exists; so is a compact kernel's nearest-point fallback.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_features) or (n_queries, n_targets, n_features)
            The gradient, per target for 2-D training targets.  With
            categorical features, one column per continuous feature only (in
            feature order): a category has no derivative.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0, 4, 200)[:, None]
        >>> reg = NadarayaWatsonRegressor(bandwidth=0.2).fit(X, 3 * X[:, 0])
        >>> reg.predict_gradient([[2.0]]).round(3)
        array([[3.]])
        """
        return self._shaped(self._gradient(self._queries(X)))

    def _predict_with_std(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        Q = self._queries(X)
        self._check_extrapolation(Q)
        mean, std = self._mean_std(Q)
        return self._shaped(mean), self._shaped(std)

    def _check_extrapolation(self, Q: np.ndarray) -> None:
        """Warn about queries where the fit extrapolates (a hook: nothing by default)."""

    def _local_degree(self) -> int:
        """Degree of the local polynomial fitted (0: Nadaraya–Watson)."""
        return 0

    def _bias_corrected(self):
        """Return the bias-corrected fit at the same bandwidth, on the same training set."""
        return local_sibling(self, corrected_degree(self._local_degree()))

    def predict_interval(
        self,
        X: ArrayLike,
        alpha: float = 0.05,
        method: str = "normal",
        n_boot: int = 399,
        random_state=None,
        *,
        multipliers: str = "rademacher",
        simultaneous: bool = False,
        bias_correction: str = "none",
    ) -> np.ndarray:
        """Confidence intervals (pointwise, or a simultaneous band) for the regression curve.

        With ``bias_correction="none"`` the intervals cover ``E[m_hat(q)]``,
        the regression function as the smoother sees it at this bandwidth
        (the *smoothed curve*), not the regression function itself: the
        smoother's bias (of order ``h^2`` times the curvature, ``h`` at a
        Nadaraya–Watson boundary) is not included.  ``bias_correction="robust"``
        covers the regression function ``m(q)`` itself.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        alpha : float, default=0.05
            Miscoverage level of each pointwise interval (of the whole band
            with ``simultaneous=True``).
        method : {"normal", "bootstrap"}, default="normal"
            "normal": ``m_hat -+ t se`` with the standard error of
            ``predict(X, return_std=True)`` and the quantile ``t`` of Student's
            law with ``1 / sum_i l_i(q)^2 - p`` degrees of freedom (the local
            fit's effective number of points less the ``p`` coefficients of the
            local fit its noise variance is estimated about: Nadaraya–Watson's
            local line, ``1 + d``; ``l_i`` the smoother's weights: the attention
            weights, or a local polynomial's equivalent kernel).  "bootstrap": a wild bootstrap-t
            (:mod:`skl_nw._inference._bootstrap`): the residuals ``e_i = y_i - m_hat(x_i)``
            rescaled by ``(1 - 2 H_ii + sum_j H_ij^2)^(-1/2)`` (the smoother
            shrinks them), the standard error ``sqrt(sum_i l_i^2 e_i^2)`` from
            them (robust to heteroscedasticity), and the interval
            ``m_hat -+ c se`` with ``c`` the ``1 - alpha`` quantile of the
            bootstrap's ``|m_hat* - E* m_hat*| / se*`` with the bandwidth held
            fixed.  The smoother is linear in ``y``: the bootstrap fits are
            products of the weights with ``n_boot`` value columns, by chunks.
        n_boot : int, default=399
            Bootstrap replications (``method="bootstrap"``).
        random_state : int, RandomState instance or None, default=None
            Seeds the bootstrap multipliers.
        multipliers : {"rademacher", "mammen"}, default="rademacher"
            Law of the wild-bootstrap multipliers ``v_i`` (mean 0, variance 1).
            Rademacher's keep ``|v_i e_i| = |e_i|``; with Mammen's skewed law the
            studentised interval covers less at the boundaries (0.85-0.91
            against 0.89-0.94 for the local linear fit in the study of
            ``docs/inference.md``).
        simultaneous : bool, default=False
            A sup-t band over the queries given (``method="bootstrap"`` only):
            ``c`` is the ``1 - alpha`` quantile of ``max_q |T*(q)|``, so that
            the whole curve lies in the band with probability ``1 - alpha``
            (at these queries: pass a grid).
        bias_correction : {"none", "robust"}, default="none"
            "robust": robust bias correction (Calonico, Cattaneo & Farrell
            2018) with equal pilot and main bandwidths, which is the local
            polynomial fit of the next even degree at this bandwidth (local
            quadratic for Nadaraya–Watson and for local linear: the interior
            bias of an even degree ``p`` is of order ``h^(p + 2)``, so that the
            local linear fit would not correct Nadaraya–Watson's), with its own
            standard error: the interval is centred on it and covers ``m(q)``,
            the bias of the fitted degree removed and its estimation error
            counted.

        Returns
        -------
        ndarray of shape (n_queries, 2) or (n_queries, n_targets, 2)
            Lower and upper bounds.

        Warns
        -----
        UserWarning
            Where an interval has zero width (a query with one effective
            neighbour: its standard error is 0), and, for a local polynomial
            fit, at queries outside the training range (extrapolation).

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (300, 1))
        >>> y = X[:, 0] + rng.normal(0, 0.1, 300)
        >>> reg = NadarayaWatsonRegressor(bandwidth=0.1).fit(X, y)
        >>> reg.predict_interval([[0.5]]).round(2)
        array([[0.49, 0.53]])

        A local linear fit is unbiased for this line, also at the boundary:

        >>> from skl_nw import LocalPolynomialRegressor
        >>> lin = LocalPolynomialRegressor(bandwidth=0.1).fit(X, y)
        >>> lin.predict_interval([[0.0], [0.5]], method="bootstrap", random_state=0).round(2)
        array([[-0.03,  0.06],
               [ 0.49,  0.53]])

        A 95% band for the whole curve on a grid:

        >>> grid = np.linspace(0, 1, 11)[:, None]
        >>> band = lin.predict_interval(grid, method="bootstrap", simultaneous=True,
        ...                             random_state=0)
        >>> bool(np.all((band[:, 0] <= grid[:, 0]) & (grid[:, 0] <= band[:, 1])))
        True

        Nadaraya–Watson's boundary bias moves its interval off ``m(0) = 0``; the
        bias-corrected one covers it:

        >>> reg.predict_interval([[0.0]]).round(2)
        array([[0.05, 0.11]])
        >>> reg.predict_interval([[0.0]], bias_correction="robust").round(2)
        array([[-0.08,  0.09]])
        """
        _check_interval_args(alpha, method, n_boot, multipliers, simultaneous, bias_correction)
        if bias_correction == "robust":
            return self._bias_corrected().predict_interval(
                X, alpha, method, n_boot, random_state,
                multipliers=multipliers, simultaneous=simultaneous,
            )  # fmt: skip
        Q = self._queries(X)
        self._check_extrapolation(Q)
        Y, w = self._targets()
        if method == "normal":
            mean, std = self._mean_std(Q)
            df = effective_df(self._variance_factor(Q), self._n_local_params())
            half = t_quantile(alpha, df)[:, None] * std
        else:
            # In units of a power of two near the spread of y (exact): the squared
            # residuals of y ~ 1e200 neither overflow nor, of y ~ 1e-200, underflow.
            scale = standardized(Y, w)[2]
            mean, std, crit = bootstrap_t(
                self._weights, Q, self._training_queries(), Y / scale, w, n_boot=n_boot,
                rng=check_random_state(random_state), multipliers=multipliers, alpha=alpha,
                simultaneous=simultaneous, block_doubles=_BOOT_BLOCK_DOUBLES,
            )  # fmt: skip
            mean, std = mean * scale, std * scale
            half = crit * std
        warn_zero_width(std, mean)
        return self._shaped(np.stack([mean - half, mean + half], axis=-1))


class _NWInferenceMixin(_SmootherInferenceMixin):
    """The hooks of :class:`_SmootherInferenceMixin` for Nadaraya–Watson."""

    def _targets(self) -> tuple[np.ndarray, np.ndarray]:
        """Training targets (n, k) and sample weights (n,), caller order."""
        return self._backend.targets()

    def _training_queries(self) -> np.ndarray:
        """Return the scaled training inputs, caller order (the in-sample queries)."""
        train = self._exact_train()
        return train.to_caller(train.queries()) + train.query_center

    def _weights(self, Q: np.ndarray) -> np.ndarray:
        """Dense attention weights of a few scaled queries: (m, n), training order."""
        return _engine.attention(
            Q, self._exact_train(), self._kernel, fallback=self.fallback,
            sparse=False, options=self._options(),
        )  # fmt: skip

    def _n_local_params(self) -> int:
        """Coefficients of the local line the noise variance is estimated about."""
        return npar(int((~self.is_categorical_).sum()), 1)

    def _variance_factor(self, Q: np.ndarray) -> np.ndarray:
        """``sum_i alpha_i(q)^2 / w_i`` per scaled query, from kernel sums (trees prune)."""
        n = len(self._targets()[1])

        def exact(R: np.ndarray) -> np.ndarray:
            return concentration(self._sums(R, np.ones((n, 1)), powers=(1, 2)))

        return self._backend.variance_factor(Q, exact)  # binned: on the grid, as the errors

    def _sums(self, Q, values, powers=(1,)):
        return _engine.kernel_sums(
            Q, self._exact_train(), self._kernel, values=values, powers=powers,
            fallback=self.fallback, options=self._options(),
        )  # fmt: skip

    def _smooth(self, Q: np.ndarray | None, V: np.ndarray) -> np.ndarray:
        """Apply the smoother to value columns ``V`` (n, c): (m, c); Q=None: training points."""
        if Q is None or V.shape[1] <= _FEW_COLUMNS:
            return self._sums(Q, V).ratios()[:, 0]
        # Many columns (bootstrap replicates): attention weights of a chunk of
        # queries times V, one BLAS product, instead of one pass per column.
        train, n = self._exact_train(), V.shape[0]
        rows = max(1, int(get_config()["working_memory"] * 2**20 // (8 * max(n, 1))))
        out = np.empty((len(Q), V.shape[1]))
        for start in range(0, len(Q), rows):
            A = _engine.attention(
                Q[start : start + rows], train, self._kernel, fallback=self.fallback,
                sparse=bool(train.trees), options=self._options(),
            )  # fmt: skip
            out[start : start + rows] = A @ V
        return out

    def _mean_std(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fit and pointwise standard error at the scaled queries: two (m, k) arrays.

        The noise variance from the residuals about a local line
        (:mod:`skl_nw._inference._local_variance`), in units of ``Z``
        (:func:`~skl_nw._inference._local_variance.noise_units`); the fit
        from the columns of ``Y``, as :meth:`predict` has it.  Binned: the
        noise variance at the grid's nodes, blended (:func:`skl_nw._smoothers._binning.mean_std`).
        """
        Y, w = self._targets()
        Z, scale = noise_units(Y, w, self._backend.inputs(), zero_lambda_cells(self))
        fit, std = self._backend.mean_std(Q, Z, lambda R: line_std(self, R, Z, Y))
        return fit, scale * std

    def _gradient(self, Q: np.ndarray) -> np.ndarray:
        return local_constant_gradient(self, Q)


def local_constant_gradient(est, Q: np.ndarray) -> np.ndarray:
    """Exact gradient of the local-constant (Nadaraya–Watson) fit at scaled queries: (m, k, d).

    Shared by :class:`NadarayaWatsonRegressor` and the degree-0 local fit,
    which is the same estimator; :func:`nw_gradient` has the formula.
    """
    Y, w = est._targets()
    # The gradient does not depend on a shift of y, and scales with it: in units of
    # a power of two near its spread (exact), the products with the inputs' moments
    # (up to |x| / h ~ 1e154 bandwidths) do not overflow.
    Z, _, unit = standardized(Y, w)
    Yc = Z - Z[w > 0].mean(axis=0)
    train = est._exact_train()
    X = train.to_caller(train.X)  # centred scaled inputs
    (n, d), k = X.shape, Y.shape[1]
    XY = (X[:, :, None] * Yc[:, None, :]).reshape(n, d * k)
    sums = _engine.kernel_sums(
        Q, train, est._kernel, values=np.column_stack([Yc, X, XY]), powers=(1, "ds"),
        fallback=est.fallback, options=est._options(),
    )  # fmt: skip
    h = est._widths()  # the continuous features' widths in the scaled inputs' units
    return nw_gradient(sums, Q[:, : train.d] - train.center, k, h) * unit[None, :, None]


class _DensityMixin:
    """Kernel density estimates of a fitted Parzen classifier."""

    def score_class_samples(self, X: ArrayLike) -> np.ndarray:
        """Class-conditional log densities ``log p(x | c)`` at each query.

        The weighted kernel density estimate of each class,
        ``p(x | c) = sum_{i in c} w_i K(u_i) / (W_c prod_j h_j) * c_d``, with
        ``W_c`` the class's total sample weight and ``c_d`` the kernel's
        normalising constant in ``d`` dimensions.  With categorical features,
        ``K`` also multiplies their discrete kernels, and ``d`` and the
        ``h_j`` count the continuous features only.  With a ``span`` the
        widths at ``x`` are ``h_j r_x``, its radius (the balloon estimator of
        the nearest neighbours, which need not integrate to 1): where ``x``
        sits on ``k`` or more rows (``r_x = 0``), ``+inf`` for the classes
        with rows at ``x`` and ``-inf`` for the others.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            Log densities in ``classes_`` order; ``-inf`` where a compact
            kernel has no point of the class within its support (and for a
            class of zero total weight).
        """
        L = self._class_log_densities(self._queries(X))
        return L

    def _class_log_densities(self, Q: np.ndarray) -> np.ndarray:
        train, kernel = self._exact_train(), self._kernel
        L = _engine.class_log_sums(
            Q, train, kernel, relative=False, fallback="nan", options=self._options()
        )
        # The stored weights of class c sum to T_c (W_c, or pi_c with priors), and
        # sum_{i in c} w'_i K_i / T_c = sum_{i in c} w_i K_i / W_c either way.
        # log T_c in log space: weights near 1e308 sum past the float maximum.
        bounds = np.append(train.starts, len(train.log_w))
        log_T = np.array([logsumexp(train.log_w[a:b]) if b > a else -np.inf
                          for a, b in zip(bounds[:-1], bounds[1:], strict=True)])  # fmt: skip
        # Continuous features only: the discrete kernels enter unnormalised (as in
        # statsmodels' KDEMultivariate), and their bandwidths are lambdas, not widths.
        cont = ~self.is_categorical_
        d = int(cont.sum())
        const = (kernel.log_normalizer(d) if d else 0.0) - np.log(self._widths()).sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            L = L - log_T + const
            if train.neighbours is not None and d:  # a span: widths h_j r_q at each query
                L = L - d * np.log(_engine.reach(Q, train, self._options()))[:, None]
        return np.where(np.isnan(L), -np.inf, L)

    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """Log density of the training inputs at each query.

        The weighted kernel density estimate
        ``p(x) = sum_i w_i K(u_i) / (W prod_j h_j) * c_d`` (``W`` the total
        sample weight, ``c_d`` the kernel's normalising constant), i.e. the
        mixture of the class densities with the empirical class weights
        whatever ``priors`` are.  Low values flag queries far from the
        training data, where the classifier extrapolates.  With a ``span``,
        the widths at each query are ``h_j r_x`` (see
        :meth:`score_class_samples`).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,)
            ``log p(x)``; ``-inf`` where a compact kernel has no training point
            within its support.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import ParzenClassifier
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> clf = ParzenClassifier(bandwidth=1.0).fit(X, [0, 0, 1, 1])
        >>> clf.score_samples([[1.5], [30.0]]).round(2)
        array([  -1.42, -366.81])
        """
        L = self._class_log_densities(self._queries(X))
        share = self._class_weight / self._class_weight.sum()
        with np.errstate(divide="ignore"):
            return logsumexp(L + np.log(share), axis=1)
