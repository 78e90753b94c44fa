"""Measures what a Ray call costs on this machine (for the simulator's calibration)."""

from __future__ import annotations

import statistics
import time

import numpy as np
import ray


@ray.remote(num_cpus=0)
class EchoActor:
    """Returns what it is sent: a round trip with a payload each way."""

    def echo(self, payload: np.ndarray | None) -> np.ndarray | None:
        return payload


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
