"""The plan of one :func:`_sums.kernel_sums` call: what all its chunks share.

It decides, once per call, which of the fast paths applies (the folded GEMM
or the chained exponentials of the Gaussian, the linear-space sums of compact
kernels) and fills a chunk's sums from kernel values or log-kernel terms.
"""

from __future__ import annotations

import numpy as np

from .._kernels import Kernel
from . import _dense, _folded, _span, _tree
from ._chunks import Options, budget

# At most this many folded columns (groups x (values + 1)) for grouped sums: the fused
# pass sums them per pair, and its gain over the shifted sums shrinks with them (class
# sums, n = 50,000, d = 2, 1,000 queries: 3.1-3.6x with 16 groups, 1.8-2.2x with 32,
# about 1.3x with 48, none with 64; measured once, see docs/benchmarks.md "Dense engine").
_GROUP_COLUMNS = 48


class Plan:
    """What every chunk of one :func:`kernel_sums` call shares."""

    def __init__(self, train, kernel, V, powers, factors, grouped, loo, fallback, rows=None,
                 exclude=None, options=None, Q=None):  # fmt: skip
        self.train, self.kernel, self.V = train, kernel, V
        self.powers, self.factors, self.loo, self.fallback = powers, factors, loo, fallback
        # The stored index of each query that is a training row (Q=None).
        self.rows = np.arange(train.n_samples) if rows is None else rows
        # Stored index of the row each query drops (``exclude``), or None.
        self.exclude = None if exclude is None else train.inverse_rows(exclude)
        if not set(powers) <= {1, 2, "ds"} or ("ds" in powers and 1 not in powers):
            raise ValueError(f"powers must hold 1, 2 or 'ds', and 1 with 'ds'; got {powers}.")
        # The powers whose weight sums are positive: they tell an underflowed row.
        self.plain = [t for t, p in enumerate(powers) if p != "ds"]
        self.starts = train.starts if grouped else np.zeros(1, dtype=np.intp)
        self.groups = train.group_of_row if grouped else None
        positive = train.log_w[np.isfinite(train.log_w)]
        self.lw_max = float(positive.max()) if positive.size else 0.0
        self.shape = (len(factors), len(powers), len(self.starts), V.shape[1] + 1)
        # Per-query bandwidth multiples (nearest-neighbour radii, see _span), or None.
        self.scale = None if train.neighbours is None else _span.radii(
            Q, train, self.own(slice(None)), rows, options)  # fmt: skip
        slope = None if self.scale is not None else kernel.log_slope
        slopes = None  # one per factor and power: the Gaussian's log K(s) = slope s
        if slope is not None:
            slopes = [_power(p) * slope / f**2 for f in factors for p in powers]
        # One bandwidth and no row left out: the Gaussian folds (_folded.FoldedKeys).
        single = not loo and exclude is None and list(factors) == [1.0]
        ps = [_power(p) for p in powers]
        # The folded / chained exp sums: the Gaussian on the brute path, ungrouped.
        self.slopes, self.fused = None, False
        if slopes is not None and not train.trees and not grouped and V.shape[1] >= 1:
            self.slopes = np.array(slopes)
            if single:
                m = len(self.rows) if Q is None else len(Q)
                self.folded = _folded.FoldedKeys(train, V, slopes, ps, m)
                self.fused = self.folded.fused
            elif train.codes is not None:  # the chained exps take no discrete kernels
                self.slopes = None
            else:
                self.folded = None
                self.XT = np.ascontiguousarray(train.X.T)
                self.offset = _dense.shifted_log_weights(train.log_w)
        # Grouped sums of the Gaussian: distances shifted by each group's nearest point;
        # first, where they fit, folded as one value column per group and value (the rows
        # where a group's sum underflows then take the shifted distances).
        self.group_slopes, self.group_folded, self.fold_groups = None, None, True
        if slopes is not None and grouped and train.codes is None:
            self.group_slopes = slopes
            if single and not train.trees and self._group_columns_fit(options):
                self.group_folded = _folded.FoldedKeys(train, self._group_columns(), slopes, ps)
                self.occupied = np.logical_or.reduceat(np.isfinite(train.log_w), self.starts)
        # Compact kernels sum in linear space (see _linear_sums).
        # (With discrete kernels a weight sum can vanish inside the support: log space.)
        self.linear = kernel.compact and not grouped and train.codes is None
        if self.linear:
            self.w = np.exp(_dense.shifted_log_weights(train.log_w))

    def linear_sums(self, out, f, K, dK, w, row=None, col=None, m=None):
        """Fill one factor's sums in linear space; return the rows to redo in log space.

        ``K`` (and ``dK = dK/ds`` for ``"ds"``) are the kernel values of a dense
        block (``w`` the weights) or of COO entries (``w`` their weights).
        ``K <= 1`` and weights scaled to at most 1 cannot overflow; a row whose
        weight sum underflows (or is empty) is redone in log space.  Saves the
        log, the row maxima and the exp per pair or neighbour (measured: a
        sixth of a tree predict at n = 1e6).
        """
        last = len(self.powers) - 1
        for t, p in enumerate(self.powers):
            e = dK if p == "ds" else (K if p == 1 else K**p)
            # The last power may overwrite its values (K itself for p = 1).
            e = np.multiply(e, w, out=e if t == last else None)
            if row is None:
                out[2][:, f, t, 0] = _dense.weighted_sums(e, self.V)
            else:
                out[2][:, f, t, 0] = _tree.coo_sums(row, col, e, self.V, m)
        out[1][:, f] = self.lw_max
        plain = out[2][:, f, self.plain, 0, -1]
        return np.flatnonzero((plain < _dense.UNDERFLOW).any(axis=1))

    def _group_columns_fit(self, options) -> bool:
        """Whether the folded group columns are few, and fit a quarter of the memory budget.

        The folded keys hold them twice (by row and by column) for the whole call.
        """
        columns = self.shape[2] * self.shape[3]
        workers, mib = budget(Options() if options is None else options)
        nbytes = 2 * 8 * self.train.n_samples * columns
        return columns <= _GROUP_COLUMNS and nbytes <= workers * mib * 2**20 / 4

    def _group_columns(self) -> np.ndarray:
        """``[V, 1]`` of each group's rows in that group's columns, 0 elsewhere: (n, G (k + 1))."""
        n, (_, _, G, k1) = self.train.n_samples, self.shape
        columns = np.zeros((n, G, k1))
        group = np.repeat(np.arange(G), np.diff(np.append(self.starts, n)))
        columns[np.arange(n), group] = np.column_stack([self.V, np.ones(n)])
        return columns.reshape(n, G * k1)

    def group_folded_sums(self, Qc) -> tuple[tuple, np.ndarray]:
        """Return grouped sums by the folded product (:meth:`empty`'s arrays), and rows to redo.

        Those are the rows where a group with points of positive weight has a
        plain sum below ``_dense.UNDERFLOW`` (0 included: past the folded
        product's bound without the compiled kernels).  Each group keeps a
        log scale of its own, as the shifted sums do: its weight sum is 1 in
        scaled units (its power's, the first power's for ``"ds"``), and a group
        of no weight has scale ``-inf`` and sums 0.
        """
        m, (_, P, G, k1) = len(Qc), self.shape
        sums = self.group_folded.sums(Qc)[:, :, :-1].reshape(m, P, G, k1)  # not the total
        self._times_slope(sums, axis=1)
        low = (sums[..., -1][:, self.plain] < _dense.UNDERFLOW) & self.occupied
        own = [self.powers.index(1) if p == "ds" else t for t, p in enumerate(self.powers)]
        total = sums[..., -1][:, own]  # (m, P, G): the weight sum of each entry's power
        total = np.where(total > 0, total, np.inf)
        out = self.empty(m)
        out[2][:, 0] = sums / total[..., None]
        with np.errstate(divide="ignore"):
            out[1][:, 0] = self.lw_max + np.log(np.where(np.isfinite(total), total, 0.0))
        return out, np.flatnonzero(low.any(axis=(1, 2)))

    def own(self, chunk: slice):
        """Return the stored index of the row each query of ``chunk`` leaves out, or None."""
        if self.exclude is not None:
            return self.exclude[chunk]
        return self.rows[chunk] if self.loo else None

    def empty(self, m: int):
        F, P, G, k1 = self.shape
        return np.zeros((m, F)), np.empty((m, F, P, G)), np.empty((m, F, P, G, k1))

    def fast_sums(self, Qc, own):
        """``(m, F, P, k + 1)`` sums from the folded GEMM or the chained exps, or None.

        Rows whose plain sums are below ``_dense.UNDERFLOW`` (0 included: the
        folded product's rows past its bound, without the compiled kernels)
        are for the caller to redo in log space.
        """
        if self.slopes is None:
            return None
        m = len(Qc)
        if self.folded is not None:
            sums = self.folded.sums(Qc)
        else:
            unique, inverse = np.unique(self.slopes, return_inverse=True)
            sums = _dense.exp_sums_slopes(
                Qc, self.train, self.XT, self.V, unique, self.offset, own, self.kernel
            )[:, inverse]
        sums = sums.reshape(m, *self.shape[:2], -1)
        self._times_slope(sums, axis=2)
        return sums

    def _times_slope(self, sums: np.ndarray, axis: int) -> None:
        """Multiply the ``"ds"`` sums (along the powers' ``axis``) by ``d log K / ds``, in place.

        The folded and chained sums take ``w K``; for the Gaussian ``d log K / ds``
        is the constant slope (in each factor's units).
        """
        ds = [t for t, p in enumerate(self.powers) if p == "ds"]
        np.moveaxis(sums, axis, 0)[ds] *= self.kernel.log_slope

    def log_space(self, rows_out, f, b, shift, s, row=None, col=None):
        """Fill the sums of one factor from log-kernel terms ``b`` (dense, or COO entries)."""
        sh, ls, sc = rows_out
        sh[:, f] = shift
        last = len(self.powers) - 1
        for t, p in enumerate(self.powers):
            q = _power(p)
            mult = _dlog(self.kernel, s) if p == "ds" else None
            # The last power may overwrite the log terms b (one array less).
            T = b if t == last else b.copy()
            if q != 1:
                T *= q
            if row is None:
                T += self.train.log_w
                r, scaled = _dense.block_sums(T, self.V, self.starts, mult)
            else:
                T += self.train.log_w[col]
                G = len(self.starts)
                r, scaled = _tree.entry_sums(row, col, T, self.V, self.groups, G, len(shift), mult)
            ls[:, f, t], sc[:, f, t] = r, scaled


def _power(p) -> int:
    """Return the power of ``K`` whose log scale a (pseudo-)power shares (1 for "ds")."""
    return 1 if p == "ds" else int(p)


def zero_at_zero(g: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``g`` with 0 where ``s = 0`` (see the module docstring), in place."""
    g[s == 0] = 0.0
    return g


def _dlog(kernel: Kernel, s: np.ndarray) -> np.ndarray:
    """``d log K / ds``, 0 at ``s = 0`` (see the module docstring) and outside the support."""
    return zero_at_zero(kernel.dlog_profile(s), s)
