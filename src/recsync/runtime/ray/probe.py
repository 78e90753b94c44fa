"""Measures what a Ray call costs on this machine (for the simulator's calibration)."""

from __future__ import annotations

import statistics
import time

import numpy as np
import ray


@ray.remote(num_cpus=0)
class EchoActor:
    """Returns what it is sent: a round trip with a payload each way; and says how much CPU
    its process spent."""

    def echo(self, payload: np.ndarray | None) -> np.ndarray | None:
        return payload

    def cpu_seconds(self) -> float:
        return time.process_time()


def round_trip_seconds(payload_bytes: int, calls: int = 200) -> float:
    """Median seconds of a Ray round trip carrying `payload_bytes` each way (numpy)."""
    actor = EchoActor.remote()  # type: ignore[attr-defined]
    payload = np.zeros(payload_bytes // 4, dtype=np.float32) if payload_bytes else None
    ray.get([actor.echo.remote(payload) for _ in range(10)])
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        ray.get(actor.echo.remote(payload))
        times.append(time.perf_counter() - start)
    ray.kill(actor)
    return statistics.median(times)


def call_cpu_seconds(payload_bytes: int, calls: int = 400) -> tuple[float, float]:
    """CPU seconds one Ray call (`payload_bytes` each way) costs the caller's process and the
    callee's process (Ray's threads included), medians of 5 runs of `calls` calls, 8 in
    flight at a time as a worker's lookups are."""
    actor = EchoActor.remote()  # type: ignore[attr-defined]
    payload = np.zeros(payload_bytes // 4, dtype=np.float32) if payload_bytes else None
    ray.get([actor.echo.remote(payload) for _ in range(20)])
    caller, callee = [], []
    for _ in range(5):
        started, served = time.process_time(), ray.get(actor.cpu_seconds.remote())
        for _ in range(calls // 8):
            ray.get([actor.echo.remote(payload) for _ in range(8)])
        caller.append((time.process_time() - started) / calls)
        callee.append((ray.get(actor.cpu_seconds.remote()) - served) / calls)
    ray.kill(actor)
    return statistics.median(caller), statistics.median(callee)
