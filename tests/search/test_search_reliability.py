"""BandwidthSearchCV: the second wave of reliability fixes.

Binned estimators whose smallest candidates' grids cannot be built, the
error of an in-sample criterion that no candidate can meet, the path that
scores the criteria of a binned estimator, the one-pass lambda grid of the
criteria on mixed data, and progress lines that change nothing computed.
References: the exact estimator's own search, explicit refits, dense sums.
"""

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import skl_nw._search._grid
import skl_nw._search._progress
from skl_nw import (
    BandwidthSearchCV,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
    _engine,
)
from skl_nw._engine import _binned_local
from skl_nw._search._paths import scoring_paths
from skl_nw._smoothers import _binning

pytestmark = pytest.mark.filterwarnings("ignore:The selected bandwidth:UserWarning")


def _scores(search) -> np.ndarray:
    return search.cv_results_["mean_test_score"]


# ------------------------------------------------------------ 6: binned grids too large
@pytest.mark.parametrize(
    "make, tol",
    # The local polynomial's grid is finer: 1e-3 keeps its final refit quick, and its
    # smallest candidate's grid still over the limit (5e8 nodes).
    [(NadarayaWatsonRegressor, None), (LocalPolynomialRegressor, 1e-3), (ParzenClassifier, None)],
)
def test_default_search_of_a_binned_estimator_in_2d_gets_a_result(make, tol):
    # Its smallest candidates' grids would hold ~1e9 nodes: they are scored exactly
    # (here all of them: 300 points), as the exact estimator scores them.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = X[:, 0] + rng.normal(0, 0.5, 300)
    y = y > 0 if make is ParzenClassifier else y
    binned = BandwidthSearchCV(make(algorithm="binned", binned_tol=tol)).fit(X, y)
    exact = BandwidthSearchCV(make()).fit(X, y)
    assert_allclose(_scores(binned), _scores(exact), rtol=1e-10)
    assert_allclose(binned.bandwidth_, exact.bandwidth_)
    assert binned.best_estimator_.get_params()["algorithm"] == "binned"


def test_binned_grid_serves_only_candidates_whose_grid_is_small():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 1))
    y = np.sin(2 * X[:, 0]) + rng.normal(0, 0.3, 400)
    w = np.ones(400)
    factors = 2.0 ** (np.arange(-22, 18) / 4)
    h = np.array([0.4])
    est = NadarayaWatsonRegressor(algorithm="binned")
    paths = scoring_paths(est, X, y, w, h, factors[::-1], None, "loo")
    assert [p.backend for p in paths] == ["brute force", "binned grid"]
    exact_part, binned_part = (np.sort(p.part) for p in paths)
    # The smallest candidates exact, the rest binned, every candidate once.
    assert_array_equal(np.sort(np.concatenate([exact_part, binned_part])), np.arange(40))
    assert factors[::-1][exact_part].max() < factors[::-1][binned_part].min()
    # Each path's fitted estimator sits at its smallest candidate.
    for p in paths:
        assert_allclose(p.fitted.bandwidth_, h * factors[::-1][p.part].min())
        assert p.factors.min() == 1.0
    # The scores: exact ones as the exact estimator's, binned ones within binned_tol.
    search = BandwidthSearchCV(est, bandwidths=list(factors[:, None] * h)).fit(X, y)
    exact = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=list(factors[:, None] * h))
    exact.fit(X, y)
    low = factors < factors[::-1][binned_part].min()
    assert_allclose(_scores(search)[low], _scores(exact)[low], rtol=1e-10)
    assert_allclose(_scores(search)[~low], _scores(exact)[~low], rtol=1e-3)


# ------------------------------------------------------------ 8: criteria that never hold
def test_aicc_on_three_points_says_why_no_candidate_scores():
    # n = 3 <= tr(H) + 2 at every bandwidth (tr(H) >= 1): AICc is infinite everywhere.
    rng = np.random.default_rng(2)
    X = rng.normal(size=(3, 1))
    with pytest.raises(ValueError) as info:
        BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="aicc").fit(X, rng.normal(size=3))
    message = str(info.value)
    assert "fallback" not in message
    assert "criterion='aicc' is infinite for every candidate" in message
    assert re.search(r"n = 3 .* <= tr\(H\) \+ 2 for 64 of 64 candidates", message)


def test_aicc_of_a_constant_target_blames_the_zero_residual_variance():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 1))
    with pytest.raises(ValueError, match="residual variance is 0 for 64 of 64") as info:
        BandwidthSearchCV(NadarayaWatsonRegressor(), criterion="aicc").fit(X, np.full(40, 2.0))
    assert "fallback" not in str(info.value)


# ------------------------------------------------------------ 9: criteria of binned estimators
def test_criteria_of_a_binned_estimator_are_scored_on_the_exact_path(monkeypatch):
    # The criteria are exact: the binned estimator's protocol object (whose exact
    # training set takes the neighbour search of the smallest candidate) is never asked.
    def refuse(*args, **kwargs):
        raise AssertionError("the binned protocol object scored the criteria")

    monkeypatch.setattr(_binning.BinnedLeaveOneOut, "fits", refuse)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1200, 1))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.3, 1200)
    for criterion in ("gcv", "aicc"):
        binned = BandwidthSearchCV(NadarayaWatsonRegressor(algorithm="binned"),
                                   criterion=criterion).fit(X, y)  # fmt: skip
        exact = BandwidthSearchCV(NadarayaWatsonRegressor(), criterion=criterion).fit(X, y)
        assert_allclose(_scores(binned), _scores(exact), rtol=1e-10)


