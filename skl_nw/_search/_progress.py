"""BandwidthSearchCV's progress lines (a mixin of the search; ``verbose`` levels in its docs)."""

from __future__ import annotations

import time

import numpy as np

# verbose=1 prints at most one progress line per this many seconds (tests set it to 0).
PROGRESS_INTERVAL = 5.0


def _say(message: str) -> None:
    print(f"[BandwidthSearchCV] {message}", flush=True)  # noqa: T201


def _bandwidths(h: np.ndarray, verbose: int) -> str:
    """Format bandwidths for a progress line: their range, or every entry at verbose >= 3."""
    if verbose >= 3:
        return "[" + ", ".join(f"{v:.4g}" for v in h) + "]"
    low, high = float(np.min(h)), float(np.max(h))
    return f"{low:.4g}" if low == high else f"{low:.4g}..{high:.4g}"


class _Progress:
    """The clock of one search and its throttled progress lines (verbose >= 1)."""

    def __init__(self, verbose: int):
        self.verbose = verbose
        self.start = self.last = time.monotonic()

    def update(self, done: int, total: int, unit: str, bound: bool = False) -> None:
        """Report ``done`` of ``total`` units, at most once per ``PROGRESS_INTERVAL``."""
        now = time.monotonic()
        if self.verbose < 1 or done >= total or now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        elapsed = now - self.start
        left = elapsed * (total - done) / done
        _say(
            f"{done}/{total} {unit} ({done / total:.0%}), {elapsed:.1f} s elapsed, "
            f"about {left:.1f} s left{' at most' if bound else ''}"
        )

    def note(self, message: str) -> None:
        """Print ``message``, at most once per ``PROGRESS_INTERVAL`` with the other lines."""
        now = time.monotonic()
        if self.verbose < 1 or now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        _say(f"{message}, {now - self.start:.1f} s elapsed")

    def elapsed(self) -> float:
        return time.monotonic() - self.start


__all__ = ["_Reporting"]

# What one step of each gradient method is called in the progress lines.
_STEP = {"sgd": "epoch", "lbfgs": "iteration"}


class _Reporting:
    """The start, progress and per-step lines of :class:`BandwidthSearchCV`."""

    def _announce(self, n_samples: int, Xu, wu, backend: str) -> None:
        """Print the start line: the data, the work, the path, the neighbour search."""
        if not self.verbose:
            return
        if self.method_ == "grid":
            n_candidates = len(self._candidates(Xu, wu))
            work = f"{n_candidates} candidates, closed-form leave-one-out (method='grid', cv='loo')"
        elif self.method_ == "sgd":
            work = f"at most {self.max_iter} epochs, leave-one-out loss by Adam (method='sgd')"
        else:
            work = (f"at most {self.max_iter} iterations, leave-one-out loss by L-BFGS-B "
                    "(method='lbfgs')")  # fmt: skip
        if self.method != self.method_:
            work += " chosen by method='auto'"
        distinct = "" if len(Xu) == n_samples else f" ({len(Xu)} distinct)"
        _say(f"{n_samples} samples{distinct}, {Xu.shape[1]} features: {work}; backend {backend}")

    def _report_scores(self, candidates: list, done: int, scores: np.ndarray) -> None:
        """Report the candidates ``done:done + len(scores)`` once scored."""
        if self.verbose >= 2:
            for t, score in enumerate(self._in_y_units(np.asarray(scores)), start=done):
                _say(
                    f"candidate {t + 1}/{len(candidates)}: bandwidth "
                    f"{_bandwidths(candidates[t], self.verbose)}, score {score:.6g}"
                )
        self._progress.update(done + len(scores), len(candidates), "candidates")

    def _say_extension(self, end: str, factors: np.ndarray, base: np.ndarray) -> None:
        """Say that the default grid grows past its ``end`` ("smallest" or "largest")."""
        _say(
            f"the best candidate is the {end} of the grid: {len(factors)} more, bandwidth "
            f"{_bandwidths(np.concatenate([factors[:1] * base, factors[-1:] * base]), 1)}"
        )

    def _report_epoch(self, epoch: int, loss: float, bandwidth: np.ndarray) -> None:
        """Report one SGD epoch or L-BFGS-B iteration (its loss, at verbose >= 2)."""
        step = _STEP[self.method_]
        if self.verbose >= 2:
            shown = _bandwidths(bandwidth, self.verbose)
            _say(f"{step} {epoch}: loss {self._loss_in_y_units(loss):.6g}, bandwidth {shown}")
        # Early stopping may end the search before max_iter: the time left is a bound.
        self._progress.update(epoch, self.max_iter, f"{step}s", bound=self.tol is not None)

    def _report_rows(self, done: int, total: int) -> None:
        """Report how far one pass over the training rows has gone (long passes only)."""
        self._progress.note(f"{done}/{total} training rows of this {_STEP[self.method_]} "
                            f"({done / total:.0%})")  # fmt: skip
