"""The compiled kernels compile on first use only, and later processes load them from disk.

Each child process gets an empty ``NUMBA_CACHE_DIR`` of the test's own (numba
then writes there whatever the package's install location is), so the first
child compiles and the second must load every kernel it calls from the cache.
Without ``NUMBA_CACHE_DIR``, an install numba cannot write to (a read-only
site-packages) caches in the user's cache directory instead.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")
if os.environ.get("SKL_NW_DISABLE_NUMBA", "") not in ("", "0"):  # CI's numpy-only run
    pytest.skip("numba disabled (SKL_NW_DISABLE_NUMBA)", allow_module_level=True)

_CHILD = """
import json, numpy as np, skl_nw
from skl_nw import BandwidthSearchCV, NadarayaWatsonRegressor
from skl_nw._engine import _compiled, _dense

assert _dense.compiled() is _compiled  # loads the module and runs warm_up
kernels = _compiled.examples()
loaded = [k.__name__ for k in kernels if k.signatures]
rng = np.random.default_rng(0)
X = rng.uniform(size=(200, 2))
BandwidthSearchCV(NadarayaWatsonRegressor()).fit(X, np.sin(4 * X[:, 0]))
used = [k for k in kernels if k.signatures]
print(json.dumps({
    "package": skl_nw.__file__,
    "loaded": loaded,
    "used": [k.__name__ for k in used],
    "hits": sum(sum(k.stats.cache_hits.values()) for k in used),
    "misses": sum(sum(k.stats.cache_misses.values()) for k in used),
}))
"""


def _child(cache: Path, **env) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "SKL_NW_DISABLE_NUMBA": "", **env}
    env = {name: value for name, value in env.items() if value is not None}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=600,
        cwd=cache.parent,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def _files(cache: Path) -> dict[str, int]:
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in cache.rglob("*.nb[ic]")}


def test_kernels_compile_when_needed_and_load_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _child(cache)
    # Loading the engine compiles the smallest kernel only; the search compiled what it
    # called, and nothing else (no local fits, no binning).
    assert first["loaded"] == ["exp_nonpositive_array"]
    assert "exp_nonpositive_array" in first["used"] and len(first["used"]) >= 2
    assert not {"local_fit", "linear_bin", "binned_loo"} & set(first["used"])
    assert first["hits"] == 0 and first["misses"] == len(first["used"])
    written = _files(cache)
    for name in first["used"]:  # an index and its code, per kernel compiled
        assert any(f".{name}-" in f and f.endswith(".nbi") for f in written), (name, written)
        assert any(f".{name}-" in f and f.endswith(".nbc") for f in written), (name, written)
    assert not any(".local_fit-" in f for f in written)
    # A second process loads every kernel it calls from the cache and writes nothing.
    second = _child(cache)
    assert second["used"] == first["used"]
    assert second["hits"] == len(second["used"]) and second["misses"] == 0
    assert _files(cache) == written


@pytest.mark.slow
def test_an_install_numba_cannot_write_to_caches_in_the_user_cache(tmp_path):
    # A read-only site-packages: numba then caches in the user's cache directory
    # (XDG_CACHE_HOME/numba).  Simulated by a file where __pycache__ would go (the
    # tests may run as root, whom a read-only directory does not stop).
    import skl_nw

    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(skl_nw.__file__).parent, site / "skl_nw", ignore=ignore)
    (site / "skl_nw" / "_engine" / "__pycache__").write_text("not a directory")
    user = tmp_path / "user"
    env = {"NUMBA_CACHE_DIR": None, "XDG_CACHE_HOME": str(user), "PYTHONPATH": str(site)}
    first = _child(tmp_path / "unused", **env)
    assert first["package"] == str(site / "skl_nw" / "__init__.py")
    assert first["hits"] == 0 and first["misses"] == len(first["used"])
    written = _files(user / "numba")
    assert {name for name in first["used"] if any(f".{name}-" in f for f in written)} == set(
        first["used"]
    )
    second = _child(tmp_path / "unused", **env)
    assert second["hits"] == len(second["used"]) and second["misses"] == 0
    assert not (tmp_path / "unused").exists()


@pytest.mark.slow
def test_a_change_to_an_inlined_helpers_module_recompiles_the_kernels_that_use_it(tmp_path):
    # numba stamps only the file that defines a kernel; the exponential every kernel
    # inlines lives in _compiled_exp.py.  A source checkout that changes only that file
    # (a branch switch) must not load the machine code built from the old one.
    import skl_nw

    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(skl_nw.__file__).parent, site / "skl_nw", ignore=ignore)
    env = {"PYTHONPATH": str(site)}
    cache = tmp_path / "cache"
    first = _child(cache, **env)
    assert first["package"] == str(site / "skl_nw" / "__init__.py")
    assert _child(cache, **env)["misses"] == 0  # unchanged sources: loaded
    helper = site / "skl_nw" / "_engine" / "_compiled_exp.py"
    helper.write_text(helper.read_text() + "\n# changed\n")
    after = _child(cache, **env)
    assert after["used"] == first["used"]
    assert after["hits"] == 0 and after["misses"] == len(after["used"])
    assert _child(cache, **env)["misses"] == 0  # and the new code is cached in turn


def test_stale_machine_code_is_dropped_where_the_digest_differs(tmp_path):
    from skl_nw._engine._loader import _DIGEST, _drop_in

    kept = tmp_path / "_other.f-1.py311.nbi"
    code = [tmp_path / "_compiled.f-1.py311.nbi", tmp_path / "_compiled_x.g-2.py311.1.nbc"]
    for path in (kept, *code):
        path.write_text("")
    _drop_in(tmp_path, "a")
    assert (tmp_path / _DIGEST).read_text() == "a"
    assert kept.exists() and not any(p.exists() for p in code)
    for path in code:
        path.write_text("")
    _drop_in(tmp_path, "a")  # same sources: the cache stays
    assert all(p.exists() for p in code)
    _drop_in(tmp_path, "b")
    assert not any(p.exists() for p in code) and (tmp_path / _DIGEST).read_text() == "b"
