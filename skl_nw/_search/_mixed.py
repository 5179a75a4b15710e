"""BandwidthSearchCV on mixed data: bandwidths h and lambdas chosen together.

The search keeps the user's ``X`` (a DataFrame keeps its category dtypes) and
fits the estimator on its rows; the numeric codes of the categorical
features serve only to merge repeated rows and to compute the rules of thumb.
The default grid is the continuous grid times a grid of lambdas per
categorical feature, scored from one pass over the cells of categories
(:class:`skl_nw._engine.MixedLeaveOneOut`).
"""

from __future__ import annotations

import itertools

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.utils import _safe_indexing

from .._smoothers._base import default_lambdas, rule_of_thumb

# Default lambdas of each categorical feature, as fractions of its kernel's largest
# (0: split by category; 1: ignore the feature, or 0.95 where 1 is not admissible).
LAMBDA_FRACTIONS = np.array([0.0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0])
_OPEN_END = 0.95


def collapse(X, Xnum: np.ndarray, y, w, collapse_numeric):
    """Merge repeated (x, y) rows as ``collapse_numeric`` does; return rows of the given X.

    Rows with equal codes and equal continuous values are the same input, so
    any of them stands for the merged row.
    """
    Xk, yu, wu = collapse_numeric(Xnum, y, w)
    index = {row.tobytes(): i for i, row in enumerate(np.ascontiguousarray(Xnum))}
    first = [index[row.tobytes()] for row in np.ascontiguousarray(Xk)]
    return _safe_indexing(X, first), yu, wu


def base_bandwidth(cats, Xnum: np.ndarray, rule: str, w: np.ndarray) -> np.ndarray:
    """Rule-of-thumb h for continuous features and the default lambdas."""
    h = np.empty(Xnum.shape[1])
    cont = ~cats.mask
    if cont.any():
        h[cont] = rule_of_thumb(Xnum[:, cont], rule, w)
    h[cats.mask] = default_lambdas(cats, w, int(cont.sum()), warn=not cont.any())
    return h


def lambda_grid(cats) -> np.ndarray:
    """Candidate lambda vectors: the product of each feature's default lambdas (L, J)."""
    per_feature = []
    for kernel, top in zip(cats.kernels, cats.max_lambdas(), strict=True):
        fractions = LAMBDA_FRACTIONS.copy()
        if not kernel.max_closed:
            fractions[-1] = _OPEN_END
        per_feature.append(np.unique(fractions * top))
    return np.array(list(itertools.product(*per_feature)), dtype=np.float64)


def candidates(cats, base: np.ndarray, factors: np.ndarray) -> tuple[list, np.ndarray]:
    """Return the default candidates (lambda-major) and the lambda grid."""
    grid = lambda_grid(cats)
    H = np.tile(base, (len(grid), len(factors), 1))
    H[:, :, ~cats.mask] *= np.asarray(factors)[None, :, None]
    H[:, :, cats.mask] = grid[:, None, :]
    return list(H.reshape(-1, len(base))), grid


def grid_scores(ctx, Xu, yu, wu, base, factors, grid) -> tuple:
    """Scores of every (lambda, factor) candidate, lambda-major, from one pass; the fit."""
    est = clone(ctx.estimator).set_params(bandwidth=base).fit(Xu, yu, wu)
    loo = est._leave_one_out()
    if ctx.criterion != "loo":
        return _criterion_scores(ctx, est, loo, Xu, yu, wu, base, factors, grid), est
    if loo.takes_lambdas:  # every lambda from one pass over the cells
        P = loo.predictions(factors, n_jobs=ctx.n_jobs, lambdas=grid)
    else:  # one pass per lambda vector
        P = np.stack([
            clone(est).set_params(bandwidth=_with(base, est.is_categorical_, lam)).fit(Xu, yu, wu)
            ._leave_one_out().predictions(factors, n_jobs=ctx.n_jobs)
            for lam in grid
        ])  # fmt: skip
    if ctx.scoring is None and not is_classifier(est):
        # The default score of every candidate at once (as _score computes it).
        Y = np.asarray(yu, dtype=np.float64).reshape(len(yu), -1)
        mse = np.einsum("lfnk,n->lf", (P - Y) ** 2, wu / wu.sum()) / Y.shape[1]
        return np.where(np.isnan(mse), -np.inf, -mse).ravel(), est
    return np.array([ctx.score(est, P_lf, yu, wu) for P_l in P for P_lf in P_l]), est


def _criterion_scores(ctx, est, loo, Xu, yu, wu, base, factors, grid) -> np.ndarray:
    """In-sample criterion of every (lambda, factor) candidate, lambda-major."""
    if loo.takes_lambdas:  # fits and hat diagonals of every lambda from one pass
        fits, hat = loo.fits(factors, n_jobs=ctx.n_jobs, lambdas=grid)
    else:  # one pass per lambda vector
        fits, hat = zip(*[
            clone(est).set_params(bandwidth=_with(base, est.is_categorical_, lam)).fit(Xu, yu, wu)
            ._leave_one_out().fits(factors, n_jobs=ctx.n_jobs)
            for lam in grid
        ], strict=True)  # fmt: skip
    return np.concatenate([ctx.criterion_scores(F, H, yu, wu)
                           for F, H in zip(fits, hat, strict=True)])  # fmt: skip


def _with(base: np.ndarray, mask: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
    h = base.copy()
    h[mask] = lambdas
    return h
