"""Independent calls (a sweep's points: `recsync advise`, `recsync reproduce`) run as Ray
tasks, as many at once as the cluster has cores, each on one thread of torch. A call's own
exception comes back as its outcome (the caller decides which are a point refused and which
are a failure); a call is not started once `may_start` says no (the caller counts what
never came back)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray
import torch

from recsync.runtime.pools import Call
from recsync.runtime.ray.cluster import connect


@ray.remote(num_cpus=1)
def _outcome(call: Callable[[], Any]) -> Any:
    torch.set_num_threads(1)
    try:
        return call()
    except Exception as error:  # the call's own: handed back, not a task failure
        return error


class TaskPool:
    """Runs calls on the Ray cluster at `address` ("local": one started here with this
    machine's cores, or `num_cpus`), at most its cores' worth at once."""

    def __init__(self, address: str, num_cpus: int | None = None, python_path: Sequence[str] = ()):
        """`python_path`: folders the tasks import from besides the installed packages (a
        checkout's experiments), ahead of the workers' own PYTHONPATH."""
        local = address == "local"
        self.started = connect(None if local else address, num_cpus, python_path)
        cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
        self.slots = max(1, int(cpus))

    def run(
        self, calls: Sequence[Call], may_start: Callable[[], bool]
    ) -> Iterator[tuple[Any, Any]]:
        """(key, outcome) of every call started, as each ends; a call starts only while
        `may_start` says so."""
        waiting = list(calls)
        running: dict[Any, Any] = {}  # task ref -> key
        while waiting or running:
            while waiting and len(running) < self.slots:
                if not may_start():
                    waiting.clear()
                    break
                key, call = waiting.pop(0)
                running[_outcome.remote(call)] = key
            if not running:
                continue
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                yield running.pop(ref), ray.get(ref)

    def close(self) -> None:
        if self.started:
            ray.shutdown()
