"""BandwidthSearchCV's interfaces: metadata routing, pipelines, progress output.

References: the same search with routing off, scikit-learn's own
``GridSearchCV`` under routing, and the search put last in a pipeline
(``make_pipeline(StandardScaler(), BandwidthSearchCV(...))``).
"""

import re
import warnings

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import DataConversionWarning, UnsetMetadataPassedError
from sklearn.linear_model import Ridge
from sklearn.metrics import get_scorer, make_scorer, mean_absolute_error
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut, cross_validate
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.metadata_routing import get_routing_for_object

import skl_nw._search._grid
import skl_nw._search._progress
from skl_nw import (
    BandwidthSearchCV,
    KernelQuantileRegressor,
    LocalPolynomialRegressor,
    NadarayaWatsonRegressor,
    ParzenClassifier,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ROUTING = {"enable_metadata_routing": True}
CANDIDATES = [0.15, 0.3, 0.6, 1.2]
SGD = {"method": "sgd", "max_iter": 12, "batch_size": 16, "random_state": 0}
PATHS = {"loo": {"bandwidths": CANDIDATES}, "cv3": {"bandwidths": CANDIDATES, "cv": 3}, "sgd": SGD}


def _data(rng, n=60, classes=False):
    X = rng.uniform(0, 4, size=(n, 2)) * [1.0, 50.0]  # scales apart: preprocessing matters
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, n)
    return X, ((y > 0).astype(int) if classes else y), w


def _requesting(est, fit=True, score=True):
    """``est`` asking for sample_weight in fit and score (call under routing)."""
    return est.set_fit_request(sample_weight=fit).set_score_request(sample_weight=score)


# ---------------------------------------------------------------------------
# Metadata routing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, ParzenClassifier])
def test_routing_selects_as_without_routing(rng, path, cls):
    X, y, w = _data(rng, classes=cls is ParzenClassifier)
    off = BandwidthSearchCV(cls(), **PATHS[path]).fit(X, y, sample_weight=w)
    with sklearn.config_context(**ROUTING):
        on = BandwidthSearchCV(_requesting(cls()), **PATHS[path]).fit(X, y, sample_weight=w)
        if path == "cv3":  # scikit-learn's own grid search under routing
            scoring = "neg_log_loss" if cls is ParzenClassifier else "neg_mean_squared_error"
            ref = GridSearchCV(
                _requesting(cls()),
                {"bandwidth": CANDIDATES},
                cv=3,
                scoring=get_scorer(scoring).set_score_request(sample_weight=True),
            ).fit(X, y, sample_weight=w)
            assert_allclose(on.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
            assert on.best_score_ == ref.best_score_
    # routing off, the fold scores are weighted too (scikit-learn's own search: from 1.7)
    assert_array_equal(on.bandwidth_, off.bandwidth_)
    assert on.best_score_ == off.best_score_
    assert_allclose(on.predict(X), off.predict(X), rtol=1e-12)
    # the weights did reach the search: unweighted, the selection differs
    unweighted = BandwidthSearchCV(cls(), **PATHS[path]).fit(X, y)
    assert unweighted.best_score_ != on.best_score_


@pytest.mark.parametrize("path", PATHS)
def test_routing_user_scorer_that_requests_weights(rng, path):
    X, y, w = _data(rng)
    mae = make_scorer(mean_absolute_error, greater_is_better=False)
    with sklearn.config_context(**ROUTING):
        scoring = make_scorer(mean_absolute_error, greater_is_better=False)
        scoring.set_score_request(sample_weight=True)
        est = _requesting(NadarayaWatsonRegressor(), score=False)
        on = BandwidthSearchCV(est, scoring=scoring, **PATHS[path]).fit(X, y, sample_weight=w)
        if path == "cv3":
            ref = GridSearchCV(est, {"bandwidth": CANDIDATES}, cv=3, scoring=scoring)
            ref.fit(X, y, sample_weight=w)
    if path == "cv3":
        assert_allclose(on.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    off = BandwidthSearchCV(NadarayaWatsonRegressor(), scoring=mae, **PATHS[path])
    off.fit(X, y, sample_weight=w)
    assert_array_equal(on.bandwidth_, off.bandwidth_)
    assert on.best_score_ == off.best_score_


@pytest.mark.parametrize("path", PATHS)
def test_routing_unrequested_weights_raise_naming_the_estimator(rng, path):
    X, y, w = _data(rng)
    with sklearn.config_context(**ROUTING):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), **PATHS[path])
        with pytest.raises(UnsetMetadataPassedError, match=r"NadarayaWatsonRegressor\.fit"):
            search.fit(X, y, sample_weight=w)
        # the default scorer asks for what the estimator's score asks for: the
        # message names a method the user can call, not an internal scorer
        est = NadarayaWatsonRegressor().set_fit_request(sample_weight=True)
        search = BandwidthSearchCV(est, **PATHS[path])
        with pytest.raises(UnsetMetadataPassedError, match=r"NadarayaWatsonRegressor\.score"):
            search.fit(X, y, sample_weight=w)
        # without metadata nothing needs a request
        plain = BandwidthSearchCV(NadarayaWatsonRegressor(), **PATHS[path]).fit(X, y)
    off = BandwidthSearchCV(NadarayaWatsonRegressor(), **PATHS[path]).fit(X, y)
    assert_array_equal(plain.bandwidth_, off.bandwidth_)


