"""An advice's points measured through the cache and within the budget, a phase at a time:
the points a phase needs go to a pool together (in this process one after another, or
as Ray tasks on a cluster: runtime/pools.py, runtime/ray/tasks.py), each kept in the cache
as it ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from recsync.app.advise.cache import PointCache, point_key
from recsync.runtime.pools import Call, CallPool

Progress = Callable[[int, int, str], None]  # points done, points planned, what is next
Measure = Callable[[], dict[str, Any]]


class InProcess:
    """One point after another, in this process."""

    def run(
        self, calls: Sequence[Call], may_start: Callable[[], bool]
    ) -> Iterator[tuple[Any, Any]]:
        for key, call in calls:
            if not may_start():
                return
            try:
                yield key, call()
            except Exception as error:  # the caller re-raises what is no refusal
                yield key, error


class Points:
    """Measures points through the cache, within the budget, counting them."""

    def __init__(
        self,
        cache: PointCache,
        budget_s: float | None,
        on_progress: Progress | None,
        runner: CallPool | None = None,
    ):
        self.cache, self.budget_s, self.on_progress = cache, budget_s, on_progress
        self.runner: CallPool = runner or InProcess()
        self.start = time.monotonic()
        self.done = self.planned = self.cached = self.measured = 0
        self.not_measured: list[str] = []

    def plan(self, count: int) -> None:
        self.planned += count
        self._report("")

    def _report(self, what: str) -> None:
        if self.on_progress is not None:
            self.on_progress(self.done, self.planned, what)

    def _may_start(self) -> bool:
        return self.budget_s is None or time.monotonic() - self.start <= self.budget_s

    def get_many(self, wanted: Sequence[tuple[str, dict[str, Any], Measure]]) -> list[Any]:
        """Each point's outcome, in order: its point (from the cache, or measured now), the
        exception its measure raised, or None (not measured: the budget was spent)."""
        outcomes: list[Any] = [None] * len(wanted)
        calls: list[Call] = []
        keys: dict[int, str] = {}
        for index, (label, parts, measure) in enumerate(wanted):
            key = point_key(parts)
            point = self.cache.get(key)
            if point is None:
                keys[index] = key
                calls.append((index, measure))
                continue
            self.cached += 1
            self.done += 1
            outcomes[index] = point
            self._report(label)
        if calls:
            self._report(wanted[calls[0][0]][0])
        ended = set()
        for index, outcome in self.runner.run(calls, self._may_start):
            ended.add(index)
            if not isinstance(outcome, BaseException):
                self.cache.put(keys[index], outcome)
                self.measured += 1
            outcomes[index] = outcome
            self.done += 1
            self._report(wanted[index][0])
        for index, _ in calls:
            if index not in ended:  # the budget was spent before it started
                self.not_measured.append(wanted[index][0])
                self.done += 1
        return outcomes
