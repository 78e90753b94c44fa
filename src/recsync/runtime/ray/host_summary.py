"""The part of a Ray job's summary on machines: how many, their addresses, each node's
machine, the driver's, and what each machine's nodes sent and received."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recsync.coordinator.host_traffic import host_traffic
from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.address import Address
from recsync.runtime.ray.hosts import JobActors


def machines_summary(
    actors: JobActors,
    measures: dict[Address, NodeMeasures],
    collectives: Sequence[Sequence[Address]],
) -> dict[str, Any]:
    """Where the job's nodes (`measures`: each one's) ran, and each machine's traffic."""
    host_of = {a: actors.machine_ips[actors.machine_of[a]] for a in measures}
    driver = actors.driver_host()
    return {
        "machines": len(actors.machines),
        "machine_addresses": list(actors.machine_ips),
        "placement": actors.placement(),
        "node_hosts": actors.node_hosts(),
        "driver_host": driver,
        "hosts": host_traffic(measures, host_of, collectives, driver),
    }
