"""Nadaraya–Watson kernel regression and Parzen-window classification.

The 1964 estimator that attention grew out of: the query is where we predict,
the keys are the training inputs, the values are the training targets, and the
attention weights are the softmax of negative scaled squared distances.
"""

from ._estimators import NadarayaWatsonRegressor, rule_of_thumb
from ._kernels import KERNELS, Kernel, get_kernel
from ._local_poly import LocalPolynomialRegressor
from ._parzen import ParzenClassifier
from ._search import BandwidthSearchCV
from ._significance import SignificanceResult, significance_test

__version__ = "0.1.0"

__all__ = [
    "BandwidthSearchCV",
    "KERNELS",
    "Kernel",
    "LocalPolynomialRegressor",
    "NadarayaWatsonRegressor",
    "ParzenClassifier",
    "SignificanceResult",
    "__version__",
    "get_kernel",
    "rule_of_thumb",
    "significance_test",
]
