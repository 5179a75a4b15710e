"""Selection by proper scores of the predictive distribution: leave-one-out CRPS and pinball.

``BandwidthSearchCV(criterion="crps")`` scores a candidate ``(h, h_y)`` by
the continuous ranked probability score of each training target under the
leave-one-out mixture ``F_{-i}(y) = sum_{j != i} a_ij G((y - y_j) / h_y)``
(``a_ij`` the attention weights of ``x_i`` without row ``i``, renormalised);
``criterion="pinball"`` scores a :class:`KernelQuantileRegressor` by the
pinball loss of its leave-one-out quantiles.  Both are closed forms of the
attention weights of the training points: no refit per row.

The CRPS of a mixture of Gaussians (Grimit et al. 2006) is
``sum_j a_j A(y - y_j, h_y) - 1/2 sum_jk a_j a_k A(y_j - y_k, sqrt(2) h_y)``
with ``A(m, s) = E|m + s Z| = m (2 Phi(m / s) - 1) + 2 s phi(m / s)``; at
``h_y = 0`` it is the weighted empirical CRPS
``sum_j a_j |y - y_j| - 1/2 sum_jk a_j a_k |y_j - y_k|``, whose pair sum is
``O(n)`` per row in sorted ``y`` order (``sum_k a_k y_k (2 C_k - a_k - 1)``,
``C`` the cumulative weights).  The Gaussian pair sum is the row's quadratic
form with the matrix ``A(y_j - y_k, sqrt(2) h_y)``: through a piecewise
Chebyshev factor of it, or a band about ``|y_j - y_k|``, each within a
tolerance proved a priori (:mod:`._crps_pairs`).  The leave-one-out rows
come with their columns in the order of ``y``: the engine's compiled rows
where it has them.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.stats import rankdata
from sklearn import get_config
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline

from .._engine import sorted_loo_weights
from .._inference._mixture import Mixture, Weights, check_y_kernel, y_bandwidth_rule
from .._smoothers._base import check_weights
from .._smoothers._nadaraya_watson import NadarayaWatsonRegressor
from .._smoothers._quantile import KernelQuantileRegressor
from ._context import Selection, check_two_points
from ._crps_pairs import PairTerms, abs_mean, pair_matrix, pair_tol
from ._results import edge_of, warn_at_edge

__all__ = [
    "DISTRIBUTION_CRITERIA",
    "check_distribution",
    "crps_rows",
    "fit_distribution",
    "pinball_rows",
]

DISTRIBUTION_CRITERIA = ("crps", "pinball")
#: Multiples of the y rule of thumb searched when ``y_bandwidth`` is a rule: 1/16 to 2.
Y_FACTORS = 2.0 ** (np.arange(-8, 3) / 2)
# Alternate scans of h and of h_y (each over its whole grid) at most this many times.
_MAX_ROUNDS = 4
# The h scan scores every 4th candidate, then the neighbours of the best.
_COARSE_STEP = 4
# Rows of leave-one-out weights per chunk, and columns of the CRPS pair matrix per
# block: n x this many bytes of floats.
_CHUNK_BYTES = 2**26
# The leave-one-out rows (n, n) of the bandwidths scored are kept up to this size where
# h is scanned again (at most _CHUNK_BYTES: one chunk): 32 bandwidths at n = 500.
_MAX_ROWS_BYTES = 2**26
# The (n, n) matrices of the h_y (PairTerms) are kept between the candidates of h up to
# this size; beyond it each chunk rebuilds them (the pair matrix by column blocks).
_MAX_PAIR_BYTES = 2**28


def _chunk_bytes() -> int:
    """``_CHUNK_BYTES``, or scikit-learn's ``working_memory`` where that is smaller."""
    return min(_CHUNK_BYTES, int(get_config()["working_memory"] * 2**20))