def test_routing_fit_weights_without_score_weights(rng):
    X, y, w = _data(rng)
    with sklearn.config_context(**ROUTING):
        est = _requesting(NadarayaWatsonRegressor(), score=False)
        # the closed-form leave-one-out weights its fits and its scores alike
        for params in (PATHS["loo"], SGD):
            with pytest.raises(ValueError, match="both or for neither"):
                BandwidthSearchCV(est, **params).fit(X, y, sample_weight=w)
        # GridSearchCV fits weighted and scores unweighted
        ours = BandwidthSearchCV(est, **PATHS["cv3"]).fit(X, y, sample_weight=w)
        scoring = get_scorer("neg_mean_squared_error").set_score_request(sample_weight=False)
        ref = GridSearchCV(est, {"bandwidth": CANDIDATES}, cv=3, scoring=scoring)
        ref.fit(X, y, sample_weight=w)
    assert_allclose(ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])


def test_routing_router_score_and_nesting(rng):
    X, y, w = _data(rng)
    assert not hasattr(BandwidthSearchCV(NadarayaWatsonRegressor()), "set_fit_request")
    cv = KFold(3, shuffle=True, random_state=0)
    with sklearn.config_context(**ROUTING):
        search = BandwidthSearchCV(_requesting(NadarayaWatsonRegressor()), **PATHS["loo"])
        routing = get_routing_for_object(search)
        assert routing.consumes("fit", ["sample_weight"]) == {"sample_weight"}
        assert routing.consumes("score", ["sample_weight"]) == {"sample_weight"}
        search.fit(X, y, sample_weight=w)
        assert search.score(X, y, sample_weight=w) == search.best_estimator_.score(
            X, y, sample_weight=w
        )
        # inside another meta-estimator: the weights reach the search's fit
        scoring = get_scorer("neg_mean_squared_error").set_score_request(sample_weight=True)
        nested = cross_validate(
            search, X, y, cv=cv, scoring=scoring, params={"sample_weight": w}, return_estimator=True
        )
    for (train, test), fitted, score in zip(
        cv.split(X), nested["estimator"], nested["test_score"], strict=True
    ):
        ref = BandwidthSearchCV(NadarayaWatsonRegressor(), **PATHS["loo"])
        ref.fit(X[train], y[train], sample_weight=w[train])
        assert_array_equal(fitted.bandwidth_, ref.bandwidth_)
        assert score == scoring(ref, X[test], y[test], sample_weight=w[test])


