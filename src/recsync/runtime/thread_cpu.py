"""CPU seconds this process's threads spent, by what they run: a node's worker loops, its
other loops (a shadow sync, a server's timers), its channel's connections (receiving a
request, handling it, sending the reply). What the process spent beyond them went to
Ray's threads and the actor's main thread; a node's helper processes (the reader's batch
producer) are told apart by the driver (coordinator/outcome.py's HELPER_PROCESSES).

Linux and macOS give one thread's CPU clock (`time.pthread_getcpuclockid`); where it is
missing, nothing is counted and `cpu_by_kind` is empty."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

WORKER_LOOPS, OTHER_LOOPS, CHANNEL = "worker_loops", "other_loops", "channel"

_counting = threading.Lock()
_ended: dict[str, float] = defaultdict(float)  # CPU of the threads that ended, by kind
_alive: dict[int, str] = {}  # thread id -> kind, of the threads still running
_CLOCKS = hasattr(time, "pthread_getcpuclockid")


def counted(kind: str, target: Callable[..., Any]) -> Callable[..., None]:
    """`target` as a thread's body whose CPU is counted under `kind`."""

    def body(*args: Any) -> None:
        ident = threading.get_ident()
        with _counting:
            _alive[ident] = kind
        try:
            target(*args)
        finally:
            with _counting:
                del _alive[ident]
                _ended[kind] += time.thread_time()

    return body


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds spent so far by the counted threads of this process, by kind."""
    if not _CLOCKS:
        return {}
    with _counting:
        spent = defaultdict(float, _ended)
        for ident, kind in _alive.items():
            try:
                spent[kind] += time.clock_gettime(time.pthread_getcpuclockid(ident))
            except OSError:  # the thread ended between the two
                continue
    return dict(spent)
