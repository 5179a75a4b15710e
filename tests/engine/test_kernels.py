"""The kernel records against the formulas of the spec, scipy and scikit-learn.

Every test is parametrised over the registry, so a new kernel is tested as
soon as it is registered (and fails until its spec formulas are added here and
its profile to ``conftest.PROFILES``).
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import integrate
from scipy.special import gamma, logsumexp
from sklearn.neighbors import KernelDensity
from sklearn.neighbors._kde import VALID_KERNELS as SKLEARN_KERNELS

from conftest import LOG_PROFILES, PROFILES, scaled_distances
from skl_nw._kernels import KERNELS, Kernel, get_kernel, kernel_names

NAMES = kernel_names()
DIMENSIONS = [1, 2, 3, 4, 5, 6]

# The spec, written in u = ||(x - x_i) / h||, independently of skl_nw._kernels: the
# profile K(u) is conftest.PROFILES (log K(u) for infinite support: conftest.LOG_PROFILES);
# here (compact support of radius 1?, analytic dK/ds with s = u**2 for u > 0).
SPEC = {
    "gaussian": (False, lambda u: -0.5 * np.exp(-(u**2) / 2)),
    "tophat": (True, lambda u: np.zeros_like(u)),
    "epanechnikov": (True, lambda u: np.where(u < 1, -1.0, 0.0)),
    # dK/ds = dK/du / (2u)
    "exponential": (False, lambda u: -np.exp(-u) / (2 * u)),
    "linear": (True, lambda u: np.where(u < 1, -1 / (2 * u), 0.0)),
    "cosine": (True, lambda u: np.where(u < 1, -np.pi * np.sin(np.pi * u / 2) / (4 * u), 0.0)),
    # dK/du = -9 u^2 (1 - u^3)^2, -4 u (1 - u^2), -6 u (1 - u^2)^2; over 2u.
    "tricube": (True, lambda u: np.where(u < 1, -4.5 * u * (1 - u**3) ** 2, 0.0)),
    "biweight": (True, lambda u: np.where(u < 1, -2 * (1 - u**2), 0.0)),
    "triweight": (True, lambda u: np.where(u < 1, -3 * (1 - u**2) ** 2, 0.0)),
}
# The limits of dK/ds as u -> 0+ (a kernel that is a function of u, not of u**2,
# has an infinite slope in s at 0).
DERIVATIVE_AT_ZERO = {
    "gaussian": -0.5,
    "tophat": 0.0,
    "epanechnikov": -1.0,
    "exponential": -np.inf,
    "linear": -np.inf,
    "cosine": -(np.pi**2) / 8,
    "tricube": 0.0,
    "biweight": -2.0,
    "triweight": -3.0,
}

# Distances u, all exactly representable with an exact square, so that the
# record (which takes s = u**2) and the spec (which takes u) see the same point:
# 0, a few interior points, just below / at / just above 1, and far away.
U = np.array(
    [0.0, 2.0**-30, 0.125, 0.5, 0.75, 1 - 2.0**-20, 1.0, 1 + 2.0**-20, 1.5, 2.0, 7.0, 30.0, 1e3]
)
# And the closest doubles to 1 (s = u**2 is then rounded, but stays on its side of 1).
U_EDGE = np.array([np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0)])


def spec_profile(name, u):
    return PROFILES[name](np.asarray(u, dtype=float))


def spec_compact(name):
    return SPEC[name][0]


@pytest.mark.parametrize("name", NAMES)
def test_profile_matches_spec(name):
    kernel = KERNELS[name]
    u = np.concatenate([U, U_EDGE])
    s = u**2
    expected = spec_profile(name, u)
    assert_allclose(kernel.profile(s), expected, rtol=1e-10, atol=1e-14)
    assert kernel.profile(np.array([0.0]))[0] == 1.0
    with np.errstate(under="ignore"):
        assert_allclose(np.exp(kernel.log_profile(s)), expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_profile_accepts_2d_arrays(name):
    # The engine calls the record on (chunk, n_train) matrices of squared distances.
    kernel = KERNELS[name]
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 2, size=(7, 5))
    assert kernel.profile(s).shape == s.shape
    assert kernel.log_profile(s).shape == s.shape
    assert kernel.derivative(s).shape == s.shape
    assert_allclose(kernel.profile(s), spec_profile(name, np.sqrt(s)), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_log_profile_support(name):
    kernel = KERNELS[name]
    inside = np.array([0.0, 1e-300, 1e-12, 0.3, 0.9, (1 - 2.0**-20) ** 2, np.nextafter(1.0, 0)])
    outside = np.array([1.0, np.nextafter(1.0, 2.0), 1.5, 4.0, 1e6, 1e300])
    assert np.all(np.isfinite(kernel.log_profile(inside)))
    if spec_compact(name):
        log_out = kernel.log_profile(outside)
        assert np.all(log_out == -np.inf)
        assert np.all(kernel.profile(outside) == 0.0)
        assert np.all(kernel.profile(inside) > 0.0)
    else:
        # Infinite support: a finite log-profile for every finite s, however
        # large, where the weight itself underflows to 0.
        u = np.sqrt(outside)
        assert np.all(np.isfinite(kernel.log_profile(outside)))
        assert_allclose(kernel.log_profile(outside), LOG_PROFILES[name](u), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_never_nan(name):
    kernel = KERNELS[name]
    s = np.concatenate([np.linspace(0, 3, 301), [1e-300, 1e300, np.finfo(float).max, np.inf]])
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        for fn in (kernel.profile, kernel.log_profile, kernel.derivative):
            values = fn(s)
            assert not np.any(np.isnan(values)), fn


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_analytic(name):
    kernel = KERNELS[name]
    u = np.array([0.01, 0.125, 0.5, 0.75, 0.99, 1.01, 1.5, 2.0, 7.0])
    assert_allclose(kernel.derivative(u**2), SPEC[name][1](u), rtol=1e-10, atol=1e-14)
    assert kernel.derivative(np.array([0.0]))[0] == pytest.approx(DERIVATIVE_AT_ZERO[name])


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_finite_differences(name):
    kernel = KERNELS[name]
    # Away from the kinks (s = 0 and s = 1).
    s = np.array([0.01, 0.04, 0.25, 0.5, 0.81, 0.95, 1.1, 1.44, 2.25, 4.0, 9.0])
    step = 1e-6
    central = (kernel.profile(s + step) - kernel.profile(s - step)) / (2 * step)
    # The same central differences of the spec's profile, as a check on the check.
    spec_central = (
        spec_profile(name, np.sqrt(s + step)) - spec_profile(name, np.sqrt(s - step))
    ) / (2 * step)
    assert_allclose(kernel.derivative(s), central, rtol=1e-6, atol=1e-8)
    assert_allclose(kernel.derivative(s), spec_central, rtol=1e-6, atol=1e-8)


def log_sphere_area(d):
    """log S_{d-1} = log(2 pi^(d/2) / Gamma(d/2)), the area of the unit sphere in R^d."""
    return np.log(2 * np.pi ** (d / 2) / gamma(d / 2))


def log_radial_integral(name, d):
    """log of S_{d-1} int_0^R K(r) r^(d-1) dr, by quadrature of the spec's profile."""
    upper = 1.0 if spec_compact(name) else np.inf
    value, error = integrate.quad(
        lambda r: float(spec_profile(name, np.array(r))) * r ** (d - 1),
        0,
        upper,
        epsabs=0,
        epsrel=1e-13,
        limit=200,
    )
    assert error < 1e-11 * value
    return log_sphere_area(d) + np.log(value)