# ---------------------------------------------------------------------------
# Pipelines
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("method", ["grid", "sgd"])
@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, ParzenClassifier])
def test_pipeline_equals_the_search_last_in_the_pipeline(rng, cls, method, weighted):
    X, y, w = _data(rng, classes=cls is ParzenClassifier)
    w = np.round(4 * w) if weighted else None
    params = SGD if method == "sgd" else {}
    ours = BandwidthSearchCV(make_pipeline(StandardScaler(), cls()), **params)
    ours.fit(X, y, sample_weight=w)
    ref = make_pipeline(StandardScaler(), BandwidthSearchCV(cls(), **params))
    fit_params = {} if w is None else {
        "standardscaler__sample_weight": w, "bandwidthsearchcv__sample_weight": w
    }  # fmt: skip
    ref.fit(X, y, **fit_params)
    assert_array_equal(ours.bandwidth_, ref[-1].bandwidth_)
    assert ours.best_score_ == ref[-1].best_score_
    assert ours.n_iter_ == ref[-1].n_iter_
    Q = _data(rng, n=15)[0]
    method_ = "predict_proba" if cls is ParzenClassifier else "predict"
    assert_array_equal(getattr(ours, method_)(Q), getattr(ref, method_)(Q))
    assert isinstance(ours.best_estimator_, Pipeline)
    assert_array_equal(ours.bandwidth_, ours.best_estimator_[-1].bandwidth_)
    assert ours.n_features_in_ == 2
    name = ours.best_estimator_.steps[-1][0]
    if method == "grid":
        assert set(ours.best_params_) == {f"{name}__bandwidth"}
        assert_array_equal(ours.best_params_[f"{name}__bandwidth"], ours.bandwidth_)
        assert_array_equal(
            ours.cv_results_["mean_test_score"], ref[-1].cv_results_["mean_test_score"]
        )
        assert f"param_{name}__bandwidth" in ours.cv_results_
    else:
        assert ours.loss_curve_ == ref[-1].loss_curve_


def test_pipeline_of_one_step_equals_the_estimator(rng):
    X, y, _ = _data(rng)
    ours = BandwidthSearchCV(make_pipeline(NadarayaWatsonRegressor())).fit(X, y)
    ref = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    assert_array_equal(ours.bandwidth_, ref.bandwidth_)
    assert ours.best_score_ == ref.best_score_


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, ParzenClassifier])
def test_pipeline_other_cv_is_gridsearchcv_over_the_pipeline(rng, cls):
    X, y, _ = _data(rng, classes=cls is ParzenClassifier)
    pipe = make_pipeline(StandardScaler(), cls())
    ours = BandwidthSearchCV(pipe, **PATHS["cv3"]).fit(X, y)
    name = pipe.steps[-1][0]
    scoring = "neg_log_loss" if cls is ParzenClassifier else "neg_mean_squared_error"
    grid = {f"{name}__bandwidth": [np.full(2, h) for h in CANDIDATES]}
    ref = GridSearchCV(pipe, grid, cv=3, scoring=scoring).fit(X, y)
    assert_allclose(ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    assert ours.best_index_ == ref.best_index_
    assert_array_equal(ours.bandwidth_, ref.best_estimator_[-1].bandwidth_)
    assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-12)


def test_pipeline_delegation_and_tags(rng):
    X, y, _ = _data(rng, classes=True)
    clf = BandwidthSearchCV(make_pipeline(StandardScaler(), ParzenClassifier()))
    reg = BandwidthSearchCV(make_pipeline(StandardScaler(), NadarayaWatsonRegressor()))
    assert is_classifier(clf) and not is_regressor(clf)
    assert is_regressor(reg) and not is_classifier(reg)
    assert hasattr(clf, "predict_proba") and hasattr(clf, "predict_log_proba")
    assert not hasattr(reg, "predict_proba")
    clf.fit(X, y)
    assert hasattr(clf, "predict_proba")
    assert_array_equal(clf.classes_, [0, 1])
    assert_allclose(clf.predict_proba(X), clf.best_estimator_.predict_proba(X))
    assert clf.score(X, y) == clf.best_estimator_.score(X, y)


