"""What the routes score with: the default scorer, the losses of the gradient routes.

Identity estimators let any scorer score precomputed leave-one-out predictions.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, is_classifier
from sklearn.metrics import get_scorer
from sklearn.utils.metadata_routing import get_routing_for_object

# Probabilities below this are clipped in the log-loss, as sklearn.metrics.log_loss does.
PROBA_FLOOR = np.finfo(np.float64).eps


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
        y_true, pred = np.asarray(y_true), estimator.predict(X)
        if y_true.ndim == 2 and pred.ndim == 1:  # a column y of a single-output fit
            y_true = y_true[:, 0]
        residual = (y_true - pred) / self.unit
        squares = (residual**2).reshape(len(residual), -1).mean(axis=1)
        return -float(np.average(squares, weights=sample_weight))

    def __repr__(self) -> str:
        return f"{self.scorer!r} as {type(self.estimator).__name__}.score"

    def get_metadata_routing(self):
        return get_routing_for_object(self.estimator)


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
