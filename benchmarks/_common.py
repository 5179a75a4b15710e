"""What every benchmark shares: timing, the machine's description, tables, JSON."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np


def timings(fn, repeat: int = 5) -> tuple[object, np.ndarray]:
    """Run ``fn`` ``repeat`` times; return its last result and every wall time."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, np.array(times)


def spread(times: np.ndarray) -> str:
    """``median [min, max]`` of wall times, in seconds."""
    return f"{np.median(times):.3g} [{times.min():.3g}, {times.max():.3g}]"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table, numbers right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def environment(extra: tuple[str, ...] = ()) -> dict:
    """The machine, its BLAS (via threadpoolctl) and the library versions."""
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    import skl_nw

    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "skl_nw": skl_nw.__version__,
    }
    for name in extra:
        try:
            versions[name] = getattr(__import__(name), "__version__", "?")
        except ImportError:
            versions[name] = "not installed"
    blas = [
        f"{p.get('internal_api')} {p.get('version')} ({p.get('architecture')}, "
        f"{p.get('num_threads')} threads)"
        for p in threadpool_info()
        if p.get("user_api") == "blas"
    ]
    from skl_nw._engine import _dense

    compiled = _dense.compiled()
    if compiled is None:
        engine = "numpy passes (numba not installed, or SKL_NW_DISABLE_NUMBA set)"
    else:
        engine = f"compiled kernels (numba {compiled.numba.__version__})"
    return {
        "machine": f"{platform.machine()} ({cpu()}), {os.cpu_count()} cores",
        "engine": engine,
        "load_average": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "blas": blas,
        "versions": versions,
    }


def cpu() -> str:
    """The CPU's model name and its widest vector extension (Linux), else ``"?"``."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?"
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                  if ln.startswith("model name")), "?")  # fmt: skip
    flags = set(next((ln.split(":", 1)[1].split() for ln in info.splitlines()
                      if ln.startswith("flags")), []))  # fmt: skip
    names = {"avx512f": "AVX-512", "avx2": "AVX2", "avx": "AVX"}
    return f"{model}, {next((names[f] for f in names if f in flags), 'no AVX')}"


def describe(env: dict) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    return (
        f"Machine: {env['machine']}, load average {env['load_average']}; "
        f"engine: {env['engine']}; "
        f"BLAS: {'; '.join(env['blas'])}; {versions}"
    )


def write_json(path: str | None, payload: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=2, default=str))
        print(f"Wrote {path}")


@contextlib.contextmanager
def numpy_engine():
    """Run skl_nw on its numpy passes (its path without numba), for side-by-side rows."""
    from skl_nw._engine._loader import compiled

    users = [
        module
        for name, module in sys.modules.items()
        if name.startswith("skl_nw.") and getattr(module, "compiled", None) is compiled
    ]
    for module in users:
        module.compiled = lambda: None
    try:
        yield
    finally:
        for module in users:
            module.compiled = compiled
