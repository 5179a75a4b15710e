"""The integer screen: Gaussian sums that skip the pairs too far below their row's largest weight.

``FoldedKeys.direct_sums`` asks :func:`screened_sums` first; it fills the sums
and returns True where the screen applies and pays, and returns False
otherwise (the caller then takes ``exp_diff_tiled``).  The sums are those of
``exp_diff_tiled``, ``out[i] = [sum_j e_ij v_j, sum_j e_ij]`` with
``e_ij = 2^(slope |q_i - x_j|^2 + off_j)``, less the pairs whose ``e_ij`` lies
more than ``log2 n + 58`` bits below the row's largest (together under
``2^-58`` of the row's sum: far under float64's rounding of it).

The bound.  With ``b = -slope`` and ``D_ij = |q_i - x_j|^2 + off_j / slope``
(the weight folded into a distance, ``e_ij = 2^(-b D_ij)``) a pair is needed
only if ``D_ij <= min_j D_ij + M``, ``M = (log2 n + 58) / b``.  About the
points' centre, ``q = s q~ + e_q`` and ``x = s x~ + e_x`` with int8 ``q~``,
``x~`` and one scale ``s``, so ``q.x - s^2 q~.x~ = s q~.e_x + e_q.x``, whose
size is at most ``|s q~||e_x| + |e_q||x| <= (t A^2 + B^2 / t) / 2 +
(u C^2 + |x|^2 / u) / 2`` (Cauchy-Schwarz, then AM-GM with any ``t, u > 0``):
a query's part ``err_q`` plus a point's part ``err_x``.  Hence

    D_ij >= |q|^2 - 2 err_q + (|x|^2 + off_j / slope - 2 err_x) - 2 s^2 q~.x~,

and the integer test ``q~.x~ - floor(beta_j) >= alpha_i`` (one ``vpdpbusd``
lane per pair, ``_compiled_screen``) keeps every needed pair, with
``beta_j = (|x_j|^2 + off_j / slope - 2 err_x) / 2 s^2`` folded into a
per-point integer offset and ``alpha_i`` from an upper bound ``U_i`` on the
row's least ``D``: the same inequality the other way (a max-only pre-pass),
then the exact ``D`` of the pre-pass's best candidates.  Every float bound
carries a relative slack of ``1e-9`` (their rounding is ~1e-15), and the
margin the centring's rounding (the kept pairs' ``e_ij`` come from the
inputs themselves, not the centred copies).
"""

from __future__ import annotations

import functools

import numpy as np

from ._loader import compiled

__all__ = ["ScreenPoints", "cpu_supported", "screen_points", "screen_supported", "screened_sums"]

# The screen pays from this many features: in d = 32 (h = 0.5, n = m = 20,000) it ran at
# 0.6-0.8 of np.exp's elements/s against the tiled kernel's 0.34-0.41; below 16 features
# the folded product takes the rows anyway (``python -m benchmarks engine --only exp_limit``).
SCREEN_MIN_FEATURES = 16
# Below this many training points a chunk's fixed costs (quantising the queries, the
# pre-pass's candidates) outweigh what the screen saves (measured once, d = 32).
SCREEN_MIN_POINTS = 2048
# The kept share of pairs above which the exact pass on the kept pairs (gathers and a
# transpose-add each) costs more than the tiled kernel's pass over all of them: at
# h = 1.0, d = 32 the screen kept 99.95% and ran at 0.25 against the tiled 0.59; at
# h = 0.5 it kept ~9% and ran at ~0.7 (``python -m benchmarks engine --only exp_limit``).
SCREEN_MAX_KEPT = 0.25
# The points' set-up (quantising, packing: ~40-100 ms at n = 20,000, d = 32) against the
# ~25 us a query row saves there: it pays from about 1,500 rows (measured once).
SCREEN_MIN_QUERIES = 2048
# Queries screened first in each chunk to estimate its kept share (their sums are kept).
SAMPLE_ROWS = 32

_MARGIN_BITS = 58.0  # plus log2 n: the pairs left out sum to under 2^-58 of a row's sums
_CLIP_QUANTILE = 0.9999  # |coordinates| at this quantile map to 127: outliers do not set s
_ZERO_BITS = -1100.0  # points whose offset is below it have e_ij = 0 in exp_diff_tiled too
_INT_LIMIT = 2.0**29  # integer offsets and dot products within it: no int32 overflow
_SLACK = 1e-9
_EPS = np.finfo(np.float64).eps


@functools.cache
def cpu_supported() -> bool:
    """Whether this CPU has AVX-512 F, BW and VNNI (``vpdpbusd``, ``vpcompressd`` on zmm).

    A CPU without them must never compile the kernels (LLVM would reject or emulate
    the instructions), so nothing imports ``_compiled_screen`` before this says yes.
    """
    try:
        from llvmlite import binding
        from numba.core import config

        features = binding.get_host_cpu_features()
    except Exception:  # no llvmlite, or one without the query: no screen
        return False
    # numba told to compile for another CPU (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES, say a
    # portable cache's "generic") could not select these instructions.
    if config.CPU_NAME or config.CPU_FEATURES:
        return False
    return all(features.get(name, False) for name in ("avx512f", "avx512bw", "avx512vnni"))


