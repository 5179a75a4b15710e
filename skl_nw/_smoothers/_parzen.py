"""ParzenClassifier: Nadaraya–Watson regression on one-hot labels (Parzen windows)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils.multiclass import check_classification_targets

from .._inference._methods import _DensityMixin
from . import _loess
from ._base import _NWBase, power_of_two

__all__ = ["ParzenClassifier"]


class ParzenClassifier(_DensityMixin, ClassifierMixin, _NWBase):
    """Parzen-window classifier: Nadaraya–Watson regression on one-hot labels.

    With ``priors=None`` the class probabilities are the attention-pooled
    one-hot labels,

    ``P(c | q) = sum_{i in c} w_i K(u_i) / sum_i w_i K(u_i)``.

    This *is* the Parzen-window (kernel density) classifier: with empirical
    priors ``pi_c = W_c / W`` and class densities
    ``p(q | c) ∝ sum_{i in c} w_i K(u_i) / W_c`` (``W_c`` the class weight), Bayes'
    rule ``pi_c p(q | c) / sum_c' pi_c' p(q | c')`` cancels ``W_c`` and the
    kernel's normalising constant and gives the same expression.  Given
    ``priors``, ``P(c | q) ∝ pi_c sum_{i in c} w_i K(u_i) / W_c``.

    Parameters
    ----------
    bandwidth : float, array-like of shape (n_features,) or {"scott", "silverman"}, \
default="scott"
        Kernel width ``h``, one per feature or shared (see :func:`rule_of_thumb`).
    kernel : {"gaussian", "tophat", "boxcar", "epanechnikov", "exponential", \
"linear", "triangular", "cosine", "tricube", "biweight", "triweight"}, default="gaussian"
        Kernel profile.
    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, default="auto"
        How the kernel sums are computed.  "brute" sums over every training
        point in chunks of queries; "kd_tree" / "ball_tree" build scikit-learn's
        tree on the scaled data at fit and sum over each query's neighbourhood
        (``query_radius``).  The algorithm changes speed, not results: compact
        kernels are exact on every path, infinite-support kernels agree to
        ``rtol``.  "auto" picks from the data size, dimension, kernel and the
        neighbourhood size that the bandwidth implies (brute force below 1,000
        points, above 12 features and for the Gaussian whenever its weights
        fold into one matrix product; a ball tree where a query's neighbourhood
        holds a small share of the data); ``tree_`` shows the choice.
        "binned" (1 to 3 features) approximates the sums on a regular grid
        (linear binning, one FFT convolution, multilinear interpolation) to
        ``binned_tol``: see the user guide's "Binned path"; "auto" takes it
        only when ``binned_tol`` is set, from 100,000 training points on, and
        where its grid fits the path's memory limit.
    leaf_size : int, default=40
        Leaf size of the tree.
    rtol : float, default=1e-16
        Tree path, infinite-support kernels (gaussian, exponential): each query
        sums over the radius outside which the total kernel mass is at most
        ``rtol`` times the mass inside, so the prediction differs from the
        exact one by at most ``rtol * (max(y) - min(y))`` (per output; class
        probabilities by at most ``rtol``).  The default changes nothing at
        float64 precision; larger values trade accuracy for speed; 0 sums over
        every point.  Brute force and compact kernels are always exact.
    priors : array-like of shape (n_classes,), default=None
        Class prior probabilities in ``classes_`` order.  None uses the
        (weighted) class frequencies of the training set.
    n_jobs : int, default=None
        Threads over chunks of queries at predict.
    binned_tol : float in (0, 1), default=None
        Accuracy of ``algorithm="binned"``: the grid spacing is
        ``3 sqrt(binned_tol / d)`` bandwidths (``binned_tol / d`` for the
        tophat), and predictions on data with many points per bandwidth
        differ from the exact ones by at most about
        ``binned_tol * (max(y) - min(y))`` (class probabilities by about
        ``binned_tol``); the user guide states the bound and when it holds.
        None: 1e-4 with ``algorithm="binned"``, and "auto" never bins.

    categorical_features : "from_dtype", array-like of bool, int or str, or None, \
default="from_dtype"
        Features smoothed by a discrete kernel with a bandwidth ``lambda``
        instead of a continuous one: a boolean mask of shape (n_features,),
        integer indices, or feature names; "from_dtype" takes the pandas
        ``category`` columns of a DataFrame (numpy input stays continuous);
        None makes every feature continuous.  Their labels may be any hashable
        values (ints, strings, pandas categories); a category unseen at fit
        matches no training category; a missing value (NaN, None) is an error.
    ordered_features : "from_dtype", array-like of bool, int or str, or None, \
default="from_dtype"
        The categorical features whose categories are ordered, compared by
        the distance between their positions in the order (the sorted labels,
        or the pandas-declared order); same forms, "from_dtype" taking the
        ordered pandas categoricals.  A feature named here is categorical
        whether or not ``categorical_features`` names it.
    categorical_kernel : {"aitchison_aitken", "li_racine"}, default="aitchison_aitken"
        Kernel of the unordered categorical features: Aitchison–Aitken,
        ``1 - lambda`` for equal categories and ``lambda / (c - 1)`` otherwise
        (``c`` categories, ``0 <= lambda <= (c - 1) / c``), or Li–Racine, 1 and
        ``lambda`` (``0 <= lambda <= 1``).
    ordered_kernel : {"wang_van_ryzin", "li_racine"}, default="wang_van_ryzin"
        Kernel of the ordered features: Wang–van Ryzin, ``1 - lambda`` for
        equal categories and ``(1 - lambda) / 2 * lambda^|a - b|`` otherwise
        (``0 <= lambda < 1``), or Li–Racine, ``lambda^|a - b|``
        (``0 <= lambda <= 1``).  ``lambda = 0`` smooths nothing (only the
        query's own category counts); the largest ``lambda`` of the
        Aitchison–Aitken and Li–Racine kernels ignores the feature.
    span : float > 0, default=None
        Nearest-neighbour bandwidths (LOESS's span), as for
        :class:`NadarayaWatsonRegressor`: each query's kernel scale is its
        distance to its ``k = floor(span * n)``-th nearest training row in the
        metric ``||(x - q) / bandwidth_||``.  Not with ``algorithm="binned"``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    class_prior_ : ndarray of shape (n_classes,)
        The priors in use: ``priors``, or the weighted class frequencies.
    bandwidth_ : ndarray of shape (n_features,)
        The bandwidth of each feature used at fit.
    tree_ : list of KDTree or BallTree, or None
        One tree per class over the bandwidth-scaled (centred) training inputs
        of positive weight (so each class's log-probability keeps ``rtol``
        accuracy however far the class is), or None on the brute-force path.
        Trees store their points in leaf order: their indices are not those of
        the training set.
    is_categorical_ : ndarray of bool of shape (n_features,)
        Which features are categorical.
    is_ordered_ : ndarray of bool of shape (n_features,)
        Which categorical features are ordered.
    categories_ : list of ndarray
        The categories of each categorical feature, in feature order and in
        code order (the pandas-declared categories, or the sorted labels seen
        at fit).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.
    n_neighbors_ : int or None
        The neighbour count ``k`` of ``span`` (None without it).

    See Also
    --------
    NadarayaWatsonRegressor : The same attention pooling of real targets.
    BandwidthSearchCV : Choose ``bandwidth`` by closed-form leave-one-out or SGD.

    Notes
    -----
    A compact kernel with no training point inside its support uses the
    ``h -> 0`` limit: the class shares of the nearest training point(s).
    Probabilities are computed in log space, with each class shifted by its own
    maximum, so ``predict_log_proba`` is finite wherever the probability is
    positive; it is ``-inf`` exactly where the probability is exactly 0 (no
    point of that class inside a compact kernel's support).

    Categorical features multiply the kernel by their discrete kernels, as
    in :class:`NadarayaWatsonRegressor` (whose Notes give the ``lambda = 0``
    limit).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from skl_nw import ParzenClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = ParzenClassifier().fit(X, y)
    >>> clf.predict(X[[0, 60, 120]])
    array([0, 1, 2])
    >>> clf.predict_proba(X[[70]]).round(3)
    array([[0.   , 0.558, 0.442]])
    """

    _parameter_constraints: dict = {
        **_NWBase._parameter_constraints,
        "priors": ["array-like", None],
        **_loess.SPAN_CONSTRAINTS,
    }

    def __init__(
        self,
        bandwidth: float | ArrayLike | str = "scott",
        *,
        kernel: str = "gaussian",
        algorithm: str = "auto",
        leaf_size: int = 40,
        rtol: float = 1e-16,
        priors: ArrayLike | None = None,
        n_jobs: int | None = None,
        binned_tol: float | None = None,
        categorical_features="from_dtype",
        ordered_features="from_dtype",
        categorical_kernel: str = "aitchison_aitken",
        ordered_kernel: str = "wang_van_ryzin",
        span: float | None = None,
    ) -> None:
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.rtol = rtol
        self.priors = priors
        self.n_jobs = n_jobs
        self.binned_tol = binned_tol
        self.categorical_features = categorical_features
        self.ordered_features = ordered_features
        self.categorical_kernel = categorical_kernel
        self.ordered_kernel = ordered_kernel
        self.span = span

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None):
        """Store the bandwidth-scaled training set, sorted by class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels (any type scikit-learn accepts).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights with a positive sum.

        Returns
        -------
        self : ParzenClassifier
            The fitted estimator.
        """
        X, y = self._validate_fit(X, y, sample_weight)
        check_classification_targets(y)
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        n_classes = len(self.classes_)
        priors = self._check_priors(n_classes)
        Xs, w = self._fit_inputs(X, sample_weight)
        # In units of a power of two near the largest weight (exact): weights near 1e308
        # sum past the float maximum (NaN priors).
        unit = power_of_two(w.max())
        class_weight = np.bincount(y_enc, weights=w / unit, minlength=n_classes)
        self.class_prior_ = class_weight / class_weight.sum() if priors is None else priors
        self._class_weight = class_weight  # for the densities of score_samples

        if priors is not None:
            # P(c | q) ∝ pi_c sum_{i in c} w_i K_i / W_c: rescale each class's weights.
            # w_i / W_c <= 1 cannot overflow; a class of zero weight gives 0 / 0 -> 0.
            with np.errstate(divide="ignore", invalid="ignore"):
                w = w / unit / class_weight[y_enc] * priors[y_enc]
            w = np.where(np.isfinite(w), w, 0.0)
        _loess.build(self, None, Xs, w, np.eye(n_classes)[y_enc], groups=y_enc)
        return self

    def _check_priors(self, n_classes: int) -> np.ndarray | None:
        if self.priors is None:
            return None
        priors = np.asarray(self.priors)
        if priors.dtype.kind not in "iuf" or priors.shape != (n_classes,):
            raise ValueError(
                f"priors must be an array of shape (n_classes,) = ({n_classes},) with one "
                f"probability per class in classes_ order; got {self.priors!r}."
            )
        priors = priors.astype(np.float64)
        if not (np.all(np.isfinite(priors)) and np.all(priors >= 0)):
            raise ValueError(f"priors must be non-negative and finite; got {priors}.")
        if not np.isclose(priors.sum(), 1.0):
            raise ValueError(f"priors must sum to 1; got sum {priors.sum()}.")
        return priors / priors.sum()

    def _log_class_sums(self, X: ArrayLike) -> np.ndarray:
        Q = self._queries(X)  # checks the fit first
        return self._backend.class_log_sums(Q, self._kernel, self._options())

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log class probabilities, computed in log space.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``log P(c | q)`` in ``classes_`` order.
        """
        L = self._log_class_sums(X)
        # Shift each row by its maximum first: far from the data (log sums near
        # -1e24) logsumexp's own ``max + log(sum)`` rounds the log(sum) away and
        # the probabilities no longer sum to 1.
        top = L.max(axis=1, keepdims=True)
        L -= np.where(np.isfinite(top), top, 0.0)
        return L - logsumexp(L, axis=1, keepdims=True)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities: the attention-pooled one-hot labels.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries, n_classes)
            ``P(c | q)`` in ``classes_`` order; rows sum to 1.
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predict the most probable class at each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.

        Returns
        -------
        ndarray of shape (n_queries,)
            Labels from ``classes_``.
        """
        best = np.argmax(self._log_class_sums(X), axis=1)
        return self.classes_[best]

    def attention_weights(self, X: ArrayLike, *, sparse: bool = False):
        """Return the attention weights of every query on every training point.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            Queries.
        sparse : bool, default=False
            Return a ``scipy.sparse`` CSR matrix of the non-zero weights instead
            of a dense array, whatever ``algorithm`` is.

        Returns
        -------
        ndarray or csr_matrix of shape (n_queries, n_samples_fit)
            Non-negative rows summing to 1, columns in training order, so that
            ``attention_weights(X) @ onehot(y)`` equals ``predict_proba(X)``.

        Raises
        ------
        MemoryError
            Before any work, when the dense matrix would exceed scikit-learn's
            ``working_memory`` budget (pass ``sparse=True``, or fewer queries).
        """
        return self._attention(X, "nearest", sparse)