@pytest.mark.parametrize("span", [None, 0.5])
def test_cv_scores_are_weighted_with_routing_off(rng, span):
    # Routing off, scikit-learn's GridSearchCV passes a pipeline's step weights to its
    # fits and none to the scorer (a bare estimator's from 1.7 only): the folds were
    # scored unweighted. A span is searched on the bare estimator.
    X, y, w = _data(rng)
    nw = NadarayaWatsonRegressor(kernel="tricube", span=span)
    est = make_pipeline(StandardScaler(), nw) if span is None else nw
    grid = {"bandwidths": CANDIDATES} if span is None else {"spans": [0.3, 0.5, 0.8]}
    key, values = ("bandwidth", CANDIDATES) if span is None else ("span", [0.3, 0.5, 0.8])
    search = BandwidthSearchCV(est, cv=KFold(3), **grid).fit(X, y, sample_weight=w)
    expected = []
    for value in values:
        scores = []
        for train, test in KFold(3).split(X):
            fitted = clone(nw).set_params(**{key: value})
            Xtrain, Xtest = X[train], X[test]
            if span is None:
                scaler = StandardScaler().fit(Xtrain, sample_weight=w[train])
                Xtrain, Xtest = scaler.transform(Xtrain), scaler.transform(Xtest)
            fitted.fit(Xtrain, y[train], sample_weight=w[train])
            residuals = y[test] - fitted.predict(Xtest)
            scores.append(-np.average(residuals**2, weights=w[test]))
        expected.append(np.mean(scores))
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-12)


def test_cv_scorers_without_weights_are_left_as_scikit_learn_has_them(rng):
    # A metric that takes no sample_weight is not asked for them (its scores were NaN),
    # while one that does is weighted.
    X, y, w = _data(rng)

    def mae(y_true, y_pred):
        return float(np.mean(np.abs(y_true - y_pred)))

    plain = make_scorer(mae, greater_is_better=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # scikit-learn: "does not support"
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=CANDIDATES, cv=KFold(3),
                                   scoring=plain).fit(X, y, sample_weight=w)  # fmt: skip
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    weighted = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=CANDIDATES, cv=KFold(3),
                                 scoring="neg_mean_absolute_error")  # fmt: skip
    weighted.fit(X, y, sample_weight=w)
    first = []
    for train, test in KFold(3).split(X):
        fitted = NadarayaWatsonRegressor(CANDIDATES[0]).fit(X[train], y[train], w[train])
        first.append(-np.average(np.abs(y[test] - fitted.predict(X[test])), weights=w[test]))
    assert weighted.cv_results_["mean_test_score"][0] == pytest.approx(np.mean(first), rel=1e-12)


def test_pipeline_under_routing(rng):
    X, y, w = _data(rng)
    # routing off: every step whose fit takes sample_weight gets it
    off = BandwidthSearchCV(make_pipeline(StandardScaler(), NadarayaWatsonRegressor()))
    off.fit(X, y, sample_weight=w)
    with sklearn.config_context(**ROUTING):
        scaler = StandardScaler().set_fit_request(sample_weight=True)
        pipe = make_pipeline(scaler, _requesting(NadarayaWatsonRegressor()))
        on = BandwidthSearchCV(pipe).fit(X, y, sample_weight=w)
        # a step that has not said whether it wants the weights: sklearn's error
        unset = make_pipeline(StandardScaler(), _requesting(NadarayaWatsonRegressor()))
        with pytest.raises(UnsetMetadataPassedError, match="StandardScaler"):
            BandwidthSearchCV(unset).fit(X, y, sample_weight=w)
    assert_array_equal(on.bandwidth_, off.bandwidth_)
    assert on.best_score_ == off.best_score_


@pytest.mark.parametrize(
    "est",
    [Ridge(), KNeighborsRegressor(), make_pipeline(StandardScaler(), Ridge())],
    ids=lambda est: type(est).__name__ if not isinstance(est, Pipeline) else "pipe_ridge",
)
def test_other_estimators_raise_naming_the_patterns(rng, est):
    X, y, _ = _data(rng, n=20)
    with pytest.raises(ValueError) as info:
        BandwidthSearchCV(est).fit(X, y)
    message = str(info.value)
    assert f"got {type(est).__name__}." in message
    assert "a Pipeline whose last step is one" in message
    for name in ("NadarayaWatsonRegressor", "ParzenClassifier", "LocalPolynomialRegressor"):
        assert name in message
    assert "make_pipeline(StandardScaler(), NadarayaWatsonRegressor())" in message
    assert "put BandwidthSearchCV last in the pipeline" in message


