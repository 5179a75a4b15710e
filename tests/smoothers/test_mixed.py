"""Mixed data: categorical and ordered features against independent references.

References: statsmodels' ``KernelReg`` and ``KDEMultivariate`` (whose
``var_type`` letters ``"c"``, ``"u"``, ``"o"`` the data helpers below share),
the dense oracle of ``conftest.py`` (``naive_mixed_kernel``), and the limits of
the discrete kernels written as plain fits on subsets of the data.
"""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from conftest import PROFILES, naive_mixed_kernel, naive_mixed_weights, onehot
from skl_nw import (
    BandwidthSearchCV,
    KernelQuantileRegressor,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)

LEVELS = {"u": 4, "o": 5}
# Our kernel names -> statsmodels' ukertype and okertype (Li-Racine: its "*_reg" kernels).
UKERTYPE = {"aitchison_aitken": "aitchisonaitken", "li_racine": "aitchison_aitken_reg"}
OKERTYPE = {"wang_van_ryzin": "wangryzin", "li_racine": "wangryzin_reg"}
KERNEL_PAIRS = [("aitchison_aitken", "wang_van_ryzin"), ("li_racine", "li_racine")]


def _columns(rng, kinds, n):
    """Continuous N(0, 1) columns and consecutive integer codes, every level present."""
    cols = [
        rng.normal(size=n) if k == "c" else rng.permutation(np.arange(n) % LEVELS[k]) for k in kinds
    ]
    return np.column_stack(cols).astype(float)


def _mixed_data(rng, kinds, n=80, m=20):
    X = _columns(rng, kinds, n)
    y = rng.normal(scale=0.1, size=n)
    for j, k in enumerate(kinds):
        effect = (
            np.sin(2 * X[:, j]) if k == "c" else rng.normal(size=LEVELS[k])[X[:, j].astype(int)]
        )
        y += effect
    Q = np.column_stack([
        rng.normal(size=m) if k == "c" else rng.integers(0, LEVELS[k], m) for k in kinds
    ]).astype(float)  # fmt: skip
    return X, y, Q


def _bandwidth(kinds, h=0.5, lam_u=0.3, lam_o=0.4):
    return np.array([{"c": h, "u": lam_u, "o": lam_o}[k] for k in kinds])


def _params(kinds, categorical_kernel="aitchison_aitken", ordered_kernel="wang_van_ryzin"):
    return {
        "categorical_features": [j for j, k in enumerate(kinds) if k == "u"],
        "ordered_features": [j for j, k in enumerate(kinds) if k == "o"],
        "categorical_kernel": categorical_kernel,
        "ordered_kernel": ordered_kernel,
    }


def _params_one(kinds, kind, kernel):
    """``_params`` with ``kernel`` for the features of ``kind`` ("u" or "o")."""
    return _params(
        kinds, **{"u": {"categorical_kernel": kernel}, "o": {"ordered_kernel": kernel}}[kind]
    )


def _oracle_predict(X, y, Q, bandwidth, kinds, sample_weight=None, **kernels):
    return naive_mixed_weights(X, Q, bandwidth, kinds, sample_weight, **kernels) @ y


# ------------------------------------------------------------------ references
@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' random-state notice
@pytest.mark.parametrize("kinds", ["cu", "co", "cuo", "uo"])
@pytest.mark.parametrize(("categorical_kernel", "ordered_kernel"), KERNEL_PAIRS)
def test_matches_statsmodels_kernelreg(rng, kinds, categorical_kernel, ordered_kernel):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y, Q = _mixed_data(rng, kinds)
    bw = _bandwidth(kinds)
    kr = KernelReg(
        y, X, kinds, reg_type="lc", bw=bw,
        ukertype=UKERTYPE[categorical_kernel], okertype=OKERTYPE[ordered_kernel],
    )  # fmt: skip
    expected = kr.fit(Q)[0]
    assert np.ptp(expected) > 0.5  # the categories matter
    for algorithm in ["brute", "kd_tree", "ball_tree"]:
        est = NadarayaWatsonRegressor(
            bandwidth=bw, algorithm=algorithm, **_params(kinds, categorical_kernel, ordered_kernel)
        )
        got = est.fit(X, y).predict(Q)
        assert_allclose(got, expected, rtol=1e-8, err_msg=algorithm)