def crps_rows(A: np.ndarray, y_obs: np.ndarray, y: np.ndarray, h: float):
    """CRPS of each row's mixture ``sum_j A_rj G((. - y_j) / h)`` at ``y_obs[r]``: (m,).

    ``h = 0``: the weighted empirical CRPS; ``h > 0``: Gaussian components,
    the pair matrix ``E|y_j - y_k + sqrt(2) h Z|`` built by column blocks
    (memory ``n`` times a block).  The search's leave-one-out rows go
    through :class:`PairTerms` instead, which keeps its matrices.
    """
    if h == 0:
        order = np.argsort(y, kind="stable")
        As, ys = A[:, order], y[order]
        C = np.cumsum(As, axis=1)
        half_pairs = np.einsum("ij,ij->i", As * ys, 2.0 * C - As - 1.0)
        return np.einsum("ij,ij->i", A, np.abs(y_obs[:, None] - y)) - half_pairs
    near = np.einsum("ij,ij->i", A, abs_mean(y_obs[:, None] - y, h))
    pairs = np.zeros(len(A))
    step = max(1, _chunk_bytes() // (8 * len(y)))
    for s in range(0, len(y), step):
        block = abs_mean(y[:, None] - y[s : s + step], np.sqrt(2.0) * h)
        pairs += np.einsum("ij,ij->i", A @ block, A[:, s : s + step])
    return near - 0.5 * pairs


def pinball_rows(A: np.ndarray, y_obs: np.ndarray, mix: Mixture, taus: np.ndarray):
    """Mean pinball loss over ``taus`` of each row's quantiles at ``y_obs[r]``: (m,)."""
    W = Weights(A, mix)
    Q = W.empirical_quantiles(taus) if mix.h == 0 else W.smoothed_quantiles(taus)
    r = y_obs[:, None] - Q
    return np.mean(np.maximum(taus * r, (taus - 1.0) * r), axis=1)


def _loo_chunks(est, n: int):
    """Yield ``(rows, A)``: leave-one-out attention rows of the training points.

    Row ``i`` drops training row ``i`` by index, in log space (its neighbours
    do not underflow against it); an empty row follows the estimator's
    ``fallback`` among the other points.
    """
    size = max(1, _chunk_bytes() // (8 * n))
    for start in range(0, n, size):
        rows = np.arange(start, min(start + size, n))
        yield rows, est._loo_attention(rows)


def _sorted_loo_chunks(est, y: np.ndarray, fused):
    """Yield ``(rows, places, A)``: leave-one-out weights, columns in the order of ``y``.

    ``rows`` are training rows (caller order), ``places`` their places in
    the stable order of ``y`` (a slice or indices) and ``A`` their weights
    over the others.  The engine's compiled rows where it has them (chunks
    of places), else the attention weights of :func:`_loo_chunks`.
    """
    n = len(y)
    order = np.argsort(y, kind="stable")
    if fused is not None and np.array_equal(fused.ys, y[order]):
        size = max(1, _chunk_bytes() // (8 * n))
        for start in range(0, n, size):
            places = np.arange(start, min(start + size, n))
            A = sorted_loo_weights(fused, places, est._options())
            yield order[places], slice(start, places[-1] + 1), A
        return
    place = np.empty(n, dtype=np.int64)
    place[order] = np.arange(n)
    for rows, A in _loo_chunks(est, n):
        yield rows, place[rows], A[:, order]


def _crps_per_row(ctx, fit, h, y: np.ndarray, hys: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` (k, n): each training row's leave-one-out CRPS at ``h``, a row per ``h_y``.

    ``fit()`` returns the estimator fitted at ``h``: called unless the rows
    of ``h`` are kept (:func:`_loo_rows`).
    """
    ys, fused = np.sort(y, kind="stable"), None
    if (hys == 0).any():
        est = fit()
        fused = est._fused(est._mixture)
        if fused is not None:  # the engine's per-row kernel: no n x n matrix
            out[hys == 0] = fused.loo_empirical_crps(est._options())
            if (hys == 0).all():
                return
    for rows, places, A in _loo_rows(ctx, fit, h, y):
        for k in range(len(hys)):
            if hys[k] > 0:
                out[k, rows] = _pair_terms(ctx, ys, hys[k], len(hys) > 1).crps(A, places)
            elif fused is None:
                out[k, rows] = crps_rows(A, y[rows], ys, 0.0)


def _loo_rows(ctx, fit, h, y: np.ndarray):
    """Return the chunks ``(rows, places, A)`` of :func:`_sorted_loo_chunks` at ``h``.

    Kept where the search scans ``h`` more than once (``ctx.cache["crps_keep_rows"]``:
    the coordinate search over ``h`` and ``h_y`` scans ``h`` again at the next
    ``h_y``, 13 of its 16 candidates the same on the default grid) and the kept
    ones fit in ``_MAX_ROWS_BYTES``.  Not otherwise: new memory for each kept
    matrix costs more than a refit saves (``python -m benchmarks conditional``).
    """
    kept = ctx.cache.setdefault("crps_rows", {})
    key = np.asarray(h, dtype=float).tobytes()
    if key in kept:
        return kept[key]
    est = fit()
    chunks = _sorted_loo_chunks(est, y, est._fused(est._mixture))
    limit = min(_MAX_ROWS_BYTES, _chunk_bytes())  # one chunk: _MAX_ROWS_BYTES <= _CHUNK_BYTES
    if ctx.cache.get("crps_keep_rows") and 8 * len(y) ** 2 * (len(kept) + 1) <= limit:
        kept[key] = list(chunks)
        return kept[key]
    return chunks


def _scores(ctx, X, y, w, h, y_bandwidths) -> tuple[np.ndarray, np.ndarray]:
    """Negated leave-one-out criterion and its per-row spread at ``h``, per ``h_y``: two (k,)."""
    hys = np.asarray(y_bandwidths, dtype=float)
    per_row = np.empty((len(hys), len(y)))
    if ctx.criterion == "crps":
        _crps_per_row(ctx, lambda: _fitted(ctx, X, y, w, h, hys[0]), h, y, hys, per_row)
    else:
        est = _fitted(ctx, X, y, w, h, hys[0])
        taus = np.atleast_1d(np.asarray(est.quantile, dtype=float))
        for rows, A in _loo_chunks(est, len(y)):
            for k, hy in enumerate(hys):
                per_row[k, rows] = pinball_rows(A, y[rows], Mixture(y, hy, est._y_kernel), taus)
    per_row[~np.isfinite(per_row)] = np.inf
    mean = per_row @ w / w.sum()
    with np.errstate(invalid="ignore"):
        spread = np.sqrt(((per_row - mean[:, None]) ** 2) @ w / w.sum())
    return -mean, spread


def _fitted(ctx, X, y, w, h, hy):
    """Return the search's clone fitted at ``(h, h_y)``: the public ``fit`` once, then refits.

    The refits skip the validation of the data and the weights (0.3 ms a
    candidate at n = 500, half the CRPS of a candidate at the rule's ``h_y``):
    the data are those the first fit validated, the weights ``w`` checked, the
    parameters of the types the first fit validated.
    """
    est = ctx.cache.get("crps_estimator")
    if est is None:
        est = clone(ctx.estimator).set_params(bandwidth=h, y_bandwidth=hy)
        ctx.cache["crps_estimator"] = est.fit(X, y, sample_weight=w)
        ctx.cache["crps_data"] = (X, *est._validate_fit(X, y, w, y_numeric=True))
        return est
    est.bandwidth, est.y_bandwidth = h, hy  # set_params without its signature inspection
    return est._fit_validated(*ctx.cache["crps_data"], w)


def _pair_terms(ctx, ys, hy, few: bool = False) -> PairTerms:
    """Return the :class:`PairTerms` of ``h_y`` on the sorted targets ``ys`` (kept).

    ``few``: scored at few bandwidths (a scan of ``h_y`` at one ``h``): the
    near term from the factor's points where one holds (no (n, n) matrix
    built), unless its matrix is kept; rebuilt with the matrix where the
    search then scans ``h`` at this ``h_y`` (16 bandwidths).
    """
    cache = ctx.cache.setdefault("crps_pairs", {})
    if hy not in cache or (not few and cache[hy].near is not None):  # now scored at many
        matrix = _matrices(ctx, ys)
        few = few and float(f"{hy:.12g}") not in ctx.cache["crps_matrices"]
        terms = PairTerms(ys, hy, matrix, few)
        if sum(t.nbytes for t in cache.values()) + terms.nbytes > _MAX_PAIR_BYTES:
            cache.clear()  # the factors (n, M) of many h_y at a large n
        cache[hy] = terms
    return cache[hy]


def _matrices(ctx, ys):
    """Return ``matrix(s)``: the (n, n) ``E|y_i - y_k + s Z|``, kept while the budget holds.

    None where two such matrices exceed the budget (the caller builds row or
    column blocks); the kept ones are dropped together when one more would
    not fit.  Keys round ``s`` to 12 digits: ``sqrt(2)`` times one grid value
    of ``h_y`` is the next one to rounding.
    """
    kept = ctx.cache.setdefault("crps_matrices", {})
    size = 8 * len(ys) ** 2

    def matrix(s: float):
        if 2 * size > _MAX_PAIR_BYTES:
            return None
        key = float(f"{s:.12g}")
        if key not in kept:
            if (len(kept) + 1) * size > _MAX_PAIR_BYTES:
                kept.clear()
            kept[key] = pair_matrix(ys, s, pair_tol(ys, s))
        return kept[key]

    return matrix


def check_distribution(ctx, y) -> None:
    """Raise where the estimator, the parameters or ``y`` (None: not checked) do not suit it."""
    est = ctx.estimator
    if isinstance(est, Pipeline) or not isinstance(est, NadarayaWatsonRegressor):
        raise ValueError(
            f"criterion={ctx.criterion!r} scores a predictive distribution: it takes a "
            "NadarayaWatsonRegressor or KernelQuantileRegressor itself (not a pipeline); "
            f"got {type(est).__name__}."
        )
    if ctx.criterion == "pinball" and not isinstance(est, KernelQuantileRegressor):
        raise ValueError("criterion='pinball' takes a KernelQuantileRegressor (its quantile).")
    if ctx.method not in ("grid", "auto") or ctx.scoring is not None:
        raise ValueError(
            f"criterion={ctx.criterion!r} needs method='grid' (or 'auto') and no scoring; "
            f"got method={ctx.method!r}, scoring={ctx.scoring!r}."
        )
    if y is not None and np.ndim(y) != 1:
        raise ValueError(f"criterion={ctx.criterion!r} needs a 1-D y; got shape {y.shape}.")
    if getattr(est, "span", None) is not None:
        raise ValueError(
            f"criterion={ctx.criterion!r} chooses bandwidth and y_bandwidth at a fixed "
            f"bandwidth per query; this estimator has span={est.span!r}. Set span=None, or "
            "select the span by criterion='loo', 'aicc' or 'gcv'."
        )
    check_y_kernel(est.y_kernel)
    fixed = not isinstance(est.y_bandwidth, str)
    if (
        ctx.criterion == "crps"
        and est.y_kernel != "gaussian"
        and not (fixed and est.y_bandwidth == 0)
    ):
        raise ValueError(
            "criterion='crps' has a closed form for y_kernel='gaussian' or y_bandwidth=0; "
            f"got y_kernel={est.y_kernel!r}, y_bandwidth={est.y_bandwidth!r}."
        )


def _y_candidates(ctx, X, y, w) -> np.ndarray:
    rule = ctx.estimator.y_bandwidth
    if not isinstance(rule, str):
        return np.array([float(rule)])
    cats, _ = ctx.categories_of(X, w)
    n_cont = X.shape[1] - (0 if cats is None else int(cats.mask.sum()))
    return y_bandwidth_rule(y, w, n_cont, rule) * Y_FACTORS


def fit_distribution(ctx, X, y, sample_weight) -> Selection:
    """Select by the criteria "crps" and "pinball" on validated data."""
    check_distribution(ctx, y)
    w = check_weights(sample_weight, X)
    check_two_points(
        np.count_nonzero(w), f"criterion={ctx.criterion!r} scores each point by the others: it"
    )
    loo = isinstance(ctx.cv, str) and ctx.cv == "loo"
    if loo:  # repeated rows are left out together, as in the closed-form route
        X, y, w = ctx.merged(X, y, w)
        check_two_points(len(X), f"criterion={ctx.criterion!r}", "distinct training points")
    h_all = ctx.candidates(X, w)
    y_all = _y_candidates(ctx, X, y, w)
    start = time.perf_counter()
    if loo:
        pairs, scores, stds = _coordinate_search(ctx, X, y, w, h_all, y_all)
    else:
        pairs, scores, stds = _grid_search_cv(ctx, X, y, sample_weight, h_all, y_all)
    best = int(np.argmax(scores))
    if not np.isfinite(scores[best]):
        raise ValueError("No candidate could be scored: every one left a point without weight.")
    i, j = pairs[best]
    warn_at_edge(edge_of(h_all, i, ctx.continuous_mask(X)), ctx.bandwidths)
    return Selection(
        best_params_={"bandwidth": h_all[i], "y_bandwidth": float(y_all[j])},
        best_score_=float(scores[best]),
        n_iter_=len(pairs),
        best_index_=best,
        cv_results_=_results(pairs, h_all, y_all, scores, stds, time.perf_counter() - start),
    )


def _coordinate_search(ctx, X, y, w, h_all, y_all):
    """Alternate scans: every ``h`` at the current ``h_y``, every ``h_y`` at the best ``h``.

    Starts at the rules of thumb; stops when a round changes neither.
    Returns the scored pairs ``(i, j)``, their scores and per-row spreads.
    """
    # A categorical lambda of 0 has the log -inf: such a grid is not ordered by scale.
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.array([np.log(np.asarray(h, float)).mean() for h in h_all])
        rule = np.log(np.asarray(ctx.base_bandwidth(X, w), float)).mean()
        sorted_h = bool(np.all(np.diff(logs) > 0))
    i = int(np.argmin(np.abs(logs - rule)))
    j = int(np.argmin(np.abs(np.log(y_all / np.median(y_all))))) if y_all[0] > 0 else 0
    cache: dict = {}
    ctx.cache["crps_keep_rows"] = len(y_all) > 1  # h is scanned again at another h_y

    def score_h(a: int, j: int) -> float:
        if (a, j) not in cache:
            s, sd = _scores(ctx, X, y, w, h_all[a], y_all[[j]])
            cache[a, j] = (s[0], sd[0])
        return cache[a, j][0]

    for _ in range(_MAX_ROUNDS):
        previous = (i, j)
        i = _scan(len(h_all), lambda a, j=j: score_h(a, j), sorted_h)
        todo = [b for b in range(len(y_all)) if (i, b) not in cache]
        if todo:
            s, sd = _scores(ctx, X, y, w, h_all[i], y_all[todo])
            cache.update({(i, b): (s[k], sd[k]) for k, b in enumerate(todo)})
        j = max(range(len(y_all)), key=lambda b: cache[i, b][0])
        if (i, j) == previous:
            break
    pairs = list(cache)
    return pairs, np.array([cache[p][0] for p in pairs]), np.array([cache[p][1] for p in pairs])


def _scan(n: int, score, ordered: bool) -> int:
    """Index of the best of ``n`` ordered candidates: every 4th, then around the best.

    A coarse pass (every 4th and the last), then the 3 neighbours on each
    side of its best: 16 of the default 40 scored, the same optimum where the
    score is unimodal in the bandwidth's scale.  Unordered candidates: all.
    """
    if not ordered or n <= 12:
        return max(range(n), key=score)
    coarse = sorted({*range(0, n, _COARSE_STEP), n - 1})
    best = max(coarse, key=score)
    fine = range(max(0, best - _COARSE_STEP + 1), min(n, best + _COARSE_STEP))
    return max([*coarse, *fine], key=score)


def crps_score(estimator, X, y, sample_weight=None) -> float:
    """Negative mean CRPS of a fitted estimator's predictive distribution at ``(X, y)``.

    The search's scorer of held-out data (the GridSearchCV route of ``criterion="crps"``).
    """
    y = np.asarray(y, dtype=float)
    mix = estimator._mixture
    A = estimator.attention_weights(X)
    crps = crps_rows(A, y, mix.y, mix.h)
    return -float(np.average(crps, weights=sample_weight))


def _grid_search_cv(ctx, X, y, sample_weight, h_all, y_all):
    """GridSearchCV over every ``(h, h_y)`` pair: CRPS scorer, or the quantile model's score."""
    grid = {"bandwidth": list(h_all), "y_bandwidth": list(y_all)}
    scoring = crps_score if ctx.criterion == "crps" else None
    gs = GridSearchCV(clone(ctx.estimator), grid, scoring=scoring, cv=ctx.cv,
                      n_jobs=ctx.n_jobs)  # fmt: skip
    params = {} if sample_weight is None else {"sample_weight": sample_weight}
    gs.fit(X, y, **params)
    index = {(id_h, id_y) for id_h in range(len(h_all)) for id_y in range(len(y_all))}
    pairs = sorted(index)  # GridSearchCV's order: bandwidth outer, y_bandwidth inner
    res = gs.cv_results_
    return pairs, res["mean_test_score"], res["std_test_score"]


def _results(pairs, h_all, y_all, scores, stds, seconds) -> dict:
    """``cv_results_`` of the scored pairs, GridSearchCV's keys."""
    n = len(pairs)
    h_param = np.ma.MaskedArray(np.empty(n, dtype=object), mask=False)
    h_param[:] = [h_all[i] for i, _ in pairs]
    return {
        "mean_fit_time": np.full(n, seconds / n),
        "std_fit_time": np.zeros(n),
        "mean_score_time": np.zeros(n),
        "std_score_time": np.zeros(n),
        "param_bandwidth": h_param,
        "param_y_bandwidth": np.ma.MaskedArray([float(y_all[j]) for _, j in pairs]),
        "params": [{"bandwidth": h_all[i], "y_bandwidth": float(y_all[j])} for i, j in pairs],
        "mean_test_score": np.asarray(scores, float),
        "std_test_score": np.asarray(stds, float),
        "rank_test_score": rankdata(-np.asarray(scores), method="min").astype(np.int32),
    }
