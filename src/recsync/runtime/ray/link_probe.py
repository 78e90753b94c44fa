"""Measures the links between the machines of a Ray cluster, for the simulator's
`cost.machines` (`recsync calibrate --network`): a probe actor on each machine streams
payloads to another's over recsync's own connections (the data path's frames, one flow at a
time), and small calls between them time the latency a machine boundary adds to a call
between two processes of one machine."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from recsync.runtime.ray.cluster import machines_with_addresses
from recsync.runtime.transport.channel import ChannelServer, Connection, Endpoint, Ticket

CHUNK_BYTES = 1 << 20  # a streamed request's payload
IN_FLIGHT = 4  # requests a stream keeps on its way
WARM_S = 0.3  # streamed before timing (TCP's slow start, the first connection)
CALLS = 100  # small round trips timed a pair
SHARING_FLOWS = 4  # replies pulled from one machine at once, for how unevenly they share
SHARING_ROUNDS = 12  # times they are pulled together
REPLY_BYTES = 2 << 20  # each reply (a dense part's pull, a sync's)
ROUND_S = 1.0  # between two rounds' starts, at least...
ROUND_SLACK = 1.5  # ...and this many times a round's replies at the link's rate: no round
# may start while the last one's replies still cross (they would share it with those)


@ray.remote(num_cpus=0)
class LinkProbe:
    """Answers every request with nothing; streams to, and calls, another probe."""

    def endpoint(self) -> Endpoint:
        host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        reply = np.zeros(REPLY_BYTES // 4, dtype=np.float32)
        self.server = ChannelServer(
            lambda payload: reply if isinstance(payload, str) else None, host
        )
        return self.server.endpoint

    def pull_at(self, to: Endpoint, starts: list[float]) -> list[float]:
        """Bytes a second of one reply pulled from `to` at each of the wall-clock times
        `starts` (the pullers of a round start together), on one connection."""
        connection = Connection(to)
        connection.request("reply").result(60.0)  # the connection's start, untimed
        rates = []
        for start in starts:
            time.sleep(max(start - time.time(), 0.0))
            began = time.perf_counter()
            got = connection.request("reply").result(60.0).nbytes
            rates.append(got / (time.perf_counter() - began))
        connection.close()
        return rates

    def stream(self, to: Endpoint, seconds: float) -> tuple[int, float]:
        """(bytes, seconds) of payload streamed to `to` for about `seconds`, after a warm-up,
        timed until the last request was answered."""
        connection = Connection(to)
        chunk = np.zeros(CHUNK_BYTES // 4, dtype=np.float32)
        _stream_for(connection, chunk, WARM_S)
        start = time.perf_counter()
        sent = _stream_for(connection, chunk, seconds)
        elapsed = time.perf_counter() - start
        connection.close()
        return sent, elapsed

    def round_trip(self, to: Endpoint, calls: int = CALLS) -> float:
        """Median seconds of a call with no payload to `to`."""
        connection = Connection(to)
        for _ in range(10):
            connection.request(None).result(30.0)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            connection.request(None).result(30.0)
            times.append(time.perf_counter() - start)
        connection.close()
        return statistics.median(times)


def _stream_for(connection: Connection, chunk: np.ndarray, seconds: float) -> int:
    """Stream `chunk`s, IN_FLIGHT on their way, until `seconds` passed and all answered."""
    deadline = time.perf_counter() + seconds
    tickets: list[Ticket] = []
    sent = 0
    while time.perf_counter() < deadline or tickets:
        while len(tickets) < IN_FLIGHT and time.perf_counter() < deadline:
            tickets.append(connection.request(chunk))
            sent += chunk.nbytes
        tickets.pop(0).result(60.0)
    return sent


@dataclass(frozen=True)
class LinkMeasures:
    """What was measured: each machine's address, every ordered pair's streamed bytes a
    second, the round trip of a small call between two processes of machine 0 and from
    machine 0 to each other machine."""

    addresses: list[str]
    flows: dict[tuple[int, int], float]
    loopback_round_trip_s: float
    round_trips_s: dict[int, float]
    sharing: list[list[float]]  # each round's replies' bytes a second, pulled at once

    def flow_spread(self) -> float:
        """How unevenly messages started together through one link share it: the standard
        deviation of their log rates, each round's about its own mean."""
        logs = []
        for rates in self.sharing:
            round_logs = [math.log(r) for r in rates if r > 0]
            mean = sum(round_logs) / len(round_logs)
            logs += [x - mean for x in round_logs]
        return math.sqrt(sum(x * x for x in logs) / max(len(logs) - len(self.sharing), 1))

    def link_bytes_s(self) -> list[float]:
        """Each machine's link rate: the fastest flow it took part in, each flow limited by
        the slower of its two ends' links (so a machine's own rate shows against a faster
        one; of two machines alone, the slower rate is both's)."""
        count = len(self.addresses)
        return [
            max(
                min(self.flows[(m, other)], self.flows[(other, m)])
                for other in range(count)
                if other != m
            )
            for m in range(count)
        ]

    def latency_s(self) -> float:
        """What a machine boundary adds to a message one way: the median over machines of
        half the round trip beyond one within a machine (0 where it adds nothing)."""
        extra = [
            max(rtt - self.loopback_round_trip_s, 0.0) / 2 for rtt in self.round_trips_s.values()
        ]
        return statistics.median(extra) if extra else 0.0


