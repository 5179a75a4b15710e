"""Run the benchmarks: ``python -m benchmarks [NAME ...|all] [options]``.

Each benchmark module exposes ``main(argv)``; register it in ``BENCHMARKS``.
``all`` (the default) runs every one in turn with the same options, e.g.
``python -m benchmarks all --quick`` for a smoke run.
"""

from __future__ import annotations

import importlib
import sys

# name -> module exposing main(argv); imported only when chosen.
BENCHMARKS = {
    "binned": "benchmarks.bench_binned",
    "conditional": "benchmarks.bench_conditional",
    "coverage": "benchmarks.bench_coverage",
    "engine": "benchmarks.bench_engine",
    "inference": "benchmarks.bench_inference",
    "local_poly": "benchmarks.bench_local_poly",
    "loess": "benchmarks.bench_loess",
    "metric": "benchmarks.bench_metric",
    "mixed": "benchmarks.bench_mixed",
    "mixed_search": "benchmarks.bench_mixed_search",
    "search": "benchmarks.bench_search",
    "search_backend": "benchmarks.bench_search_backend",
    "search_defaults": "benchmarks.bench_search_defaults",
    "screen": "benchmarks.bench_screen",
    "trees": "benchmarks.bench_trees",
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    first_option = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    names, options = argv[:first_option], argv[first_option:]
    if not names or names == ["all"]:
        names = list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        valid = ", ".join(["all", *sorted(BENCHMARKS)])
        print(f"unknown benchmark {unknown}; choose from {valid}", file=sys.stderr)
        sys.exit(2)
    for name in names:
        print(f"## {name}\n", flush=True)
        importlib.import_module(BENCHMARKS[name]).main(options)


if __name__ == "__main__":
    main()