# ---------------------------------------------------------------------------
# Progress output
# ---------------------------------------------------------------------------


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def _number(pattern, line):
    match = re.search(pattern + r"\s*([-+]?\d[\d.]*(?:e[-+]?\d+)?)", line)
    assert match is not None, line
    return float(match.group(1))


@pytest.mark.parametrize("method", ["grid", "sgd"])
def test_verbose_0_is_silent(rng, capsys, method):
    X, y, _ = _data(rng)
    BandwidthSearchCV(NadarayaWatsonRegressor(), method=method, max_iter=5).fit(X, y)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("verbose", [1, 2, 3])
def test_verbose_grid(rng, capsys, monkeypatch, verbose):
    monkeypatch.setattr(skl_nw._search._progress, "PROGRESS_INTERVAL", 0.0)
    X, y, _ = _data(rng)
    # not multiples of one vector: one engine call, and one progress step, per candidate
    bandwidths = [0.2, np.array([0.3, 20.0]), 0.5, np.array([0.6, 30.0])]
    est = NadarayaWatsonRegressor(algorithm="kd_tree")
    search = BandwidthSearchCV(est, bandwidths=bandwidths, verbose=verbose).fit(X, y)
    lines = _lines(capsys)
    assert all(line.startswith("[BandwidthSearchCV] ") for line in lines)
    start, *body, final = lines
    for part in ("60 samples", "2 features", "4 candidates", "cv='loo'", "backend KDTree"):
        assert part in start
    progress = [line for line in body if "candidates (" in line]
    assert [re.search(r"(\d+)/4 candidates \((\d+)%\)", p).groups() for p in progress] == [
        ("1", "25"), ("2", "50"), ("3", "75")
    ]  # fmt: skip
    assert all(re.search(r"elapsed, about \d+\.\d s left$", p) for p in progress)
    scored = [line for line in body if "candidate " in line and "score" in line]
    if verbose == 1:
        assert scored == [] and len(body) == 3
    else:
        assert len(scored) == 4
        for t, line in enumerate(scored):
            assert f"candidate {t + 1}/4" in line
            assert_allclose(_number("score", line), search.cv_results_["mean_test_score"][t], 1e-5)
        per_feature = scored[1]  # bandwidth [0.3, 20]
        assert ("[0.3, 20]" if verbose == 3 else "0.3..20") in per_feature
    assert "Done in" in final and "4 candidates" in final
    low, high = search.bandwidth_.min(), search.bandwidth_.max()
    shown = f"[{low:.4g}, {high:.4g}]" if verbose == 3 else f"{low:.4g}..{high:.4g}"
    assert f"bandwidth {shown}" in final
    assert_allclose(_number("score", final), search.best_score_, rtol=1e-5)


@pytest.mark.parametrize("verbose", [1, 2, 3])
def test_verbose_sgd(rng, capsys, monkeypatch, verbose):
    monkeypatch.setattr(skl_nw._search._progress, "PROGRESS_INTERVAL", 0.0)
    X, y, _ = _data(rng)
    params = {**SGD, "tol": None, "max_iter": 6}
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), verbose=verbose, **params).fit(X, y)
    start, *body, final = _lines(capsys)
    for part in ("60 samples", "2 features", "at most 6 epochs", "method='sgd'", "brute force"):
        assert part in start
    progress = [line for line in body if "epochs (" in line]
    assert len(progress) == 5 and "1/6 epochs (17%)" in progress[0]
    epochs = [line for line in body if re.search(r"\bepoch \d+:", line)]
    if verbose == 1:
        assert epochs == [] and len(body) == 5
    else:
        assert len(epochs) == search.n_iter_ == 6
        for line, loss in zip(epochs, search.loss_curve_, strict=True):
            assert_allclose(_number("loss", line), loss, rtol=1e-5)
            assert re.search(r"bandwidth \[[\d.e+-]+, [\d.e+-]+\]$" if verbose == 3 else
                             r"bandwidth [\d.e+-]+\.\.[\d.e+-]+$", line)  # fmt: skip
    assert "Done in" in final and "6 epochs" in final


