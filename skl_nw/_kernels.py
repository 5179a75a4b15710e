"""Kernels as data: one frozen record per kernel and the ``KERNELS`` registry.

Every function of a record takes ``s = u**2``, the *squared* bandwidth-scaled
distance ``u = ||(x - x_i) / h||``, because that is what the engine computes
(a BLAS expansion or a sum of squared differences) and the Gaussian needs no
square root.  Nothing outside this module knows a kernel by its name: the
engine asks the record (``log_profile``, ``support``, ``exact_near_zero``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
from numpy.polynomial import Polynomial
from scipy import integrate
from scipy.special import comb, gammaln, ndtr

__all__ = ["KERNELS", "Kernel", "copy_fields", "get_kernel", "kernel_names"]

ArrayFn = Callable[[np.ndarray], np.ndarray]


def _log_sphere_area(d: int) -> float:
    """Log of the surface area of the unit sphere in R^d, 2 pi^(d/2) / Gamma(d/2)."""
    return np.log(2.0) + 0.5 * d * np.log(np.pi) - gammaln(0.5 * d)


def _log_ball_volume(d: int) -> float:
    """Log of the volume of the unit ball in R^d, pi^(d/2) / Gamma(d/2 + 1)."""
    return 0.5 * d * np.log(np.pi) - gammaln(0.5 * d + 1.0)


def _log(x: np.ndarray) -> np.ndarray:
    """``log(x)`` with ``log(0) = -inf`` and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(x)


def _sqrt(s: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(s, 0.0))


@dataclass(frozen=True, repr=False)
class Kernel:
    """A radially symmetric kernel ``K(u)``, described as data.

    Attributes
    ----------
    name : str
        Canonical name, as scikit-learn's ``KernelDensity`` spells it.
    profile : callable
        ``s -> K(sqrt(s))``, the unnormalised profile (``K(0) = 1``).
    log_profile : callable
        ``s -> log K(sqrt(s))``, ``-inf`` outside the support; used by the
        log-sum-exp softmax so that no ratio of underflowed values occurs.
    derivative : callable
        ``s -> dK/ds``, the derivative of the profile with respect to the
        squared distance, as needed by gradients with respect to bandwidths
        (``ds/d log h_j = -2 (x_j - x_ij)^2 / h_j^2``).
    dlog_profile : callable
        ``s -> d log K / ds = K'(s) / K(s)`` inside the support, 0 outside
        (where ``K = 0`` carries no weight); what the log-space gradients use,
        since ``K'`` and ``K`` may both underflow where their ratio does not.
    log_profile_inverse : callable
        ``level -> s``, the squared distance beyond which ``log K <= level``
        (``level <= 0``), capped at the support; the tree backend uses it to
        bound the radius outside which an infinite-support kernel's weights
        are negligible.
    support : float
        Support radius in ``u``: ``1.0`` for compact kernels, ``inf`` otherwise.
    log_integral : callable
        ``d -> log ∫_{R^d} K(||x||) dx``; minus it is the log normalising
        constant that makes ``K`` a probability density in ``d`` dimensions.
    log_slope : float or None
        ``c`` when ``log K(s) = c s`` exactly (the Gaussian, ``c = -1/2``): the
        engine then folds the kernel into the distance product (one GEMM gives
        the log weights directly).  None for every other kernel.
    exact_near_zero : bool
        True when ``K`` is not a smooth function of ``s`` at ``s = 0`` (it is
        a function of ``u = sqrt(s)``), so a rounding error ``e`` in a small
        ``s`` becomes an error ``sqrt(e)`` in the weight: the engine then
        recomputes small squared distances exactly.
    aliases : tuple of str
        Other accepted names.
    power_form : tuple of (int, int) or None
        ``(a, b)`` when ``K(u) = (1 - u^a)^b`` for ``u < 1`` and 0 beyond
        (``a`` in 1, 2, 3): the compiled window path of nearest-neighbour
        spans evaluates such a kernel in its loop.  None for the others.
    integrated_profile : callable or None
        ``t -> G(t) = int_{-inf}^t K(|u|) du / int K(|u|) du``, the kernel's
        distribution function in one dimension (the smoothed step of a
        conditional distribution's ``y``), from ``power_form`` when not given.
    """

    name: str
    profile: ArrayFn
    log_profile: ArrayFn
    derivative: ArrayFn
    dlog_profile: ArrayFn
    log_profile_inverse: ArrayFn
    support: float
    log_integral: Callable[[int], float]
    log_slope: float | None = None
    exact_near_zero: bool = False
    aliases: tuple[str, ...] = ()
    power_form: tuple[int, int] | None = None
    integrated_profile: ArrayFn | None = None

    def __post_init__(self) -> None:
        if self.integrated_profile is None and self.power_form is not None:
            object.__setattr__(self, "integrated_profile", _power_cdf(*self.power_form))

    def __repr__(self) -> str:
        # The data fields only: the functions' reprs are lambdas and addresses.
        slope = "" if self.log_slope is None else f", log_slope={self.log_slope!r}"
        aliases = f", aliases={self.aliases!r}" if self.aliases else ""
        return (
            f"Kernel({self.name!r}, support={self.support!r}{slope}, "
            f"exact_near_zero={self.exact_near_zero!r}{aliases})"
        )

    @property
    def compact(self) -> bool:
        """Whether the kernel is zero beyond a finite radius."""
        return bool(np.isfinite(self.support))

    def __reduce__(self):
        # Records hold functions: pickle them as a registry look-up by name.
        return get_kernel, (self.name,)

    # skops persists an object's state rather than its ``__reduce__``: the same
    # look-up by name, so that no function of the record is ever serialised.
    def __getstate__(self) -> dict:
        return {"name": self.name}

    def __setstate__(self, state: dict) -> None:
        copy_fields(self, get_kernel(state["name"]))

    def log_normalizer(self, d: int) -> float:
        """Log of the constant ``c_d`` such that ``c_d K(||x||)`` integrates to 1."""
        return -float(self.log_integral(d))


