"""Measures what a loop's call to a peer (a channel round trip between two Ray actors'
processes) costs on this machine, for the simulator's calibration."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import ray

from recsync.runtime.transport.channel import ChannelServer, Connection, Endpoint

IN_FLIGHT = 8  # calls at a time, as a worker's lookups to its embedding servers are


@ray.remote(num_cpus=0)
class EchoActor:
    """Answers on its channel with what it is sent (a round trip with a payload each way);
    says how much CPU its process spent."""

    def endpoint(self) -> Endpoint:
        host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self.server = ChannelServer(lambda payload: payload, host)
        return self.server.endpoint

    def cpu_seconds(self) -> float:
        return time.process_time()


def _echo() -> tuple[Any, list[Connection]]:
    actor = EchoActor.remote()  # type: ignore[attr-defined]
    endpoint = ray.get(actor.endpoint.remote())
    return actor, [Connection(endpoint) for _ in range(IN_FLIGHT)]


def _payload(payload_bytes: int) -> np.ndarray | None:
    return np.zeros(payload_bytes // 4, dtype=np.float32) if payload_bytes else None


def _close(actor: Any, connections: list[Connection]) -> None:
    for connection in connections:
        connection.close()
    ray.kill(actor)


def round_trip_seconds(payload_bytes: int, calls: int = 200) -> float:
    """Median seconds of one call carrying `payload_bytes` each way (numpy), alone."""
    actor, connections = _echo()
    payload, connection = _payload(payload_bytes), connections[0]
    for _ in range(10):
        connection.request(payload).result(60.0)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        connection.request(payload).result(60.0)
        times.append(time.perf_counter() - start)
    _close(actor, connections)
    return statistics.median(times)


def idle_cores(actor: Any, seconds: float) -> tuple[float, float]:
    """Cores this process and `actor`'s (its `cpu_seconds` method: its whole process) take
    over `seconds` in which no call is made."""
    own, served = time.process_time(), ray.get(actor.cpu_seconds.remote())
    clock = time.perf_counter()
    time.sleep(seconds)
    served = ray.get(actor.cpu_seconds.remote()) - served
    wall = time.perf_counter() - clock
    return (time.process_time() - own) / wall, float(served) / wall


def idle_cpus(seconds: float = 2.0) -> float:
    """Cores one node process takes while it serves nothing (Ray's threads waking, its
    channel's connections open), measured over `seconds` once it settled."""
    actor, connections = _echo()
    time.sleep(0.5)
    _, cores = idle_cores(actor, seconds)
    _close(actor, connections)
    return cores


def per_call(
    callee: Any, round_of_calls: Callable[[], int], calls: int, repeats: int
) -> tuple[float, float, float]:
    """Wall seconds, the caller's CPU seconds and the callee's (its `cpu_seconds` actor
    method: its whole process) per call, medians of `repeats` runs of at least `calls`
    calls; `round_of_calls()` makes some calls and says how many."""
    for _ in range(3):
        round_of_calls()
    wall, caller, callee_cpu = [], [], []
    for _ in range(repeats):
        started, served = time.process_time(), ray.get(callee.cpu_seconds.remote())
        clock, done = time.perf_counter(), 0
        while done < calls:
            done += round_of_calls()
        wall.append((time.perf_counter() - clock) / done)
        caller.append((time.process_time() - started) / done)
        callee_cpu.append((ray.get(callee.cpu_seconds.remote()) - served) / done)
    median = statistics.median
    return median(wall), median(caller), median(callee_cpu)


def call_cpu_seconds(payload_bytes: int, calls: int = 400) -> tuple[float, float]:
    """CPU seconds one call (`payload_bytes` each way) costs the caller's process and the
    callee's process (Ray's threads included), medians of 5 runs of `calls` calls,
    IN_FLIGHT at a time on connections of their own as a worker's lookups are."""
    actor, connections = _echo()
    payload = _payload(payload_bytes)

    def round_of_calls() -> int:
        tickets = [c.request(payload) for c in connections]
        for ticket in tickets:
            ticket.result(60.0)
        return len(tickets)

    _, caller, callee = per_call(actor, round_of_calls, calls, repeats=5)
    _close(actor, connections)
    return caller, callee
