"""MLKR: the learned metric's loss and gradient against dense formulas and references."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp
from sklearn import config_context
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_nw import MLKR, BandwidthSearchCV, NadarayaWatsonRegressor
from skl_nw._engine import Options, metric_loss_grad
from skl_nw._kernels import get_kernel, kernel_names

GRADIENT_KERNELS = [k for k in kernel_names() if k != "tophat"]


def dense_loss(X, W, Y, kernel, w):
    """The leave-one-out loss from its definition: every pair at once, the diagonal removed."""
    Z = X @ W.T
    S = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(axis=-1)
    with np.errstate(divide="ignore"):
        L = get_kernel(kernel).log_profile(S) + np.log(w)[None, :]
    np.fill_diagonal(L, -np.inf)
    A = np.exp(L - logsumexp(L, axis=1, keepdims=True))
    P = A @ Y
    return float(w @ ((P - Y) ** 2).sum(axis=1) / (w.sum() * Y.shape[1]))


def hidden_directions(n, d=20, seed=0):
    """y depends on two oblique directions hidden among d standard normal features."""
    rng = np.random.default_rng(seed)
    A = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    X = rng.normal(size=(n, d))
    Z = X @ A
    y = np.sin(2 * Z[:, 0]) + 0.5 * Z[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("kernel", GRADIENT_KERNELS)
def test_gradient_matches_finite_differences_of_the_dense_loss(kernel):
    rng = np.random.default_rng(0)
    n, d, r = 30, 4, 3
    X, Y = rng.normal(size=(n, d)), rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, n)
    # Compact kernels: a small W, so that every query has neighbours in its support.
    W = rng.normal(size=(r, d)) * (0.3 if get_kernel(kernel).compact else 0.7)
    loss, grad = metric_loss_grad(X, W, Y, get_kernel(kernel), log_w=np.log(w))
    assert loss == pytest.approx(dense_loss(X, W, Y, kernel, w), rel=1e-12)
    eps, fd = 1e-6, np.zeros_like(W)
    for index in np.ndindex(W.shape):
        step = np.zeros_like(W)
        step[index] = eps
        fd[index] = dense_loss(X, W + step, Y, kernel, w) - dense_loss(X, W - step, Y, kernel, w)
        fd[index] /= 2 * eps
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)


def test_tiles_and_threads_do_not_change_the_result():
    rng = np.random.default_rng(1)
    X, Y, W = rng.normal(size=(200, 5)), rng.normal(size=(200, 1)), rng.normal(size=(2, 5))
    kernel = get_kernel("gaussian")
    loss, grad = metric_loss_grad(X, W, Y, kernel)
    with config_context(working_memory=0.05), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "could not adhere": tiles of one row
        tiled = metric_loss_grad(X, W, Y, kernel)
    threaded = metric_loss_grad(X, W, Y, kernel, options=Options(n_jobs=2, working_memory=0.5))
    for other_loss, other_grad in (tiled, threaded):
        assert other_loss == pytest.approx(loss, rel=1e-12)
        np.testing.assert_allclose(other_grad, grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("path", ["folded", "general"])
def test_a_zero_weight_is_a_removed_row(path, monkeypatch):
    from skl_nw._engine import _mlkr

    if path == "general":  # distances, then log K: what other kernels take
        monkeypatch.setattr(_mlkr, "_folded_keys", lambda train, kernel: None)
    rng = np.random.default_rng(2)
    X, Y, W = rng.normal(size=(60, 3)), rng.normal(size=(60, 2)), rng.normal(size=(2, 3))
    log_w = np.zeros(60)
    log_w[5] = -np.inf
    zero = metric_loss_grad(X, W, Y, get_kernel("gaussian"), log_w=log_w)
    removed = metric_loss_grad(np.delete(X, 5, 0), W, np.delete(Y, 5, 0), get_kernel("gaussian"))
    assert zero[0] == pytest.approx(removed[0], rel=1e-12)
    np.testing.assert_allclose(zero[1], removed[1], rtol=1e-10)


def test_compiled_and_numpy_tiles_agree(monkeypatch):
    from skl_nw._engine import _mlkr, compiled

    if compiled() is None:
        pytest.skip("numba is not installed or disabled: only the numpy tile runs")
    rng = np.random.default_rng(7)
    X, Y, W = rng.normal(size=(150, 4)), rng.normal(size=(150, 2)), 2 * rng.normal(size=(3, 4))
    fused = metric_loss_grad(X, W, Y, get_kernel("gaussian"), rows=np.arange(0, 150, 2))
    monkeypatch.setattr(_mlkr, "compiled", lambda: None)
    numpy = metric_loss_grad(X, W, Y, get_kernel("gaussian"), rows=np.arange(0, 150, 2))
    assert fused[0] == pytest.approx(numpy[0], rel=1e-12)
    np.testing.assert_allclose(fused[1], numpy[1], rtol=1e-10, atol=1e-14)


def test_loss_at_w_is_the_closed_form_leave_one_out_of_the_search():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(150, 4)), rng.normal(size=(150, 2))
    W = rng.normal(size=(2, 4))
    loss = MLKR(2, init=W, max_iter=0).fit(X, y).loss_curve_[0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="grid", bandwidths=[1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the only candidate is the grid's end
        search.fit(X @ W.T, y)
    assert loss == pytest.approx(-search.best_score_, rel=1e-10)


def test_diagonal_w_is_the_per_feature_bandwidth_loss():
    # W = diag(1 / h): the loss is the search's leave-one-out at bandwidths h.
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(120, 3)), rng.normal(size=120)
    h = np.array([0.3, 0.7, 2.0])
    loss = MLKR(init=np.diag(1 / h), max_iter=0).fit(X, y).loss_curve_[0]
    search = BandwidthSearchCV(NadarayaWatsonRegressor(), method="grid", bandwidths=[h])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
    assert loss == pytest.approx(-search.best_score_, rel=1e-10)


def test_metric_learn_loss_and_gradient_reproduced():
    mlkr_module = pytest.importorskip("metric_learn", reason="metric-learn is not installed")
    rng = np.random.default_rng(5)
    n = 80
    X, y, A = rng.normal(size=(n, 4)), rng.normal(size=n), rng.normal(size=(2, 4))
    reference = mlkr_module.MLKR()
    reference.n_iter_ = 0  # _loss counts its calls there; it needs no fit (no check_X_y)
    cost, grad_a = reference._loss(A.ravel(), X, y)
    # Its kernel is exp(-||A d||^2), its cost a sum: ours at W = sqrt(2) A is cost / n.
    loss, grad_w = metric_loss_grad(X, np.sqrt(2) * A, y[:, None], get_kernel("gaussian"))
    assert loss == pytest.approx(cost / n, rel=1e-10)
    np.testing.assert_allclose(np.sqrt(2) * grad_w, grad_a.reshape(A.shape) / n, rtol=1e-8)


def test_max_iter_zero_returns_the_initialisation():
    rng = np.random.default_rng(6)
    X, y, W = rng.normal(size=(50, 3)), rng.normal(size=50), rng.normal(size=(2, 3))
    mlkr = MLKR(2, init=W, max_iter=0).fit(X, y)
    np.testing.assert_array_equal(mlkr.components_, W)
    assert mlkr.n_iter_ == 0 and len(mlkr.loss_curve_) == 1
    np.testing.assert_allclose(mlkr.transform(X), X @ W.T)


@pytest.mark.parametrize("init", ["auto", "pca", "identity", "rule_of_thumb"])
@pytest.mark.parametrize("batch_size", ["auto", 32])
def test_loss_never_ends_above_its_start(init, batch_size):
    X, y = hidden_directions(240, d=6, seed=1)
    mlkr = MLKR(2, init=init, batch_size=batch_size, max_iter=15, random_state=0).fit(X, y)
    assert np.isfinite(mlkr.components_).all()
    start = MLKR(2, init=init, max_iter=0, random_state=0).fit(X, y).components_
    if batch_size == "auto":  # full batch: the training loss, from the dense formula
        w = np.ones(len(X))
        end = dense_loss(X, mlkr.components_, y[:, None], "gaussian", w)
        assert end < dense_loss(X, start, y[:, None], "gaussian", w)
        assert end == pytest.approx(mlkr.loss_curve_[-1], rel=1e-10)
    else:  # minibatches: the held-out loss of the W kept
        assert mlkr.best_loss_ == min(mlkr.loss_curve_) <= mlkr.loss_curve_[0]


@pytest.mark.parametrize("batch_size", ["auto", 64])
def test_equivariant_in_the_units_of_x_and_y(batch_size):
    # The search runs in units of spread 1: with X in thousandths, y in thousandths or at
    # 1e100 (its squares overflow), X at 1e150, it stopped at its start, crashed or
    # learnt nothing; the metric is now the same, W / c for X * c, to the optimiser's
    # rounding (powers of two: to the bit).
    X, y = hidden_directions(240, d=4, seed=2)
    params = {"n_components": 2, "batch_size": batch_size, "max_iter": 30, "random_state": 0}
    base = MLKR(**params).fit(X, y)
    assert base.best_loss_ < 0.95 * base.loss_curve_[0]  # it learns
    for cx, cy in [(1e-3, 1.0), (1.0, 1e-3), (1e150, 1.0), (1.0, 1e100), (2.0**-20, 2.0**30)]:
        mlkr = MLKR(**params).fit(X * cx, y * cy)
        rtol = 0 if np.log2(cx * cy) % 1 == 0 else 1e-7
        np.testing.assert_allclose(mlkr.components_ * cx, base.components_, rtol=rtol)
        np.testing.assert_allclose(np.array(mlkr.loss_curve_) / cy**2, base.loss_curve_,
                                   rtol=max(rtol, 1e-12))  # fmt: skip
    # y at 1e200: the losses' squares pass the float range (inf), the metric does not;
    # the scale to the losses was a Python float's ** 2, which raised OverflowError.
    mlkr = MLKR(**params).fit(X, y * 1e200)
    np.testing.assert_allclose(mlkr.components_, base.components_, rtol=1e-7)
    assert np.isposinf(mlkr.loss_curve_).all()


def test_learned_metric_beats_per_feature_bandwidths_on_hidden_directions():
    X, y = hidden_directions(900, d=8)
    X_train, y_train, X_test, y_test = X[:600], y[:600], X[600:], y[600:]
    model = make_pipeline(MLKR(2, random_state=0), NadarayaWatsonRegressor(bandwidth=1.0))
    mse = np.mean((model.fit(X_train, y_train).predict(X_test) - y_test) ** 2)
    baseline = BandwidthSearchCV(NadarayaWatsonRegressor(), method="lbfgs")
    base_mse = np.mean((baseline.fit(X_train, y_train).predict(X_test) - y_test) ** 2)
    assert mse < 0.3 * base_mse


def test_composes_with_the_search_over_a_pipeline():
    X, y = hidden_directions(200, d=5)
    pipe = make_pipeline(StandardScaler(), MLKR(2, max_iter=10), NadarayaWatsonRegressor(1.0))
    search = BandwidthSearchCV(pipe, method="grid").fit(X, y)
    assert search.best_estimator_[1].components_.shape == (2, 5)
    assert np.isfinite(search.predict(X[:5])).all()


def test_pickle_and_clone_round_trips():
    X, y = hidden_directions(100, d=4)
    mlkr = MLKR(2, max_iter=5, random_state=0).fit(X, y)
    again = pickle.loads(pickle.dumps(mlkr))
    np.testing.assert_array_equal(again.transform(X), mlkr.transform(X))
    assert clone(mlkr).get_params() == mlkr.get_params()
    # The same fit to rounding (the first fit of a process may sum in another order).
    np.testing.assert_allclose(clone(mlkr).fit(X, y).components_, mlkr.components_, rtol=1e-9)
    assert list(mlkr.get_feature_names_out()) == ["mlkr0", "mlkr1"]
    M = mlkr.get_mahalanobis_matrix()
    d = X[0] - X[1]
    assert d @ M @ d == pytest.approx(np.sum((mlkr.transform(X[:1]) - mlkr.transform(X[1:2])) ** 2))


def test_bad_input_raises_naming_the_parameter():
    X, y = hidden_directions(40, d=3)
    with pytest.raises(ValueError, match="kernel='tophat'.*gaussian"):
        MLKR(kernel="tophat").fit(X, y)
    with pytest.raises(ValueError, match="n_components=4"):
        MLKR(4).fit(X, y)
    with pytest.raises(ValueError, match=r"init must be .*\(2, 3\)"):
        MLKR(2, init=np.ones((3, 3))).fit(X, y)
    with pytest.raises(ValueError, match="init must be finite"):
        MLKR(2, init=np.full((2, 3), np.nan)).fit(X, y)
    with pytest.raises(ValueError, match="kernel='boxcar'.*gaussian"):
        MLKR(kernel="boxcar").fit(X, y)
    with pytest.raises(ValueError, match="init"):
        MLKR(init="random").fit(X, y)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": X[:, 0], "b": pd.Categorical(["u", "v"] * 20)})
    with pytest.raises(ValueError, match=r"categorical columns \['b'\]"):
        MLKR().fit(frame, y)


def test_pca_start_with_a_constant_feature_stays_finite_and_usable(rng):
    # PCA gives the constant direction a spread of ~0: its scale is the widest one's.
    X = rng.normal(size=(60, 4))
    X[:, 2] = 3.0
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    mlkr = MLKR(init="pca", max_iter=5).fit(X, y)
    assert np.abs(mlkr.components_).max() < 1e3
    assert mlkr.best_loss_ <= mlkr.loss_curve_[0]
    with pytest.raises(ValueError, match="init='pca' gives at most"):
        MLKR(init="pca", n_components=4).fit(X[:3], y[:3])


@pytest.mark.parametrize("offset", [1e6, 1e8])
def test_pca_start_does_not_move_with_the_inputs_origin(offset, rng):
    # The start is taken from centred inputs, as the loss is: PCA's covariance solver
    # (X'X less n mean mean') lost every digit of the start to an offset of 1e8.
    X = rng.normal(size=(80, 3)) * [1.0, 3.0, 0.2]
    y = X[:, 0] + 0.1 * rng.normal(size=80)
    start = MLKR(2, init="pca", max_iter=0).fit(X, y)
    moved = MLKR(2, init="pca", max_iter=0).fit(X + offset, y)
    assert (
        np.abs(np.abs(moved.components_) - np.abs(start.components_)).max()
        < 1e-6 * np.abs(start.components_).max()
    )
    assert moved.loss_curve_[0] == pytest.approx(start.loss_curve_[0], rel=1e-6)


@pytest.mark.parametrize("scale", [1e-300, 1e306])
def test_auto_start_does_not_move_with_the_weights_scale(scale, rng):
    # The loss is free of the weights' scale, and so is the start: its inner search's rule
    # of thumb read 1e-300 as fewer than one observation (loss 0.53 for 0.015), and the
    # gradients' outer product overflowed at 1e306 (LinAlgError).
    X, y = hidden_directions(120, d=4)
    w = rng.uniform(0.5, 2.0, len(y))
    start = MLKR(2, max_iter=0, random_state=0).fit(X, y, sample_weight=w)
    scaled = MLKR(2, max_iter=0, random_state=0).fit(X, y, sample_weight=w * scale)
    np.testing.assert_allclose(
        np.abs(scaled.components_), np.abs(start.components_), rtol=1e-6, atol=1e-9
    )
    assert scaled.loss_curve_[0] == pytest.approx(start.loss_curve_[0], rel=1e-6)


def test_auto_start_runs_whatever_the_metadata_routing(rng):
    # Its inner search asked an estimator without requests for sample_weight: routing on,
    # every fit with init="auto" raised UnsetMetadataPassedError.
    X, y = hidden_directions(120, d=4)
    w = rng.uniform(0.5, 2.0, len(y))
    plain = MLKR(2, max_iter=2, random_state=0).fit(X, y, sample_weight=w)
    with config_context(enable_metadata_routing=True):
        routed = MLKR(2, max_iter=2, random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(routed.components_, plain.components_)


@pytest.mark.parametrize("scale", [2.0**-640, 2.0**600])
def test_pca_start_scales_with_the_inputs(scale, rng):
    # PCA's X'X underflowed at 2e-193 (a start 17x worse) and overflowed at 4e180
    # (LinAlgError): the start is taken in a power of two of the spread.
    X = rng.normal(size=(80, 3)) * [1.0, 3.0, 0.2]
    y = X[:, 0] + 0.1 * rng.normal(size=80)
    start = MLKR(2, init="pca", max_iter=0).fit(X, y)
    scaled = MLKR(2, init="pca", max_iter=0).fit(X * scale, y)
    np.testing.assert_allclose(scaled.components_ * scale, start.components_, rtol=1e-12)


def test_tags_say_it_takes_several_targets(rng):
    from sklearn.utils import get_tags

    assert get_tags(MLKR()).target_tags.multi_output  # it was False
    X = rng.normal(size=(40, 3))
    Y = np.column_stack([X[:, 0], X[:, 1] ** 2])
    assert MLKR(2, max_iter=2).fit(X, Y).transform(X).shape == (40, 2)


@pytest.mark.parametrize("init", ["auto", "rule_of_thumb", "pca"])
def test_starts_from_the_data_at_the_float_range_s_ends(init, rng):
    # The data's starts are taken in units of X's spread: 2^-1019 starts where 1 does,
    # over 2^-1019; at 1e-310 the metric (~1 / spread) passes the float range, a clear
    # ValueError (a bare ZeroDivisionError from the loss, or inf components, before).
    X, y = hidden_directions(60, d=3)
    start = MLKR(2, init=init, max_iter=0, random_state=0).fit(X, y)
    scaled = MLKR(2, init=init, max_iter=0, random_state=0).fit(X * 2.0**-1019, y)
    np.testing.assert_allclose(scaled.components_ * 2.0**-1019, start.components_, rtol=1e-9)
    with pytest.raises(ValueError, match="float range: X's spread"):
        MLKR(2, init=init, random_state=0).fit(X * 1e-310, y)