def copy_fields(record, source) -> None:
    """Fill a frozen record restored by ``__setstate__`` from the registry's copy."""
    for field in fields(source):
        object.__setattr__(record, field.name, getattr(source, field.name))


def _inside(s: np.ndarray) -> np.ndarray:
    return s < 1.0


def _cosine_log_integral(d: int) -> float:
    # No elementary closed form for every d: integrate the radial profile.
    value, _ = integrate.quad(lambda r: np.cos(0.5 * np.pi * r) * r ** (d - 1), 0, 1)
    return _log_sphere_area(d) + np.log(value)


def _cosine_derivative(s: np.ndarray) -> np.ndarray:
    u = _sqrt(s)
    # d/ds cos(pi u / 2) = -pi sin(pi u / 2) / (4 u), with the limit -pi^2 / 8 at u = 0.
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(u > 0, np.sin(0.5 * np.pi * u) / np.where(u > 0, u, 1.0), 0.5 * np.pi)
    return np.where(_inside(s), -0.25 * np.pi * ratio, 0.0)


def _cosine_dlog(s: np.ndarray) -> np.ndarray:
    u = _sqrt(s)
    inside = _inside(s)
    # d/ds log cos(pi u / 2) = -pi tan(pi u / 2) / (4 u), with the limit -pi^2 / 8 at u = 0.
    safe_u = np.where(inside & (u > 0), u, 1.0)
    ratio = np.where(u > 0, np.tan(0.5 * np.pi * np.minimum(u, safe_u)) / safe_u, 0.5 * np.pi)
    return np.where(inside, -0.25 * np.pi * ratio, 0.0)


def _root_derivative(s: np.ndarray, factor: ArrayFn) -> np.ndarray:
    """``-factor(s) / (2 sqrt(s))``, the chain rule of a profile in ``u``; ``-inf`` at 0."""
    u = _sqrt(s)
    with np.errstate(divide="ignore"):
        return -factor(s) / (2.0 * u)


def _exponential_cdf(t: np.ndarray) -> np.ndarray:
    e = 0.5 * np.exp(-np.abs(t))
    return np.where(t < 0, e, 1.0 - e)


def _power_cdf(a: int, b: int):
    """Return ``G`` of ``K(u) = (1 - |u|^a)^b`` on ``[-1, 1]``: a polynomial (``power_form``).

    Near the edges the mass beyond ``|t|``, ``T(s) = int_0^s K(1 - v) dv`` with
    ``s = 1 - |t|``, is summed directly: ``K(1 - v) = v^b P(v)^b`` with
    ``P(v) = sum_{i < a} (1 - v)^i``, a polynomial whose lowest term leads for
    small ``s`` (``0.5 - int_0^|t|`` cancelled there: 3e-5 h_y off in a
    tricube's quantiles at levels near 1e-16).  Near the middle, the integral
    from 0.
    """
    v = Polynomial([0.0, 1.0])
    P = sum(((1 - v) ** i for i in range(a)), Polynomial([0.0]))
    tail = (v**b * P**b).integ()  # T(0) = 0
    half = tail(1.0)
    near = Polynomial([0.0, 1.0]) if b == 0 else ((1 - v**a) ** b).integ()

    def cdf(t: np.ndarray) -> np.ndarray:
        x = np.abs(np.clip(t, -1.0, 1.0))
        outer = np.where(x > 0.5, tail(1.0 - x) / (2.0 * half), 0.5 - near(x) / (2.0 * half))
        return np.where(t < 0, outer, 1.0 - outer)

    return cdf