@pytest.mark.parametrize("kernel", sorted(PROFILES))
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_every_kernel_matches_mixed_oracle(rng, kernel, algorithm):
    kinds = "cuco"
    X, y, Q = _mixed_data(rng, kinds)
    w = rng.uniform(0.2, 2.0, len(X))
    bw = _bandwidth(kinds, h=2.5)  # every query has neighbours inside a compact support
    est = NadarayaWatsonRegressor(
        bandwidth=bw, kernel=kernel, algorithm=algorithm, **_params(kinds)
    )
    est.fit(X, y, sample_weight=w)
    expected = naive_mixed_weights(X, Q, bw, kinds, w, kernel=kernel)
    assert_allclose(est.predict(Q), expected @ y, rtol=1e-10)
    assert_allclose(est.attention_weights(Q), expected, rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------ lambda and its limits
@pytest.mark.parametrize(
    ("kind", "kernel"),
    [("u", "aitchison_aitken"), ("u", "li_racine"), ("o", "wang_van_ryzin"), ("o", "li_racine")],
)
def test_lambda_zero_fits_each_category_separately(rng, kind, kernel):
    kinds = "c" + kind
    X, y, Q = _mixed_data(rng, kinds)
    est = NadarayaWatsonRegressor(bandwidth=[0.5, 0.0], **_params_one(kinds, kind, kernel))
    est.fit(X, y)
    got = est.predict(Q)
    for level in range(LEVELS[kind]):
        rows, queries = X[:, 1] == level, Q[:, 1] == level
        alone = NadarayaWatsonRegressor(bandwidth=0.5).fit(X[rows, :1], y[rows])
        assert_allclose(got[queries], alone.predict(Q[queries, :1]), rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize(
    ("make", "kernel", "h", "fallback"),
    [
        (NadarayaWatsonRegressor, "epanechnikov", 0.4, "nearest"),
        (NadarayaWatsonRegressor, "epanechnikov", 0.4, "nan"),
        (LocalPolynomialRegressor, "biweight", 0.6, "nearest"),
        (LocalPolynomialRegressor, "biweight", 0.6, "nan"),
        (ParzenClassifier, "tricube", 0.4, None),  # the nearest (it has no fallback)
        (NadarayaWatsonRegressor, "gaussian", 0.005, "nearest"),  # own rows 200+ h out
    ],
    ids=["nw", "nw-nan", "local", "local-nan", "parzen", "gaussian"],
)
def test_lambda_zero_is_one_model_per_category_where_its_rows_are_out_of_reach(
    rng, make, kernel, h, fallback, algorithm
):
    # Each category's rows lie apart (0-1, 2-3, 4-5), queries anywhere: one beside
    # another category's rows takes its own category's fallback (the nearest, or NaN),
    # as a model of that category alone does. The finite stand-in for log 0 made
    # another category's rows in reach outweigh the query's own, out of reach (and
    # outweigh them 14,000 Gaussian bandwidths nearer).
    u = np.repeat(np.arange(3), 30)
    x = rng.uniform(0, 1, 90) + 2 * u
    y = np.sin(3 * x) + u if make is not ParzenClassifier else (x - 2 * u > 0.5).astype(int)
    X = np.column_stack([x, u]).astype(float)
    Q = np.column_stack([rng.uniform(-0.5, 5.5, 40), rng.integers(0, 3, 40)])
    params = {"kernel": kernel, "algorithm": algorithm}
    if fallback is not None:
        params["fallback"] = fallback
    mixed = make([h, 0.0], categorical_features=[1], **params).fit(X, y)
    got = mixed.predict_proba(Q) if make is ParzenClassifier else mixed.predict(Q)
    for level in range(3):
        rows, queries = u == level, Q[:, 1] == level
        alone = make(h, **params).fit(X[rows, :1], y[rows])
        want = (alone.predict_proba if make is ParzenClassifier else alone.predict)(Q[queries, :1])
        # (local fits solve other Gram matrices: rounding differs by ~1e-12)
        assert_allclose(got[queries], want, rtol=1e-9, atol=1e-12)
    assert np.isnan(got).any() == (fallback == "nan" and kernel != "gaussian")


@pytest.mark.parametrize("make", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_lambda_zero_standard_errors_are_one_model_per_category(rng, make):
    # The noise variance comes from y less a robust line, one per cell of the categorical
    # features at lambda = 0, as each category's own model subtracts its own: one line
    # pooled over the categories (slopes 10 and -10 here) left a slope in the residuals of
    # windows too small for a local line (0.265 for 0.0037), and a category offset of 1e8
    # cost every digit.
    x, c = rng.uniform(0, 1, 200), np.arange(200) % 2
    y = np.where(c == 0, 10 * x, -10 * x) + 1e8 * c + rng.normal(0, 0.1, 200)
    X = np.column_stack([x, c]).astype(float)
    Q = np.column_stack([np.linspace(0.02, 0.98, 60), np.arange(60) % 2])
    mixed = make([0.03, 0.0], kernel="epanechnikov", categorical_features=[1]).fit(X, y)
    mean, std = mixed.predict(Q, return_std=True)
    for level in (0, 1):
        rows, queries = c == level, Q[:, 1] == level
        alone = make(0.03, kernel="epanechnikov").fit(X[rows, :1], y[rows])
        want_mean, want_std = alone.predict(Q[queries, :1], return_std=True)
        assert_allclose(mean[queries], want_mean, rtol=1e-12)
        assert_allclose(std[queries], want_std, rtol=1e-7, atol=1e-6)  # y ~ 1e8: 1e-8 rounding


@pytest.mark.parametrize("kernel", ["wang_van_ryzin", "li_racine"])
def test_ordered_lambda_zero_is_the_limit_of_small_lambdas(kernel):
    # Query position 3 between rows at 2 and 4, others at 1 and 5: as lambda -> 0 the
    # weights go to the rows one step away (lambda^|a - b|), and lambda = 0 is that
    # limit. It gave every mismatched position the same weight (82.5 for 15).
    X = np.array([[0.0, 1], [0.0, 2], [0.0, 4], [0.0, 5]])
    y = np.array([100.0, 10.0, 20.0, 200.0])
    Q = np.array([[0.0, 3]])
    params = {"ordered_features": [1], "ordered_kernel": kernel}
    small = NadarayaWatsonRegressor([1.0, 1e-9], **params).fit(X, y).predict(Q)
    zero = NadarayaWatsonRegressor([1.0, 0.0], **params).fit(X, y)
    assert_allclose(small, 15.0, rtol=1e-6)
    assert_allclose(zero.predict(Q), 15.0, rtol=1e-12)
    assert_allclose(zero.attention_weights(Q), [[0.0, 0.5, 0.5, 0.0]], atol=1e-12)


@pytest.mark.parametrize(("categorical_kernel", "ordered_kernel"), KERNEL_PAIRS)
def test_lambda_zero_of_an_unseen_combination_is_the_limit_of_small_lambdas(
    rng, categorical_kernel, ordered_kernel
):
    # No row has the query's categories (2, 3): the weights at lambda = 0 are the limit
    # lambda -> 0, which keeps each kernel's constant factors: Aitchison-Aitken's
    # 1 / (c - 1) (dropped before: 16.165 for 16.113) and Wang-van Ryzin's 1 / 2.
    x, c1, c2 = rng.uniform(0, 1, 60), rng.integers(0, 3, 60), rng.integers(0, 4, 60)
    keep = ~((c1 == 2) & (c2 == 3))
    X = np.column_stack([x, c1, c2])[keep]
    y = np.arange(len(X), dtype=float)
    Q = np.array([[0.5, 2, 3], [0.2, 2, 3]])
    params = {
        "categorical_features": [1, 2],
        "ordered_features": [2],
        "categorical_kernel": categorical_kernel,
        "ordered_kernel": ordered_kernel,
    }
    small = NadarayaWatsonRegressor([0.3, 1e-12, 1e-12], **params).fit(X, y).predict(Q)
    zero = NadarayaWatsonRegressor([0.3, 0.0, 0.0], **params).fit(X, y).predict(Q)
    assert_allclose(zero, small, rtol=1e-6)


def test_densities_of_categories_no_row_has_are_zero_at_lambda_zero():
    # The density at lambda = 0 of a category no training row has is exactly 0; the
    # finite stand-in for log 0 gave log densities of -1e8 (also a constant column,
    # c = 1, whose Aitchison-Aitken kernel gives an unseen category 0 at any lambda).
    X = np.array([[0.0, 0], [0.5, 0], [1.0, 1], [1.5, 1]])
    clf = ParzenClassifier(bandwidth=[1.0, 0.0], categorical_features=[1]).fit(X, [0, 0, 1, 1])
    dens = clf.score_class_samples([[0.2, 0], [0.2, 7]])
    assert np.isfinite(dens[0, 0]) and dens[0, 1] == -np.inf
    assert_array_equal(dens[1], [-np.inf, -np.inf])
    assert_array_equal(clf.score_samples([[0.2, 7]]), [-np.inf])
    assert_array_equal(clf.predict_log_proba([[0.2, 0]])[0, 1], -np.inf)
    const = ParzenClassifier(bandwidth=[1.0, 0.0], categorical_features=[1])
    const.fit(np.array([[0.0, 2], [1.0, 2]]), [0, 1])
    assert_array_equal(const.score_samples([[0.5, 3]]), [-np.inf])


@pytest.mark.parametrize(
    ("kind", "kernel", "lam"),
    [("u", "aitchison_aitken", 3 / 4), ("u", "li_racine", 1.0), ("o", "li_racine", 1.0)],
)
def test_largest_lambda_ignores_the_feature(rng, kind, kernel, lam):
    kinds = "c" + kind + "c"
    X, y, Q = _mixed_data(rng, kinds)
    params = _params_one(kinds, kind, kernel)
    got = NadarayaWatsonRegressor(bandwidth=[0.5, lam, 0.7], **params).fit(X, y).predict(Q)
    without = NadarayaWatsonRegressor(bandwidth=[0.5, 0.7]).fit(X[:, [0, 2]], y)
    assert_allclose(got, without.predict(Q[:, [0, 2]]), rtol=1e-12)


def test_lambda_zero_without_a_matching_row_takes_the_fewest_mismatches(rng):
    # No training row has the query's categories (0, 0): at lambda = 0 the rows
    # that differ in one categorical feature count (the lambda -> 0 limit).
    kinds = "cuu"
    X, y, _ = _mixed_data(rng, kinds, n=120)
    keep = ~((X[:, 1] == 0) & (X[:, 2] == 0))
    X, y = X[keep], y[keep]
    Q = np.column_stack([rng.normal(size=10), np.zeros(10), np.zeros(10)])
    for kernel in ["aitchison_aitken", "li_racine"]:
        est = NadarayaWatsonRegressor(bandwidth=[0.5, 0.0, 0.0], **_params(kinds, kernel))
        got = est.fit(X, y).predict(Q)
        one_off = (X[:, 1] == 0) | (X[:, 2] == 0)
        alone = NadarayaWatsonRegressor(bandwidth=0.5).fit(X[one_off, :1], y[one_off])
        assert np.all(np.isfinite(got))
        # -1e8 stands for log 0: the continuous log-weights beside it keep ~8 digits.
        assert_allclose(got, alone.predict(Q[:, :1]), rtol=1e-6)


def test_default_lambdas_follow_the_rate(rng):
    kinds = "cuco"
    X, y, _ = _mixed_data(rng, kinds, n=100)
    est = NadarayaWatsonRegressor(**_params(kinds)).fit(X, y)
    rate = 100 ** (-2 / (2 + 4))  # q = 2 continuous features
    assert_allclose(est.bandwidth_[[1, 3]], [3 / 4 * rate, 1.0 * rate])
    scalar = NadarayaWatsonRegressor(bandwidth=0.8, **_params(kinds)).fit(X, y)
    assert_allclose(scalar.bandwidth_, [0.8, 3 / 4 * rate, 0.8, rate])
    assert_array_equal(est.is_categorical_, [False, True, False, True])
    assert_array_equal(est.is_ordered_, [False, False, False, True])


@pytest.mark.parametrize("bandwidth", ["scott", 0.8])
@pytest.mark.parametrize("total", [1.0, 0.5, 1e-300])
def test_default_lambdas_of_weights_summing_below_two_stay_in_range_and_warn(rng, bandwidth, total):
    # Frequency weights summing to under 2 count as 2 observations in the lambdas' rate
    # (a sum of 1 gave lambda_max, 1 for Wang-van Ryzin: a ValueError the user had not
    # asked for), and the fit says how it reads them.
    kinds = "cuco"
    X, y, _ = _mixed_data(rng, kinds, n=100)
    w = rng.uniform(0.5, 2.0, 100)
    est = NadarayaWatsonRegressor(bandwidth=bandwidth, **_params(kinds))
    with pytest.warns(UserWarning, match=r"sample_weight sums to .*100 rows count as"):
        est.fit(X, y, sample_weight=w * (total / w.sum()))
    rate = 2.0 ** (-2 / (2 + 4))
    assert_allclose(est.bandwidth_[[1, 3]], [3 / 4 * rate, 1.0 * rate])


def test_wang_van_ryzin_rejects_lambda_one(rng):
    X, y, _ = _mixed_data(rng, "co")
    est = NadarayaWatsonRegressor(bandwidth=[0.5, 1.0], **_params("co"))
    with pytest.raises(ValueError, match=r"categorical feature 1 .*wang_van_ryzin.*\[0, 1\)"):
        est.fit(X, y)


@pytest.mark.parametrize(
    ("kinds", "kernel", "lam"),
    [("cu", "aitchison_aitken", 0.8), ("cu", "li_racine", 1.5), ("cu", "aitchison_aitken", -0.1),
     ("co", "wang_van_ryzin", 1.2), ("co", "li_racine", -1e-3)],
)  # fmt: skip
def test_lambda_outside_its_range_names_the_feature(rng, kinds, kernel, lam):
    X, y, _ = _mixed_data(rng, "c" + kinds)
    params = _params_one("c" + kinds, kinds[1], kernel)
    est = NadarayaWatsonRegressor(bandwidth=[0.5, 0.5, lam], **params)
    with pytest.raises(ValueError, match=f"categorical feature 2 .*{kernel}"):
        est.fit(X, y)


# ------------------------------------------------------------------ categories
def test_unseen_unordered_category_takes_the_otherwise_branch(rng):
    kinds = "cuo"
    X, y, Q = _mixed_data(rng, kinds)
    Q[::2, 1] = 9  # a label no training row has
    for pair in KERNEL_PAIRS:
        kernels = dict(zip(["categorical_kernel", "ordered_kernel"], pair, strict=True))
        bw = _bandwidth(kinds)
        est = NadarayaWatsonRegressor(bandwidth=bw, **_params(kinds, *pair)).fit(X, y)
        expected = _oracle_predict(X, y, Q, bw, kinds, n_categories=[0, 4, 5], **kernels)
        assert_allclose(est.predict(Q), expected, rtol=1e-10)


def test_unseen_ordered_label_sits_between_its_sorted_neighbours(rng):
    X, y, _ = _mixed_data(rng, "co", n=60)
    labels = np.array([10, 20, 40, 50, 80])
    X_labels = np.column_stack([X[:, 0], labels[X[:, 1].astype(int)]])
    Q = np.array([[0.1, 30], [0.2, 5], [-0.3, 90], [0.0, 20]])
    Q_codes = np.array([[0.1, 1.5], [0.2, -0.5], [-0.3, 4.5], [0.0, 1.0]])
    for kernel in ["wang_van_ryzin", "li_racine"]:
        bw = [0.5, 0.4]
        est = NadarayaWatsonRegressor(bandwidth=bw, **_params("co", ordered_kernel=kernel))
        got = est.fit(X_labels, y).predict(Q)
        assert_array_equal(est.categories_[0], labels)
        expected = _oracle_predict(X, y, Q_codes, bw, "co", ordered_kernel=kernel)
        assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("kind", ["u", "o"])
def test_integer_column_takes_unseen_values_as_the_float_path_does(rng, kind):
    # Fitted on an integer array, a query's 1.5 was cast to category 1.
    n = 60
    X = np.column_stack([rng.integers(0, 10, n), np.arange(n) % 3])
    y = X[:, 0] + 2.0 * X[:, 1] + rng.normal(scale=0.1, size=n)
    Q = np.array([[5, 1.5], [5, 1.0], [5, 7.0], [2, 0.5], [3, -2.0]])
    # Codes of the queries: unseen labels match nothing (unordered) or sit halfway.
    Q_codes = Q.copy()
    if kind == "o":
        Q_codes[:, 1] = [1.5, 1.0, 2.5, 0.5, -0.5]
    kinds, bw = "c" + kind, [2.0, 0.4]
    est = NadarayaWatsonRegressor(bandwidth=bw, **_params(kinds))
    got = est.fit(X, y).predict(Q)
    assert_allclose(got, est.fit(X.astype(float), y).predict(Q), rtol=1e-12)
    expected = _oracle_predict(X, y, Q_codes, bw, kinds, n_categories=[0, 3])
    assert_allclose(got, expected, rtol=1e-10)


def test_label_of_another_type_is_an_unseen_category(rng):
    X, y, Q = _mixed_data(rng, "cu")
    names = np.array(["a", "b", "c", "d"])
    X_str = X.astype(object)
    X_str[:, 1] = names[X[:, 1].astype(int)]
    bw = [0.5, 0.3]
    est = NadarayaWatsonRegressor(bandwidth=bw, categorical_features=[1]).fit(X_str, y)
    Q_mixed = Q.astype(object)
    Q_mixed[:, 1] = names[Q[:, 1].astype(int)]
    Q_mixed[::2, 1] = 7  # an integer among strings: no category
    Q_codes = Q.copy()
    Q_codes[::2, 1] = 9
    expected = _oracle_predict(X, y, Q_codes, bw, "cu", n_categories=[0, 4])
    assert_allclose(est.predict(Q_mixed), expected, rtol=1e-10)
    numeric = Q[::2].copy()  # a numeric array queried on a column of strings
    numeric[:, 1] = 7
    assert_allclose(est.predict(numeric), expected[::2], rtol=1e-10)


def test_label_of_another_type_on_an_ordered_feature_names_it(rng):
    X, y, _ = _mixed_data(rng, "co")
    X_str = X.astype(object)
    X_str[:, 1] = np.array(list("abcde"))[X[:, 1].astype(int)]
    est = NadarayaWatsonRegressor(bandwidth=[0.5, 0.4], ordered_features=[1]).fit(X_str, y)
    with pytest.raises(ValueError, match="Ordered feature 1 has the value 3, which does not"):
        est.predict(np.array([[0.0, "b"], [0.0, 3]], dtype=object))


def _with_missing(X, value):
    X = X.astype(object)
    X[3, 1] = value
    return X


@pytest.mark.parametrize("missing", [None, np.nan, pd.NA])
def test_missing_category_is_an_error_naming_the_feature(rng, missing):
    X, y, Q = _mixed_data(rng, "cu")
    est = NadarayaWatsonRegressor(bandwidth=[0.5, 0.3], categorical_features=[1])
    with pytest.raises(ValueError, match="feature 1 holds missing values"):
        est.fit(_with_missing(X, missing), y)
    est.fit(X, y)
    with pytest.raises(ValueError, match="feature 1 holds missing values"):
        est.predict(_with_missing(Q, missing))
    frame = pd.DataFrame({"x": X[:, 0], "u": pd.Categorical(X[:, 1])})
    frame.loc[3, "u"] = np.nan
    with pytest.raises(ValueError, match=r"feature 'u' \(column 1\) holds missing values"):
        NadarayaWatsonRegressor().fit(frame, y)


def test_string_labels_equal_their_sorted_codes(rng):
    X, y, Q = _mixed_data(rng, "cuo")
    names = np.array(["pear", "apple", "fig", "kiwi"])  # sorted: apple, fig, kiwi, pear
    codes = np.argsort(np.argsort(names))

    def as_strings(A):
        out = A.astype(object)
        out[:, 1] = names[A[:, 1].astype(int)]
        return out

    def as_codes(A):
        out = A.copy()
        out[:, 1] = codes[A[:, 1].astype(int)]
        return out

    bw = _bandwidth("cuo")
    est = NadarayaWatsonRegressor(bandwidth=bw, **_params("cuo")).fit(as_strings(X), y)
    assert_array_equal(est.categories_[0], np.sort(names))
    expected = _oracle_predict(as_codes(X), y, as_codes(Q), bw, "cuo")
    assert_allclose(est.predict(as_strings(Q)), expected, rtol=1e-10)


# ------------------------------------------------------------------ pandas
def _frame(rng, n):
    X, y, _ = _mixed_data(rng, "ccuo", n=n)
    colours, sizes = ["red", "green", "blue", "black"], ["XS", "S", "M", "L", "XL"]
    frame = pd.DataFrame({
        "x0": 3.0 * X[:, 0] + 1.0,
        "x1": X[:, 1],
        "colour": pd.Categorical.from_codes(X[:, 2].astype(int), categories=colours),
        "size": pd.Categorical.from_codes(X[:, 3].astype(int), categories=sizes, ordered=True),
    })  # fmt: skip
    return frame, X, y


def test_pandas_category_dtypes_from_dtype(rng):
    frame, X, y = _frame(rng, 80)
    bw = [1.5, 0.5, 0.3, 0.4]
    est = NadarayaWatsonRegressor(bandwidth=bw).fit(frame, y)
    assert_array_equal(est.is_categorical_, [False, False, True, True])
    assert_array_equal(est.is_ordered_, [False, False, False, True])
    assert_array_equal(est.categories_[0], ["red", "green", "blue", "black"])  # declared order
    assert_array_equal(est.categories_[1], ["XS", "S", "M", "L", "XL"])
    codes = X.copy()
    codes[:, 0] = frame["x0"]
    expected = _oracle_predict(codes, y, codes[:30], bw, "ccuo")
    assert_allclose(est.predict(frame.iloc[:30]), expected, rtol=1e-10)
    # numpy input stays continuous under "from_dtype"
    assert not NadarayaWatsonRegressor().fit(codes, y).is_categorical_.any()


def test_pandas_pipeline_end_to_end(rng):
    frame, X, y = _frame(rng, 100)
    scale = ColumnTransformer(
        [("num", StandardScaler(), ["x0", "x1"])], remainder="passthrough"
    ).set_output(transform="pandas")
    pipe = make_pipeline(scale, NadarayaWatsonRegressor()).fit(frame, y)
    est = pipe[-1]
    assert_array_equal(est.feature_names_in_, ["num__x0", "num__x1", "remainder__colour",
                                               "remainder__size"])  # fmt: skip
    assert_array_equal(est.is_categorical_, [False, False, True, True])
    assert_array_equal(est.is_ordered_, [False, False, False, True])
    codes = X.copy()
    codes[:, :2] = StandardScaler().fit_transform(frame[["x0", "x1"]])
    expected = _oracle_predict(codes, y, codes[:25], est.bandwidth_, "ccuo")
    assert_allclose(pipe.predict(frame.iloc[:25]), expected, rtol=1e-10)
    assert pipe.score(frame, y) > 0.5


def test_reordered_columns_with_categories_name_the_mismatch(rng):
    # The column contents were checked first: a reordered frame blamed the strings of
    # the category column "in continuous feature 'g'", which is a pandas category.
    frame = pd.DataFrame(
        {"x": rng.uniform(size=20), "g": pd.Categorical(rng.choice(list("ab"), 20))}
    )
    reg = NadarayaWatsonRegressor().fit(frame, rng.normal(size=20))
    with pytest.raises(ValueError, match="feature names should match"):
        reg.predict(frame[["g", "x"]])


def test_feature_names_in_categorical_features(rng):
    frame, X, y = _frame(rng, 80)
    frame = frame.assign(colour=frame["colour"].astype(str), size=X[:, 3].astype(int))
    bw = [1.5, 0.5, 0.3, 0.4]
    by_name = NadarayaWatsonRegressor(
        bandwidth=bw, categorical_features=["colour"], ordered_features=["size"]
    ).fit(frame, y)
    by_index = NadarayaWatsonRegressor(
        bandwidth=bw, categorical_features=[2], ordered_features=[3]
    ).fit(frame, y)
    assert_array_equal(by_name.is_categorical_, [False, False, True, True])
    assert_array_equal(by_name.categories_[0], ["black", "blue", "green", "red"])  # sorted
    assert_array_equal(by_name.predict(frame), by_index.predict(frame))
    codes = X.copy()
    codes[:, 0] = frame["x0"]
    codes[:, 2] = np.searchsorted(["black", "blue", "green", "red"], frame["colour"])
    expected = _oracle_predict(codes, y, codes[:20], bw, "ccuo")
    assert_allclose(by_name.predict(frame.iloc[:20]), expected, rtol=1e-10)
    with pytest.raises(ValueError, match="'shape'"):
        NadarayaWatsonRegressor(categorical_features=["shape"]).fit(frame, y)
    with pytest.raises(ValueError, match="no feature names"):
        NadarayaWatsonRegressor(categorical_features=["colour"]).fit(X, y)


@pytest.mark.parametrize("bandwidth", ["scott", [0.5, 0.3, 0.6, 0.4]])
def test_sample_weight_equals_repeated_rows(rng, bandwidth):
    kinds = "cuco"
    X, y, Q = _mixed_data(rng, kinds, n=60)
    counts = rng.integers(0, 4, len(X))
    params = _params(kinds)
    weighted = NadarayaWatsonRegressor(bandwidth=bandwidth, **params).fit(X, y, counts)
    repeated = NadarayaWatsonRegressor(bandwidth=bandwidth, **params)
    repeated.fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-12)
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-10)


# ------------------------------------------------------------------ ParzenClassifier
def _class_data(rng, kinds, n=120):
    """Three classes, each holding every level of every categorical feature."""
    i = np.arange(n)
    cols = {"c": None, "u": i % 4, "o": (i // 12) % 5}
    labels = (i // 4) % 3
    X = np.column_stack([
        rng.normal(loc=labels, size=n) if k == "c" else cols[k] for k in kinds
    ]).astype(float)  # fmt: skip
    order = rng.permutation(n)
    return X[order], labels[order]


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_parzen_predict_proba_matches_oracle(rng, algorithm):
    kinds = "cuo"
    X, labels = _class_data(rng, kinds)
    w = rng.uniform(0.2, 2.0, len(X))
    Q = np.column_stack([rng.normal(size=15) * 2, rng.integers(0, 4, 15), rng.integers(0, 5, 15)])
    bw = _bandwidth(kinds)
    clf = ParzenClassifier(bandwidth=bw, algorithm=algorithm, **_params(kinds)).fit(X, labels, w)
    expected = naive_mixed_weights(X, Q, bw, kinds, w) @ onehot(labels, [0, 1, 2])
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' random-state notice
@pytest.mark.parametrize("kinds", ["cu", "cuo", "uo"])
def test_parzen_class_densities_match_statsmodels_kdemultivariate(rng, kinds):
    from statsmodels.nonparametric.kernel_density import KDEMultivariate

    X, labels = _class_data(rng, kinds)
    Q = X[:12] + np.where(np.array(list(kinds)) == "c", 0.3, 0.0)
    bw = _bandwidth(kinds)
    clf = ParzenClassifier(bandwidth=bw, **_params(kinds)).fit(X, labels)
    got = clf.score_class_samples(Q)
    for c in range(3):
        expected = KDEMultivariate(X[labels == c], kinds, bw=bw).pdf(Q)
        assert_allclose(np.exp(got[:, c]), expected, rtol=1e-10)
    # and the dense oracle: class sums over the class weight, the continuous kernel normalised
    K = naive_mixed_kernel(X, Q, bw, kinds)
    norm = np.prod(bw[[k == "c" for k in kinds]]) * np.sqrt(2 * np.pi) ** kinds.count("c")
    assert_allclose(np.exp(got), K @ onehot(labels, [0, 1, 2]) / 40 / norm, rtol=1e-10)


def test_unseen_label_of_a_declared_order_is_an_error():
    order = ["S", "M", "L"]
    X = pd.DataFrame({
        "x": [0.0, 1.0, 2.0, 3.0],
        "size": pd.Categorical(["S", "M", "L", "M"], categories=order, ordered=True),
    })  # fmt: skip
    est = NadarayaWatsonRegressor(bandwidth=[1.0, 0.3]).fit(X, [1.0, 2.0, 3.0, 4.0])
    wider = pd.Categorical(["XL"], categories=[*order, "XL"], ordered=True)
    with pytest.raises(ValueError, match=r"Ordered feature 'size' \(column 1\) has the value 'XL'"):
        est.predict(pd.DataFrame({"x": [1.0], "size": wider}))


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: NadarayaWatsonRegressor(**kw),
        lambda **kw: LocalPolynomialRegressor(degree=1, **kw),
        lambda **kw: ParzenClassifier(**kw),
        lambda **kw: KernelQuantileRegressor([0.3], **kw),
    ],
    ids=["nw", "local1", "parzen", "quantile"],
)
@pytest.mark.parametrize("kinds", ["cu", "co"])
def test_a_category_only_rows_of_weight_0_hold_is_no_category(rng, make, kinds):
    # Weight 0 is no row (scikit-learn's convention): the labels that only such rows
    # hold counted among the categories (c of Aitchison-Aitken's lambda / (c - 1), the
    # largest lambda, the ordered positions), so predictions moved (0.83 against 0.99).
    n = 60
    X = np.column_stack([rng.uniform(0, 3, n), rng.integers(0, 3, n)]).astype(float)
    X[-4:, 1] = [3, 4, 5, 5]  # labels that only the rows of weight 0 hold
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + rng.normal(0, 0.1, n)
    if make(bandwidth=1.0).__class__ is ParzenClassifier:
        y = (y > np.median(y)).astype(int)
    w = np.r_[rng.integers(1, 3, n - 4), np.zeros(4)].astype(float)
    params = {"categorical_features": [1]} if kinds == "cu" else {"ordered_features": [1]}
    Q = np.column_stack([rng.uniform(0, 3, 8), [0, 1, 2, 3, 4, 5, 1, 0]])
    for bandwidth in ([0.6, 0.3], "scott"):
        weighted = make(bandwidth=bandwidth, **params).fit(X, y, sample_weight=w)
        dropped = make(bandwidth=bandwidth, **params).fit(X[:-4], y[:-4], sample_weight=w[:-4])
        assert_array_equal(weighted.categories_[0], dropped.categories_[0])
        assert_allclose(weighted.bandwidth_, dropped.bandwidth_, rtol=1e-12)
        for method in ("predict", "predict_proba"):
            if hasattr(weighted, method):
                assert_allclose(getattr(weighted, method)(Q), getattr(dropped, method)(Q),
                                rtol=1e-10, atol=1e-12)  # fmt: skip
    if not hasattr(weighted, "predict_proba"):  # the default search sees the same data
        a = BandwidthSearchCV(make(**params)).fit(X, y, sample_weight=w)
        b = BandwidthSearchCV(make(**params)).fit(X[:-4], y[:-4], sample_weight=w[:-4])
        assert_allclose(a.best_params_["bandwidth"], b.best_params_["bandwidth"], rtol=1e-9)
        assert_allclose(a.best_score_, b.best_score_, rtol=1e-9)
