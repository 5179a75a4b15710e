"""The conformance matrix: every estimator x backend x kernel family x data kind.

Defined once here and imported where a test needs it (``MATRIX``, ``fitted``).
Every cell runs through every member of the leave-one-out protocol
(:class:`skl_nw._engine.LeaveOneOutProtocol`), against explicit refits
(``refit_loo`` of ``conftest.py``) and finite differences, and through
``BandwidthSearchCV`` with every method, criterion and ``verbose`` level, on
both sides of the search's backend-probe threshold.  A new option or backend
joins the matrix, not a test of its own happy path.
"""

import inspect
import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose

from conftest import refit_loo
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)
from skl_nw._engine import LeaveOneOutProtocol, MixedLeaveOneOutProtocol

ESTIMATORS = {
    "nw": NadarayaWatsonRegressor,
    "parzen": ParzenClassifier,
    "local0": lambda **kw: LocalPolynomialRegressor(degree=0, **kw),
    "local1": lambda **kw: LocalPolynomialRegressor(degree=1, **kw),
    "local2": lambda **kw: LocalPolynomialRegressor(degree=2, **kw),
}
BACKENDS = ["brute", "kd_tree", "ball_tree", "binned"]
KERNELS = ["gaussian", "epanechnikov"]  # an infinite-support and a compact kernel
# "span": the continuous data with a nearest-neighbour span (LOESS), each row's radius
# the distance to its SPAN * n-th row.
DATA = ["continuous", "mixed", "span"]
SPAN = 0.6
# The binned path takes continuous features and no span.
MATRIX = [
    cell
    for cell in itertools.product(ESTIMATORS, BACKENDS, KERNELS, DATA)
    if not (cell[1] == "binned" and cell[3] != "continuous")
]
IDS = ["-".join(cell) for cell in MATRIX]
BINNED_TOL = 1e-3
FACTORS = np.array([1.0, 1.5])


