"""When a replica strategy syncs: in the background (shadow) or at a fixed rate (foreground).

ShadowSync (Zheng et al. 2020, arXiv 2003.03477) names the two timings of each replica
strategy: ``S-<NAME>`` runs the sync in a dedicated *shadow* thread that loops as fast as it
can and never blocks the worker threads; ``FR-<NAME>-<k>`` (the original *fixed rate*
algorithms) makes every worker thread stop and sync in the foreground after every k of its
own iterations. Its experiments also use a rate in time ("1 sync per minute" for FR-BMUF and
FR-MA); that is ``FR-<NAME>-<P>s`` here.

Pure policy: no clocks. Time comes in as ``now`` (seconds, virtual or wall), supplied by the
driver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

TIMING_MODES = ("shadow", "fixed")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Timing:
    """When a replica strategy syncs: in a background shadow thread, or in the foreground
    at a fixed rate.

    A shadow round waits for `shadow_min_gap` new iterations per worker thread, so the sync
    gap per worker thread is at least that (the paper's eq. 2 gap, all threads' iterations
    per sync, at least m times that): re-syncing a replica no worker has changed only burns
    the CPU the workers share with the shadow thread; 0 is the paper's letter.
    """

    mode: Literal["shadow", "fixed"] = field(
        default="shadow",
        metadata={
            "doc": "shadow: a background thread syncs in a loop, never blocking the workers; "
            "fixed: the workers stop and sync in the foreground at a fixed rate."
        },
    )
    every_iterations: int | None = field(
        default=None,
        metadata={
            "doc": "fixed mode: each worker thread syncs after every this many of its own "
            "iterations (or set every_seconds).",
            "unset": "none: shadow mode, or fixed mode by every_seconds",
            "values": "> 0",
        },
    )
    every_seconds: float | None = field(
        default=None,
        metadata={
            "doc": "fixed mode: the first worker thread to finish an iteration once this many "
            "seconds have passed syncs (or set every_iterations).",
            "unset": "none: shadow mode, or fixed mode by every_iterations",
            "values": "> 0",
        },
    )
    shadow_min_gap: float = field(
        default=1.0,
        metadata={
            "doc": "shadow mode: a round waits until the trainer's worker threads made this "
            "many new iterations each since the last one started (0: back to back).",
            "values": ">= 0",
        },
    )

    def __post_init__(self) -> None:
        if self.mode not in TIMING_MODES:
            raise ValueError(f"mode must be one of {list(TIMING_MODES)}, got {self.mode!r}")
        if (
            not _is_real(self.shadow_min_gap)
            or not math.isfinite(self.shadow_min_gap)
            or self.shadow_min_gap < 0
        ):
            raise ValueError(f"shadow_min_gap must be a number >= 0, got {self.shadow_min_gap!r}")
        if self.mode == "shadow":
            for key in ("every_iterations", "every_seconds"):
                if getattr(self, key) is not None:
                    raise ValueError(
                        f"{key} must be None for mode='shadow' (the shadow thread syncs as "
                        f"fast as it can), got {getattr(self, key)!r}"
                    )
            return
        if (self.every_iterations is None) == (self.every_seconds is None):
            raise ValueError(
                "mode='fixed' takes exactly one of every_iterations or every_seconds, got "
                f"every_iterations={self.every_iterations!r}, "
                f"every_seconds={self.every_seconds!r}"
            )
        if self.every_iterations is not None and (
            not _is_int(self.every_iterations) or self.every_iterations <= 0
        ):
            raise ValueError(f"every_iterations must be an int > 0, got {self.every_iterations!r}")
        if self.every_seconds is not None and (
            not _is_real(self.every_seconds)
            or not math.isfinite(self.every_seconds)
            or self.every_seconds <= 0
        ):
            raise ValueError(
                f"every_seconds must be a finite number > 0, got {self.every_seconds!r}"
            )

    @property
    def is_shadow(self) -> bool:
        return self.mode == "shadow"

    def label(self, name: str) -> str:
        """The paper's name of strategy ``name`` under this timing: ``S-EASGD``,
        ``FR-EASGD-5`` (every 5 iterations of each worker thread), ``FR-MA-60s``."""
        if self.mode == "shadow":
            return f"S-{name}"
        if self.every_iterations is not None:
            return f"FR-{name}-{self.every_iterations}"
        return f"FR-{name}-{self.every_seconds:g}s"


class FixedTrigger:
    """Decides when a fixed-rate sync is due. One per worker thread (iterations) or per
    trainer (seconds).

    ``every_iterations=k``: True after iterations k, 2k, 3k, ... of the calling worker thread
    (``now`` is ignored). ``every_seconds=P``: the sync times lie on the grid ``start + j*P``;
    the first call with ``now >= start + j*P`` returns True and the next due time becomes the
    first grid point after ``now`` (an iteration that spans several periods causes one sync,
    not a backlog, and the rate stays 1/P without drift). A per-trainer trigger shared by
    worker threads must be called under the node's lock: this class holds no lock itself.
    """

    def __init__(self, timing: Timing, start: float = 0.0) -> None:
        if timing.mode != "fixed":
            raise ValueError(f"FixedTrigger needs timing.mode='fixed', got {timing.mode!r}")
        if not _is_real(start) or not math.isfinite(start):
            raise ValueError(f"start must be a finite number of seconds, got {start!r}")
        self.timing = timing
        self.start = float(start)
        self.iterations = 0  # after_iteration calls seen
        self.syncs = 0  # of which returned True
        self._slot = 1  # seconds mode: next due time is start + _slot * every_seconds

    @property
    def next_due(self) -> float | None:
        """Seconds mode: when the next sync is due; None in iterations mode."""
        if self.timing.every_seconds is None:
            return None
        return self.start + self._slot * self.timing.every_seconds

    def after_iteration(self, now: float) -> bool:
        """Called by a worker thread after each of its iterations; True = sync now (in the
        foreground, before the thread's next iteration)."""
        self.iterations += 1
        every = self.timing.every_iterations
        if every is not None:
            due = self.iterations % every == 0
        else:
            period = self.timing.every_seconds
            assert period is not None
            due = now >= self.start + self._slot * period
            if due:
                self._slot = max(self._slot + 1, math.floor((now - self.start) / period) + 1)
                while self.start + self._slot * period <= now:  # floor() may round down
                    self._slot += 1
        if due:
            self.syncs += 1
        return due


def average_sync_gap(iterations: int, syncs: int) -> float | None:
    """ShadowSync's *average sync gap* (eq. 2): iterations trained per second divided by syncs
    per second, both over the same window and the same trainers, which is iterations / syncs.
    None when there was no sync. FR-<NAME>-k has gap k by construction."""
    for key, value in (("iterations", iterations), ("syncs", syncs)):
        if not _is_int(value) or value < 0:
            raise ValueError(f"{key} must be an int >= 0, got {value!r}")
    if syncs == 0:
        return None
    return iterations / syncs
