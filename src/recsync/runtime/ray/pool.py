"""Node processes kept warm between the jobs of one driver: a node actor whose job ended
cleanly (its loops done, its channel, collective group and helper processes closed) waits
here, and the next job of the same Ray session hosts one of its nodes in it instead of
starting a process. A process start costs seconds of CPU (the interpreter, Ray's worker,
torch's import), more than a small job's training; continual training starts a job a day,
and a run that recovers from a loss starts every survivor's node again.

A kept process is taken only by a node of the same machine that asks for no more
concurrent calls than it was made with; one that no longer answers a ping is dropped. A
new Ray session (another cluster, or the same one joined again) starts with none."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import ray

from recsync.runtime.timeouts import PING_TIMEOUT_S

MAX_IDLE = 32  # kept processes in all (each holds an interpreter with torch: ~300 MB)
MIN_CONCURRENCY = 16  # the servers of small jobs ask for 4 to 13 calls at once

Key = tuple[str, int]  # (the Ray node id it runs on, "" on one machine; its max_concurrency)


def concurrency_for(max_calls: int) -> int:
    """The max_concurrency a node actor is made with: its node's `max_calls` rounded up to
    a power of two, at least MIN_CONCURRENCY, so that a later node asking a few calls more
    still fits it (a thread Ray's actor does not use costs nothing)."""
    return max(MIN_CONCURRENCY, 1 << max(max_calls - 1, 1).bit_length())


class IdleActors:
    """The session's idle node actors, by the machine they run on."""

    def __init__(self) -> None:
        self._session: tuple[str, str] | None = None
        self._idle: dict[str, list[tuple[int, Any]]] = defaultdict(list)

    def _sync(self) -> None:
        """Forget the actors of an earlier session (their handles are dead with it)."""
        context = ray.get_runtime_context()
        session = (context.get_session_name(), context.get_job_id())
        if session != self._session:
            self._idle.clear()
            self._session = session

    def _pop(self, machine: str, max_calls: int) -> tuple[int, Any] | None:
        """The kept (concurrency, actor) of `machine` of the least concurrency that allows
        `max_calls`, the last released of those (its caches the warmest; a job after a
        job takes that job's processes back, whatever earlier ones are kept)."""
        kept = self._idle[machine]
        fits = [i for i, (calls, _) in enumerate(kept) if calls >= max_calls]
        return kept.pop(min(fits, key=lambda i: (kept[i][0], -i))) if fits else None

    def take(self, wanted: list[tuple[str, int]]) -> list[tuple[int, Any] | None]:
        """For each (machine, max_calls): a kept (concurrency, actor) that fits and answers
        a ping (within PING_TIMEOUT_S), or None."""
        self._sync()
        taken = [self._pop(machine, calls) for machine, calls in wanted]
        pinged = [kept[1] for kept in taken if kept is not None]
        refs = [actor.ping.remote() for actor in pinged]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PING_TIMEOUT_S)
        answers = zip(pinged, refs, strict=True)
        dead = {id(actor) for actor, ref in answers if reply_of(ref, ready) is None}
        for actor in pinged:
            if id(actor) in dead:
                ray.kill(actor, no_restart=True)
        return [None if kept is None or id(kept[1]) in dead else kept for kept in taken]

    def give(self, key: Key, actor: Any) -> bool:
        """Keep `actor` (released; `key`: its machine and concurrency) for a later job;
        False if the pool is full."""
        self._sync()
        if len(self) >= MAX_IDLE:
            return False
        machine, concurrency = key
        self._idle[machine].append((concurrency, actor))
        return True

    def __len__(self) -> int:
        return sum(len(actors) for actors in self._idle.values())


def reply_of(ref: Any, ready: list[Any]) -> Any | None:
    """The reply of a call among `ready` (those `ray.wait` returned), or None if it did not
    come in time or its actor died."""
    if ref not in ready:
        return None
    try:
        return ray.get(ref)
    except ray.exceptions.RayError:
        return None


IDLE = IdleActors()
