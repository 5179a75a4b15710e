"""The folded predict: keys with the kernel and the weights folded in, one GEMM per chunk.

The Gaussian (and any kernel whose log is linear in the squared distance) with
one bandwidth and no row left out: the log weights of a chunk of queries are
one matrix product, or the compiled kernels' register tiles, where the
product's rounding stays within ``MAX_GEMM_ERROR``; direct differences
otherwise.
"""

from __future__ import annotations

import numpy as np

from ._dense import (
    TILED_MIN_FEATURES,
    exp_sums,
    gemm_exact,
    pad_features,
    padded_columns,
    shifted_log_weights,
)
from ._loader import compiled
from ._screen import screen_points, screened_sums

_LOG2E = 1.4426950408889634  # the tiled kernels take their log weights in bits
# Above this many value columns the fused kernels' register tiles lose to the compiled
# exp then a BLAS product (local linear in d = 32 wins, d = 64 loses); see
# ``python -m benchmarks engine --only paths``.
FUSED_MAX_VALUE_COLUMNS = 1024


class FoldedKeys:
    """Keys with the kernel and the weights folded in, for one GEMM per chunk and power.

    For a kernel with ``log K(s) = c s`` (``kernel.log_slope``), the log of
    ``w K^p`` is ``p c |q - x|^2 + log w = [-2pc q, 1, pc |q|^2] . [x, pc |x|^2 + log w, 1]``:
    one matrix product gives it, always ``<= max log w`` (taken as 0), so the
    exponential cannot overflow and only rows whose every term underflows need
    a shift.  Pooling is then three passes over a chunk (GEMM, in-place exp,
    then a matrix-vector product and row sum) instead of seven; one with the
    compiled kernel, which takes each log weight (``d`` multiply-adds and two
    adds), the exp and the sums together (continuous features), or two (the
    GEMM, then the rest) with discrete kernels.
    """

    def __init__(self, train, V: np.ndarray, slopes: list[float], powers: list[int],
                 queries: int = 0):  # fmt: skip
        self.train, self.slopes, self.values, self.powers = train, slopes, V, powers
        self.queries = queries  # the call's query rows: the screen's set-up pays from many
        shifted = shifted_log_weights(train.log_w)
        # Discrete kernels fold in as well: a query's log-kernel rows against the
        # points' one-hot codes (every entry <= 0, so the bound above still holds).
        # The compiled kernel looks them up instead: by cell (the categories of every
        # feature) in the exponential's pass, or feature by feature where cells abound.
        self.codes = self.cells = None
        kernels = compiled()
        if train.onehot is not None and kernels is not None:
            columns = train.codes + train.offsets
            self.cells, cell_of = np.unique(columns, axis=0, return_inverse=True)
            if len(self.cells) * 8 > len(columns):
                self.cells, cell_of = None, columns
            self.codes = np.ascontiguousarray(cell_of.reshape(len(columns), -1).T, np.int64)
        self.VT = np.ascontiguousarray(V.T)
        # The dot products in the compiled pass: the keys by column. Its tiles beat the
        # exp then a single-threaded BLAS product up to FUSED_MAX_VALUE_COLUMNS
        # (measured once, see docs/benchmarks.md "Dense engine", "Tuned constants").
        self.fused = (
            kernels is not None
            and V.shape[1] <= FUSED_MAX_VALUE_COLUMNS
            and (train.onehot is None or (self.cells is not None and train.d <= 3))
        )
        # Rows whose GEMM could cancel take direct differences in the same tiles
        # (continuous features only; else the caller's log-space path takes those rows).
        self.direct = self.fused and train.onehot is None
        # Many features: the tiled kernels, features padded to a multiple of four.
        self.tiled = self.direct and train.d >= TILED_MIN_FEATURES
        self.differences = None  # (X.T padded, offsets in bits), made when first needed
        if self.tiled:  # log weights in bits (see _compiled_tiled)
            X = pad_features(train.X).T
            self.keys = [np.ascontiguousarray(np.vstack([X, _LOG2E * c * train.sq_norms
                                                         + _LOG2E * shifted]))
                         for c in slopes]  # fmt: skip
        else:
            extra = [] if train.onehot is None or kernels is not None else [train.onehot]
            self.keys = [
                np.column_stack([train.X, c * train.sq_norms + shifted, np.ones(len(V)), *extra])
                for c in slopes
            ]
            if self.fused:  # the ones are implied (see exp_dot_sums)
                self.keys = [np.ascontiguousarray(keys[:, :-1].T) for keys in self.keys]
        if self.fused and self.cells is not None:
            # The points sorted by cell (sums do not depend on the order): the discrete
            # kernels are then one constant per block of the exponential's pass.
            order = np.argsort(self.codes[0], kind="stable")
            self.keys = [np.ascontiguousarray(keys[:, order]) for keys in self.keys]
            self.VT = np.ascontiguousarray(self.VT[:, order])
            counts = np.bincount(self.codes[0], minlength=len(self.cells))
            self.bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def sums(self, Q: np.ndarray) -> np.ndarray:
        """``[sum w K^p V, sum w K^p]`` per query and power.

        The folded product's rounding bound is taken per query: the rows it
        admits fold; the others take :meth:`direct_sums` (compiled kernels,
        continuous features) or come back as zero sums, which the caller redoes
        in log space as it does rows whose sums underflow.
        """
        Q, A = self.train.split(Q)
        q_sq = np.einsum("ij,ij->i", Q, Q)
        steepest = max(abs(c) for c in self.slopes)
        fold = gemm_exact(steepest, Q.shape[1], q_sq + self.train.max_sq_norm)
        if fold.all():
            return self.folded_sums(Q, A, q_sq)
        out = np.zeros((len(Q), len(self.slopes), self.values.shape[1] + 1))
        if fold.any():
            out[fold] = self.folded_sums(Q[fold], None if A is None else A[fold], q_sq[fold])
        if self.direct:
            out[~fold] = self.direct_sums(Q[~fold], share=float(np.mean(~fold)))
        return out

    def folded_sums(self, Q: np.ndarray, A: np.ndarray | None, q_sq: np.ndarray) -> np.ndarray:
        """:meth:`sums` by the folded product, for rows within its rounding bound."""
        # One C-contiguous block per power: the compiled kernels take the layout of
        # their examples (a strided out[:, t] would compile a second specialisation).
        out = np.empty((len(self.slopes), len(Q), self.values.shape[1] + 1))
        kernels = compiled()
        for t, (c, keys) in enumerate(zip(self.slopes, self.keys, strict=True)):
            R = None if A is None else self.powers[t] * A  # log L^p = p log L
            if self.cells is not None:  # each cell's log kernel: (m, n_cells)
                R = np.ascontiguousarray(R[:, self.cells].sum(axis=2))
            if self.tiled:
                bits = _LOG2E * c
                queries = np.column_stack([pad_features(-2.0 * bits * Q), bits * q_sq])
                kernels.exp_dot_tiled(queries, keys, self.VT, out[t])
            elif self.fused:
                queries = np.column_stack([-2.0 * c * Q, c * q_sq])
                if R is None:
                    kernels.exp_dot_sums(queries, keys, self.VT, out[t])
                else:
                    kernels.exp_dot_sums_coded(queries, keys, self.VT, R, self.bounds, out[t])
            if self.fused:
                continue
            extra = [] if R is None or self.codes is not None else [R]
            queries = np.column_stack([-2.0 * c * Q, np.ones(len(Q)), c * q_sq, *extra])
            if self.codes is not None:  # many cells: feature by feature
                G = np.ascontiguousarray(queries @ keys.T)
                kernels.exp_sums_coded(G, self.VT, np.ascontiguousarray(R), self.codes, out[t])
            else:
                out[t] = exp_sums(queries @ keys.T, self.values)
        return np.moveaxis(out, 0, 1)

    def direct_sums(self, Q: np.ndarray, share: float = 1.0) -> np.ndarray:
        """:meth:`sums` from direct differences (exact to rounding wherever the points lie).

        The tiled kernels' other pass, for rows whose GEMM could cancel (far
        from the centre in bandwidth units): a subtraction more per feature and
        pair, against the log-space passes over an (m, n) block.
        """
        if self.differences is None:  # one assignment: chunk threads share these keys
            offset = _LOG2E * shifted_log_weights(self.train.log_w)  # in bits
            # The integer screen's points per slope (None where it does not apply):
            # it leaves out the pairs far below their row's largest weight (_screen).
            # ``share``: of the chunk's rows, those taking direct sums; the call's others
            # are alike, so its direct rows are about share * queries (the screen's set-up
            # pays only for many: a few far rows among folded ones cost it 5% in d = 16).
            k, rows = self.values.shape[1], int(share * self.queries)
            screens = [screen_points(self.train.X, offset, _LOG2E * c, k, rows)
                       for c in self.slopes]  # fmt: skip
            self.differences = (padded_columns(self.train), offset, screens)
        XT, offset, screens = self.differences
        out = np.empty((len(self.slopes), len(Q), self.values.shape[1] + 1))
        queries = None
        for t, c in enumerate(self.slopes):
            if screened_sums(screens[t], Q, self.VT, out[t]):
                continue
            queries = pad_features(Q) if queries is None else queries
            compiled().exp_diff_tiled(queries, XT, _LOG2E * c, offset, self.VT, out[t])
        return np.moveaxis(out, 0, 1)