def screen_supported() -> bool:
    """Whether the compiled kernels are loaded (numba, not disabled) on a supported CPU."""
    return compiled() is not None and cpu_supported()


def _pad(A: np.ndarray, multiple: int, dtype=np.float64) -> np.ndarray:
    """Return ``A`` with zero columns appended up to a multiple of ``multiple``, C-contiguous."""
    out = np.zeros((len(A), -(-A.shape[1] // multiple) * multiple), dtype)
    out[:, : A.shape[1]] = A
    return out


class ScreenPoints:
    """The training points' int8 copies and integer offsets for one slope (made once per fit).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The training points.
    off : ndarray of shape (n,)
        Their log weights in bits, ``<= 0``.
    slope : float
        The kernel's slope in bits (``< 0``).

    Attributes
    ----------
    usable : bool
        False where the integers would overflow or the points have no spread:
        the caller then takes the tiled kernel.
    """

    def __init__(self, X: np.ndarray, off: np.ndarray, slope: float):
        n, d = X.shape
        self.n, self.d, self.slope, self.off = n, d, slope, np.ascontiguousarray(off, np.float64)
        self.centre, self.declined, self.accepted = X.mean(axis=0), False, False
        Xc = X - self.centre
        sample = np.abs(Xc[:: max(1, n // 4096)])
        self.scale = float(np.quantile(sample, _CLIP_QUANTILE)) / 127.0
        self.usable = self.scale > 0 and np.isfinite(self.scale) and d * 32640 < _INT_LIMIT
        if not self.usable:
            return
        self.X = _pad(X, 8)
        self._integers(Xc)

    def _integers(self, Xc: np.ndarray) -> None:
        """Make the packed bytes, the per-point offsets and the AM-GM weights ``t, u``."""
        s, n, d = self.scale, self.n, self.d
        xt = np.clip(np.rint(Xc / s), -128, 127)
        ex = Xc - s * xt
        norm = np.sqrt(np.einsum("ij,ij->i", Xc, Xc))
        # |e_x| with the rounding of ex itself (<= 2 ulp of each coordinate)
        B = (np.sqrt(np.einsum("ij,ij->i", ex, ex)) + 4 * _EPS * norm) * (1 + _SLACK) + 1e-300
        A = s * np.sqrt(np.einsum("ij,ij->i", xt, xt))  # a typical |s q~|: queries are alike
        self.t = max(np.median(B), 1e-12 * s) / max(np.median(A), 1e-12 * s)
        self.u = max(np.median(norm), 1e-12 * s) / max(np.median(B), 1e-12 * s)
        err_x = (B * B / self.t + norm * norm * (1 + _SLACK) ** 2 / self.u) / 2 * (1 + _SLACK)
        self.doff = np.where(self.off < _ZERO_BITS, np.inf, self.off / self.slope)
        live = np.isfinite(self.doff)  # the others are never kept (their e_ij are 0)
        wide = (norm * norm + np.where(live, self.doff, 0.0)) / (2 * s * s)
        lower = wide - err_x / (s * s) - _SLACK * (1 + wide + err_x / (s * s))
        upper = wide + err_x / (s * s) + _SLACK * (1 + wide + err_x / (s * s))
        if live.any() and max(-lower[live].min(), upper[live].max()) >= _INT_LIMIT:
            self.usable = False
            return
        vectors = -(-n // 16)  # packed vectors of 16 points, then in fours (a tile)
        nv = -(-vectors // 4) * 4
        self.negib = np.full(nv * 16, -(1 << 30), np.int32)
        self.delta = np.zeros(nv * 16, np.int32)
        fb = np.floor(np.where(live, lower, 0.0))
        self.negib[:n][live] = (-fb[live]).astype(np.int32)
        self.delta[:n][live] = (np.ceil(upper[live]) - fb[live]).astype(np.int32)
        self.xt, self.fb = xt, fb  # for the tests' bound check
        xu = np.zeros((nv * 16, -(-d // 4) * 4), np.uint8)
        xu[:n, :d] = (xt + 128).astype(np.uint8)
        groups = xu.shape[1] // 4
        packed = xu.reshape(nv, 16, groups, 4).transpose(0, 2, 1, 3)  # vpdpbusd's layout
        self.packed = np.ascontiguousarray(packed).ravel()
        self.max_abs = float(np.abs(Xc).max()) + float(np.abs(self.centre).max())
        self.max_norm = float(norm.max())

    def queries(self, Q: np.ndarray) -> tuple:
        """Return the queries' int8 rows, byte sums and bounds ``qa``, ``qb`` (module docstring)."""
        s, m = self.scale, len(Q)
        Qc = Q - self.centre
        qt = np.clip(np.rint(Qc / s), -128, 127)
        eq = Qc - s * qt
        norm = np.sqrt(np.einsum("ij,ij->i", Qc, Qc))
        A = s * np.sqrt(np.einsum("ij,ij->i", qt, qt)) * (1 + _SLACK)
        C = (np.sqrt(np.einsum("ij,ij->i", eq, eq)) + 4 * _EPS * norm) * (1 + _SLACK) + 1e-300
        err_q = (self.t * A * A + self.u * C * C) / 2 * (1 + _SLACK)
        nq = norm * norm
        qa = (nq - 2 * err_q) / (2 * s * s)
        qb = nq + 2 * err_q
        Qq = np.zeros((-(-m // 4) * 4, self.packed.size // len(self.negib)), np.int8)
        Qq[:m, : self.d] = qt
        Sq = qt.sum(axis=1)
        return Qq, Sq, qa, qb, float(np.abs(Qc).max(initial=0.0)), float(norm.max(initial=0.0))

    def margin(self, q_abs: float, q_norm: float) -> float:
        """``M`` in units of ``D``, widened by the centring's rounding (twice: both bounds).

        The screen's ``D`` comes from the centred copies, the kept weights from the
        inputs: they differ by ``2 |q - x| |delta| + |delta|^2`` with ``|delta|`` up to
        2 ulp of each coordinate and of the centre, over ``d`` features.
        """
        delta = 4 * _EPS * np.sqrt(self.d) * (q_abs + self.max_abs + 2 * np.abs(self.centre).max())
        shift = 2 * (q_norm + self.max_norm) * delta + delta * delta
        bits = np.log2(self.n) + _MARGIN_BITS
        return bits / -self.slope * (1 + _SLACK) + 2 * shift

    def sums(self, Q: np.ndarray, v: np.ndarray, out: np.ndarray) -> tuple[int, np.ndarray]:
        """Screened ``out[i] = [sum e_ij v_j, sum e_ij]`` for the rows of ``Q``.

        Returns the kept pairs' count and each row's integer threshold.
        """
        from ._compiled_screen import screen_sums

        Qq, Sq, qa, qb, q_abs, q_norm = self.queries(Q)
        thr = np.empty(len(Q), np.int32)
        kept = screen_sums(
            Qq, Sq.astype(np.float64), qa, qb, self.packed, self.negib, self.delta, self.doff,
            self.X, _pad(Q, 8), self.scale**2, self.margin(q_abs, q_norm), float(self.slope),
            self.off, np.ascontiguousarray(v, np.float64), out, thr,
        )  # fmt: skip
        return kept, thr


def screen_points(X: np.ndarray, off: np.ndarray, slope: float, columns: int,
                  queries: int) -> ScreenPoints | None:  # fmt: skip
    """Return the screen's points for one slope, or None where it does not apply.

    It applies on a supported CPU (:func:`screen_supported`), for one value column
    (the NW predict), ``SCREEN_MIN_FEATURES`` features, ``SCREEN_MIN_POINTS`` points,
    ``SCREEN_MIN_QUERIES`` query rows in the call, a negative slope and integers that fit.
    """
    n, d = X.shape
    if columns != 1 or d < SCREEN_MIN_FEATURES or n < SCREEN_MIN_POINTS or not slope < 0:
        return None
    if queries < SCREEN_MIN_QUERIES:
        return None
    if not screen_supported():
        return None
    points = ScreenPoints(X, off, slope)
    return points if points.usable else None


def screened_sums(
    points: ScreenPoints | None, Q: np.ndarray, VT: np.ndarray, out: np.ndarray
) -> bool:
    """Fill ``out`` by the screen where it pays and return True; else False (``out`` untouched).

    The first ``SAMPLE_ROWS`` queries of the call's first chunk are screened first:
    where they kept more than ``SCREEN_MAX_KEPT`` of their pairs, the screen declines
    this chunk and the call's later ones (the caller takes the tiled kernel); else it
    takes them all.
    """
    if points is None or points.declined or VT.shape[0] != 1 or len(Q) == 0:
        return False
    if points.accepted:  # an earlier chunk of the call paid: the queries are alike
        points.sums(Q, VT[0], out)
        return True
    head = min(SAMPLE_ROWS, len(Q))
    sample = np.empty((head, 2))
    kept, _ = points.sums(Q[:head], VT[0], sample)
    if kept > SCREEN_MAX_KEPT * head * points.n:
        points.declined = True  # the call's queries are alike: its other chunks skip the sample
        return False
    out[:head] = sample
    points.accepted = True
    if head < len(Q):
        points.sums(Q[head:], VT[0], out[head:])
    return True