def test_binned_local_polynomial_search_builds_no_grid_to_score(monkeypatch):
    # Its leave-one-out is exact on every algorithm: the search fits the exact path,
    # and only the refit of the selected bandwidth builds a binned grid.
    built = []
    original = _binned_local.BinnedLocalFit.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_binned_local.BinnedLocalFit, "__init__", counting)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 1))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.3, 300)
    binned = BandwidthSearchCV(LocalPolynomialRegressor(algorithm="binned")).fit(X, y)
    assert len(built) == 1
    exact = BandwidthSearchCV(LocalPolynomialRegressor()).fit(X, y)
    assert_allclose(_scores(binned), _scores(exact), rtol=1e-10)


# ------------------------------------------------------------ 10: mixed data, in-sample criteria
def _mixed(rng, n=60):
    x = rng.uniform(0, 3, n)
    u = np.repeat(np.arange(3), n // 3)
    y = np.sin(x) + 0.5 * u + rng.normal(0, 0.2, n)
    return np.column_stack([x, u]).astype(float), y


def _criterion_by_refit(make, X, y, w, h, criterion):
    """The criterion at ``h`` from an explicit refit: in-sample fit and hat diagonal."""
    est = make(h).fit(X, y, sample_weight=w)
    fit = est.predict(X)
    trace = np.diag(est.attention_weights(X)).sum()
    n = w.sum()
    sigma2 = w @ (y - fit) ** 2 / n
    if criterion == "gcv":
        return sigma2 / (1 - trace / n) ** 2
    den = 1 - (trace + 2) / n
    return np.log(sigma2) + (1 + trace / n) / den if den > 0 else np.inf


@pytest.mark.parametrize("Est", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
@pytest.mark.parametrize("criterion", ["aicc", "gcv"])
def test_mixed_criteria_come_from_one_pass_and_equal_refits(monkeypatch, Est, criterion):
    rng = np.random.default_rng(6)
    X, y = _mixed(rng)
    w = rng.uniform(0.5, 2.0, len(y))
    fits = []
    original = Est.fit

    def counting(self, *args, **kwargs):
        fits.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Est, "fit", counting)
    search = BandwidthSearchCV(Est(categorical_features=[1]), criterion=criterion)
    search.fit(X, y, sample_weight=w)
    monkeypatch.setattr(Est, "fit", original)
    # 280 candidates: one fit to score them all, one refit of the best.
    assert len(search.cv_results_["params"]) == 40 * 7
    assert len(fits) == 2
    picked = rng.choice(280, size=4, replace=False)
    picked = np.append(picked, search.best_index_)
    make = lambda h: Est(categorical_features=[1], bandwidth=h)  # noqa: E731
    for t in picked:
        h = search.cv_results_["params"][t]["bandwidth"]
        want = _criterion_by_refit(make, X, y, w, h, criterion)
        # A candidate that fits almost exactly has log(sigma^2) ~ -25, from residuals of
        # ~1e-6 that are the rounding of the local fits (predict refits some of them about
        # their own origin, the search's one pass does not): there sigma^2 itself, which is
        # exp(AICc) up to a factor of at most e^3, agrees to rounding of var(y).
        got = -_scores(search)[t]
        if criterion == "aicc" and max(got, want) < -20:
            assert abs(np.exp(got) - np.exp(want)) <= 1e-10 * np.var(y)
        else:
            assert_allclose(got, want, rtol=1e-6, atol=1e-10 * np.var(y))


# ------------------------------------------------------------ 11: progress changes nothing
@pytest.mark.parametrize(
    "make, n",
    [(lambda: NadarayaWatsonRegressor(algorithm="binned"), 2000), (NadarayaWatsonRegressor, 300)],
)
def test_verbose_changes_nothing_computed(monkeypatch, capsys, make, n):
    monkeypatch.setattr(skl_nw._search._progress, "PROGRESS_INTERVAL", 0.0)
    calls = []
    for cls in (_binning.BinnedLeaveOneOut, _engine.LeaveOneOut):
        original = cls.predictions

        def spy(self, factors, n_jobs=None, rows=None, _original=original):
            calls[-1].append((type(self).__name__, len(factors), None if rows is None else
                              len(rows)))  # fmt: skip
            return _original(self, factors, n_jobs=n_jobs, rows=rows)

        monkeypatch.setattr(cls, "predictions", spy)
    rng = np.random.default_rng(7)
    X = rng.normal(size=(n, 1))
    y = np.sin(X[:, 0]) + rng.normal(0, 0.3, n)
    results = []
    for verbose in (0, 1, 2):
        calls.append([])
        results.append(BandwidthSearchCV(make(), verbose=verbose).fit(X, y))
    assert calls[0] == calls[1] == calls[2]
    for other in results[1:]:
        assert_array_equal(_scores(other), _scores(results[0]))
        assert_array_equal(other.bandwidth_, results[0].bandwidth_)
    start = capsys.readouterr().out.splitlines()[0]
    backend = "binned grid" if "binned" in repr(make()) else "brute force"
    assert start.endswith(f"backend {backend}")
