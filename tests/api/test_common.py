"""Every scikit-learn estimator check, for every estimator and every kernel."""

import warnings
from unittest import SkipTest

import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from skl_nw import (
    MLKR,
    BandwidthSearchCV,
    KernelQuantileRegressor,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._kernels import kernel_names

ESTIMATORS = [
    cls(kernel=kernel)
    for cls in (NadarayaWatsonRegressor, ParzenClassifier)
    for kernel in kernel_names()
] + [
    BandwidthSearchCV(cls(), method=method)
    for cls in (NadarayaWatsonRegressor, ParzenClassifier)
    for method in ("grid", "sgd", "lbfgs")
]
# A pipeline ending in one of ours: its last step's bandwidth is searched.  Scalers
# that refuse sparse input with a TypeError, as scikit-learn 1.6's sparse check expects.
ESTIMATORS += [
    BandwidthSearchCV(make_pipeline(MinMaxScaler(), NadarayaWatsonRegressor())),
    BandwidthSearchCV(
        make_pipeline(StandardScaler(with_mean=False), ParzenClassifier()), method="sgd"
    ),
]
ESTIMATORS += [
    LocalPolynomialRegressor(kernel=kernel, degree=degree)
    for degree in (0, 1, 2)
    for kernel in kernel_names()
] + [
    BandwidthSearchCV(LocalPolynomialRegressor()),
    # Local linear fits of the checks' linear targets improve as the bandwidth
    # grows without bound: SGD never stops early there, so cap its epochs.
    BandwidthSearchCV(LocalPolynomialRegressor(), method="sgd", max_iter=25),
    BandwidthSearchCV(LocalPolynomialRegressor(), method="lbfgs", max_iter=25),
]
# The learned metric: full batch (L-BFGS) and minibatches (Adam).
ESTIMATORS += [MLKR(), MLKR(batch_size=8, max_iter=5)]

ESTIMATORS += [KernelQuantileRegressor(), KernelQuantileRegressor(y_bandwidth=0.0)]
# The searches by proper scores of the predictive distribution (one target).
ESTIMATORS += [
    BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="crps"),
    BandwidthSearchCV(KernelQuantileRegressor(), criterion="pinball"),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    # A check that skips itself (SkipTest, e.g. for a missing capability) fails here:
    # with no skip and no xfail (below), every check of check_estimator passed.
    try:
        check(estimator)
    except (SkipTest, pytest.skip.Exception) as skip:
        pytest.fail(f"the check skipped itself: {skip}")


@pytest.mark.parametrize(
    "estimator",
    list({type(e): e for e in ESTIMATORS}.values()),
    ids=lambda e: type(e).__name__,
)
def test_parameter_constraints_name_exactly_the_parameters(estimator):
    # scikit-learn runs this check on its own estimators only (not in check_estimator):
    # the constraints and __init__ agree, and every method rejects a bad value by name.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_param_validation(type(estimator).__name__, estimator)


def test_no_check_is_skipped_or_xfailed():
    # parametrize_with_checks marks expected failures; we declare none.
    marks = [
        mark
        for param in parametrize_with_checks(ESTIMATORS).args[1]
        for mark in getattr(param, "marks", ())
        if mark.name in ("skip", "xfail")
    ]
    assert marks == []


# The checks above, through the public one-call entry point, for one estimator of
# each kind (every estimator there would run every check twice: a third of the suite).
@pytest.mark.parametrize(
    "estimator",
    [
        NadarayaWatsonRegressor(),
        ParzenClassifier(),
        LocalPolynomialRegressor(),
        BandwidthSearchCV(NadarayaWatsonRegressor()),
    ],
    ids=repr,
)
def test_check_estimator_every_check_passes(estimator):
    from sklearn.utils.estimator_checks import check_estimator

    statuses = {}

    def record(*, check_name, status, **_):
        statuses.setdefault(status, []).append(check_name)

    check_estimator(estimator, on_skip=None, on_fail=None, callback=record)
    assert set(statuses) == {"passed"}, statuses
    assert len(statuses["passed"]) > 40