def test_verbose_1_throttles_progress(rng, capsys):
    X, y, _ = _data(rng)
    bandwidths = [0.2, np.array([0.3, 20.0]), 0.5]
    BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=bandwidths, verbose=1).fit(X, y)
    BandwidthSearchCV(NadarayaWatsonRegressor(), verbose=1, **SGD).fit(X, y)
    lines = _lines(capsys)
    # a search of well under _PROGRESS_INTERVAL seconds: start and final lines only
    assert len(lines) == 4
    assert "Done in" in lines[1] and "Done in" in lines[3]


def test_verbose_classifier_trees_and_other_cv(rng, capsys):
    X, y, _ = _data(rng, classes=True)
    BandwidthSearchCV(ParzenClassifier(algorithm="ball_tree"), verbose=1).fit(X, y)
    assert "backend BallTree" in _lines(capsys)[0]
    # GridSearchCV's own messages on the other path
    BandwidthSearchCV(ParzenClassifier(), cv=3, bandwidths=CANDIDATES, verbose=1).fit(X, y)
    assert "Fitting 3 folds for each of 4 candidates" in capsys.readouterr().out


def test_verbose_default_grid_reports_rows(rng, capsys, monkeypatch):
    # The default grid is one engine call: on a large training set it runs in blocks
    # of rows (here of one row at least), so that a long search reports its progress
    # (here every block: interval 0); verbose or not, the same blocks.
    monkeypatch.setattr(skl_nw._search._progress, "PROGRESS_INTERVAL", 0.0)
    monkeypatch.setattr(skl_nw._search._grid, "_MIN_BLOCK_ROWS", 1)
    X, y, _ = _data(rng)
    quiet = BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, y)
    loud = BandwidthSearchCV(NadarayaWatsonRegressor(), verbose=1).fit(X, y)
    rows = [line for line in _lines(capsys) if "training rows (" in line]
    assert len(rows) >= 10
    assert all(
        re.search(r"\d+/60 training rows \(\d+%\), .* about \d+\.\d s left$", r) for r in rows
    )
    assert_array_equal(loud.cv_results_["mean_test_score"], quiet.cv_results_["mean_test_score"])


