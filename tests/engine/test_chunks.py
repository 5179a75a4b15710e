"""Chunks of queries and their worker threads: chunk sizes, the process's pool.

That no result depends on the chunking or on ``n_jobs`` is tested with each
operation (``test_engine``, ``test_trees``, ``test_reliability``); these tests
pin the machinery itself.
"""

import multiprocessing
import threading

import numpy as np
from numpy.testing import assert_allclose
from sklearn import config_context

from skl_nw import NadarayaWatsonRegressor
from skl_nw._engine import _chunks, _dense, prepare_train


def _predict_in_threads(reg, Q):
    return reg.set_params(n_jobs=2).predict(Q)


def test_worker_pool_survives_fork_and_nesting(rng):
    # The chunk workers are one pool per process: a forked child (multiprocessing's
    # "fork") must start its own, and a chunk that maps chunks itself runs them inline.
    X, y = rng.normal(size=(300, 2)), rng.normal(size=300)
    Q = rng.normal(size=(200, 2))
    reg = NadarayaWatsonRegressor(bandwidth=0.5, n_jobs=2).fit(X, y)
    with config_context(working_memory=0.1):  # several chunks: the pool is used
        want = reg.predict(Q)
        assert _chunks._pool[0] is not None
        with multiprocessing.get_context("fork").Pool(1) as child:
            got = child.apply_async(_predict_in_threads, (reg, Q)).get(timeout=60)
    assert_allclose(got, want, rtol=1e-12)

    outers = []

    def inner(chunk, Qc):  # a chunk function that maps chunks: inline, in its own thread
        outer = threading.current_thread().name
        outers.append(outer)
        return _chunks.map_chunks(
            lambda c, q: (q.sum(axis=1), threading.current_thread().name == outer),
            Qc, train, 3, workers=2,
        )  # fmt: skip

    train = prepare_train(X)
    parts = [part for chunk in _chunks.map_chunks(inner, Q, train, 50, workers=2) for part in chunk]
    assert all(same_thread for _, same_thread in parts)
    assert all(name.startswith(_chunks._WORKER_PREFIX) for name in outers)
    # Each level subtracts the training centre from its queries.
    expected = (Q - 2 * train.query_center).sum(axis=1)
    assert_allclose(np.concatenate([sums for sums, _ in parts]), expected)


def test_worker_pool_grows_under_concurrent_calls(rng):
    # Calls from many threads asking for different numbers of workers: the pool is
    # replaced by a larger one while others still submit to the old one.
    X = rng.normal(size=(200, 2))
    train = prepare_train(X)
    want = (X - train.query_center).sum(axis=1)
    errors = []

    def call(workers):
        try:
            for _ in range(20):
                parts = _chunks.map_chunks(lambda c, q: q.sum(axis=1), X, train, 5, workers)
                assert_allclose(np.concatenate(parts), want)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=call, args=(w,)) for w in (2, 3, 4, 5, 6, 7, 8, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert _chunks._pool[1] >= 8


def test_dense_chunk_rows_budget_cache_and_workers():
    n, rows = 2000, _dense.dense_chunk_rows
    assert rows(n, 1024) == _dense.MAX_CHUNK_PAIRS // n  # cache-sized
    assert rows(n, 1024, fused_m=2000) == 2000  # fused: no (m, n) block
    assert rows(n, 1024, fused_m=2000, workers=2) == 1000  # one per worker
    assert rows(n, 1024, fused_m=3001, workers=2) == 1501
    assert rows(n, 1024, fused_m=10**6) == _dense.MAX_FUSED_CHUNK_PAIRS // n
    budget = 100 * _dense.BYTES_PER_PAIR * n / 2**20  # MiB for 100 rows: the budget binds
    assert rows(n, budget) == rows(n, budget, fused_m=2000) == 100
