"""BandwidthSearchCV's progress lines (``verbose`` levels in its docs), over a search's context."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["Progress", "announce", "report_epoch", "report_rows", "report_scores", "say_extension"]

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


class Progress:
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


# What one step of each gradient method is called in the progress lines.
_STEP = {"sgd": "epoch", "lbfgs": "iteration"}


def announce(ctx, n_samples: int, Xu, wu, backend: str) -> None:
    """Print the start line: the data, the work, the path, the neighbour search."""
    if not ctx.verbose:
        return
    if ctx.method_ == "grid":
        n_candidates = len(ctx.candidates(Xu, wu))
        work = f"{n_candidates} candidates, closed-form leave-one-out (method='grid', cv='loo')"
    elif ctx.method_ == "sgd":
        work = f"at most {ctx.max_iter} epochs, leave-one-out loss by Adam (method='sgd')"
    else:
        work = (f"at most {ctx.max_iter} iterations, leave-one-out loss by L-BFGS-B "
                "(method='lbfgs')")  # fmt: skip
    if ctx.method != ctx.method_:
        work += " chosen by method='auto'"
    distinct = "" if len(Xu) == n_samples else f" ({len(Xu)} distinct)"
    _say(f"{n_samples} samples{distinct}, {Xu.shape[1]} features: {work}; backend {backend}")


def report_scores(ctx, candidates: list, done: int, scores: np.ndarray) -> None:
    """Report the candidates ``done:done + len(scores)`` once scored."""
    if ctx.verbose >= 2:
        for t, score in enumerate(ctx.in_y_units(np.asarray(scores)), start=done):
            _say(
                f"candidate {t + 1}/{len(candidates)}: bandwidth "
                f"{_bandwidths(candidates[t], ctx.verbose)}, score {score:.6g}"
            )
    ctx.progress.update(done + len(scores), len(candidates), "candidates")


def say_extension(end: str, factors: np.ndarray, base: np.ndarray) -> None:
    """Say that the default grid grows past its ``end`` ("smallest" or "largest")."""
    _say(
        f"the best candidate is the {end} of the grid: {len(factors)} more, bandwidth "
        f"{_bandwidths(np.concatenate([factors[:1] * base, factors[-1:] * base]), 1)}"
    )


def report_epoch(ctx, epoch: int, loss: float, bandwidth: np.ndarray) -> None:
    """Report one SGD epoch or L-BFGS-B iteration (its loss, at verbose >= 2)."""
    step = _STEP[ctx.method_]
    if ctx.verbose >= 2:
        shown = _bandwidths(bandwidth, ctx.verbose)
        _say(f"{step} {epoch}: loss {ctx.loss_in_y_units(loss):.6g}, bandwidth {shown}")
    # Early stopping may end the search before max_iter: the time left is a bound.
    ctx.progress.update(epoch, ctx.max_iter, f"{step}s", bound=ctx.tol is not None)


def report_rows(ctx, done: int, total: int) -> None:
    """Report how far one pass over the training rows has gone (long passes only)."""
    ctx.progress.note(f"{done}/{total} training rows of this {_STEP[ctx.method_]} "
                      f"({done / total:.0%})")  # fmt: skip