def test_attention_weights_pass_sparse_through(rng):
    X, y, _ = _data(rng)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=CANDIDATES).fit(X, y)
    dense = search.attention_weights(X[:5])
    A = search.attention_weights(X[:5], sparse=True)
    assert isinstance(dense, np.ndarray) and A.format == "csr"
    assert_allclose(A.toarray(), dense, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# Delegation of the inference methods
# ---------------------------------------------------------------------------

INFERENCE = ["predict_gradient", "predict_interval", "predict_proba", "score_samples"]


@pytest.mark.parametrize(
    "est", [NadarayaWatsonRegressor(), LocalPolynomialRegressor(), ParzenClassifier()], ids=repr
)
def test_inference_methods_exist_exactly_where_the_estimator_has_them(rng, est):
    X, y, _ = _data(rng, classes=is_classifier(est))
    search = BandwidthSearchCV(est, bandwidths=CANDIDATES)
    expected = [hasattr(est, name) for name in INFERENCE]
    assert [hasattr(search, name) for name in INFERENCE] == expected
    search.fit(X, y)
    assert [hasattr(search, name) for name in INFERENCE] == expected


@pytest.mark.parametrize("cls", [NadarayaWatsonRegressor, LocalPolynomialRegressor])
def test_inference_methods_forward_their_arguments(rng, cls):
    X, y, _ = _data(rng)
    search = BandwidthSearchCV(cls(), bandwidths=CANDIDATES).fit(X, y)
    ref = cls(search.bandwidth_).fit(X, y)  # the selected bandwidth, fitted independently
    Q = X[:7]
    mean, std = search.predict(Q, return_std=True)
    ref_mean, ref_std = ref.predict(Q, return_std=True)
    assert_allclose(mean, ref_mean, rtol=1e-12)
    assert_allclose(std, ref_std, rtol=1e-12)
    assert_allclose(search.predict_gradient(Q), ref.predict_gradient(Q), rtol=1e-12)
    assert_allclose(search.predict_interval(Q, alpha=0.2), ref.predict_interval(Q, alpha=0.2))
    boot = {"method": "bootstrap", "n_boot": 19, "random_state": 0}
    assert_allclose(search.predict_interval(Q, **boot), ref.predict_interval(Q, **boot))


def test_docstring_names_every_estimator_searched():
    doc = BandwidthSearchCV.__doc__
    first = doc.strip().splitlines()[0]
    assert "Nadaraya" not in first  # it is not about one of them
    estimator = re.search(r"^    estimator : (.*)$", doc, re.MULTILINE).group(1)
    for name in ("NadarayaWatsonRegressor", "ParzenClassifier", "LocalPolynomialRegressor"):
        assert name in estimator


# ---------------------------------------------------------------------------
# cv_results_
# ---------------------------------------------------------------------------


def _log_likelihood(est, X, y):
    """Mean log-probability of the true labels (neg_log_loss refuses one-row splits)."""
    P = est.predict_proba(X)[np.arange(len(y)), np.searchsorted(est.classes_, y)]
    return float(np.mean(np.log(np.clip(P, np.finfo(float).eps, 1.0))))


def _without_splits(keys):
    return {key for key in keys if not re.fullmatch(r"split\d+_test_score", key)}


@pytest.mark.parametrize("classes", [False, True])
def test_loo_cv_results_have_gridsearchcv_keys_and_values(rng, classes):
    X, y, _ = _data(rng, n=30, classes=classes)
    est = ParzenClassifier() if classes else NadarayaWatsonRegressor()
    ours = BandwidthSearchCV(est, bandwidths=CANDIDATES).fit(X, y)
    scoring = _log_likelihood if classes else "neg_mean_squared_error"
    ref = GridSearchCV(est, {"bandwidth": CANDIDATES}, cv=LeaveOneOut(), scoring=scoring)
    ref.fit(X, y)
    # One split per training row: their columns are left out, everything else is there.
    assert set(ours.cv_results_) == _without_splits(ref.cv_results_)
    for key in ("mean_test_score", "std_test_score"):
        assert_allclose(ours.cv_results_[key], ref.cv_results_[key], rtol=1e-7, atol=1e-12)
    assert_array_equal(ours.cv_results_["rank_test_score"], ref.cv_results_["rank_test_score"])
    assert ours.cv_results_["rank_test_score"].dtype == ref.cv_results_["rank_test_score"].dtype
    param = ours.cv_results_["param_bandwidth"]
    assert isinstance(param, np.ma.MaskedArray) and not param.mask.any()
    assert [h[0] for h in param] == list(ref.cv_results_["param_bandwidth"])
    assert [p["bandwidth"][0] for p in ours.cv_results_["params"]] == CANDIDATES
    for key in ("mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time"):
        times = ours.cv_results_[key]
        assert times.shape == (len(CANDIDATES),) and np.all(times >= 0)
    assert ours.cv_results_["mean_fit_time"].sum() > 0


def test_pipeline_cv_results_name_the_step(rng):
    X, y, _ = _data(rng, n=30)
    pipe = make_pipeline(StandardScaler(), NadarayaWatsonRegressor())
    ours = BandwidthSearchCV(pipe, bandwidths=CANDIDATES).fit(X, y)
    ref = GridSearchCV(pipe, {"nadarayawatsonregressor__bandwidth": CANDIDATES}, cv=3).fit(X, y)
    assert set(ours.cv_results_) == _without_splits(ref.cv_results_)
    assert list(ours.cv_results_["params"][0]) == ["nadarayawatsonregressor__bandwidth"]


@pytest.mark.parametrize("kwargs", [{}, {"cv": 3}, {"criterion": "crps"}])
def test_a_dataframe_s_column_names_are_checked_at_predict(rng, kwargs):
    # The refit took the validated array: predicting with the same frame warned that
    # the estimator was fitted without feature names, and reordered columns were fed
    # to it silently permuted. GridSearchCV refits on the frame, and so does the search.
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(rng.uniform(0, 1, (120, 3)), columns=["a", "b", "c"])
    y = np.sin(6 * X["a"].to_numpy()) + rng.normal(0, 0.1, 120)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), **kwargs).fit(X, y)
    assert_array_equal(search.best_estimator_.feature_names_in_, ["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = search.predict(X.iloc[:5])
    want = NadarayaWatsonRegressor(search.bandwidth_).fit(X.to_numpy(), y).predict(X.to_numpy()[:5])
    assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError, match="feature names should match"):
        search.predict(X[["c", "b", "a"]].iloc[:5])


@pytest.mark.parametrize("criterion", ["crps", "pinball"])
def test_distribution_criteria_take_a_column_y_as_the_regressors_do(rng, criterion):
    est = KernelQuantileRegressor(quantile=0.5)
    X = rng.uniform(0, 1, (80, 1))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.1, 80)
    flat = BandwidthSearchCV(est, criterion=criterion).fit(X, y)
    with pytest.warns(DataConversionWarning):
        column = BandwidthSearchCV(est, criterion=criterion).fit(X, y[:, None])
    assert_array_equal(column.bandwidth_, flat.bandwidth_)
    assert_array_equal(column.predict(X[:5]), flat.predict(X[:5]))
    with pytest.raises(ValueError, match="requires y to be passed"):
        BandwidthSearchCV(est, criterion=criterion).fit(X, None)


