"""What crossed each machine's link in a run (pure; both drivers): from each node's bytes by
the machine they went to (`NodeMeasures.bytes_to`) and where each node ran, every machine's
nodes, the bytes they sent to other machines and the bytes other machines sent them.

The all-reduces of a collective group (MA, BMUF, all-reduce, hierarchical groups) go over
the collective library's own connections, which the nodes' counters do not see: they are
added as a ring all-reduce sends them (gloo's ring: each rank sends 2(n - 1)/n of the vector
to the next rank, in rank order, at every all-reduce), from the bytes each member
all-reduced (`bytes_sent["all_reduce"]`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from recsync.coordinator.hosting import ALL_REDUCE
from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.address import Address


def ring_bytes(vector_bytes: int, size: int) -> int:
    """Bytes one rank of a ring all-reduce among `size` sends, for a vector of that size."""
    return 0 if size <= 1 else round(2 * (size - 1) / size * vector_bytes)


def host_traffic(
    measures: Mapping[Address, NodeMeasures],
    host_of: Mapping[Address, str],
    collectives: Sequence[Sequence[Address]] = (),
    driver_host: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per machine (by its address, in the order first met): its nodes, `sent_bytes` to
    other machines, `received_bytes` from them, and of those the collectives' share; and,
    where the driver's machine is given, `control_sent_bytes` and
    `control_received_bytes`: what its nodes sent the driver's machine outside the data
    path (`NodeMeasures.control_bytes`: reports through Ray), apart."""
    hosts: dict[str, dict[str, Any]] = {}
    for address in measures:
        entry = hosts.setdefault(host_of[address], _empty())
        entry["nodes"].append(address.name)
    for address, measured in measures.items():
        here = host_of[address]
        for peer, nbytes in measured.bytes_to.items():
            if peer != here:
                hosts[here]["sent_bytes"] += nbytes
                hosts.setdefault(peer, _empty())["received_bytes"] += nbytes
    ring: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for group in collectives:
        for rank, address in enumerate(group):
            after = group[(rank + 1) % len(group)]
            here, there = host_of[address], host_of[after]
            if here == there:
                continue
            vector = measures[address].bytes_sent.get(ALL_REDUCE, 0)
            ring[here]["sent"] += ring_bytes(vector, len(group))
            ring[there]["received"] += ring_bytes(vector, len(group))
    if driver_host is not None:
        for address, measured in measures.items():
            here, control = host_of[address], sum(measured.control_bytes.values())
            if here != driver_host and control:
                entry = hosts[here]
                entry["control_sent_bytes"] = entry.get("control_sent_bytes", 0) + control
                driver = hosts.setdefault(driver_host, _empty())
                driver["control_received_bytes"] = driver.get("control_received_bytes", 0) + control
    for host, counts in ring.items():
        entry = hosts[host]
        entry["collective_sent_bytes"] = counts["sent"]
        entry["collective_received_bytes"] = counts["received"]
        entry["sent_bytes"] += counts["sent"]
        entry["received_bytes"] += counts["received"]
    return hosts


def _empty() -> dict[str, Any]:
    return {"nodes": [], "sent_bytes": 0, "received_bytes": 0}
