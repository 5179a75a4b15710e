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

from ._diagnostics import SmootherSummary
from ._estimators import NadarayaWatsonRegressor, rule_of_thumb
from ._kernels import KERNELS, Kernel, get_kernel
from ._local_poly import LocalPolynomialRegressor
from ._metric_learning import MLKR
from ._parzen import ParzenClassifier
from ._search import BandwidthSearchCV
from ._significance import SignificanceResult, significance_test

__version__ = "0.1.0"

__all__ = [
    "BandwidthSearchCV",
    "KERNELS",
    "Kernel",
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
