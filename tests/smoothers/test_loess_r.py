"""LOESS against R's ``loess(..., surface="direct", normalize=FALSE)``.

R runs as a subprocess (``Rscript``, Debian's r-base-core) on the data written
to a temporary CSV; the tests skip, saying so, where ``Rscript`` is not on the
path.  ``family="symmetric"`` is R's four fits (``iterations = 4``): three
reweightings, ``robust_iterations=3`` here (four differs, checked below).
"""

import shutil
import subprocess

import numpy as np
import pytest

from skl_nw import LocalPolynomialRegressor

pytestmark = pytest.mark.skipif(
    shutil.which("Rscript") is None,
    reason="Rscript is not installed (Debian: apt-get install r-base-core)",
)


def r_loess(tmp_path, X, y, span, degree, family):
    """R's fitted values and robustness weights (``fit$robust``) at the training rows."""
    names = [f"x{j}" for j in range(X.shape[1])]
    data, out = tmp_path / "data.csv", tmp_path / "fit.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", fmt="%.17g",
               header=",".join([*names, "y"]), comments="")  # fmt: skip
    script = (
        f'd <- read.csv("{data}"); '
        f"f <- loess(y ~ {' + '.join(names)}, data = d, span = {span!r}, degree = {degree}, "
        f'family = "{family}", normalize = FALSE, surface = "direct"); '
        f'write.csv(data.frame(fit = fitted(f), robust = f$robust), "{out}", row.names = FALSE)'
    )
    run = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    fit, robust = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2).T
    return fit, robust


def _data(rng, d, n=150):
    X = rng.uniform(0, 10, (n, d))  # continuous: no ties at a radius
    y = np.sin(X).sum(axis=1) + 0.3 * rng.normal(size=n)
    y[::13] += 4.0  # outliers for the robust fits
    return X, y


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("family, iterations", [("gaussian", 0), ("symmetric", 3)])
@pytest.mark.parametrize("span", [0.3, 0.6])
def test_r_loess_direct_at_the_training_rows(rng, tmp_path, d, degree, family, iterations, span):
    X, y = _data(rng, d)
    want, robust = r_loess(tmp_path, X, y, span, degree, family)
    reg = LocalPolynomialRegressor(1.0, kernel="tricube", degree=degree, span=span,
                                   robust_iterations=iterations).fit(X, y)  # fmt: skip
    assert np.abs(reg.predict(X) - want).max() <= 1e-7 * np.ptp(y)
    # R rounds the bisquare to 1 for |u| <= 0.001 and to 0 beyond 0.999 (its lowesw):
    # 1 - (1 - 0.001^2)^2 = 2e-6 and (1 - 0.999^2)^2 = 4e-6 are the largest differences.
    np.testing.assert_allclose(reg.robust_weights_, robust, atol=5e-6)
    if iterations:
        assert (robust < 0.5).any()  # the outliers were down-weighted: the test can fail


def test_r_symmetric_is_three_reweightings_not_four(rng, tmp_path):
    X, y = _data(rng, 1)
    want, _ = r_loess(tmp_path, X, y, 0.4, 1, "symmetric")
    four = LocalPolynomialRegressor(1.0, kernel="tricube", span=0.4, robust_iterations=4)
    assert np.abs(four.fit(X, y).predict(X) - want).max() > 1e-4 * np.ptp(y)