_KERNEL_LIST = (
    Kernel(
        name="gaussian",
        profile=lambda s: np.exp(-0.5 * s),
        log_profile=lambda s: -0.5 * s,
        derivative=lambda s: -0.5 * np.exp(-0.5 * s),
        dlog_profile=lambda s: np.full_like(s, -0.5, dtype=float),
        log_profile_inverse=lambda level: -2.0 * np.asarray(level, dtype=float),
        support=np.inf,
        log_integral=lambda d: 0.5 * d * np.log(2.0 * np.pi),
        log_slope=-0.5,
        integrated_profile=ndtr,
    ),
    Kernel(
        name="tophat",
        profile=lambda s: _inside(s).astype(float),
        log_profile=lambda s: np.where(_inside(s), 0.0, -np.inf),
        derivative=lambda s: np.zeros_like(s, dtype=float),
        dlog_profile=lambda s: np.zeros_like(s, dtype=float),
        log_profile_inverse=lambda level: np.ones_like(level, dtype=float),
        support=1.0,
        log_integral=_log_ball_volume,
        aliases=("boxcar",),
        power_form=(2, 0),
    ),
    Kernel(
        name="epanechnikov",
        profile=lambda s: np.maximum(1.0 - s, 0.0),
        log_profile=lambda s: _log(np.maximum(1.0 - s, 0.0)),
        derivative=lambda s: np.where(_inside(s), -1.0, 0.0),
        dlog_profile=lambda s: np.where(_inside(s), -1.0 / np.where(_inside(s), 1.0 - s, 1.0), 0.0),
        log_profile_inverse=lambda level: 1.0 - np.exp(level),
        support=1.0,
        log_integral=lambda d: _log_ball_volume(d) + np.log(2.0 / (d + 2.0)),
        power_form=(2, 1),
    ),
    Kernel(
        name="exponential",
        profile=lambda s: np.exp(-_sqrt(s)),
        log_profile=lambda s: -_sqrt(s),
        derivative=lambda s: _root_derivative(s, lambda s: np.exp(-_sqrt(s))),
        dlog_profile=lambda s: _root_derivative(s, np.ones_like),
        log_profile_inverse=lambda level: np.asarray(level, dtype=float) ** 2,
        support=np.inf,
        log_integral=lambda d: _log_sphere_area(d) + gammaln(d),
        exact_near_zero=True,
        integrated_profile=_exponential_cdf,
    ),
    Kernel(
        name="linear",
        profile=lambda s: np.maximum(1.0 - _sqrt(s), 0.0),
        log_profile=lambda s: _log(np.maximum(1.0 - _sqrt(s), 0.0)),
        derivative=lambda s: _root_derivative(s, lambda s: _inside(s).astype(float)),
        dlog_profile=lambda s: _root_derivative(
            s, lambda s: np.where(_inside(s), 1.0 / np.where(_inside(s), 1.0 - _sqrt(s), 1.0), 0.0)
        ),
        log_profile_inverse=lambda level: (1.0 - np.exp(level)) ** 2,
        support=1.0,
        log_integral=lambda d: _log_sphere_area(d) - np.log(d * (d + 1.0)),
        exact_near_zero=True,
        aliases=("triangular",),
        power_form=(1, 1),
    ),
    Kernel(
        name="cosine",
        profile=lambda s: np.where(_inside(s), np.cos(0.5 * np.pi * _sqrt(s)), 0.0),
        log_profile=lambda s: _log(np.where(_inside(s), np.cos(0.5 * np.pi * _sqrt(s)), 0.0)),
        derivative=_cosine_derivative,
        dlog_profile=_cosine_dlog,
        log_profile_inverse=lambda level: (2.0 / np.pi * np.arccos(np.exp(level))) ** 2,
        support=1.0,
        log_integral=_cosine_log_integral,
        # (1 + sin(pi t / 2)) / 2 written as sin^2(pi (1 + t) / 4): no cancellation at t = -1.
        integrated_profile=lambda t: np.sin(0.25 * np.pi * (1.0 + np.clip(t, -1.0, 1.0))) ** 2,
    ),
)


