"""Chunks of queries: the memory budget, worker threads and the BLAS thread limit.

A *chunk* is a set of consecutive query rows whose temporaries fit the
budget; the operations map a function over the chunks, in threads when
``n_jobs`` asks for them, and never hold an (m, n) matrix at once.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from joblib import effective_n_jobs
from sklearn import get_config
from sklearn.utils import gen_even_slices
from threadpoolctl import ThreadpoolController

__all__ = ["Options", "budget", "chunk_rows", "map_chunks", "n_queries", "single_threaded_blas"]


@dataclass(frozen=True)
class Options:
    """How an operation runs, never what it computes (beyond ``rtol``).

    Attributes
    ----------
    rtol : float
        Tree path, infinite-support kernels: the mass left outside each
        query's search radius is at most ``rtol`` times the mass inside.
    n_jobs : int or None
        Worker threads over chunks of queries (joblib's convention).
    working_memory : float or None
        Budget in MiB for the temporaries of all workers together; None reads
        ``sklearn.get_config()["working_memory"]``.
    """

    rtol: float = 1e-16
    n_jobs: int | None = None
    working_memory: float | None = None


def budget(options: Options) -> tuple[int, float]:
    """Worker count and the memory budget of each, in MiB."""
    workers = effective_n_jobs(options.n_jobs)
    working_memory = options.working_memory
    if working_memory is None:
        working_memory = get_config()["working_memory"]
    return workers, working_memory / workers


def chunk_rows(row_bytes: float, budget_mib: float) -> int:
    """Rows whose temporaries of ``row_bytes`` each fit ``budget_mib`` (at least 1).

    scikit-learn's ``get_chunk_n_rows`` formula, kept here because that
    function is private to scikit-learn.
    """
    rows = int(budget_mib * 2**20 // max(row_bytes, 1))
    if rows < 1:
        warnings.warn(
            "Could not adhere to working_memory config. "
            f"Currently {budget_mib:.3g} MiB, {row_bytes * 2**-20:.3g} MiB required.",
            UserWarning,
            stacklevel=3,
        )
    return max(rows, 1)


def n_queries(Q: np.ndarray | None, train, rows_of_train: np.ndarray | None = None) -> int:
    """Return the number of queries: the rows of ``Q``, else the training rows queried."""
    if Q is not None:
        return len(Q)
    return train.n_samples if rows_of_train is None else len(rows_of_train)


def map_chunks(
    fn: Callable[[slice, np.ndarray], object],
    Q: np.ndarray | None,
    train,
    rows: int,
    workers: int,
    out: np.ndarray | None = None,
    rows_of_train: np.ndarray | None = None,
) -> list | np.ndarray:
    """Apply ``fn(chunk, Q[chunk] - center)`` over chunks of ``rows`` queries, in threads.

    ``Q=None`` queries the (already centred) stored training points
    themselves: all of them, or the stored rows ``rows_of_train``.  The
    results fill ``out[chunk]`` if given, else come back as a list in order.
    BLAS runs single-threaded inside: the products of a chunk are thin (inner
    dimension d + 2) and short, and BLAS threads would spin against the
    exponential pass and against our own worker threads.
    """
    m = n_queries(Q, train, rows_of_train)
    slices = [slice(start, min(start + rows, m)) for start in range(0, m, rows)]
    results = [None] * len(slices)

    def run(indices):
        for i in indices:
            chunk = slices[i]
            if Q is not None:
                Qc = Q[chunk] - train.query_center
            else:
                Qc = train.queries(chunk if rows_of_train is None else rows_of_train[chunk])
            results[i] = fn(chunk, Qc)
            if out is not None:
                out[chunk] = results[i]
                results[i] = None

    workers = min(workers, len(slices))
    if threading.current_thread().name.startswith(_WORKER_PREFIX):
        workers = 1  # called from a chunk: no worker may wait on the pool's other tasks
    with single_threaded_blas():
        if workers <= 1:
            run(range(len(slices)))
        else:
            batches = [range(len(slices))[s] for s in gen_even_slices(len(slices), workers)]
            list(_executor(workers).map(run, batches))
    return results if out is None else out


# run() fills shared arrays: threads, whatever the active joblib backend, from one pool
# kept for the process: setting up joblib's backend, or a pool, per call costs a large
# share of a small predict (measured once, see docs/benchmarks.md "Dense engine",
# "Tuned constants").
# Workers never wait on the pool themselves (see map_chunks), so calls from many user
# threads at once share it without deadlock.
_WORKER_PREFIX = "skl_nw-chunks"
_pool_lock = threading.Lock()
_pool: list = [None, 0]  # the executor and its number of threads


def _executor(workers: int) -> ThreadPoolExecutor:
    """Return the process's pool of chunk workers, with at least ``workers`` threads.

    A larger pool replaces a smaller one without shutting it down: a call that
    took the old one may still be submitting to it; once no call holds it, the
    garbage collector lets its idle threads exit.
    """
    with _pool_lock:
        pool, size = _pool
        if pool is None or size < workers:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=_WORKER_PREFIX)
            _pool[:] = [pool, workers]
        return pool


def _forget_pool() -> None:
    """In a forked child: the parent's threads do not exist there (nor its lock holder)."""
    global _pool_lock
    _pool_lock = threading.Lock()
    _pool[:] = [None, 0]


os.register_at_fork(after_in_child=_forget_pool)


@functools.cache
def _blas_libraries() -> tuple:
    """Return the process's BLAS libraries, found once (a controller scans them all)."""
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


# The BLAS thread count is process-wide.  Calls that overlap (predict from several
# user threads) must not each set and restore it: a call starting while another
# holds the limit would record 1 as the "original" count and restore it for good,
# leaving BLAS single-threaded for the rest of the process.  Only the call that
# finds no limit in place sets it, and restores it when it leaves.
_blas_lock = threading.Lock()
_blas_limited = [False]


@contextlib.contextmanager
def single_threaded_blas():
    """Limit BLAS to one thread inside, once per process (nested calls pass through).

    Each library's count is read and set directly; threadpoolctl's ``limit``
    collects every library's full description first, twenty times the cost, paid
    several times by each millisecond-scale predict (measured once, see
    docs/benchmarks.md "Dense engine", "Tuned constants").
    """
    with _blas_lock:
        first = not _blas_limited[0]
        _blas_limited[0] = True
    if not first:
        yield
        return
    libraries = _blas_libraries()
    original = [library.num_threads for library in libraries]
    try:
        for library in libraries:
            library.set_num_threads(1)
        yield
    finally:
        for library, threads in zip(libraries, original, strict=True):
            library.set_num_threads(threads)
        with _blas_lock:
            _blas_limited[0] = False
