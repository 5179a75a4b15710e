"""The optional compiled kernels: loaded once, on first use, or None.

``SKL_NW_DISABLE_NUMBA=1`` (or a missing or broken numba) gives the numpy
passes, with the same results; every caller asks :func:`compiled` and takes
the numpy path on None.
"""

from __future__ import annotations

import functools
import os
import warnings

__all__ = ["compiled"]


@functools.cache
def compiled():
    """Return the numba kernels (:mod:`skl_nw._engine._compiled`), or None if absent or disabled."""
    if os.environ.get("SKL_NW_DISABLE_NUMBA", "") not in ("", "0"):
        return None
    try:
        from . import _compiled as module

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
