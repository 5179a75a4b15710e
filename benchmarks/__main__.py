"""Run a benchmark: ``python -m benchmarks NAME [options]``.

Each benchmark module exposes ``main(argv)``; register it in ``BENCHMARKS``.
"""

from __future__ import annotations

import importlib
import sys

# name -> module exposing main(argv); imported only when chosen.
BENCHMARKS = {
    "search": "benchmarks.bench_search",
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        names = ", ".join(sorted(BENCHMARKS))
        print(f"usage: python -m benchmarks {{{names}}} [options]", file=sys.stderr)
        sys.exit(2)
    importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    main()
