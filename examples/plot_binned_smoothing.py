r"""
Smoothing millions of points: the binned path
=============================================

A noisy series of two million points, smoothed by Gaussian Nadaraya–Watson regression.
Brute force would compare each of the predictions with every point; with
``algorithm="binned"`` the points are summarised on a regular grid (linear binning), the
kernel sums are one FFT convolution of the grid, and each prediction interpolates two grid
values. ``binned_tol`` sets the grid: the error against the exact estimate stays below
``binned_tol`` times the range of the targets (see :doc:`/binned`).
"""

# %%
# The series and the binned fit
# -----------------------------
import time

import matplotlib.pyplot as plt
import numpy as np

from skl_nw import NadarayaWatsonRegressor, rule_of_thumb

rng = np.random.default_rng(0)
n = 2_000_000
t = np.sort(rng.uniform(0, 10, n))[:, None]
signal = np.sin(2 * t[:, 0]) + 0.5 * np.sin(7 * t[:, 0]) * np.exp(-0.2 * t[:, 0])
y = signal + 0.6 * rng.standard_t(5, n)

h = rule_of_thumb(t)  # Scott's rule, per feature
grid = np.linspace(0, 10, 2_000)[:, None]
start = time.perf_counter()
binned = NadarayaWatsonRegressor(h, algorithm="binned", binned_tol=1e-6).fit(t, y)
smooth = binned.predict(grid)
print(f"binned fit + predict, n = {n:,}: {time.perf_counter() - start:.2f} s")

# %%
# The error against the exact estimate
# ------------------------------------
# The exact (brute-force) estimate at 50 of the grid points, from all two million points.
check = grid[::40]
start = time.perf_counter()
exact = NadarayaWatsonRegressor(h, algorithm="brute").fit(t, y).predict(check)
print(f"exact predict at {len(check)} points: {time.perf_counter() - start:.2f} s")
error = np.abs(binned.predict(check) - exact) / np.ptp(y)
print(f"max |binned - exact| / range: {error.max():.1e}")

fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
thin = slice(None, None, 400)
top.plot(t[thin, 0], y[thin], ".", ms=1, alpha=0.3, label="data (every 400th point)")
top.plot(grid[:, 0], smooth, lw=2, label="binned Nadaraya–Watson")
top.set(ylabel="y", ylim=(-4, 4))
top.legend(loc="upper right")
bottom.semilogy(check[:, 0], np.maximum(error, 1e-17), "o", ms=3)
bottom.axhline(1e-6, color="k", ls="--", label="binned_tol")
bottom.set(xlabel="t", ylabel="|binned - exact| / range")
bottom.legend()
plt.show()
