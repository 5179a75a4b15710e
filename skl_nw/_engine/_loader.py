"""The optional compiled kernels: loaded once, on first use, or None.

``SKL_NW_DISABLE_NUMBA=1`` (or a missing or broken numba) gives the numpy
passes, with the same results; every caller asks :func:`compiled` and takes
the numpy path on None.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import warnings
from pathlib import Path

__all__ = ["compiled"]

# The digest of the compiled modules' sources, kept beside their cached machine code.
_DIGEST = "skl_nw_kernels.digest"


def _drop_stale_machine_code() -> None:
    """Delete the kernels' cached machine code if any compiled module changed since it was built.

    numba checks only the stamp of the file that defines a kernel, so a
    kernel whose inlined helpers live in another ``_compiled_*`` module kept
    its old code when only that module changed (a branch switch in a
    source checkout): stale results, silently.  The digest covers every
    compiled module and numba's version; it is kept in each directory where
    numba caches the kernels (beside the sources, ``NUMBA_CACHE_DIR`` or the
    user's cache).  Directories that cannot be written are left alone.
    """
    import numba

    here = Path(__file__).parent
    digest = hashlib.sha256(numba.__version__.encode())
    for source in sorted(here.glob("_compiled*.py")):
        digest.update(source.name.encode() + source.read_bytes())
    text = digest.hexdigest()
    folders = set()
    for name, module in list(sys.modules.items()):
        if name.startswith(f"{__package__}._compiled"):
            for kernel in vars(module).values():
                cache = getattr(kernel, "_cache", None)
                folders.add(getattr(cache, "cache_path", None))
    for folder in folders - {None}:
        _drop_in(Path(folder), text)


def _drop_in(folder: Path, digest: str) -> None:
    """Delete ``folder``'s cached ``_compiled*`` kernels unless its digest is ``digest``."""
    stamp = folder / _DIGEST
    try:
        if stamp.read_text() == digest:
            return
    except OSError:
        pass
    try:
        for stale in (*folder.glob("_compiled*.nbi"), *folder.glob("_compiled*.nbc")):
            stale.unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest)
    except OSError:  # not writable: numba does not cache there either
        pass


@functools.cache
def compiled():
    """Return the numba kernels (:mod:`skl_nw._engine._compiled`), or None if absent or disabled."""
    if os.environ.get("SKL_NW_DISABLE_NUMBA", "") not in ("", "0"):
        return None
    try:
        from . import _compiled as module

        _drop_stale_machine_code()

        module.warm_up()  # compile (or load) the exponential: a broken numba fails here
    except ImportError:  # numba is not installed (or does not support this numpy)
        return None
    except Exception as error:  # e.g. no writable cache directory, a failed compilation
        warnings.warn(
            f"skl_nw: numba is installed but its kernels failed to load ({error!r}); "
            "using the numpy passes (same results, slower).",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return module