@pytest.mark.parametrize("d", DIMENSIONS)
@pytest.mark.parametrize("name", NAMES)
def test_normalizer_matches_quadrature(name, d):
    kernel = KERNELS[name]
    expected = log_radial_integral(name, d)
    assert_allclose(np.exp(kernel.log_integral(d)), np.exp(expected), rtol=1e-8)
    assert_allclose(kernel.log_normalizer(d), -expected, rtol=1e-8, atol=1e-10)


def test_normalizer_matches_closed_forms():
    # The textbook values, as a check on the quadrature above.
    assert_allclose(np.exp(log_radial_integral("gaussian", 3)), (2 * np.pi) ** 1.5, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("tophat", 2)), np.pi, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("epanechnikov", 1)), 4 / 3, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("linear", 1)), 1.0, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("cosine", 1)), 4 / np.pi, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("exponential", 1)), 2.0, rtol=1e-10)
    # The tricube's 70/81, the biweight's 15/16, the triweight's 35/32 (d = 1).
    assert_allclose(np.exp(log_radial_integral("tricube", 1)), 81 / 70, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("biweight", 1)), 16 / 15, rtol=1e-10)
    assert_allclose(np.exp(log_radial_integral("triweight", 1)), 32 / 35, rtol=1e-10)


def sklearn_cosine_log_integral(d):
    """scikit-learn's own cosine normalisation (``_binary_tree.pxi.tp``), reproduced.

    Its recursion stops one integration by parts short for even ``d`` (it gives
    int_0^1 r cos(pi r / 2) dr = 2 / pi instead of 2 / pi - 4 / pi**2), so its
    cosine densities are wrong for even dimensions; for odd ``d`` it is exact.
    """
    factor, tmp = 0.0, 2 / np.pi
    for k in range(1, d + 1, 2):
        factor += tmp
        tmp *= -(d - k) * (d - k - 1) * (2 / np.pi) ** 2
    return np.log(factor) + log_sphere_area(d)


