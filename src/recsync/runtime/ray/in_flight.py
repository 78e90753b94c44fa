"""The calls a node actor is answering, so that releasing its node (for a later job's to be
hosted in the process, pool.py) never pulls the node from under one: `release` waits until
none is in flight, and a call that comes after is refused with a NodeFailure naming the
node as lost (an earlier incarnation's caller: the job's recovery or shutdown is under way)
instead of failing inside the cleared node."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from recsync.runtime.ray.errors import NodeFailure

RELEASE_WAIT_S = 2.0  # longer, and the process is killed rather than pooled


class InFlight:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._count = 0
        self._released_name: str | None = None

    @contextmanager
    def call(self) -> Iterator[None]:
        with self._cond:
            if self._released_name is not None:
                name = self._released_name
                raise NodeFailure(f"{name} was released (its job's nodes were shut down)", name)
            self._count += 1
        try:
            yield
        finally:
            with self._cond:
                self._count -= 1
                self._cond.notify_all()

    def close(self, name: str, timeout_s: float = RELEASE_WAIT_S) -> bool:
        """No call in flight (waiting up to `timeout_s`): later ones are refused; False if
        one still was."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._count == 0, timeout_s):
                return False
            self._released_name = name
            return True

    def reopen(self) -> None:
        with self._cond:
            self._released_name = None
