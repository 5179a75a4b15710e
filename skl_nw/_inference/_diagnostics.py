"""Fitted diagnostics of a linear smoother: tr(H), sigma^2, R^2, leave-one-out, AICc, GCV.

The numbers users of R's ``np`` (``summary(npreg(...))``) and statsmodels
expect from a fitted kernel regression, computed on demand by
:meth:`_SummaryMixin.summary` from the estimator's leave-one-out protocol
object (:class:`skl_nw._engine.LeaveOneOut`): one in-sample pass for the
fits and the hat diagonal (the :data:`skl_nw._inference._formulas.CRITERIA` machinery)
and one leave-one-out pass, both chunked by the engine (O(n) memory, O(n^2)
time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._engine import power_of_two
from .._smoothers._base import target_frame
from ._formulas import criterion_of_outputs

__all__ = ["SmootherSummary"]


@dataclass(frozen=True, eq=False)  # eq would compare the arrays element-wise
class SmootherSummary:
    """Diagnostics of a fitted smoother at its fitted bandwidth (see ``summary()``).

    Attributes
    ----------
    estimator : str
        The estimator's class name.
    n_samples : int
        Number of training rows.
    n : float
        Effective number of observations, ``sum_i w_i`` (the rows' count
        without sample weights).
    bandwidth : ndarray of shape (n_features,)
        ``bandwidth_``.
    kernel : str
        The kernel's name.
    degree : int
        Degree of the local polynomial (0: Nadaraya–Watson).
    trace : float
        Effective degrees of freedom ``tr(H) = sum_i H_ii`` (``H_ii`` point
        ``i``'s weight in its own fit, its sample weight included).
    residual_df : float
        ``n - tr(H)``.
    sigma2 : float
        Residual variance ``RSS / n``, ``RSS = sum_i w_i (y_i - yhat_i)^2``.
    r2 : float
        ``1 - RSS / TSS`` (weighted), as :func:`sklearn.metrics.r2_score`.
    loo_mse : float
        Weighted mean squared leave-one-out residual.
    aicc : float
        Hurvich, Simonoff & Tsai (1998):
        ``log sigma2 + (1 + tr(H) / n) / (1 - (tr(H) + 2) / n)``
        (+inf where ``tr(H) >= n - 2`` or ``sigma2 = 0``); with several
        targets, the mean of each one's (``log sigma2`` of each target).
    gcv : float
        Generalised cross-validation, ``sigma2 / (1 - tr(H) / n)^2``
        (+inf where ``tr(H) >= n``).
    """

    estimator: str
    n_samples: int
    n: float
    bandwidth: np.ndarray
    kernel: str
    degree: int
    trace: float
    residual_df: float
    sigma2: float
    r2: float
    loo_mse: float
    aicc: float
    gcv: float

    def __repr__(self) -> str:
        fields = ("n", "trace", "sigma2", "r2", "loo_mse", "aicc", "gcv")
        body = ", ".join(f"{f}={getattr(self, f):.6g}" for f in fields)
        return f"SmootherSummary({self.estimator}, {body})"

    def __str__(self) -> str:
        bandwidth = np.array2string(self.bandwidth, precision=4, separator=", ")
        rows = [
            ("Observations", f"{self.n_samples} (sum of weights {self.n:.6g})"),
            ("Kernel", self.kernel),
            ("Degree", str(self.degree)),
            ("Bandwidth", bandwidth),
            ("Effective df tr(H)", f"{self.trace:.4f}"),
            ("Residual df n - tr(H)", f"{self.residual_df:.4f}"),
            ("sigma^2 (RSS / n)", f"{self.sigma2:.4g}"),
            ("Residual std. error", f"{np.sqrt(self.sigma2):.4g}"),
            ("R^2", f"{self.r2:.4f}"),
            ("Leave-one-out MSE", f"{self.loo_mse:.4g}"),
            ("AICc", f"{self.aicc:.4f}"),
            ("GCV", f"{self.gcv:.4g}"),
        ]
        width = max(len(name) for name, _ in rows)
        lines = [f"{self.estimator} summary"]
        lines += [f"  {name + ':':<{width + 1}} {value}" for name, value in rows]
        return "\n".join(lines)


def _r2(Y: np.ndarray, fitted: np.ndarray, w: np.ndarray) -> float:
    """Weighted ``1 - RSS / TSS`` per output, averaged (``r2_score``'s uniform average).

    A constant target gives 1 for a perfect fit, else 0 (``r2_score``'s finite convention).
    """
    mean = w @ Y / w.sum()
    rss = w @ (Y - fitted) ** 2
    tss = w @ (Y - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(tss > 0, 1.0 - rss / tss, np.where(rss > 0, 0.0, 1.0))
    return float(r2.mean())


def summarize(estimator) -> SmootherSummary:
    """Compute the :class:`SmootherSummary` of a fitted regressor (see ``summary()``)."""
    loo = estimator._leave_one_out()
    Y, w = estimator._targets()  # w times the robustness weights, if any
    w = getattr(estimator, "_frequency", w)  # the residuals count by sample weight alone
    fits, hat = loo.fits(np.ones(1), n_jobs=estimator.n_jobs)
    fitted, loo_pred = fits[0], loo.predictions(np.ones(1), n_jobs=estimator.n_jobs)[0]
    n = float(w.sum())
    # Rows of weight 0 count nowhere (with fallback="nan" their fits may be NaN).
    live = w > 0
    trace = float(hat[0][live].sum())
    Y, fitted, loo_pred, w = Y[live], fitted[live], loo_pred[live], w[live]
    v = w / power_of_two(w.max())  # the means' weights, whose sums stay finite (w ~ 1e308)
    # Residuals in a power of two of each output's spread: squares of y ~ 1e160 overflowed
    # (r2 NaN) and of y ~ 1e-200 underflowed (r2 1 and AICc inf for a true -923).
    unit = target_frame(Y)[1]
    Y, fitted, loo_pred = Y / unit, fitted / unit, loo_pred / unit
    in_units = v @ (Y - fitted) ** 2 / v.sum()  # sigma^2 of each output, over unit^2
    with np.errstate(over="ignore"):  # beyond the float range: inf, as it is
        per_output, loo_mse = in_units * unit**2, (v @ (Y - loo_pred) ** 2 / v.sum()) * unit**2
    log_unit = 2.0 * np.log(unit).mean()  # AICc's mean log sigma^2 from the units'
    return SmootherSummary(
        estimator=type(estimator).__name__,
        n_samples=len(live),
        n=n,
        bandwidth=estimator.bandwidth_.copy(),
        kernel=estimator.kernel,
        degree=int(getattr(estimator, "degree", 0)),
        trace=trace,
        residual_df=n - trace,
        sigma2=float(per_output.mean()),
        r2=_r2(Y, fitted, v),
        loo_mse=float(loo_mse.mean()),
        aicc=float(criterion_of_outputs(in_units[None], np.array([trace]), n, "aicc")[0])
        + log_unit,
        gcv=float(criterion_of_outputs(per_output[None], np.array([trace]), n, "gcv")[0]),
    )


class _SummaryMixin:
    """``summary()`` for the regressors (Nadaraya–Watson and local polynomial)."""

    def summary(self) -> SmootherSummary:
        """Diagnostics of the fit at ``bandwidth_``: tr(H), sigma^2, R^2, LOO MSE, AICc, GCV.

        The fit is a linear smoother, ``yhat = H y`` with ``H_ij = l_j(x_i)``
        (the attention weights for Nadaraya–Watson, the equivalent-kernel
        weights of :meth:`LocalPolynomialRegressor.attention_weights`).
        Computed on demand, not at fit: one in-sample and one leave-one-out
        pass over the training set (O(n^2) time, memory bounded by the
        engine's chunks), the sums of :class:`BandwidthSearchCV`'s
        ``criterion="aicc"`` / ``"gcv"`` and leave-one-out search.

        Returns
        -------
        SmootherSummary
            ``trace = tr(H)``; ``sigma2 = RSS / n``, the maximum-likelihood
            residual variance that R's ``np`` reports (its ``MSE``) and that
            the AICc of Hurvich, Simonoff & Tsai (1998) is defined with
            (``RSS / (n - tr(H))``, the less biased one, is
            ``sigma2 * n / residual_df``); ``r2 = 1 - RSS / TSS`` as
            :func:`sklearn.metrics.r2_score` (R's ``np`` reports the squared
            correlation of ``y`` and ``yhat`` instead); ``loo_mse`` the mean
            squared leave-one-out residual, each point removed by index (its
            degenerate local problems refitted exactly; where they stay
            well-posed it is ``(y_i - yhat_i) / (1 - H_ii)``); ``aicc`` and
            ``gcv`` the criteria of :class:`BandwidthSearchCV` (its
            ``best_score_`` with ``criterion="aicc"`` is ``-aicc``).
            Sample weights are frequency weights: ``n = sum_i w_i``, the
            residual sums and R^2 weighted, ``H_ii`` includes ``w_i`` (integer
            weights give the numbers of the data with repeated rows, except
            the leave-one-out, which removes a row with its whole weight).
            With ``robust_iterations``, the robustness weights enter the fit
            (and so ``H``), not ``n`` or the residual sums: ``r2`` is then
            ``score(X, y)``.  Several targets: each number averaged over them.  NaN
            ``loo_mse`` only where ``fallback="nan"`` leaves a point without
            neighbours.  On :class:`NadarayaWatsonRegressor`'s binned path the
            leave-one-out is the search's binned one (to ``binned_tol``); the
            fits and ``H_ii`` are exact.

        Examples
        --------
        >>> import numpy as np
        >>> from skl_nw import NadarayaWatsonRegressor
        >>> X = np.linspace(0, 1, 50)[:, None]
        >>> y = np.sin(4 * X[:, 0]) + 0.1 * np.cos(40 * X[:, 0])
        >>> s = NadarayaWatsonRegressor(bandwidth=0.05).fit(X, y).summary()
        >>> print(s)
        NadarayaWatsonRegressor summary
          Observations:          50 (sum of weights 50)
          Kernel:                gaussian
          Degree:                0
          Bandwidth:             [0.05]
          Effective df tr(H):    8.5971
          Residual df n - tr(H): 41.4029
          sigma^2 (RSS / n):     0.004496
          Residual std. error:   0.06705
          R^2:                   0.9839
          Leave-one-out MSE:     0.006838
          AICc:                  -3.9174
          GCV:                   0.006557
        >>> round(s.trace, 3), round(s.r2, 3)
        (8.597, 0.984)
        """
        return summarize(self)