def data(kind: str, n: int = 40, seed: int = 0):
    """Inputs, regression targets and class labels of one data kind."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    second = rng.integers(0, 3, n).astype(float) if kind == "mixed" else rng.uniform(0, 1, n)
    X = np.column_stack([x, second])
    y = np.sin(4 * x) + 0.3 * second + rng.normal(0, 0.1, n)
    return X, y, (y > np.median(y)).astype(int)


def make(name: str, backend: str, kernel: str, kind: str, **params):
    """An unfitted estimator of one cell (bandwidth: 0.5, lambda 0.3 for the categorical)."""
    params = {"bandwidth": [0.5, 0.3 if kind == "mixed" else 0.5], **params}
    if kind == "mixed":
        params["categorical_features"] = [1]
    if kind == "span":
        params["span"] = SPAN
    if backend == "binned":
        params["binned_tol"] = BINNED_TOL
    return ESTIMATORS[name](kernel=kernel, algorithm=backend, **params)


def fitted(name, backend, kernel, kind, n: int = 40):
    """A fitted estimator of one cell and its data: (estimator, X, targets)."""
    X, y, labels = data(kind, n)
    target = labels if name == "parzen" else y
    return make(name, backend, kernel, kind).fit(X, target), X, target


def _scaled(est, factor: float) -> np.ndarray:
    """The bandwidth that ``factor`` of the protocol stands for: continuous features scaled."""
    h = est.bandwidth_.copy()
    continuous = ~getattr(est, "is_categorical_", np.zeros(len(h), bool))
    h[continuous] *= factor
    return h


def _refit_predictions(est, X, target, rows, factor):
    # The reference is exact: refits of the brute-force twin (binned approximates it).
    refit = make_like(est, bandwidth=_scaled(est, factor), algorithm="brute", binned_tol=None)
    if est.span is not None:  # row i left out: its k-th neighbour among the n - 1 others
        refit.set_params(span=(est.n_neighbors_ + 0.5) / (len(X) - 1))
    if isinstance(est, ParzenClassifier):
        return refit_loo(refit, X, target, method="predict_proba", classes=est.classes_, rows=rows)
    return refit_loo(refit, X, target, rows=rows)[:, None]


def make_like(est, **params):
    from sklearn.base import clone

    return clone(est).set_params(**params)


def _tolerance(backend, target):
    # The binned leave-one-out approximates the kernel weights to binned_tol.
    spread = np.ptp(target) if target.dtype.kind == "f" else 1.0
    return {"rtol": 0, "atol": 50 * BINNED_TOL * spread} if backend == "binned" else {
        "rtol": 1e-9, "atol": 1e-11}  # fmt: skip


@pytest.mark.parametrize(("name", "backend", "kernel", "kind"), MATRIX, ids=IDS)
def test_protocol_members_match_explicit_refits(name, backend, kernel, kind):
    est, X, target = fitted(name, backend, kernel, kind)
    loo = est._leave_one_out()
    protocol = MixedLeaveOneOutProtocol if loo.takes_lambdas else LeaveOneOutProtocol
    assert isinstance(loo, protocol)
    for member in ("predictions", "fits", "loss_grad", "bandwidth_at"):
        if hasattr(protocol, member):  # the same parameters as the protocol says
            declared = inspect.signature(getattr(protocol, member)).parameters
            assert list(inspect.signature(getattr(loo, member)).parameters) == list(declared)[1:]
    P = loo.predictions(FACTORS)
    k = loo.targets.shape[1]
    assert P.shape == (len(FACTORS), len(X), k) and np.isfinite(P).all()
    rows = np.array([0, 7, 21])
    assert_allclose(loo.predictions(FACTORS, rows=rows), P[:, rows], rtol=1e-12, atol=1e-15)
    for f, factor in enumerate(FACTORS):
        expected = _refit_predictions(est, X, target, rows, factor)
        assert_allclose(P[f, rows], expected, **_tolerance(backend, target))


@pytest.mark.parametrize(("name", "backend", "kernel", "kind"), MATRIX, ids=IDS)
def test_fits_and_hat_diagonal_match_refits(name, backend, kernel, kind):
    # A linear smoother's H_ii is d yhat_i / d y_i: one refit with y_i moved by 1.
    est, X, target = fitted(name, backend, kernel, kind)
    fits, hat = est._leave_one_out().fits(FACTORS)
    assert fits.shape[:2] == (len(FACTORS), len(X)) and hat.shape == (len(FACTORS), len(X))
    assert np.isfinite(fits).all() and np.all((hat >= -1e-12) & (hat <= 1 + 1e-12))
    if name == "parzen":  # fits of one-hot labels: the class probabilities
        assert_allclose(fits[0], est.predict_proba(X), **_tolerance(backend, target))
        return
    exact = make_like(est, algorithm="brute", binned_tol=None).fit(X, target)
    assert_allclose(fits[0, :, 0], exact.predict(X), rtol=1e-9, atol=1e-11)
    for i in (0, 13):
        moved = target.copy()
        moved[i] += 1.0
        refit = make_like(exact, bandwidth=_scaled(est, FACTORS[1])).fit(X, moved)
        base = make_like(exact, bandwidth=_scaled(est, FACTORS[1])).fit(X, target)
        change = refit.predict(X[i : i + 1])[0] - base.predict(X[i : i + 1])[0]
        assert_allclose(hat[1, i], change, rtol=1e-7, atol=1e-9)


def _squared_error(targets):
    def loss(P, rows):
        residual = P - targets[rows]
        return (residual**2).sum(axis=1), 2 * residual

    return loss


@pytest.mark.parametrize(("name", "backend", "kernel", "kind"), MATRIX, ids=IDS)
def test_loss_gradient_matches_finite_differences(name, backend, kernel, kind):
    est, X, _ = fitted(name, backend, kernel, kind)
    loo = est._leave_one_out()
    rows, weights = np.arange(0, len(X), 3), np.linspace(1.0, 2.0, len(range(0, len(X), 3)))
    loss_fn = _squared_error(loo.targets)
    theta = np.array([0.1, -0.2]) if loo.takes_lambdas else np.full(2, 0.1)
    if kind == "span":  # radii jump between neighbours: the span is searched on a grid
        with pytest.raises(ValueError, match="span"):
            loo.loss_grad(theta, rows, loss_fn, weights)
        return
    loss, grad = loo.loss_grad(theta, rows, loss_fn, weights)
    assert np.isfinite(loss) and grad.shape == theta.shape and np.isfinite(grad).all()
    if not loo.takes_lambdas:  # the loss is that of the closed-form predictions
        P = loo.predictions(np.exp(theta[:1]), rows=rows)[0]
        # The gradient pass is exact on every backend; binned predictions approximate it.
        rtol = 50 * BINNED_TOL if backend == "binned" else 1e-9
        assert_allclose(loss, np.average(loss_fn(P, rows)[0], weights=weights), rtol=rtol)
    else:
        assert_allclose(loo.bandwidth_at(np.zeros(2)), est.bandwidth_, rtol=1e-12)
    eps = 1e-6
    for j in range(len(theta)):
        step = np.eye(len(theta))[j] * eps
        up = loo.loss_grad(theta + step, rows, loss_fn, weights)[0]
        down = loo.loss_grad(theta - step, rows, loss_fn, weights)[0]
        assert_allclose(grad[j], (up - down) / (2 * eps), rtol=1e-4, atol=1e-7)


MIXED = [cell for cell in MATRIX if cell[3] == "mixed" and cell[1] == "brute"]


@pytest.mark.parametrize(("name", "backend", "kernel", "kind"), MIXED)
def test_lambda_grids_in_one_pass_match_one_fit_per_lambda(name, backend, kernel, kind):
    est, X, target = fitted(name, backend, kernel, kind)
    loo = est._leave_one_out()
    assert loo.takes_lambdas
    lambdas = np.array([[0.0], [0.3], [0.6]])
    P = loo.predictions(FACTORS, lambdas=lambdas)
    fits, hat = loo.fits(FACTORS, lambdas=lambdas)
    for lam, P_l, fits_l, hat_l in zip(lambdas, P, fits, hat, strict=True):
        one = make_like(est, bandwidth=[est.bandwidth_[0], lam[0]]).fit(X, target)
        assert_allclose(P_l, one._leave_one_out().predictions(FACTORS), rtol=1e-9, atol=1e-12)
        expected_fits, expected_hat = one._leave_one_out().fits(FACTORS)
        assert_allclose(fits_l, expected_fits, rtol=1e-9, atol=1e-12)
        assert_allclose(hat_l, expected_hat, rtol=1e-9, atol=1e-12)


# Every method, criterion and verbose level of the search over the matrix; the levels
# cycle through the cells so that each meets every estimator and backend.
SEARCHES = [
    {"method": "grid"},
    {"method": "grid", "criterion": "aicc"},
    {"method": "grid", "criterion": "gcv"},
    {"method": "sgd", "max_iter": 3, "tol": None, "random_state": 0},
    {"method": "lbfgs", "max_iter": 5},
]


def _search_cells():
    for index, (cell, search) in enumerate(itertools.product(MATRIX, SEARCHES)):
        if cell[0] == "parzen" and "criterion" in search:
            continue  # the in-sample criteria are for regression
        yield pytest.param(*cell, search, index % 4, id=f"{'-'.join(cell)}-{index}")


@pytest.mark.parametrize(("name", "backend", "kernel", "kind", "search", "verbose"),
                         list(_search_cells()))  # fmt: skip
def test_every_search_route_runs_on_every_cell(name, backend, kernel, kind, search, verbose,
                                               capsys):  # fmt: skip
    X, y, labels = data(kind)
    target = labels if name == "parzen" else y
    est = make(name, backend, kernel, kind)
    if kind == "span" and search["method"] in ("sgd", "lbfgs"):  # a span comes from a grid
        with pytest.raises(ValueError, match="span is selected from a grid"):
            BandwidthSearchCV(est, verbose=verbose, **search).fit(X, target)
        return
    got = BandwidthSearchCV(est, verbose=verbose, **search).fit(X, target)
    assert np.all(np.isfinite(got.bandwidth_)) and np.isfinite(got.best_score_)
    assert np.isfinite(got.predict(X)).all()
    assert (capsys.readouterr().out != "") == (verbose > 0)
    if backend in ("kd_tree", "ball_tree"):  # the same choice as brute force's
        brute = BandwidthSearchCV(make(name, "brute", kernel, kind), **search).fit(X, target)
        assert_allclose(got.bandwidth_, brute.bandwidth_, rtol=1e-6)
        assert got.span_ == brute.span_


# n above the search's backend probe (algorithm="auto" times brute force against a tree).
@pytest.mark.parametrize("verbose", [0, 1])
@pytest.mark.parametrize("kind", DATA)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ESTIMATORS)
def test_default_search_beyond_the_backend_probe(name, kernel, kind, verbose, capsys):
    X, y, labels = data(kind, n=1_200)
    target = labels if name == "parzen" else y
    est = make(name, "auto", kernel, kind, bandwidth="scott")
    got = BandwidthSearchCV(est, verbose=verbose).fit(X, target)
    assert np.all(np.isfinite(got.bandwidth_)) and np.isfinite(got.best_score_)
    assert (capsys.readouterr().out != "") == (verbose > 0)
