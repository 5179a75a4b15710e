"""Long gradient passes in chunks: progress within and between iterations, Ctrl-C honoured.

References: one ``loss_grad`` call over every row (the chunks must add up to
it), the unchunked search, ``loss_curve_`` for the printed losses, and the
wall clock for the interrupt.
"""

import _thread
import re
import threading
import time
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose

import skl_nw._engine
import skl_nw._search._lbfgs
import skl_nw._search._progress
from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor, ParzenClassifier
from skl_nw._search._lbfgs import RowChunks
from skl_nw._search._scoring import _log_loss, _squared_error

MIXED = {"categorical_features": [1]}


def _data(rng, n=60, categorical=False):
    X = rng.uniform(0, 4, (n, 2))
    if categorical:
        X[:, 1] = rng.integers(0, 3, n)
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.3 * rng.normal(size=n)
    return X, y


def _small_chunks(monkeypatch, rows=16):
    """Chunks of ``rows`` rows whatever the timing (no growth past the first, no shrinking)."""
    monkeypatch.setattr(skl_nw._search._lbfgs, "_FIRST_CHUNK", rows)
    monkeypatch.setattr(skl_nw._search._lbfgs, "_GROWTH", 1.0)
    monkeypatch.setattr(skl_nw._search._lbfgs, "CHUNK_SECONDS", 1e9)


@pytest.mark.parametrize("kind", ["regressor", "classifier", "mixed"])
def test_chunked_pass_adds_up_to_one_pass(rng, monkeypatch, kind):
    _small_chunks(monkeypatch, rows=7)
    X, y = _data(rng, categorical=kind == "mixed")
    w = rng.uniform(0.5, 2.0, len(X))
    if kind == "classifier":
        est, y = ParzenClassifier([0.4, 0.5]), (y > 0).astype(int)
    else:
        est = NadarayaWatsonRegressor([0.4, 0.5], **(MIXED if kind == "mixed" else {}))
    loo = est.fit(X, y, w)._leave_one_out()
    loss_fn = (_log_loss if kind == "classifier" else _squared_error)(loo.targets)
    theta, rows = np.array([0.2, -0.3]), np.arange(len(X))
    calls = []
    chunks = RowChunks(len(X), report=lambda done, total: calls.append((done, total)))
    loss, grad = chunks.loss_grad(loo, theta, rows, loss_fn, w)
    ref_loss, ref_grad = loo.loss_grad(theta, rows, loss_fn, w)
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert_allclose(grad, ref_grad, rtol=1e-10, atol=1e-14)
    assert calls == [(min(t, 60), 60) for t in range(7, 67, 7)]


def test_chunked_search_equals_the_unchunked_one(rng, monkeypatch):
    X, y = _data(rng)
    whole = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y)
    _small_chunks(monkeypatch)
    chunked = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs").fit(X, y)
    assert_allclose(chunked.bandwidth_, whole.bandwidth_, rtol=1e-7)
    assert_allclose(chunked.loss_curve_, whole.loss_curve_, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter below convergence
        params = {"method": "sgd", "random_state": 0, "max_iter": 3, "batch_size": 40}
        sgd_chunked = BandwidthSearchCV(NadarayaWatsonRegressor(), **params).fit(X, y)
        monkeypatch.undo()
        sgd_whole = BandwidthSearchCV(NadarayaWatsonRegressor(), **params).fit(X, y)
    assert_allclose(sgd_chunked.loss_curve_, sgd_whole.loss_curve_, rtol=1e-10)


@pytest.mark.parametrize("verbose", [1, 2])
def test_lbfgs_reports_iterations_and_rows(rng, capsys, monkeypatch, verbose):
    monkeypatch.setattr(skl_nw._search._progress, "PROGRESS_INTERVAL", 0.0)
    _small_chunks(monkeypatch)
    X, y = _data(rng)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs", verbose=verbose)
    search.fit(X, y)
    start, *body, final = capsys.readouterr().out.splitlines()
    assert "L-BFGS-B" in start and "Done in" in final
    rows = [line for line in body if "training rows of this iteration" in line]
    # 60 rows in chunks of 16: three lines within each pass (the last chunk ends it).
    assert len(rows) >= 3 * search.n_iter_
    assert all(re.search(r"(16|32|48|60)/60 training rows of this iteration \(\d+%\)", r)
               for r in rows)  # fmt: skip
    progress = [line for line in body if re.search(r"\d+/200 iterations \(", line)]
    assert len(progress) == search.n_iter_ - (search.n_iter_ == 200)
    iterations = [line for line in body if re.search(r"\biteration \d+: loss", line)]
    if verbose == 1:
        assert iterations == []
    else:
        assert len(iterations) == search.n_iter_ == len(search.loss_curve_)
        for line, loss in zip(iterations, search.loss_curve_, strict=True):
            value = float(re.search(r"loss ([-+\d.e]+),", line).group(1))
            assert value == pytest.approx(loss, rel=1e-5)


def test_keyboard_interrupt_within_seconds(rng, monkeypatch):
    # One pass over 30,000 rows is 9e8 kernel evaluations, twice: 3-8 s of compiled work
    # on a loaded 2-core machine, during which an unchunked pass cannot see Ctrl-C.
    X, y = _data(rng, n=30_000)
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs")
    search.fit(X[:50], y[:50])  # loads the compiled kernels (Python code, interruptible)
    sent, timers, done = [], [], threading.Event()

    def interrupt():
        # Ctrl-C, again every 0.1 s until it is seen: one that lands while the main
        # thread runs a finaliser is ignored there ("Exception ignored in ..."), which
        # made a single one miss now and then under pytest-xdist.
        sent.append(time.perf_counter())
        while not done.is_set():
            _thread.interrupt_main()
            done.wait(0.1)

    def first_call_arms_the_timer(*args, **kwargs):
        # Ctrl-C 0.3 s into the gradient passes (not during the setup before them).
        if not timers:
            timers.append(threading.Timer(0.3, interrupt))
            timers[0].start()
        return loss_grad(*args, **kwargs)

    loss_grad = skl_nw._engine.loo_loss_grad
    monkeypatch.setattr(skl_nw._engine, "loo_loss_grad", first_call_arms_the_timer)
    try:
        with pytest.raises(KeyboardInterrupt):
            try:
                search.fit(X, y)
            finally:
                done.set()
        latency = time.perf_counter() - sent[0]
    finally:
        done.set()
        for timer in timers:
            timer.cancel()
            timer.join()
    assert latency < 1.0  # chunks of a fraction of a second
