"""Nadaraya–Watson kernel regression and Parzen-window classification.

The 1964 estimator that attention grew out of: the query is where we predict,
the keys are the training inputs, the values are the training targets, and the
attention weights are the softmax of negative scaled squared distances.

The public API is the names below (``skl_nw.__all__``), imported from
``skl_nw`` itself.  Every module whose name starts with an underscore (the
PACKAGE CONTENTS that ``help(skl_nw)`` lists) is private and may change
without notice.

Estimators (scikit-learn compatible)
    NadarayaWatsonRegressor: kernel-weighted mean of the targets.
    KernelQuantileRegressor: conditional quantiles of the same weights.
    LocalPolynomialRegressor: weighted least-squares polynomial at each query.
    ParzenClassifier: class probabilities by Parzen windows.
    BandwidthSearchCV: bandwidth selection by leave-one-out or cross-validation.
    MLKR: a learned attention metric (a projection W) by the leave-one-out loss.

Functions and results
    rule_of_thumb: per-feature Scott or Silverman bandwidths.
    significance_test: does a regression depend on some of its features?
    SignificanceResult: what significance_test returns.
    SmootherSummary: what the regressors' summary() returns.

Kernels
    KERNELS: the kernel records by name and alias.
    Kernel: one kernel as data (profile, support, normalisation).
    get_kernel: the record of a name or alias.

``python -m skl_nw demo`` runs the textbook attention-pooling experiment.
"""

import sys as _sys

from ._inference import _diagnostics, _significance
from ._inference._diagnostics import SmootherSummary
from ._inference._significance import SignificanceResult, significance_test
from ._kernels import KERNELS, Kernel, get_kernel
from ._metric_learning import MLKR
from ._search import BandwidthSearchCV
from ._smoothers import _local_poly, _nadaraya_watson, _parzen
from ._smoothers._local_poly import LocalPolynomialRegressor
from ._smoothers._nadaraya_watson import NadarayaWatsonRegressor, rule_of_thumb
from ._smoothers._parzen import ParzenClassifier
from ._smoothers._quantile import KernelQuantileRegressor

# Pickles made before the subpackages name the estimators' old modules: they still load.
for _old, _new in {
    "_estimators": _nadaraya_watson,
    "_local_poly": _local_poly,
    "_parzen": _parzen,
    "_diagnostics": _diagnostics,
    "_significance": _significance,
}.items():
    _sys.modules.setdefault(f"{__name__}.{_old}", _new)
del _old, _new

__version__ = "0.1.0"

__all__ = [
    "BandwidthSearchCV",
    "KERNELS",
    "Kernel",
    "KernelQuantileRegressor",
    "LocalPolynomialRegressor",
    "MLKR",
    "NadarayaWatsonRegressor",
    "ParzenClassifier",
    "SignificanceResult",
    "SmootherSummary",
    "__version__",
    "get_kernel",
    "rule_of_thumb",
    "significance_test",
]
