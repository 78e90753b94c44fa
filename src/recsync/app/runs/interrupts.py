"""Ctrl-C (SIGINT) and SIGTERM during a distributed run: the first asks the job to stop as
at a data limit (no more batches handed out, those in flight finish, the end state is
checkpointed and `--resume` continues from it); a second one aborts at once."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """What a run was told: the first signal's name (None: not interrupted)."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.stop: Callable[[str], None] | None = None  # the job's stop, once attached

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:
            raise KeyboardInterrupt(name)  # the second signal: abort
        self.received = name
        print(
            f"\n{name}: finishing the batches in flight, then writing a checkpoint "
            "(send it again to abort without one)",
            file=sys.stderr,
            flush=True,
        )
        if self.stop is not None:
            self.stop(name)

    def attach(self, stop: Callable[[str], None]) -> None:
        """The job has started: `stop` stops it (at once, if a signal came before). The
        handlers are installed again: starting Ray replaces the SIGTERM handler."""
        self.stop = stop
        self._install()
        if self.received is not None:
            stop(self.received)

    def _install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                signal.signal(s, self._handle)


@contextmanager
def interrupts() -> Iterator[Interrupts]:
    """Handle SIGINT and SIGTERM as above while the block runs (main thread only)."""
    state = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in SIGNALS}
    state._install()
    try:
        yield state
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
