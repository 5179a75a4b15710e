"""A float32 screen before the exact pass, against the engine's tiled kernels.

``python -m benchmarks screen``: the Gaussian sums of the dense engine's predict
(n = 20,000 training points, bandwidth 0.5 as in ``engine --only exp_limit``,
one value column, one thread) by the engine's register-tiled kernel (the folded
dot product, or direct differences where it could cancel) and by the screened
pass of ``benchmarks/_screened.py`` (measured, not in the package): the fraction
of pairs it keeps, its time and that of its float32 screen alone, each as a ratio
of ``np.exp``'s elements per second (CPU seconds, medians of runs in turn), and
the largest difference between the two sums relative to the sum of magnitudes.
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from ._common import describe, environment, table
from .bench_engine import BANDWIDTH, ExpRate, gaussian_data, interleaved


def kernel_calls(kernels, d: int, n: int, m: int) -> tuple[dict, callable]:
    """The engine's tiled call, the screened one and the screen alone at ``d``; the kept count."""
    from skl_nw._engine import _dense

    from ._screened import screened_call

    X, _, Q = gaussian_data(n, m, d)
    centre = X.mean(axis=0)
    X, Q = _dense.pad_features(X - centre), _dense.pad_features(Q - centre)
    slope, off = -0.5 / BANDWIDTH**2, np.zeros(n)
    V = np.random.default_rng(d).normal(size=(1, n))
    outs = {name: np.empty((m, 2)) for name in ("tiled", "screened")}
    norms = 2 * max((X**2).sum(1).max(), (Q**2).sum(1).max())
    bits = slope * np.log2(np.e)  # the tiled kernels take their log weights in bits
    if not _dense.gemm_exact(slope, d, norms):  # as FoldedKeys chooses
        XT = np.ascontiguousarray(X.T)
        tiled = lambda: kernels.exp_diff_tiled(Q, XT, bits, off, V, outs["tiled"])  # noqa: E731
    else:
        keys = np.ascontiguousarray(np.vstack([X.T, bits * (X**2).sum(1)]))
        queries = np.column_stack([-2 * bits * Q, bits * (Q**2).sum(1)])
        tiled = lambda: kernels.exp_dot_tiled(queries, keys, V, outs["tiled"])  # noqa: E731
    calls = {
        "tiled": tiled,
        "screened": screened_call(Q, X, slope, off, V, outs["screened"]),
        "screen alone": screened_call(Q, X, slope, off, V, None, alone=True),
    }

    def difference():
        scale = np.abs(outs["tiled"]).max(axis=1, keepdims=True)
        return float((np.abs(outs["screened"] - outs["tiled"]) / scale).max())

    return calls, difference


def bench_screen(n: int, m: int, dims, repeat: int) -> str:
    """The table: kept fraction, the three ratios to ``np.exp`` and the difference, by d."""
    from skl_nw._engine import _dense

    kernels = _dense.compiled()
    if kernels is None:
        return "numba is not available."
    rows, exp_rate = [], ExpRate(n)
    with threadpool_limits(limits=1):
        for d in dims:
            calls, difference = kernel_calls(kernels, d, n, m)
            kept = calls["screened"]() / (m * n)
            calls["tiled"]()
            calls["screen alone"]()
            ratio, rate = interleaved(calls, m * n, repeat, exp_rate)
            rows.append([str(d), f"{kept:.3f}", f"{ratio['tiled']:.2f}",
                         f"{ratio['screened']:.2f}", f"{ratio['screen alone']:.2f}",
                         f"{ratio['screened'] / ratio['tiled']:.2f}",
                         f"{difference():.1e}"])  # fmt: skip
    header = ["d", "kept", "tiled", "screened", "screen alone", "screened ÷ tiled", "difference"]
    return (
        f"### Screened sums (n = {n:,}, m = {m:,}, h = {BANDWIDTH}, one thread)\n\n"
        + table(header, rows)
        + f"\n\nRatios to np.exp elements/s, medians of {repeat} runs in turn (CPU seconds)."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks screen", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    args = parser.parse_args(argv)
    print(describe(environment()), "\n")
    n, m = (4000, 256) if args.quick else (20000, 2000)
    print(bench_screen(n, m, (8, 16, 32, 64), 3), flush=True)