def test_sklearn_cosine_normalisation_is_wrong_for_even_d_only():
    # Documents why the comparison below corrects scikit-learn for even d.
    for d in (1, 3, 5):
        assert_allclose(sklearn_cosine_log_integral(d), log_radial_integral("cosine", d))
    # d = 2 is off by a factor e; from d = 4 its integral is negative (NaN densities).
    assert abs(sklearn_cosine_log_integral(2) - log_radial_integral("cosine", 2)) > 1
    with np.errstate(invalid="ignore"):
        assert np.isnan(sklearn_cosine_log_integral(4))


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("name", [name for name in NAMES if name in SKLEARN_KERNELS])
def test_density_matches_sklearn_kernel_density(name, d):
    rng = np.random.default_rng(1000 * d + NAMES.index(name))
    kernel = KERNELS[name]
    n, m, h = 60, 25, 0.7
    X = rng.normal(size=(n, d))
    # Queries near training points, so that every density is positive.
    Q = X[rng.choice(n, m)] + 0.1 * rng.normal(size=(m, d))
    s = scaled_distances(X, Q, h) ** 2
    ours = logsumexp(kernel.log_profile(s), axis=1) - np.log(n) - d * np.log(h)
    ours += kernel.log_normalizer(d)

    theirs = KernelDensity(kernel=name, bandwidth=h).fit(X).score_samples(Q)
    if name == "cosine" and d % 2 == 0:
        # Replace scikit-learn's wrong even-d constant by the exact one.
        theirs = theirs + sklearn_cosine_log_integral(d) - log_radial_integral("cosine", d)
    assert np.all(np.isfinite(theirs))
    assert_allclose(ours, theirs, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("alias, canonical", [("boxcar", "tophat"), ("triangular", "linear")])
def test_aliases_are_the_same_record(alias, canonical):
    assert KERNELS[alias] is KERNELS[canonical]
    assert get_kernel(alias) is get_kernel(canonical)
    assert get_kernel(alias).name == canonical
    assert alias in KERNELS[canonical].aliases


def test_registry_names():
    assert set(NAMES) == set(SPEC)
    assert len(NAMES) == len(set(NAMES))
    for name, kernel in KERNELS.items():
        assert isinstance(kernel, Kernel)
        assert name == kernel.name or name in kernel.aliases
        assert KERNELS[kernel.name] is kernel
    # Canonical names are scikit-learn's KernelDensity names, and the LOESS family's.
    assert set(NAMES) <= set(SKLEARN_KERNELS) | {"tricube", "biweight", "triweight"}


@pytest.mark.parametrize("bad", ["gauss", "Gaussian", "", "epanechnikov ", None, 3])
def test_unknown_kernel_lists_every_valid_name(bad):
    with pytest.raises(ValueError) as info:
        get_kernel(bad)
    message = str(info.value)
    for name in KERNELS:
        assert repr(name) in message
    assert repr(bad) in message


@pytest.mark.parametrize("name", list(KERNELS))
def test_get_kernel_accepts_names_aliases_and_records(name):
    kernel = get_kernel(name)
    assert kernel is KERNELS[name]
    assert get_kernel(kernel) is kernel


@pytest.mark.parametrize("name", NAMES)
def test_support_radius(name):
    kernel = KERNELS[name]
    if spec_compact(name):
        assert kernel.support == 1.0
        assert kernel.compact is True
    else:
        assert kernel.support == np.inf
        assert kernel.compact is False
    # The support agrees with where the profile vanishes.
    s = np.array([0.0, 0.5, 0.99, 1.0, 1.01, 4.0, 100.0])
    positive = kernel.profile(s) > 0
    assert_allclose(positive, s < kernel.support**2)


@pytest.mark.parametrize("name", list(KERNELS))
def test_records_pickle_to_the_registry_object(name):
    kernel = KERNELS[name]
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(kernel, protocol=protocol)) is kernel


