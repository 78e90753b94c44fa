"""Wakes a node's home process when a loop in one of its worker processes notifies.

A node whose workers run in processes of their own (shared_memory.py) has its other loops
(a shadow sync) in its home process, waiting on a condition of that process for the
workers' progress. A worker process's `Notify` cannot reach that condition, so without a
signal the home would see the workers' progress only at its next poll (loops.POLL_S):
a shadow sync would then wait up to that long for iterations already made, syncing less
often than the same job with threads, and than the simulator. Each worker process writes a
byte to a named pipe beside the node's shared state; a thread of the home reads it and
wakes the node's loops."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable

READ_BYTES = 4096


def wake_path(shared_path: str) -> str:
    """The named pipe of the node whose shared state is at `shared_path`."""
    return f"{shared_path}.wake"


class WakeListener:
    """The home's end: creates the pipe at `path` and calls `wake()` (on a thread of its
    own) each time worker processes rang since the last call."""

    def __init__(self, path: str, wake: Callable[[], None]):
        os.mkfifo(path, 0o600)
        # read and write: the home holds a writer too, so a read never sees the pipe's end
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self._wake = wake
        threading.Thread(target=self._listen, daemon=True, name="recsync-wake").start()

    def _listen(self) -> None:
        while True:
            try:
                select.select([self._fd], [], [])
                os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                continue
            except OSError:  # closed: the node is done
                return
            self._wake()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class Bell:
    """A worker process's end of its node's pipe at `path` (the home created it)."""

    def __init__(self, path: str):
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            message = f"wake pipe {path}: {error} (the node's home is gone?)"
            raise FileNotFoundError(message) from error

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def ring(self) -> None:
        with contextlib.suppress(BlockingIOError):  # full: the home has rings unread already
            os.write(self._fd, b"\0")
