"""Categorical and ordered features: which they are, their codes, their kernel rows.

The estimator side of mixed data.  At fit, :func:`resolve` finds the
categorical features (``categorical_features`` / ``ordered_features``, or the
pandas dtypes), and :class:`Categories` learns each one's categories and
turns columns of labels into codes.  The engine then sees, per query, the
continuous scaled coordinates followed by the *log-kernel rows*
``log L_j(a_j, b; lambda_j)`` for every category ``b`` of every categorical
feature ``j``: the log of the discrete product kernel between a query and a
training point is the dot product of that row with the point's one-hot codes
(dot-product attention on one-hot codes).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_array

from ._discrete_kernels import DiscreteKernel, get_discrete_kernel

__all__ = ["Categories", "check_numeric", "encode", "feature_label", "feature_names", "resolve"]

_FORMS = (
    '"from_dtype", None, a boolean mask of shape (n_features,), integer indices or feature names'
)


def feature_names(X) -> list[str] | None:
    """Return the column names of a DataFrame ``X``, or None.

    None also when some name is not a string: scikit-learn then sets no
    ``feature_names_in_`` either, and messages name columns by position.
    """
    columns = getattr(X, "columns", None)
    if columns is None or not all(isinstance(c, str) for c in columns):
        return None
    return list(columns)


def feature_label(j: int, names: list[str] | None = None) -> str:
    """Return how messages name feature ``j``: ``'region' (column 1)``, or ``1`` without names.

    Examples
    --------
    >>> feature_label(1, ["size", "region"]), feature_label(1)
    ("'region' (column 1)", '1')
    """
    j = int(j)
    return f"{names[j]!r} (column {j})" if names is not None else str(j)


def _labels_of(columns, names: list[str] | None) -> str:
    """``feature_label`` of several features, joined: ``'a' (column 0), 'c' (column 2)``."""
    return ", ".join(feature_label(j, names) for j in columns)


def _string_error(column) -> str | None:
    """Return why a column does not convert to float64 when it holds strings (labels), or None.

    Other objects are left to ``validate_data``, whose TypeError scikit-learn's
    common checks expect.
    """
    try:
        np.asarray(column, dtype=np.float64)
    except (TypeError, ValueError) as error:
        return str(error) if any(isinstance(v, (str, bytes)) for v in column) else None
    return None


def _raise_for_strings(columns, causes: list[str | None], names: list[str] | None) -> None:
    """Raise for the continuous ``columns`` whose cause is not None: which, and what to do."""
    bad = [j for j, cause in zip(columns, causes, strict=True) if cause is not None]
    if not bad:
        return
    spec = [names[j] for j in bad] if names is not None else [int(j) for j in bad]
    raise ValueError(
        f"X has strings in continuous feature(s) {_labels_of(bad, names)} "
        f"({next(c for c in causes if c is not None)}). If they are labels, pass "
        f"categorical_features={spec!r} (or ordered_features, for ordered labels) or give "
        "them a pandas 'category' dtype; otherwise convert them to numbers."
    )


def check_numeric(X, mask: np.ndarray | None = None) -> None:
    """Raise a ValueError naming the columns of ``X`` outside ``mask`` that hold strings.

    What ``validate_data`` would report as "could not convert string to
    float", with the columns named and the remedy (``categorical_features``).
    Only DataFrame columns of object, string or categorical dtype and
    arrays of object or string dtype are looked at: numeric input costs
    nothing here.
    """
    dtypes = _pandas_dtypes(X)
    if dtypes is not None:
        kinds = [getattr(t, "kind", "O") for t in dtypes]
        looked = {j: X.iloc[:, j] for j, kind in enumerate(kinds) if kind in "OSU"}
    elif isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "OSU":
        looked = dict(enumerate(X.T))
    else:
        return
    if mask is not None:
        looked = {j: column for j, column in looked.items() if not mask[j]}
    _raise_for_strings(list(looked), [_string_error(c) for c in looked.values()], feature_names(X))


def _pandas_dtypes(X) -> list | None:
    dtypes = getattr(X, "dtypes", None)
    return None if dtypes is None or not hasattr(X, "columns") else list(dtypes)


def _is_categorical_dtype(dtype) -> bool:
    return getattr(dtype, "name", None) == "category"


def _mask(spec, X, name: str, from_dtype) -> np.ndarray:
    """Boolean mask of shape (n_features,) from one of the accepted forms."""
    d = X.shape[1]
    if spec is None:
        return np.zeros(d, bool)
    if isinstance(spec, str) and spec == "from_dtype":
        dtypes = _pandas_dtypes(X)
        return np.zeros(d, bool) if dtypes is None else np.array([from_dtype(t) for t in dtypes])
    spec = np.asarray(spec)
    if spec.ndim == 1 and spec.size == 0:
        return np.zeros(d, bool)
    if spec.ndim == 1 and spec.dtype.kind == "b":
        if spec.shape != (d,):
            raise ValueError(f"{name} as a boolean mask must have shape ({d},); got {spec.shape}.")
        return spec.copy()
    mask = np.zeros(d, bool)
    if spec.ndim == 1 and spec.dtype.kind in "iu":
        if spec.size and not (spec.min() >= -d and spec.max() < d):
            raise ValueError(f"{name} holds an index outside [0, {d}); got {spec.tolist()}.")
        mask[spec] = True
        return mask
    if spec.ndim == 1 and spec.dtype.kind in "UO" and all(isinstance(s, str) for s in spec):
        columns = getattr(X, "columns", None)
        if columns is None:
            raise ValueError(
                f"{name} names features, but X has no feature names (not a DataFrame)."
            )
        names = [str(c) for c in columns]
        for s in spec:
            if s not in names:
                raise ValueError(f"{name} names {s!r}, which is not a feature of X; got {names}.")
            mask[names.index(s)] = True
        return mask
    raise ValueError(f"{name} must be {_FORMS}; got {spec!r}.")


def resolve(est, X) -> Categories | None:
    """Return the unfitted :class:`Categories` of ``X`` for ``est``'s parameters, or None."""
    if not hasattr(X, "shape") or len(getattr(X, "shape", ())) != 2:
        X = np.asarray(X, dtype=object)
        if X.ndim != 2:
            return None  # validate_data raises its own error on such input
    ordered = _mask(
        est.ordered_features, X, "ordered_features",
        lambda t: _is_categorical_dtype(t) and bool(t.ordered),
    )  # fmt: skip
    categorical = _mask(est.categorical_features, X, "categorical_features", _is_categorical_dtype)
    categorical |= ordered
    if not categorical.any():
        return None
    kernels = {
        False: get_discrete_kernel(est.categorical_kernel, False),
        True: get_discrete_kernel(est.ordered_kernel, True),
    }
    return Categories(categorical, ordered, kernels, names=feature_names(X))


