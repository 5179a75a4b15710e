"""Dask: a real two-process LocalCluster gives the same numbers as local runs.

The cluster has two worker processes of one thread each, started once for the
module.  Work sent to it (dask arrays, the dask joblib backend) is checked to
have run there with ``distributed.get_task_stream``, so a test cannot pass by
silently computing locally.
"""

import dask.array as da
import joblib
import numpy as np
import pytest
from dask_ml.wrappers import ParallelPostFit
from distributed import Client, LocalCluster, get_task_stream
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context

from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier

ALGORITHMS = ["brute", "kd_tree", "ball_tree"]


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _data(rng, n=3000, d=2):
    X = rng.uniform(size=(n, d))
    y = np.column_stack([np.sin(5 * X[:, 0]) * 10, X[:, 1] ** 2 - X[:, 0]])
    y += rng.normal(scale=0.1, size=y.shape)
    labels = np.digitize(X[:, 0] + 0.2 * rng.normal(size=n), [0.35, 0.7])
    return X, y, labels


def _ran_on_cluster(stream, client):
    """The task stream recorded tasks, every one on a worker of the cluster.

    Which workers take them is the scheduler's choice: under load (the suite runs
    beside this test) one worker can take them all, as it did once in CI.
    """
    workers = {task["worker"] for task in stream.data}
    return len(stream.data) > 0 and workers <= set(client.scheduler_info()["workers"])


# --------------------------------------------------------------------------
# Dask arrays of queries


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_parallel_post_fit_equals_local(client, rng, algorithm):
    X, y, labels = _data(rng)
    Q = rng.uniform(-0.1, 1.1, size=(1500, 2))
    Qd = da.from_array(Q, chunks=250)
    params = {"bandwidth": 0.05, "kernel": "epanechnikov", "algorithm": algorithm}

    reg = ParallelPostFit(NadarayaWatsonRegressor(**params)).fit(X, y[:, 0])
    local = NadarayaWatsonRegressor(**params).fit(X, y[:, 0]).predict(Q)
    with get_task_stream(client) as stream:
        remote = reg.predict(Qd)
        assert isinstance(remote, da.Array)
        remote = remote.compute()
    assert _ran_on_cluster(stream, client)
    assert_allclose(remote, local, rtol=0, atol=1e-12 * np.abs(y).max())

    clf = ParallelPostFit(ParzenClassifier(**params)).fit(X, labels)
    local_clf = ParzenClassifier(**params).fit(X, labels)
    with get_task_stream(client) as stream:
        proba = clf.predict_proba(Qd).compute()
        predicted = clf.predict(Qd).compute()
    assert _ran_on_cluster(stream, client)
    assert_allclose(proba, local_clf.predict_proba(Q), rtol=0, atol=1e-12)
    assert_array_equal(predicted, local_clf.predict(Q))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_map_blocks_equals_local(client, rng, algorithm):
    X, y, labels = _data(rng)
    Q = rng.uniform(-0.1, 1.1, size=(1200, 2))
    Qd = da.from_array(Q, chunks=(300, 2))
    params = {"bandwidth": 0.05, "kernel": "gaussian", "algorithm": algorithm}
    reg = NadarayaWatsonRegressor(**params).fit(X, y)  # two outputs
    clf = ParzenClassifier(**params).fit(X, labels)

    pred = Qd.map_blocks(reg.predict, dtype=float, chunks=(Qd.chunks[0], (2,)))
    proba = Qd.map_blocks(clf.predict_proba, dtype=float, chunks=(Qd.chunks[0], (3,)))
    log_proba = Qd.map_blocks(clf.predict_log_proba, dtype=float, chunks=(Qd.chunks[0], (3,)))
    with get_task_stream(client) as stream:
        pred, proba, log_proba = client.compute([pred, proba, log_proba], sync=True)
    assert _ran_on_cluster(stream, client)
    assert_allclose(pred, reg.predict(Q), rtol=0, atol=1e-12 * np.abs(y).max())
    assert_allclose(proba, clf.predict_proba(Q), rtol=0, atol=1e-12)
    assert_allclose(log_proba, clf.predict_log_proba(Q), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------
# The dask joblib backend


@pytest.mark.parametrize(
    "estimator",
    [
        NadarayaWatsonRegressor(kernel="epanechnikov"),
        NadarayaWatsonRegressor(kernel="gaussian", algorithm="kd_tree"),
        ParzenClassifier(kernel="gaussian"),
    ],
    ids=["regressor", "regressor-tree", "classifier"],
)
def test_grid_search_cv3_under_dask_equals_local(client, rng, estimator):
    X, y, labels = _data(rng, n=400)
    target = labels if isinstance(estimator, ParzenClassifier) else y[:, 0]
    grid = list(np.geomspace(0.01, 0.5, 8))
    local = BandwidthSearchCV(estimator, method="grid", bandwidths=grid, cv=3).fit(X, target)
    search = BandwidthSearchCV(estimator, method="grid", bandwidths=grid, cv=3, n_jobs=-1)
    with get_task_stream(client) as stream, joblib.parallel_backend("dask"):
        search.fit(X, target)
    assert _ran_on_cluster(stream, client)
    assert_array_equal(search.bandwidth_, local.bandwidth_)
    assert search.best_index_ == local.best_index_
    assert_allclose(
        search.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"], rtol=1e-12
    )
    assert_allclose(
        search.cv_results_["std_test_score"], local.cv_results_["std_test_score"], atol=1e-12
    )
    assert_allclose(search.predict(X[:50]), local.predict(X[:50]), rtol=1e-12)


@pytest.mark.parametrize("n_jobs", [2, None])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_n_jobs_predictions_under_dask_backend_equal_local(client, rng, algorithm, n_jobs):
    # Enough queries (and, on the tree path, a small enough working memory)
    # for several chunks, so that the chunks are really dispatched in parallel.
    X, y, labels = _data(rng)
    Q = rng.uniform(-0.1, 1.1, size=(2000, 2))
    params = {"bandwidth": 0.04, "kernel": "gaussian", "algorithm": algorithm, "n_jobs": n_jobs}
    reg = NadarayaWatsonRegressor(**params).fit(X, y)
    clf = ParzenClassifier(**params).fit(X, labels)

    def results():
        with config_context(working_memory=2):
            # 11 MiB dense, over this budget: the CSR form (on every path), densified.
            A = reg.attention_weights(Q[:500], sparse=True).toarray()
            return reg.predict(Q), clf.predict_log_proba(Q), clf.predict(Q), A

    local = results()
    with joblib.parallel_backend("dask"):
        remote = results()
    scale = np.abs(y).max()
    assert_allclose(remote[0], local[0], rtol=0, atol=1e-12 * scale)
    assert_allclose(remote[1], local[1], rtol=1e-12, atol=1e-12)
    assert_array_equal(remote[2], local[2])
    assert_allclose(remote[3], local[3], rtol=0, atol=1e-15)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_closed_form_loo_search_under_dask_backend_equals_local(client, rng, algorithm):
    X, y, _ = _data(rng, n=1200)
    estimator = NadarayaWatsonRegressor(kernel="gaussian", algorithm=algorithm)
    grid = list(np.geomspace(0.01, 0.3, 8))
    local = BandwidthSearchCV(estimator, bandwidths=grid).fit(X, y[:, 0])
    search = BandwidthSearchCV(estimator, bandwidths=grid, n_jobs=2)
    with joblib.parallel_backend("dask"):
        search.fit(X, y[:, 0])
    assert_array_equal(search.bandwidth_, local.bandwidth_)
    assert_allclose(
        search.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"], rtol=1e-12
    )
