"""Coverage of the intervals and bands, size and power of the significance test, by simulation.

Run ``python -m benchmarks coverage`` (about 40 minutes on 2 cores;
``--part intervals`` or ``--part test`` for one half) or ``--quick`` (a
smoke run, under 30 s: too few replications to read the numbers).  The
tables are those of ``docs/inference.md``.

Intervals: ``y = sin(2 pi x) + sigma(x) e``, ``x ~ U(0, 1)``, ``e ~ N(0, 1)``,
``sigma = 0.3`` (homoscedastic) or ``0.1 + 0.4 x`` (heteroscedastic);
nominal level 0.95.  Each row is the share of replications in which the
interval covers its target at ``x = 0.02`` (boundary), ``0.25`` (the peak),
``0.5`` (the steepest slope) and ``0.98`` (boundary):

* ``normal`` and ``bootstrap`` (``predict_interval``'s methods) cover the
  smoothed curve ``E[m_hat(q) | X] = sum_i l_i(q) m(x_i)``, computed here from
  ``attention_weights`` (the smoother's weights) and the true ``m``;
* ``robust normal`` and ``robust bootstrap`` (``bias_correction="robust"``)
  cover ``m(q)`` itself;
* ``band`` (``simultaneous=True``, 50 grid points on ``[0.02, 0.98]``):
  the share of replications in which every grid point is covered (smoothed
  curve; ``robust band``: ``m``).

Monte Carlo standard error of a coverage near 0.95: 0.011 at 400
replications (n = 200; 100 replications at n = 1,000: 0.022).
Significance test: ``n = 60``, ``X ~ U(0, 1)^2``, ``y = s x_0 + N(0, 0.5^2)``,
feature 0 tested under the defaults
(rule-of-thumb bandwidth, ``n_boot=199`` here), rejection rate at 5%.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from skl_nw import LocalPolynomialRegressor, NadarayaWatsonRegressor, significance_test

from ._common import environment, table

POINTS = np.array([0.02, 0.25, 0.5, 0.98])
GRID = np.linspace(0.02, 0.98, 50)
METHODS = ("normal", "bootstrap", "band", "robust normal", "robust bootstrap", "robust band")


def truth(x: np.ndarray) -> np.ndarray:
    return np.sin(2 * np.pi * x)


def _sample(rng, n: int, noise: str):
    x = rng.uniform(0, 1, n)
    sigma = 0.3 if noise == "hom" else 0.1 + 0.4 * x
    return x[:, None], truth(x) + sigma * rng.normal(size=n)


def _covered(band: np.ndarray, target: np.ndarray) -> np.ndarray:
    return (band[:, 0] <= target) & (target <= band[:, 1])


def _replicate(reg, rng, n: int, noise: str, n_boot: int) -> dict:
    X, y = _sample(rng, n, noise)
    reg.fit(X, y)
    Q = np.concatenate([POINTS, GRID])[:, None]
    smoothed = reg.attention_weights(Q) @ truth(X[:, 0])  # E[m_hat | X], the oracle
    m = truth(Q[:, 0])
    seed = int(rng.integers(2**31))
    out = {}
    for robust in (False, True):
        prefix, target = ("robust ", m) if robust else ("", smoothed)
        kw = {"bias_correction": "robust" if robust else "none"}
        out[prefix + "normal"] = _covered(reg.predict_interval(Q[:4], **kw), target[:4])
        boot = reg.predict_interval(Q[:4], method="bootstrap", n_boot=n_boot,
                                    random_state=seed, **kw)  # fmt: skip
        out[prefix + "bootstrap"] = _covered(boot, target[:4])
        band = reg.predict_interval(Q[4:], method="bootstrap", n_boot=n_boot,
                                    random_state=seed, simultaneous=True, **kw)  # fmt: skip
        out[prefix + "band"] = np.array([_covered(band, target[4:]).all()])
    return out


def coverage(label: str, reg, n: int, noise: str, reps: int, n_boot: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(METHODS, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zero-width at rare empty tails
        for _ in range(reps):
            for name, hit in _replicate(reg, rng, n, noise, n_boot).items():
                hits[name] = hits[name] + hit
    rows = []
    for name in METHODS:
        cells = [f"{c:.3f}" for c in np.atleast_1d(hits[name] / reps)]
        cells = [*cells, ""] if len(cells) > 1 else ["", "", "", "", *cells]  # band: "grid"
        rows.append([label, str(n), noise, name, *cells])
    return rows


def power(label: str, reg, slopes, reps: int, n_boot: int, seed: int) -> list:
    """Rejection rates at 5% per slope, then the size under heteroscedastic noise."""
    rng = np.random.default_rng(seed)
    row = [label]
    for s in [*slopes, None]:  # None: s = 0, noise sd 0.5 (0.2 + 1.6 x_1)
        rejected = 0
        for _ in range(reps):
            X = rng.uniform(0, 1, (60, 2))
            sd = 0.5 if s is not None else 0.5 * (0.2 + 1.6 * X[:, 1])
            y = (s or 0.0) * X[:, 0] + sd * rng.normal(size=60)
            p = significance_test(reg, X, y, [0], n_boot=n_boot,
                                  random_state=int(rng.integers(2**31))).pvalue  # fmt: skip
            rejected += p <= 0.05
        row.append(f"{rejected / reps:.3f}")
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks coverage")
    parser.add_argument("--quick", action="store_true", help="a smoke run (under 30 s)")
    parser.add_argument("--part", choices=["all", "intervals", "test"], default="all",
                        help="the interval study, the significance test's, or both")  # fmt: skip
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.quick:
        settings, sizes, reps, n_boot = [("NW", 0.03), ("LL", 0.05)], [200], 20, 99
        noises, test_reps, slopes = ["hom"], 5, [0.0, 20.0]
    else:
        settings = [("NW", 0.03), ("LL", 0.05), ("LL", 0.025), ("NW", 0.06)]
        sizes, reps, n_boot = [200, 1000], 400, 399
        noises, test_reps, slopes = ["hom", "het"], 400, [0.0, 0.6, 2.0, 5.0, 20.0, 100.0]
    make = {"NW": NadarayaWatsonRegressor, "LL": LocalPolynomialRegressor}
    if args.part in ("all", "intervals"):
        head = ["estimator", "n", "noise", "interval", *[f"x={x}" for x in POINTS], "grid"]
        print(table(head, []), flush=True)  # then the rows as they come (a long run)
        for (name, h), n, noise in ((s, n, z) for s in settings for n in sizes for z in noises):
            if n > 200 and noise == "het":
                continue  # n = 1000: homoscedastic only, 100 replications (time)
            r = reps if n == 200 else reps // 4
            rows = coverage(f"{name} h={h}", make[name](bandwidth=h), n, noise, r, n_boot, n)
            print(table(head, rows).split("\n", 2)[2], flush=True)
        print()
    if args.part in ("all", "test"):
        tests = [
            ("NW (scott)", NadarayaWatsonRegressor()),
            ("LL (scott)", LocalPolynomialRegressor()),
        ]
        rows = [power(label, reg, slopes, test_reps, 199, seed=1) for label, reg in tests]
        head = ["significance_test", *[f"s={s:g}" for s in slopes], "s=0 het."]
        print(table(head, rows))
        print()
    print(f"{time.perf_counter() - start:.1f} s")
    print(environment())