def test_records_are_frozen():
    kernel = KERNELS["gaussian"]
    with pytest.raises(AttributeError):
        kernel.support = 2.0


def test_reprs_show_data_not_functions():
    from skl_nw._discrete_kernels import DISCRETE_KERNELS

    text = repr(KERNELS)
    assert "lambda" not in text and "<function" not in text
    for name in KERNELS:  # every name and alias, in registry order
        assert name in text
    assert text.index("gaussian") < text.index("tophat") < text.index("boxcar")
    for kernel in KERNELS.values():
        one = repr(kernel)
        assert "lambda" not in one and "<function" not in one
        assert one.startswith(f"Kernel({kernel.name!r}, support={kernel.support!r}")
    assert repr(KERNELS["gaussian"]) == (
        "Kernel('gaussian', support=inf, log_slope=-0.5, exact_near_zero=False)"
    )
    assert repr(DISCRETE_KERNELS["wang_van_ryzin", True]) == (
        "DiscreteKernel('wang_van_ryzin', ordered=True, max_closed=False)"
    )
    # The registry is still the plain mapping the estimators validate against.
    assert isinstance(KERNELS, dict) and pickle.loads(pickle.dumps(KERNELS)) == KERNELS


def _section(text, title):
    """The lines of one section of a plain-text pydoc page, up to the next title."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    stop = next((i for i in range(start, len(lines)) if lines[i][:1].isalpha()), len(lines))
    return "\n".join(lines[start:stop])


def test_help_shows_the_public_api_and_no_function_reprs():
    import pydoc

    import skl_nw

    text = pydoc.render_doc(skl_nw, renderer=pydoc.plaintext)
    assert "<function" not in text and "<lambda>" not in text
    public = [name for name in skl_nw.__all__ if name != "__version__"]
    description = _section(text, "DESCRIPTION")
    documented = _section(text, "CLASSES") + _section(text, "FUNCTIONS") + _section(text, "DATA")
    for name in public:
        assert f"{name}:" in description  # listed, with a line saying what it is
        assert f"    {name}" in documented  # and documented by pydoc (it follows __all__)
    # The private modules pydoc lists (PACKAGE CONTENTS reads the directory) are
    # declared private; the documented sections hold no private function.
    assert "starts with an underscore" in description and "private" in description
    assert "    _" not in _section(text, "FUNCTIONS")