def measure_links(seconds: float = 1.0) -> LinkMeasures:
    """Measure the connected Ray cluster's links (at least two machines): every ordered
    pair of machines streams for `seconds`, one pair at a time."""
    machines = machines_with_addresses()
    if len(machines) < 2:
        raise ValueError(
            f"the cluster has {len(machines)} machine: measuring links needs two or more "
            "(give --address of a multi-machine cluster)"
        )
    probes = [_probe_on(node_id) for node_id, _ in machines]
    local = _probe_on(machines[0][0])
    pullers: list[Any] = []
    try:
        endpoints: list[Endpoint] = ray.get([p.endpoint.remote() for p in probes])
        ray.get(local.endpoint.remote())
        flows = {}
        for src in range(len(probes)):
            for dst in range(len(probes)):
                if src != dst:
                    sent, elapsed = ray.get(probes[src].stream.remote(endpoints[dst], seconds))
                    flows[(src, dst)] = sent / elapsed
        loopback = ray.get(local.round_trip.remote(endpoints[0]))
        round_trips = {
            m: ray.get(probes[0].round_trip.remote(endpoints[m])) for m in range(1, len(probes))
        }
        source, others = _sharing_machines(flows, len(machines))
        pullers += [_probe_on(machines[others[f % len(others)]][0]) for f in range(SHARING_FLOWS)]
        ray.get([p.endpoint.remote() for p in pullers])
        first = time.time() + 2.0
        every_s = round_spacing_s(min(flows[(source, o)] for o in others))
        starts = [first + r * every_s for r in range(SHARING_ROUNDS)]
        by_puller = ray.get([p.pull_at.remote(endpoints[source], starts) for p in pullers])
        sharing = [list(rates) for rates in zip(*by_puller, strict=True)]
    finally:
        for probe in [*probes, local, *pullers]:
            ray.kill(probe, no_restart=True)
    addresses = [address for _, address in machines]
    return LinkMeasures(addresses, flows, loopback, round_trips, sharing)


def round_spacing_s(link_bytes_s: float) -> float:
    """Seconds between two sharing rounds' starts through a link of `link_bytes_s`."""
    return max(ROUND_S, ROUND_SLACK * SHARING_FLOWS * REPLY_BYTES / link_bytes_s)


def _sharing_machines(flows: dict[tuple[int, int], float], count: int) -> tuple[int, list[int]]:
    """Where the spread is measured: the machine of the slowest link as the source (the
    pullers then share its link, none held back by its own), the others fastest first."""
    sent = [max(flows[(m, o)] for o in range(count) if o != m) for m in range(count)]
    source = min(range(count), key=lambda m: (sent[m], m))
    others = sorted((m for m in range(count) if m != source), key=lambda m: (-sent[m], m))
    return source, others


def _probe_on(node_id: str) -> Any:
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return LinkProbe.options(scheduling_strategy=strategy).remote()  # type: ignore[attr-defined]