def test_gradient_methods_warn_about_what_they_cannot_do(rng):
    # They ignored bandwidths= and returned the tophat's rule of thumb, silently.
    X = rng.uniform(0, 1, (50, 1))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.1, 50)
    for method in ("sgd", "lbfgs"):
        with pytest.warns(UserWarning, match="bandwidths is ignored by method"):
            BandwidthSearchCV(NadarayaWatsonRegressor(), method=method, bandwidths=[0.1, 0.2],
                              random_state=0).fit(X, y)  # fmt: skip
        with pytest.warns(UserWarning, match="cannot move the tophat"):
            search = BandwidthSearchCV(NadarayaWatsonRegressor(kernel="tophat"), method=method,
                                       random_state=0).fit(X, y)  # fmt: skip
        rule = NadarayaWatsonRegressor(kernel="tophat").fit(X, y).bandwidth_
        assert_allclose(search.bandwidth_, rule, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BandwidthSearchCV(NadarayaWatsonRegressor(kernel="tophat")).fit(X, y)


def test_loo_scorers_without_sample_weight_see_weights_as_repeated_rows(rng):
    # They were always called with sample_weight= (TypeError for a plain callable or
    # max_error, a ValueError from roc_auc_ovo), even without weights.
    X = rng.uniform(0, 1, (60, 1))
    y = np.sin(6 * X[:, 0]) + 0.3 * rng.normal(size=60)

    def neg_mae(est, X, y):  # scikit-learn's callable signature: no weights
        return -np.mean(np.abs(est.predict(X) - y))

    def scores(scoring, **fit):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[0.05, 0.1, 0.2],
                                   scoring=scoring)  # fmt: skip
        return search.fit(X, y, **fit).cv_results_["mean_test_score"]

    for fit in ({}, {"sample_weight": rng.integers(1, 4, 60).astype(float)}):
        want = scores("neg_mean_absolute_error", **fit)
        np.testing.assert_allclose(scores(neg_mae, **fit), want, rtol=1e-12)
    assert np.isfinite(scores("neg_max_error")).all()
    with pytest.raises(ValueError, match="takes no sample_weight"):
        scores(neg_mae, sample_weight=rng.uniform(0.5, 2.0, 60))


def test_loo_callable_scorers_that_name_sample_weight_get_the_weights(rng):
    X = rng.uniform(0, 1, (60, 1))
    y = np.sin(6 * X[:, 0]) + 0.3 * rng.normal(size=60)
    w = rng.uniform(0.5, 2.0, 60)

    def weighted_mae(est, X, y, sample_weight=None):
        return -np.average(np.abs(est.predict(X) - y), weights=sample_weight)

    def scores(scoring):
        search = BandwidthSearchCV(NadarayaWatsonRegressor(), bandwidths=[0.05, 0.2],
                                   scoring=scoring)  # fmt: skip
        return search.fit(X, y, sample_weight=w).cv_results_["mean_test_score"]

    np.testing.assert_allclose(scores(weighted_mae), scores("neg_mean_absolute_error"),
                               rtol=1e-12)  # fmt: skip