def encode(est, X, sample_weight=None) -> tuple[Categories | None, np.ndarray | None]:
    """Return the fitted :class:`Categories` of ``X`` for ``est`` and X as floats (codes).

    ``(None, None)`` when every feature is continuous.  What the search and
    the significance test need to merge rows or to vary a category, without
    fitting the estimator; ``sample_weight`` as the estimator's fit takes it
    (the categories are those of rows of positive weight).
    """
    cats = resolve(est, X)
    if cats is None:
        return None, None
    positive = None if sample_weight is None else np.asarray(sample_weight) > 0
    return cats, cats.fit(X, check_array(X, dtype=None, ensure_all_finite=False), positive)


def _labels(Xv: np.ndarray) -> np.ndarray:
    """Return a validated X whose columns keep their labels: object unless numeric."""
    return Xv if Xv.dtype.kind in "fiub" else np.asarray(Xv, dtype=object)


def _missing(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind != "O":
        return np.zeros(len(values), bool)
    return np.array([_is_missing(v) for v in values], bool)


def _is_missing(v) -> bool:
    """None, NaN, NaT or ``pandas.NA`` (whose comparisons are themselves NA)."""
    if v is None:
        return True
    try:
        return bool(v != v)
    except TypeError:
        return True


class Categories:
    """The categorical features of a fitted estimator.

    Attributes
    ----------
    mask, ordered : ndarray of bool of shape (n_features,)
        Which features are categorical, and which of them are ordered.
    categories : list of ndarray
        Per categorical feature (in feature order), its categories in code
        order: the pandas-declared categories, or the sorted labels seen at fit.
    kernels : list of DiscreteKernel
        Per categorical feature.
    codes : ndarray of int of shape (n_samples, n_categorical)
        The training rows' codes (set by :meth:`fit`).
    names : list of str or None
        The feature names (a DataFrame's columns), with which messages name
        features (:func:`feature_label`).
    """

    def __init__(
        self, mask: np.ndarray, ordered: np.ndarray, kernels: dict, names: list[str] | None = None
    ):
        self.mask, self.ordered = mask, ordered
        self.kernels: list[DiscreteKernel] = [kernels[bool(o)] for o in ordered[mask]]
        self.columns = np.flatnonzero(mask)
        self.names = names

    def label(self, j: int) -> str:
        """Name feature ``j`` in a message (see :func:`feature_label`)."""
        return feature_label(j, self.names)

    @property
    def sizes(self) -> np.ndarray:
        """Number of categories ``c_j`` per categorical feature."""
        return np.array([len(c) for c in self.categories], dtype=np.intp)

    def fit(self, X_in, Xv: np.ndarray, positive: np.ndarray | None = None) -> np.ndarray:
        """Learn the categories; return ``Xv`` as floats, categorical columns as codes.

        ``positive`` (n,) bool: the rows of positive weight, whose labels are
        the categories (a row of weight 0 is no row: scikit-learn's convention);
        the other rows' labels none of them has take code 0, which counts
        nowhere (their weight is 0), so that every training code is a category.
        """
        Xv = _labels(Xv)
        self.categories, self.declared = [], []
        dtypes = _pandas_dtypes(X_in)
        for j in self.columns:
            column = self._column(X_in, Xv, j)
            dtype = None if dtypes is None else dtypes[j]
            if _is_categorical_dtype(dtype):
                self.categories.append(np.asarray(dtype.categories))
                self.declared.append(True)
            else:
                try:
                    self.categories.append(np.unique(column if positive is None
                                                     else column[positive]))  # fmt: skip
                except TypeError as error:
                    raise ValueError(
                        f"The categories of feature {self.label(j)} cannot be sorted ({error}); "
                        "give the column one type, or a pandas categorical dtype."
                    ) from None
                self.declared.append(False)
        X = self.encode(X_in, Xv)
        if positive is not None:  # unseen codes (-1, or halfway for an ordered feature)
            X[:, self.columns] = np.maximum(np.floor(X[:, self.columns]), 0)
        self.codes = X[:, self.columns].astype(np.intp)
        return X

    def _column(self, X_in, Xv, j) -> np.ndarray:
        column = Xv[:, j]
        if _missing(column).any():
            raise ValueError(
                f"Categorical feature {self.label(j)} holds missing values (NaN or None); "
                "encode them as a category of their own, or drop those rows."
            )
        return column

    def encode(self, X_in, Xv: np.ndarray) -> np.ndarray:
        """Floats of shape (n, n_features): continuous columns as given, categorical as codes.

        A category unseen at fit gets code -1 (unordered: it matches no
        training category), or for an ordered feature whose categories are
        sorted labels, the position halfway between its sorted neighbours.
        """
        Xv = _labels(Xv)
        X = np.empty(Xv.shape)
        continuous = np.flatnonzero(~self.mask)
        if continuous.size:
            X[:, continuous] = _floats(Xv[:, continuous], continuous, self.names)
        for t, j in enumerate(self.columns):
            X[:, j] = self._codes(self._column(X_in, Xv, j), t, j)
        return X

    def _codes(self, column: np.ndarray, t: int, j: int) -> np.ndarray:
        """Codes of the labels ``column`` of categorical feature ``j`` (its ``t``-th)."""
        categories = self.categories[t]
        if self.declared[t]:
            codes = _lookup(categories, column)
        elif categories.dtype.kind in "fiub" and column.dtype.kind in "fiub":
            # Compared as numbers, never cast to the categories' dtype: 1.5 is no int.
            codes = _positions(categories, column, bool(self.ordered[j]))
        elif self.ordered[j]:
            try:
                codes = _positions(categories, np.asarray(column, dtype=object), True)
            except TypeError:
                bad = next(v for v in column.tolist() if not _comparable(v, categories))
                raise ValueError(
                    f"Ordered feature {self.label(j)} has the value {bad!r}, which does not "
                    f"compare with its categories {categories.tolist()!r} seen at fit, so its "
                    "position in the order is unknown."
                ) from None
        else:  # labels of any type: one unseen (of another type too) gets -1
            codes = _lookup(categories, column)
        if self.ordered[j] and self.declared[t] and (codes < 0).any():
            unseen = column[np.flatnonzero(codes < 0)[0]]
            raise ValueError(
                f"Ordered feature {self.label(j)} has the value {unseen!r}, not among the "
                "categories of its declared order at fit, so its position in the order is "
                "unknown."
            )
        return codes

    def log_rows(self, codes: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
        """Return the log-kernel rows (m, sum_j c_j) of queries with codes (m, n_categorical)."""
        return np.hstack([
            kernel.log_value(lam, c, self.distances(codes[:, t], t))
            for t, (kernel, lam, c) in enumerate(self._each(lambdas))
        ])  # fmt: skip

    def _each(self, lambdas):
        return zip(self.kernels, lambdas, self.sizes, strict=True)

    def dlog_rows(self, codes: np.ndarray, lambdas: np.ndarray) -> list[np.ndarray]:
        """Per categorical feature, ``d log L / d lambda`` rows (m, c_j)."""
        return [
            kernel.dlog_dlambda(lam, c, self.distances(codes[:, t], t))
            for t, (kernel, lam, c) in enumerate(self._each(lambdas))
        ]  # fmt: skip

    def distances(self, codes: np.ndarray, t: int) -> np.ndarray:
        """Return ``|a - b|`` (ordered) or ``[a != b]`` (unordered) against every category b."""
        b = np.arange(self.sizes[t])
        if self.kernels[t].ordered:
            return np.abs(codes[:, None] - b)
        return (codes[:, None] != b).astype(np.float64)

    def max_lambdas(self) -> np.ndarray:
        return np.array([k.max_lambda(c) for k, c in zip(self.kernels, self.sizes, strict=True)])

    def default_lambdas(self, n: float, n_continuous: int) -> np.ndarray:
        """``lambda_max n^(-2 / (q + 4))`` (``q`` continuous features): Li and Racine's rate.

        ``n`` below 2 (frequency weights summing to less) counts as 2, so that the
        lambdas stay inside every kernel's range.
        """
        return self.max_lambdas() * max(float(n), 2.0) ** (-2.0 / (n_continuous + 4))

    def check_lambdas(self, lambdas: np.ndarray) -> None:
        """Raise a ValueError naming the feature when a lambda is outside its kernel's range."""
        for t, (kernel, lam, top) in enumerate(
            zip(self.kernels, lambdas, self.max_lambdas(), strict=True)
        ):
            inside = 0 <= lam <= top if kernel.max_closed else 0 <= lam < top
            if not inside:
                interval = f"[0, {top:.6g}{']' if kernel.max_closed else ')'}"
                raise ValueError(
                    f"bandwidth of categorical feature {self.label(self.columns[t])} is the "
                    f"lambda of the {kernel.name} kernel, which must lie in {interval} "
                    f"({self.sizes[t]} categories); got {lam!r}."
                )


def _lookup(categories: np.ndarray, column: np.ndarray) -> np.ndarray:
    """Code of each label of ``column`` by equality (hashing), -1 where no category equals it.

    Labels of any type: a label of another type than the categories' (an
    integer in a column of strings) is an unseen category, never compared by order.
    """
    index = {v: i for i, v in enumerate(categories.tolist())}
    return np.array([_index_of(index, v) for v in column.tolist()], dtype=np.float64)


def _index_of(index: dict, v) -> int:
    try:
        return index.get(v, -1)
    except TypeError:  # an unhashable label equals no category
        return -1


def _positions(categories: np.ndarray, column: np.ndarray, ordered: bool) -> np.ndarray:
    """Codes of ``column`` among the sorted ``categories``, by comparison.

    A label equal to a category gets its position; another gets -1
    (unordered), or for an ordered feature the position halfway between its
    sorted neighbours (``-0.5`` below the first, ``c - 0.5`` above the last).
    Raises TypeError when a label does not compare with the categories.
    """
    pos = np.searchsorted(categories, column)
    found = np.take(categories, np.minimum(pos, len(categories) - 1)) == column
    found = np.asarray(found, dtype=bool)
    if ordered:
        return np.where(found, pos, pos - 0.5).astype(np.float64)
    return np.where(found, pos, -1).astype(np.float64)


def _comparable(v, categories: np.ndarray) -> bool:
    """Whether the label ``v`` compares with every category (``<``)."""
    try:
        for c in categories.tolist():
            _ = v < c
    except TypeError:
        return False
    return True


def _floats(block: np.ndarray, columns: np.ndarray, names: list[str] | None) -> np.ndarray:
    """Return the continuous features ``block`` (X's ``columns``) as floats, or raise."""
    try:
        X = np.asarray(block, dtype=np.float64)
    except (TypeError, ValueError):
        _raise_for_strings(columns, [_string_error(column) for column in block.T], names)
        raise  # objects other than strings: numpy's error
    finite = np.isfinite(X).all(axis=0)
    if not finite.all():
        raise ValueError(
            "Input X contains NaN or infinity in continuous feature(s) "
            f"{_labels_of(columns[~finite], names)}."
        )
    return X
