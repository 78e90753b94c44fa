"""Measures what a loop's call to a peer (a channel round trip between two Ray actors'
processes) costs on this machine, for the simulator's calibration."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import ray

from recsync.runtime.ray.channel import ChannelServer, Connection, Endpoint

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


def call_cpu_seconds(payload_bytes: int, calls: int = 400) -> tuple[float, float]:
    """CPU seconds one call (`payload_bytes` each way) costs the caller's process and the
    callee's process (Ray's threads included), medians of 5 runs of `calls` calls,
    IN_FLIGHT at a time on connections of their own as a worker's lookups are."""
    actor, connections = _echo()
    payload = _payload(payload_bytes)

    def round_of_calls() -> None:
        tickets = [c.request(payload) for c in connections]
        for ticket in tickets:
            ticket.result(60.0)

    for _ in range(3):
        round_of_calls()
    caller, callee = [], []
    for _ in range(5):
        started, served = time.process_time(), ray.get(actor.cpu_seconds.remote())
        for _ in range(calls // IN_FLIGHT):
            round_of_calls()
        caller.append((time.process_time() - started) / calls)
        callee.append((ray.get(actor.cpu_seconds.remote()) - served) / calls)
    _close(actor, connections)
    return statistics.median(caller), statistics.median(callee)
