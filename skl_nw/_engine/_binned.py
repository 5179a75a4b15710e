"""The binned path: linear binning on a regular grid, one convolution, interpolation.

For large ``n`` in one to three dimensions every kernel sum
``sum_i w_i K(q - x_i) [V_i, 1]`` is approximated on a regular grid of the
bandwidth-scaled inputs (Wand 1994; R's KernSmooth):

1. *linear binning*: each point's ``w_i [V_i, 1]`` is split among the
   ``2^d`` nodes of its grid cell with the multilinear (hat-function)
   weights, so node ``g`` holds ``c_g = sum_i Lambda_g(x_i) w_i [V_i, 1]``
   (one compiled pass over the rows with numba, numpy scatter-adds without);
2. *convolution* of the node sums with the kernel sampled on the grid
   offsets, ``S_g = sum_g' K(g - g') c_g'`` (compact kernels over their
   support, infinite-support kernels truncated where the profile falls
   below ``1e-8 tol^2``), by ``scipy.fft`` real transforms or, for a stencil
   of a few nodes, directly; the Gaussian, whose kernel is the product of
   one-dimensional ones, one axis at a time;
3. *multilinear interpolation* of ``S`` at the queries, and the ratio.

Steps 1 and 3 together replace ``K(q - x_i)`` by its multilinear
interpolant in both ``q`` and ``x_i`` over the grid: an error of order
``step^2`` for continuous kernels and ``step`` for kernels with a jump (the
tophat).  :func:`grid_step` chooses the spacing from the tolerance.  Queries
outside the grid, and queries whose binned weight sum is so small that the
truncated tail or the FFT's rounding could matter, are computed on the exact
path (a :class:`TrainSet` built on first need), so they follow its rules
(the nearest-point fallback of compact kernels, NaN for ``fallback="nan"``).

Memory is ``O(n + G)`` for ``G`` grid nodes (times the number of value
columns), whatever the number of queries: rows are binned and queries
interpolated in chunks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .._kernels import Kernel, get_kernel
from ._binned_convolve import check_grid_size, convolve, stencil
from ._chunks import Options
from ._loader import compiled
from ._sums import power_of_two

__all__ = ["MAX_FEATURES", "BinnedSums", "Grid", "grid_step", "truncation_radius"]

#: The binned path covers one to three features.
MAX_FEATURES = 3
# Queries interpolated per pass: temporaries of a few MiB.
_CHUNK = 1 << 18
# Rows binned per numpy pass (np.add.at): temporaries that stay in the cache.
_BIN_CHUNK = 1 << 15
# Grid spacing, in bandwidths, for a tolerance ``tol``: ``_STEP_SMOOTH * sqrt(tol / d)``
# for infinite-support kernels and ``_STEP_EDGE * sqrt(tol / d)`` for compact ones
# with a kink where they meet 0 (error ~ step^2), ``_STEP_JUMP * tol / d`` for a
# kernel with a jump (error ~ step).  Measured (n = 1e6 normal inputs, noisy smooth
# targets, Scott bandwidth): max |binned - exact| / range about 0.01-0.1 tol in 1-D
# and 0.1-0.5 tol in 2-D; tests/engine/test_binned.py checks ``<= tol`` for every kernel,
# d = 1, 2, 3, and for class probabilities (targets with jumps).
_STEP_SMOOTH = 3.0
_STEP_EDGE = 1.0
_STEP_JUMP = 1.0
# FFT rounding: |error| <= _FFT_ROUNDING * eps * log2(P) * (sum of weights) * max K.
_FFT_ROUNDING = 8.0
# Infinite-support kernels are truncated where the profile falls to _TAIL * tol^2: a
# query whose binned weight sum is below 4 * _TAIL * tol of the total goes exact.
_TAIL = 1e-8
# Values spread further than this about their centre are binned in units of a power of
# two near the spread (sums of ~n of them must stay below the float maximum).
_VALUE_UNIT_ABOVE = 2.0**500


def _has_jump(kernel: Kernel) -> bool:
    """Whether the profile jumps at the edge of a compact support (the tophat)."""
    edge = kernel.profile(np.array([kernel.support**2 * (1 - 1e-9)]))[0]
    return kernel.compact and bool(edge > 1e-6)


def grid_step(kernel: Kernel, tol: float, d: int) -> float:
    """Grid spacing in bandwidths for a relative tolerance ``tol`` in ``d`` dimensions."""
    if _has_jump(kernel):
        return _STEP_JUMP * tol / d
    if kernel.compact:  # a kink where the profile meets 0
        return _STEP_EDGE * np.sqrt(tol / d)
    return _STEP_SMOOTH * np.sqrt(tol / d)


def _radius_at(kernel: Kernel, level: float) -> float:
    return float(np.sqrt(kernel.log_profile_inverse(np.array(np.log(level)))))


def margin_radius(kernel: Kernel, tol: float) -> float:
    """How far (in bandwidths) the grid extends beyond the data.

    The support of a compact kernel; for an infinite-support kernel the
    distance where the profile falls to half the floor (``2 _TAIL tol``):
    farther queries go to the exact path anyway.
    """
    return float(kernel.support) if kernel.compact else _radius_at(kernel, 2 * _TAIL * tol)


def truncation_radius(kernel: Kernel, tol: float) -> float:
    """Radius (in bandwidths) beyond which the sampled kernel is dropped.

    The support of a compact kernel; for an infinite-support kernel the
    radius where the profile falls to ``1e-8 tol^2``.
    """
    if kernel.compact:
        return float(kernel.support)
    return _radius_at(kernel, _TAIL * tol**2)


@dataclass(frozen=True)
class Grid:
    """A regular grid: node ``k`` of axis ``j`` sits at ``lo[j] + k * step[j]``."""

    lo: np.ndarray
    step: np.ndarray
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def cells(self, Q: np.ndarray):
        """Flat index of each point's cell (its lowest node), fractions per axis, inside mask.

        Works one axis at a time on 1-D arrays (no (m, d) temporaries).
        """
        base = np.zeros(len(Q), dtype=np.intp)
        inside = np.ones(len(Q), dtype=bool)
        fractions = []
        for a, n in enumerate(self.shape):
            t = (Q[:, a] - self.lo[a]) * (1.0 / self.step[a])
            inside &= (t >= 0) & (t <= n - 1)
            j = np.clip(np.floor(t), 0, n - 2)
            t -= j
            fractions.append(np.clip(t, 0.0, 1.0, out=t))
            base += j.astype(np.intp) * int(np.prod(self.shape[a + 1 :]))
        return base, fractions, inside

    def corners(self, base: np.ndarray, fractions: list[np.ndarray]):
        """Yield ``(corner, flat node index, multilinear weight)`` for the ``2^d`` corners."""
        strides = [int(np.prod(self.shape[a + 1 :])) for a in range(len(self.shape))]
        sides = [(1.0 - f, f) for f in fractions]
        for corner in itertools.product((0, 1), repeat=len(self.shape)):
            weight = sides[0][corner[0]]
            for a in range(1, len(corner)):
                weight = weight * sides[a][corner[a]]
            offset = sum(c * s for c, s in zip(corner, strides, strict=True))
            yield np.array(corner), base + offset, weight

    def coarsened(self) -> Grid:
        """Every other node: the grid of twice the spacing, same origin."""
        return Grid(self.lo, 2 * self.step, tuple((n + 2) // 2 for n in self.shape))


def column_range(A: np.ndarray, rows=slice(None)) -> tuple[np.ndarray, np.ndarray]:
    """Per-column minimum and maximum of ``A[rows]`` (``inf`` and ``-inf`` for no rows).

    One column at a time: numpy's ``axis=0`` reduction over a tall, narrow
    C-ordered array is some 30 times slower (measured on 1e7 x 2).
    """
    columns = [A[rows, c] for c in range(A.shape[1])]
    low = np.array([c.min(initial=np.inf) for c in columns])
    high = np.array([c.max(initial=-np.inf) for c in columns])
    return low, high


def make_grid(X: np.ndarray, step: float, radius: float, rows=slice(None)) -> Grid:
    """Return a grid over the box of ``X[rows]``, widened by ``radius`` plus one node per side."""
    pad = (np.ceil(radius / step) + 1) * step
    lo, hi = column_range(X, rows)
    lo, hi = lo - pad, hi + pad
    nodes = np.ceil((hi - lo) / step) + 1  # floats: checked before any integer cast
    check_grid_size(tuple(nodes), 1)
    shape = tuple(int(s) for s in nodes)
    return Grid(lo, np.full(X.shape[1], float(step)), shape)


def linear_bin(X, w, values, mid, grid: Grid) -> np.ndarray:
    """Linear binning of ``w [values - mid, 1]``: shape (k + 1, G).

    Node ``g`` gets ``sum_i Lambda_g(x_i) w_i [V_i - mid, 1]``: one compiled
    pass over the rows where numba is available, else numpy passes over
    chunks of rows that scatter-add into the grid (``np.add.at``: no
    grid-sized temporaries per chunk).
    """
    out = np.zeros((values.shape[1] + 1, grid.size))
    kernels = compiled()
    if kernels is not None:
        shape = np.array(grid.shape, dtype=np.int64)
        X, w, values, mid = (np.asarray(a, dtype=np.float64) for a in (X, w, values, mid))
        kernels.linear_bin(X, grid.lo, 1.0 / grid.step, shape, w, values, mid, out)
        return out
    for start in range(0, len(X), _BIN_CHUNK):
        rows = slice(start, start + _BIN_CHUNK)
        base, fractions, _ = grid.cells(X[rows])
        wv = w[rows]
        columns = [wv * (values[rows, c] - m) for c, m in enumerate(mid)] + [wv]
        for _, flat, weight in grid.corners(base, fractions):
            for target, column in zip(out, columns, strict=True):
                np.add.at(target, flat, column * weight)
    return out


def interpolate(grid: Grid, sums: np.ndarray, Q: np.ndarray):
    """Multilinear interpolation of node values ``sums`` (k, G) at ``Q``: (m, k), inside mask."""
    base, fractions, inside = grid.cells(Q)
    out = np.zeros((len(Q), sums.shape[0]))
    for _, flat, weight in grid.corners(base, fractions):
        out += weight[:, None] * sums[:, flat].T
    return out, inside


class BinnedSums:
    """The training side of the binned path: grid, binned sums, and the exact fallback.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Bandwidth-scaled training inputs, ``n_features <= 3``.
    w : ndarray of shape (n_samples,)
        Non-negative sample weights with a positive sum.
    values : ndarray of shape (n_samples, k)
        Values to pool (targets, one-hot labels).
    kernel : Kernel
        The kernel.
    tol : float
        Relative tolerance: sets the grid spacing (:func:`grid_step`), the
        truncation radius (:func:`truncation_radius`) and the floor below
        which a query goes to the exact path.
    rtol : float, default=1e-16
        The exact path's ``rtol`` (for queries it computes).
    power : int, default=1
        The kernel's power: 2 bins the sums ``sum_i w_i K_i^2 [V_i, 1]`` of
        standard errors (the exact path's fallback is for power 1 only).

    Attributes
    ----------
    grid : Grid
        The grid (scaled coordinates).
    counts : ndarray of shape (k + 1, G)
        Linearly binned ``w [V - mid, 1]`` (the values centred on ``mid``, the
        mid-range of each column, so that rounding scales with their range).
    sums : ndarray of shape (k + 1, G)
        ``counts`` convolved with the kernel: the binned kernel sums at the nodes.
    floor : float
        Queries whose binned weight sum is below ``floor`` go to the exact path.
    """

    power: int = 1  # the kernel's power (see Parameters); subclasses bin power 1

    def __init__(self, X, w, values, kernel: Kernel, tol: float, rtol: float = 1e-16,
                 power: int = 1):  # fmt: skip
        n, d = X.shape
        self.power = int(power)
        values = np.asarray(values, dtype=np.float64)  # integer targets too
        if d > MAX_FEATURES:
            raise ValueError(f"The binned path needs at most {MAX_FEATURES} features; got {d}.")
        self.X, self.w, self.values, self.kernel = X, w, values, kernel
        self.tol, self.rtol = float(tol), float(rtol)
        active = w > 0
        if active.all():  # no copies of large inputs
            active = slice(None)
        self._set_mid(values, active)
        self.radius = truncation_radius(kernel, tol)
        self.grid = make_grid(X, grid_step(kernel, tol, d), margin_radius(kernel, tol), active)
        check_grid_size(self.grid.shape, values.shape[1] + 1)
        self._unit_weights(w)
        self.counts = linear_bin(X, self.wb, *self.scaled_values(), self.grid)
        self.sums, used_fft = convolve(self.counts, self.grid.shape, self.stencil(self.grid))
        self.floor = self.floor_for(used_fft, self.grid)
        self._exact = None

    def _set_mid(self, values: np.ndarray, active) -> None:
        """``mid``, the centre of each value column, and ``unit``, what the grid divides by.

        ``unit`` is 1, or where the values' spread about ``mid`` passes
        ``_VALUE_UNIT_ABOVE`` a power of two near it: the binned sums of many
        values near the float maximum overflowed (NaN fits); powers of two
        divide exactly.
        """
        bottom, top = column_range(values, active)
        self.mid = 0.5 * top + 0.5 * bottom  # (top + bottom) overflows near the float max
        spread = np.maximum(top - self.mid, self.mid - bottom)
        self.unit = np.where(spread > _VALUE_UNIT_ABOVE, power_of_two(spread), 1.0)

    def scaled_values(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the values and ``mid`` in units of :attr:`unit` (themselves where it is 1)."""
        if np.all(self.unit == 1.0):
            return self.values, self.mid
        return self.values / self.unit, self.mid / self.unit

    def _unit_weights(self, w: np.ndarray) -> None:
        """Set ``wb``, the weights the grid bins: ``w`` over a power of two near its largest.

        Exact, and the ratios do not see it; ``w y`` of ``w ~ y ~ 1e-200`` would
        underflow (of ``1e200``, overflow).  ``weight_unit`` is that power of two.
        """
        self.weight_unit = float(power_of_two(w.max()))
        self.wb = w / self.weight_unit
        self.total = float(self.wb.sum())

    def __getstate__(self) -> dict:
        """Return the constructor's arguments, the kernel by name: what the fit needs, no more.

        The grid's arrays (binned counts, convolved sums: ``10^6`` values for a
        few hundred points in 2-D) are rebuilt on load by the same
        computation, so a loaded fit predicts the same bits; the kernel record
        holds functions, which neither pickle nor skops.io should store.
        """
        return {"X": self.X, "w": self.w, "values": self.values, "kernel": self.kernel.name,
                "tol": self.tol, "rtol": self.rtol, "power": self.power}  # fmt: skip

    def __setstate__(self, state: dict) -> None:
        """Fit again from the state of :meth:`__getstate__`."""
        self.__init__(**{**state, "kernel": get_kernel(state["kernel"])})

    def stencil(self, grid: Grid, factor: float = 1.0) -> np.ndarray:
        return stencil(self.kernel, grid.step, self.radius, factor, self.power)

    def floor_for(self, used_fft: bool, grid: Grid) -> float:
        """Smallest binned weight sum trusted to ``tol / 4`` against tail and rounding."""
        floor = 0.0
        if not self.kernel.compact:  # dropped tail <= total * _TAIL tol^2 = (tol / 4) * floor
            floor = self.total * 4.0 * _TAIL * self.tol
        if used_fft:
            log_size = np.log2(max(grid.size, 2))
            rounding = _FFT_ROUNDING * np.finfo(float).eps * log_size * self.total
            floor = max(floor, 4.0 * rounding / self.tol)
        return floor

    def exact(self):
        """Return the exact path's training set, built on first need."""
        if self._exact is None:
            from ._auto import choose_algorithm
            from ._train import prepare_train

            with np.errstate(divide="ignore"):
                log_w = np.log(self.w)
            algorithm = choose_algorithm(self.X, log_w, self.kernel, self.rtol)
            self._exact = prepare_train(self.X, log_w=log_w, values=self.values,
                                        algorithm=algorithm)  # fmt: skip
        return self._exact

    def squared(self) -> BinnedSums:
        """Return the squared kernel's weight sums on the same data (no values), built once.

        The ``sum_i w_i K_i^2`` of standard errors and their degrees of
        freedom: one binning and convolution per fit, not per call.
        """
        squared = getattr(self, "_squared", None)
        if squared is None:
            squared = self._squared = BinnedSums(self.X, self.w, self.values[:, :0], self.kernel,
                                                 self.tol, self.rtol, power=2)  # fmt: skip
        return squared

    def interpolated(self, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Binned sums at queries ``Q`` and which of them the grid answers: (m, k + 1), (m,).

        Columns: ``sum_i w_i K_i^p (V_i - mid)``, then ``sum_i w_i K_i^p``.  A
        query is answered on the grid when it is inside it and its weight sum
        is above :attr:`floor`; the others are for the exact path.
        """
        S = np.empty((len(Q), self.values.shape[1] + 1))
        good = np.empty(len(Q), dtype=bool)
        for start in range(0, len(Q), _CHUNK):
            rows = slice(start, start + _CHUNK)
            S[rows], inside = interpolate(self.grid, self.sums, Q[rows])
            good[rows] = inside & (S[rows, -1] > self.floor) & (S[rows, -1] > 0)
        return S, good

    def pool(self, Q: np.ndarray, fallback: str = "nearest", options: Options | None = None):
        """Binned attention pooling at queries ``Q``: (m, k).

        Queries outside the grid or below :attr:`floor` are computed exactly.
        """
        S, good = self.interpolated(Q)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = S[:, :-1] / S[:, -1:] * self.unit + self.mid
        redo = np.flatnonzero(~good)
        if len(redo):
            from . import pool

            options = Options(rtol=self.rtol) if options is None else options
            out[redo] = pool(Q[redo], self.exact(), self.kernel,
                             fallback=fallback, options=options)  # fmt: skip
        return out
