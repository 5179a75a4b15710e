"""MLKR: the attention metric learned by the leave-one-out loss of Nadaraya–Watson."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from sklearn import config_context
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.decomposition import PCA
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._categorical import _is_categorical_dtype, _pandas_dtypes
from ._engine import Options, metric_loss_grad, power_of_two
from ._kernels import KERNELS, get_kernel
from ._search._rows import _collapse
from ._smoothers._base import rule_of_thumb

__all__ = ["MLKR"]

# batch_size="auto": full-batch L-BFGS up to this many rows (an iteration is one pass
# over the n^2 pairs), minibatches of _AUTO_BATCH queries against every key above.
_FULL_BATCH_MAX_ROWS = 20_000
_AUTO_BATCH = 256
# Held-out checks of the stochastic path use at most this many of the held-out rows
# (a fixed random subset), and come every time the training rows seen since the last
# one cost ten times the check: so the checks take about a tenth of the fit.
_MAX_CHECK_ROWS = 1024
# init="auto" fits its per-feature bandwidths on at most this many rows.
_INIT_ROWS = 1000


class MLKR(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Metric Learning for Kernel Regression: a learned attention metric.

    Learns a projection ``W`` (``components_``, shape (n_components,
    n_features)) such that Nadaraya–Watson regression with bandwidth 1 on
    ``z = W x`` has the smallest leave-one-out squared error on the training
    data (Weinberger and Tesauro, 2007).  In attention terms the scores are
    ``-||W q - W x_i||^2 / 2``: queries and keys share one learned projection,
    and the bandwidth (the softmax temperature) lives in ``W``.  A diagonal
    ``W = diag(1 / h)`` is a bandwidth per feature; a full or low-rank ``W``
    also learns the directions that matter.

    The loss and its analytic gradient are computed in tiles of queries
    against every training point: memory ``O(n d + tile n)``, never an
    ``n x n`` matrix.

    Parameters
    ----------
    n_components : int, default=None
        Rows of ``W`` (the dimension of the learned space); None: n_features.
    kernel : str, default="gaussian"
        The kernel of the Nadaraya–Watson fit whose leave-one-out loss is
        minimised: any name of ``KERNELS`` but "tophat" and its alias
        "boxcar" (refused: its derivative is 0 almost everywhere).
    init : {"auto", "pca", "identity", "rule_of_thumb"} or ndarray of shape \
(n_components, n_features), default="auto"
        The starting ``W``.  "auto" is supervised: per-feature bandwidths ``h``
        from a leave-one-out search (``BandwidthSearchCV(method="lbfgs")``, on
        at most 1,000 rows), then the ``n_components`` leading eigenvectors
        ``U`` of the mean outer product of that fit's gradients in scaled
        coordinates (the directions along which the regression changes), so
        ``W = U^T diag(1 / h)``, rescaled by the factor of a short 1-D search
        on the loss.  "rule_of_thumb" is ``diag(1 / h)`` with Scott's
        bandwidths (its first ``n_components`` rows); "identity" the first
        ``n_components`` rows of the identity; "pca" the whitened principal
        axes times Scott's factor.
    max_iter : int, default=200
        L-BFGS iterations (full batch) or passes over the training rows
        (minibatches).
    tol : float, default=1e-5
        L-BFGS: the tolerance of :func:`scipy.optimize.minimize`, on the
        loss and gradient in units where ``X`` and ``y`` have a root mean
        square spread of 1 (the fit is the same, ``W / c`` for ``X * c``,
        whatever their units).
        Minibatches: the smallest relative improvement of the held-out loss
        that counts.
    batch_size : int or "auto", default="auto"
        Queries per gradient step.  A value of at least n_samples, or "auto"
        up to 20,000 rows, is the exact full-batch path (L-BFGS); otherwise
        Adam on minibatches of queries, each against every training point
        ("auto": 256 queries).
    learning_rate : float, default=0.01
        Minibatches: Adam's step, relative to the root mean square entry of
        the initial ``W``.
    validation_fraction : float, default=0.1
        Minibatches: the share of rows held out of training; the fit stops
        when their leave-one-out loss (against the training rows; at most
        1,024 of them, a fixed random subset) has not improved by ``tol``
        in ``n_iter_no_change`` checks, and keeps the best ``W`` seen.
    n_iter_no_change : int, default=10
        Minibatches: checks without improvement before stopping.
    random_state : int, RandomState instance or None, default=None
        Minibatch order, the held-out rows and the subsample of init="auto".
    verbose : int, default=0
        Print the loss at each iteration or check.
    n_jobs : int, default=None
        Threads over tiles of queries (joblib's convention).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned ``W``.
    n_iter_ : int
        Full batch: loss-and-gradient evaluations of L-BFGS (each one pass
        over the pairs; metric-learn counts the same).  Minibatches: Adam
        steps.
    loss_curve_ : list of float
        The leave-one-out loss at the initialisation, then after each L-BFGS
        iteration; on the minibatch path the held-out loss at each check.
    best_loss_ : float
        The loss of ``components_``: on the training rows (full batch), on
        the held-out rows (minibatches, the smallest of ``loss_curve_``).
        Never above ``loss_curve_[0]``.
    n_features_in_ : int
        Number of features seen at fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen at fit, when they are all strings.

    See Also
    --------
    NadarayaWatsonRegressor : the regression on the learned coordinates.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : the classification twin.

    Notes
    -----
    The loss is ``sum_q w_q ||P_q - y_q||^2 / (k sum_q w_q)`` with ``P_q``
    the Nadaraya–Watson prediction at training row ``q`` from every other row
    (weights ``w``, ``k`` outputs).  The constructor's ``n_components``,
    ``init``, ``max_iter`` and ``tol`` mean what they mean in metric-learn's
    ``MLKR``, so that swapping the import is enough; its kernel is
    ``exp(-||A d||^2)`` where ours is ``exp(-||W d||^2 / 2)``, so the same
    metric has ``components_`` ``sqrt(2)`` times metric-learn's (ours is the
    scale at which ``NadarayaWatsonRegressor(bandwidth=1.0)`` reproduces the
    loss).  Features must be numeric: a pandas ``category`` column is
    refused (one-hot encode it first).

    Examples
    --------
    >>> import numpy as np
    >>> from skl_nw import MLKR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5))
    >>> y = np.sin(2 * X[:, 0])
    >>> mlkr = MLKR(n_components=1, random_state=0).fit(X, y)
    >>> mlkr.components_.shape
    (1, 5)
    >>> bool(mlkr.loss_curve_[-1] < mlkr.loss_curve_[0])
    True
    >>> print(mlkr.get_feature_names_out())
    ['mlkr0']
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(KERNELS))],
        "init": [StrOptions({"auto", "pca", "identity", "rule_of_thumb"}), np.ndarray],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_components: int | None = None,
        *,
        kernel: str = "gaussian",
        init: str | np.ndarray = "auto",
        max_iter: int = 200,
        tol: float = 1e-5,
        batch_size: int | str = "auto",
        learning_rate: float = 0.01,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        random_state=None,
        verbose: int = 0,
        n_jobs: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> MLKR:
        """Learn ``components_`` from training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (numeric).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Each row's weight as a key in the softmax and as a query in the loss.

        Returns
        -------
        self : MLKR
            The fitted transformer.
        """
        _refuse_categorical(X)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        if len(X) < 2:
            raise ValueError(f"MLKR needs n_samples >= 2 (leave-one-out), got n_samples={len(X)}.")
        kernel = get_kernel(self.kernel)
        if not np.any(kernel.derivative(np.array([0.25]))):
            valid = ", ".join(sorted(k for k, r in KERNELS.items() if r.name != kernel.name))
            raise ValueError(
                f"kernel={self.kernel!r} has a zero derivative: no gradient to learn "
                f"from. Choose one of {valid}."
            )
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        # Frequency weights: identical (x, y) rows merged, so that a row of weight 3
        # is three rows, left out together.
        X, y, w = _collapse(X, y, w)
        if len(X) < 2:
            raise ValueError("MLKR needs at least 2 distinct rows of positive weight.")
        Y = y.reshape(len(y), -1).astype(np.float64)
        log_w = np.log(w)
        r = X.shape[1] if self.n_components is None else self.n_components
        if r > X.shape[1]:
            raise ValueError(f"n_components={r} must be at most n_features={X.shape[1]}.")
        rng = check_random_state(self.random_state)
        options = Options(n_jobs=self.n_jobs)
        # The search runs in units of X and y of spread 1 (translations change nothing):
        # its steps and tolerances are then the same whatever their units, and the squares
        # of neither overflow.  It learns V = W x_unit; its losses are in y_unit^2.
        X_s, x_unit = _unit_spread(X, w)
        Y_s, y_unit = _unit_spread(Y, w)

        def loss_grad(V, rows=None, keys=None, grad=True):
            keys = log_w if keys is None else keys
            return metric_loss_grad(X_s, V, Y_s, kernel, log_w=keys, rows=rows, grad=grad,
                                    row_log_w=log_w, options=options)  # fmt: skip

        # The data's starts in units (X_s, y in units): at any scale of X they are finite.
        W0, V0 = self._initial(X_s, Y_s.reshape(y.shape), w, r, rng, loss_grad, x_unit)
        if W0 is None:  # before the search: a start beyond the float range raises at once
            _components(V0, x_unit)
        full = self.batch_size == "auto" and len(X) <= _FULL_BATCH_MAX_ROWS
        full = full or (self.batch_size != "auto" and self.batch_size >= len(X))
        fit = _lbfgs if full else _adam
        V, self.n_iter_, curve = fit(self, V0, loss_grad, log_w, rng)
        self.components_ = _components(V, x_unit) if W0 is None or V is not V0 else W0
        with np.errstate(over="ignore"):  # a loss beyond the float range is inf
            self.loss_curve_ = [float(np.float64(loss) * y_unit * y_unit) for loss in curve]
        self.best_loss_ = min(self.loss_curve_)
        return self

    def _initial(self, X, y, w, r, rng, loss_grad, x_unit: float) -> tuple:
        """Return the start ``(W0, V0)`` (see ``init``): ``V0 = W0 x_unit`` in the units of ``X``.

        ``W0`` is None where the start is the data's (``X`` and ``y`` in units).
        """
        n, d = X.shape
        if isinstance(self.init, np.ndarray):
            W0 = np.asarray(self.init, dtype=np.float64)
            if W0.shape != (r, d):
                raise ValueError(
                    f"init must be an array of shape (n_components, n_features) = "
                    f"{(r, d)}, got shape {W0.shape}."
                )
            if not np.all(np.isfinite(W0)):
                raise ValueError("init must be finite; the array passed has NaN or inf entries.")
            return W0.copy(), W0 * x_unit
        if self.init == "identity":
            return np.eye(r, d), np.eye(r, d) * x_unit
        return None, self._data_start(X, y, w, r, rng, loss_grad)

    def _data_start(self, X, y, w, r, rng, loss_grad) -> np.ndarray:
        """Return the start that ``init`` takes from the data (``X`` in units of spread 1)."""
        n, d = X.shape
        if self.init == "rule_of_thumb":
            return np.eye(r, d) / rule_of_thumb(X, sample_weight=w)
        if self.init == "pca":
            if r > min(n, d):
                raise ValueError(
                    f"init='pca' gives at most min(n_samples, n_features) = {min(n, d)} "
                    f"components; n_components is {r}. Lower n_components or use another init."
                )
            # Centred first: PCA's covariance solver forms X'X, which an offset cancels; in
            # a power of two of the spread, whose squares neither overflow nor underflow.
            Xc = X - X.mean(axis=0)
            unit = power_of_two(np.abs(Xc).max(initial=0.0))
            pca = PCA(n_components=r, random_state=rng).fit(Xc / unit)
            var = pca.explained_variance_  # in unit^2
            # A direction the data do not vary along (below 1e-12 of the widest) gets the
            # widest one's scale: dividing by its ~0 spread gave entries of ~1e150.
            top = var.max() if var.max() > 0 else 1.0
            scale = np.sqrt(np.where(var > 1e-12 * top, var, top)) * unit
            return pca.components_ / scale[:, None] * n ** (1.0 / (r + 4))
        return _supervised_start(X, y, w, r, rng, loss_grad)

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Project ``X`` on the learned metric: ``X @ components_.T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Inputs.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            The learned coordinates (bandwidth 1 is the metric's own scale).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.components_.T

    def get_mahalanobis_matrix(self) -> np.ndarray:
        """Return ``M = W^T W``, the learned metric ``||W d||^2 = d^T M d`` (metric-learn's name).

        Returns
        -------
        ndarray of shape (n_features, n_features)
            Symmetric positive semi-definite.
        """
        check_is_fitted(self)
        return self.components_.T @ self.components_

    @property
    def _n_features_out(self) -> int:
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True  # y of several columns: their summed squares
        return tags


def _components(V: np.ndarray, x_unit: float) -> np.ndarray:
    """``W = V / x_unit``; a ValueError where it passes the float range (X's spread ~1e-308)."""
    with np.errstate(over="ignore"):
        W = V / x_unit
    if not np.isfinite(W).all():
        raise ValueError(
            f"The learned metric's entries pass the float range: X's spread ({x_unit:.3g}) "
            "is that small. Rescale X first (e.g. StandardScaler in a pipeline)."
        )
    return W


def _unit_spread(A: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Return ``(A - mean) / unit`` and ``unit``, the root mean square of the centred rows.

    Scaled by a power of two first, so that no square overflows or underflows;
    ``unit`` 1 for a constant ``A``.
    """
    live = w > 0
    A = A - A[live].mean(axis=0)
    big = float(power_of_two(np.abs(A[live]).max()))
    unit = big * float(np.sqrt(np.mean(np.square(A[live] / big))))
    unit = unit if unit > 0 else 1.0
    return A / unit, unit


def _refuse_categorical(X) -> None:
    dtypes = _pandas_dtypes(X)
    if dtypes is None:
        return
    columns = [str(c) for c, t in zip(X.columns, dtypes, strict=True) if _is_categorical_dtype(t)]
    if columns:
        raise ValueError(
            f"MLKR learns a linear map of numeric features; the categorical columns "
            f"{columns} have none. One-hot encode them (OneHotEncoder) or drop them."
        )


def _supervised_start(X, y, w, r, rng, loss_grad) -> np.ndarray:
    """``init="auto"``: per-feature bandwidths, the gradients' leading directions, a scale."""
    from ._search import BandwidthSearchCV
    from ._smoothers._nadaraya_watson import NadarayaWatsonRegressor

    n, d = X.shape
    sub = rng.choice(n, _INIT_ROWS, replace=False) if n > _INIT_ROWS else np.arange(n)
    # The loss does not change with the weights' scale, nor should its start: the
    # search's rule of thumb reads weights as counts, so they are given relative to
    # their mean (finite from 5e-324 to 1.7e308).
    v = w[sub] / power_of_two(w[sub].max())
    v /= v.mean()
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs")
    with config_context(enable_metadata_routing=False):  # its own weights, whatever the user's
        h = search.fit(X[sub], y[sub], sample_weight=v).best_estimator_.bandwidth_
    h = np.broadcast_to(np.asarray(h, dtype=np.float64), (d,))
    if r < d:
        # The outer product of gradients (Xia et al. 2002): its leading eigenvectors
        # span the directions the regression changes along.  In scaled coordinates
        # (x / h), where the gradient is h * df/dx.
        grads = search.best_estimator_.predict_gradient(X[sub]).reshape(len(sub), -1, d) * h
        M = np.einsum("i,iok,iol->kl", v, grads, grads)
        U = np.linalg.eigh(M)[1][:, ::-1][:, :r]
    else:
        U = np.eye(d)
    W0 = U.T / h
    # Bandwidth 1 in r dimensions is not h in d: the best of a few multiples.
    rows = sub if n > _INIT_ROWS else None
    factors = 2.0 ** np.arange(-2, 2.5, 0.5)
    losses = [loss_grad(f * W0, rows=rows, grad=False)[0] for f in factors]
    return factors[int(np.argmin(losses))] * W0


def _lbfgs(est, W0, loss_grad, log_w, rng):
    """Full batch: L-BFGS-B on the exact loss and gradient."""
    shape = W0.shape
    curve = [loss_grad(W0, grad=False)[0]]
    if est.max_iter == 0:
        return W0, 0, curve

    def fun(theta):
        loss, grad = loss_grad(theta.reshape(shape))
        return loss, grad.ravel()

    def callback(intermediate_result):
        curve.append(float(intermediate_result.fun))
        if est.verbose:
            print(f"[MLKR] iteration {len(curve) - 1}: loss {curve[-1]:.6g}", flush=True)  # noqa: T201

    result = minimize(fun, W0.ravel(), jac=True, method="L-BFGS-B", tol=est.tol,
                      callback=callback, options={"maxiter": est.max_iter})  # fmt: skip
    W, loss = result.x.reshape(shape), float(result.fun)
    if loss > curve[0]:  # a failed line search returns its last point: keep the start
        curve.append(curve[0])
        return W0, int(result.nfev), curve
    return W, int(result.nfev), curve


def _adam(est, W0, loss_grad, log_w, rng):
    """Minibatches of queries against every training key, Adam, held-out early stopping."""
    n = len(log_w)
    perm = rng.permutation(n)
    n_val = min(max(1, round(est.validation_fraction * n)), n - 2)
    val, train_rows = perm[:n_val], perm[n_val:]
    check_rows = val[:_MAX_CHECK_ROWS]
    keys = log_w.copy()
    keys[val] = -np.inf  # held-out rows are neither queries nor keys of the fit
    batch = min(_AUTO_BATCH if est.batch_size == "auto" else est.batch_size, len(train_rows))
    every = max(1, -(-10 * len(check_rows) // batch))

    def held_out(W):
        return loss_grad(W, rows=check_rows, keys=keys, grad=False)[0]

    best_W, best = W0, held_out(W0)
    curve, step, stale = [best], 0, 0
    lr = est.learning_rate * np.sqrt(np.mean(W0**2))
    W, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for _ in range(est.max_iter):
        order = rng.permutation(train_rows)
        for start in range(0, len(order), batch):
            _, g = loss_grad(W, rows=order[start : start + batch], keys=keys)
            step += 1
            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g**2
            m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
            W = W - lr * m_hat / (np.sqrt(v_hat) + eps)
            if step % every:
                continue
            curve.append(held_out(W))
            if est.verbose:
                print(f"[MLKR] step {step}: held-out loss {curve[-1]:.6g}", flush=True)  # noqa: T201
            if curve[-1] < best * (1 - est.tol):
                best, best_W, stale = curve[-1], W, 0
            else:
                stale += 1
            if stale >= est.n_iter_no_change:
                return best_W, step, curve
    return best_W, step, curve