def _power_log_integral(coefs: tuple[float, ...], step: int) -> Callable[[int], float]:
    """Return ``d -> log ∫ K`` for ``K(r) = sum_j coefs[j] r^(step j)`` on ``[0, 1]``."""

    def log_integral(d: int) -> float:
        radial = sum(c / (d + step * j) for j, c in enumerate(coefs))
        return _log_sphere_area(d) + np.log(radial)

    return log_integral


def _tricube(s: np.ndarray) -> np.ndarray:
    """``1 - u^3`` inside the support, 0 outside."""
    return np.where(_inside(s), 1.0 - np.minimum(s, 1.0) ** 1.5, 0.0)


def _power_kernel(name: str, power: int) -> Kernel:
    """Return the kernel ``(1 - u^2)^power`` (biweight: 2, triweight: 3), a polynomial in ``s``."""
    binomial = tuple((-1.0) ** j * comb(power, j) for j in range(power + 1))

    def derivative(s: np.ndarray) -> np.ndarray:
        return np.where(_inside(s), -power * np.maximum(1.0 - s, 0.0) ** (power - 1), 0.0)

    return Kernel(
        name=name,
        profile=lambda s: np.maximum(1.0 - s, 0.0) ** power,
        log_profile=lambda s: power * _log(np.maximum(1.0 - s, 0.0)),
        derivative=derivative,
        dlog_profile=lambda s: np.where(_inside(s), -power / np.where(s < 1.0, 1.0 - s, 1.0), 0.0),
        log_profile_inverse=lambda level: 1.0 - np.exp(np.asarray(level, dtype=float) / power),
        support=1.0,
        log_integral=_power_log_integral(binomial, 2),
        power_form=(2, power),
    )


_KERNEL_LIST = (
    *_KERNEL_LIST,
    Kernel(
        name="tricube",
        profile=lambda s: _tricube(s) ** 3,
        log_profile=lambda s: 3.0 * _log(_tricube(s)),
        # d/ds (1 - u^3)^3 = -(9/2) u (1 - u^3)^2, and d log K / ds = -(9/2) u / (1 - u^3).
        derivative=lambda s: (
            np.where(_inside(s), -4.5 * _sqrt(np.minimum(s, 1.0)), 0.0) * _tricube(s) ** 2
        ),
        dlog_profile=lambda s: np.where(
            _inside(s), -4.5 * _sqrt(s) / np.where(_inside(s), _tricube(s), 1.0), 0.0
        ),
        log_profile_inverse=lambda level: (
            (1.0 - np.exp(np.asarray(level, dtype=float) / 3.0)) ** (2.0 / 3.0)
        ),
        support=1.0,
        log_integral=_power_log_integral((1.0, -3.0, 3.0, -1.0), 3),
        power_form=(3, 3),
    ),
    _power_kernel("biweight", 2),
    _power_kernel("triweight", 3),
)


class _Registry(dict):
    """A dict of kernel records whose repr lists their names (and aliases)."""

    def __repr__(self) -> str:
        names = [
            name + "".join(f" (alias {alias})" for alias in kernel.aliases)
            for name, kernel in self.items()
            if name == kernel.name
        ]
        return f"<KERNELS: {', '.join(names)}>"


#: Every accepted name (canonical names and aliases) mapped to its record.
KERNELS: dict[str, Kernel] = _Registry(
    {name: kernel for kernel in _KERNEL_LIST for name in (kernel.name, *kernel.aliases)}
)


def kernel_names() -> list[str]:
    """Canonical kernel names, in registry order."""
    return [kernel.name for kernel in _KERNEL_LIST]


def get_kernel(kernel: str | Kernel) -> Kernel:
    """Return the record of ``kernel`` (a name, an alias or a record).

    Raises
    ------
    ValueError
        If the name is unknown; the message lists every valid name.
    """
    if isinstance(kernel, Kernel):
        return kernel
    try:
        return KERNELS[kernel]
    except (KeyError, TypeError):
        valid = ", ".join(repr(name) for name in sorted(KERNELS))
        raise ValueError(f"Unknown kernel={kernel!r}; valid kernels are {valid}.") from None


_MOVED = frozenset({"DISCRETE_KERNELS", "LOG_ZERO", "DiscreteKernel", "get_discrete_kernel"})


def __getattr__(name: str):
    """Return the discrete kernels' names, which pickles made before their module name here."""
    if name in _MOVED:
        from . import _discrete_kernels

        return getattr(_discrete_kernels, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
