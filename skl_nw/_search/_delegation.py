"""BandwidthSearchCV's methods that delegate to ``best_estimator_`` (GridSearchCV's way).

Each method exists exactly when the wrapped estimator (before fit) or the
refitted best estimator (after fit) has it: ``available_if`` keeps
``hasattr(search, "predict_interval")`` right at both times, and keyword
arguments (``return_std=True``, ``alpha=...``) pass through unchanged.
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils import get_tags
from sklearn.utils.metadata_routing import _routing_enabled, process_routing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._crps import DISTRIBUTION_CRITERIA

__all__ = ["_Delegation"]


def _estimator_has(attr: str):
    """Whether the fitted best estimator, or else the wrapped one, has ``attr``."""

    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, attr)
        return hasattr(self.estimator, attr)

    return check


class _Delegation:
    """The inference methods of :class:`BandwidthSearchCV`, those of ``best_estimator_``.

    ``available_if`` keeps ``hasattr(search, "predict_proba")`` right before
    and after fit; the tags are the wrapped estimator's.
    """

    @available_if(_estimator_has("predict"))
    def predict(self, X: ArrayLike, **kwargs):
        """Predict with the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        **kwargs : dict
            Passed to ``best_estimator_.predict``, e.g. ``return_std=True``
            for the regressors' standard errors.

        Returns
        -------
        ndarray or tuple of ndarray
            ``best_estimator_.predict(X, **kwargs)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X, **kwargs)

    @available_if(_estimator_has("predict_quantiles"))
    def predict_quantiles(self, X: ArrayLike, quantiles: ArrayLike) -> np.ndarray:
        """Conditional quantiles of the best estimator (see its ``predict_quantiles``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        quantiles : float or array-like of shape (q,)
            Levels.

        Returns
        -------
        ndarray of shape (n_queries, q)
            ``best_estimator_.predict_quantiles(X, quantiles)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_quantiles(X, quantiles)

    @available_if(_estimator_has("predict_cdf"))
    def predict_cdf(self, X: ArrayLike, y_values: ArrayLike) -> np.ndarray:
        """Conditional distribution function of the best estimator (see its ``predict_cdf``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y_values : array-like of shape (k,) or (n_queries, k)
            The y values.

        Returns
        -------
        ndarray of shape (n_queries, k)
            ``best_estimator_.predict_cdf(X, y_values)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_cdf(X, y_values)

    @available_if(_estimator_has("predict_pdf"))
    def predict_pdf(self, X: ArrayLike, y_values: ArrayLike) -> np.ndarray:
        """Conditional density of the best estimator (see its ``predict_pdf``).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y_values : array-like of shape (k,) or (n_queries, k)
            The y values.

        Returns
        -------
        ndarray of shape (n_queries, k)
            ``best_estimator_.predict_pdf(X, y_values)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_pdf(X, y_values)

    @available_if(_estimator_has("predict_interval"))
    def predict_interval(self, X: ArrayLike, **kwargs) -> np.ndarray:
        """Pointwise confidence intervals of the best estimator's fit.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        **kwargs : dict
            Passed to ``best_estimator_.predict_interval`` (``alpha``,
            ``method``, ``n_boot``, ``random_state``, ``multipliers``).

        Returns
        -------
        ndarray
            ``best_estimator_.predict_interval(X, **kwargs)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_interval(X, **kwargs)

    @available_if(_estimator_has("predict_gradient"))
    def predict_gradient(self, X: ArrayLike) -> np.ndarray:
        """Gradient of the best estimator's regression function at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray
            ``best_estimator_.predict_gradient(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_gradient(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities from the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``best_estimator_.predict_proba(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log class probabilities from the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``best_estimator_.predict_log_proba(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_estimator_has("score_samples"))
    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """Log density of the queries under the best estimator (classifiers).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,)
            ``best_estimator_.score_samples(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.score_samples(X)

    @available_if(_estimator_has("score_class_samples"))
    def score_class_samples(self, X: ArrayLike) -> np.ndarray:
        """Log density of each class at the queries under the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``best_estimator_.score_class_samples(X)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.score_class_samples(X)

    @available_if(_estimator_has("attention_weights"))
    def attention_weights(self, X: ArrayLike, *, sparse: bool = False):
        """Attention weights of the best estimator.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        sparse : bool, default=False
            A CSR matrix of the non-zero weights instead of a dense array.

        Returns
        -------
        ndarray or csr_matrix of shape (n_queries, n_samples_fit)
            ``best_estimator_.attention_weights(X, sparse=sparse)``.
        """
        check_is_fitted(self)
        return self.best_estimator_.attention_weights(X, sparse=sparse)

    @available_if(_estimator_has("score"))
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Score of the best estimator (R² for regressors, accuracy for classifiers).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        y : array-like of shape (n_queries,) or (n_queries, n_targets)
            True targets or labels.
        sample_weight : array-like of shape (n_queries,), default=None
            Sample weights.

        Returns
        -------
        float
            ``best_estimator_.score(X, y, sample_weight)``.
        """
        check_is_fitted(self)
        if not _routing_enabled():
            return self.best_estimator_.score(X, y, sample_weight=sample_weight)
        given = {} if sample_weight is None else {"sample_weight": sample_weight}
        routed = process_routing(self, "score", **given)
        return self.best_estimator_.score(X, y, **routed.estimator.score)

    @property
    def classes_(self) -> np.ndarray:
        """Class labels of the best estimator (classifiers only)."""
        check_is_fitted(self)
        return self.best_estimator_.classes_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = deepcopy(sub.classifier_tags)
        tags.regressor_tags = deepcopy(sub.regressor_tags)
        tags.target_tags = deepcopy(sub.target_tags)
        tags.input_tags = deepcopy(sub.input_tags)
        if self.criterion in DISTRIBUTION_CRITERIA:  # a distribution of one target
            tags.target_tags.multi_output = False
            tags.target_tags.single_output = True
        return tags
