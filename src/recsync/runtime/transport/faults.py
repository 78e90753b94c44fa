"""Frame faults: a lossy or slow link, emulated on the real sockets of one host's processes
(off unless asked: tests and the box's hosts where the kernel has no netem).

A process whose environment names a file in FAULTS_ENV holds back every frame it writes as
that file says (JSON, `FrameFaults`): `delay_ms` always, and, with probability `loss` a
time, TCP's retransmission timeout (RTO_S, doubled at each further loss of the same
frame), as a lost segment holds its connection's stream back until it is sent again. A
frame is never dropped outright: TCP does not drop, it retransmits, and so the peer sees
late frames, in order, as it would behind a lossy link. The file is read again when it
changes (looked at no more often than every CHECK_EVERY_S): a box degrades a host's link
for a while by writing it and heals it by removing it. A Ray node started with the
variable hands it to every worker process it starts; only recsync's own connections are
affected, not Ray's."""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FAULTS_ENV = "RECSYNC_FRAME_FAULTS"
RTO_S = 0.2  # Linux's least retransmission timeout
CHECK_EVERY_S = 0.5


@dataclass(frozen=True)
class FrameFaults:
    """`delay_ms` added to every frame written; `loss` the chance that a frame (again) is
    lost and sent again a retransmission timeout later; `seed` the draws' (with the
    process id: each process draws its own)."""

    delay_ms: float = 0.0
    loss: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delay_ms) and self.delay_ms >= 0):
            raise ValueError(f"frame faults: delay_ms must be >= 0, got {self.delay_ms!r}")
        if not 0.0 <= self.loss < 1.0:
            raise ValueError(f"frame faults: loss must be in [0, 1), got {self.loss!r}")

    def hold_s(self, rng: random.Random) -> float:
        """Seconds one frame is held back."""
        held, rto = self.delay_ms / 1000.0, RTO_S
        while self.loss and rng.random() < self.loss:
            held += rto
            rto *= 2
        return held

    def write(self, path: Path) -> None:
        """Save to `path` (replaced at once: a process never reads half of it)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(asdict(self)) + "\n")
        partial.replace(path)

    @staticmethod
    def read(path: Path) -> FrameFaults | None:
        """The faults `path` holds; None if there is no such file. ValueError naming the
        file for one that is not faults."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            fields = json.loads(text)
            return FrameFaults(**fields)
        except (TypeError, ValueError) as error:
            named = f"{path} (named by ${FAULTS_ENV})"
            raise ValueError(f"{named}: not frame faults: {error}") from None


class WatchedFaults:
    """A process's frame faults, read from a file whenever it changed."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._checked = -math.inf
        self._stamp: tuple[int, int] | None = None
        self._faults: FrameFaults | None = None
        self._rng = random.Random()
        self.frames_held = 0  # frames held back so far, and for how long in all
        self.seconds_held = 0.0

    def hold_s(self) -> float:
        """Seconds the next frame is held back (0: none)."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= CHECK_EVERY_S:
                self._checked = now
                self._reload()
            if self._faults is None:
                return 0.0
            held = self._faults.hold_s(self._rng)
            if held:
                self.frames_held += 1
                self.seconds_held += held
            return held

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._faults = None, None
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            self._stamp = stamp
            self._faults = FrameFaults.read(self.path)
            if self._faults is not None:
                self._rng = random.Random(f"{self._faults.seed}-{os.getpid()}")


_named = os.environ.get(FAULTS_ENV)
WATCHED: WatchedFaults | None = WatchedFaults(Path(_named)) if _named else None


def hold_frame() -> None:
    """Hold the frame about to be written back as this process's faults say (none: at once)."""
    if WATCHED is not None:
        held = WATCHED.hold_s()
        if held:
            time.sleep(held)
