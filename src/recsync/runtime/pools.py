"""Where a sweep's independent calls run: the caller's own processes, or a pool that a
command sets for a block (its `--address`: runtime/ray/tasks.TaskPool, Ray tasks on a
cluster). A sweep asks `current_pool()`; this module imports no Ray."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

Call = tuple[Any, Callable[[], Any]]  # (the caller's key, a picklable call of no arguments)


class CallPool(Protocol):
    """Runs calls (elsewhere, several at a time, or one after another here)."""

    def run(
        self, calls: Sequence[Call], may_start: Callable[[], bool]
    ) -> Iterator[tuple[Any, Any]]:
        """(key, outcome) of every call started, as each ends (a call's own exception is
        its outcome); a call starts only while `may_start` says so."""
        ...


_current: ContextVar[CallPool | None] = ContextVar("call_pool", default=None)


@contextmanager
def calls_on(pool: CallPool) -> Iterator[None]:
    """Within the block, sweeps run their calls on `pool`."""
    token = _current.set(pool)
    try:
        yield
    finally:
        _current.reset(token)


def current_pool() -> CallPool | None:
    """The pool a command set for this block, if any."""
    return _current.get()
