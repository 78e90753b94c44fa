"""Which machine of a multi-machine cluster each node of a job runs on (pure).

As a parameter-server job is laid out on a cluster: the server side (the reader, embedding,
sync and dense servers) and the trainers on different machines, so that a trainer's
compute never competes with the servers it calls. With M machines (M >= 2), the first
max(1, M // 2) take the server side, the rest the trainers; within each side the nodes of
each role go round-robin, continuing across roles, so that the load spreads. One machine:
everything on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from recsync.protocol.address import Address, Role

SERVER_SIDE = (
    Role.READER,
    Role.EMBEDDING_SERVER,
    Role.SYNC_SERVER,
    Role.DENSE_SERVER,
    Role.GROUP_SERVER,
)


def assign_machines(nodes: Sequence[Address], num_machines: int) -> dict[Address, int]:
    """Machine index (0 .. num_machines - 1) of every node."""
    if num_machines < 1:
        raise ValueError(f"a cluster needs at least one machine, got {num_machines}")
    if num_machines == 1:
        return {node: 0 for node in nodes}
    server_machines = list(range(max(1, num_machines // 2)))
    trainer_machines = list(range(len(server_machines), num_machines))
    servers = [n for role in SERVER_SIDE for n in nodes if n.role is role]
    trainers = [n for n in nodes if n.role not in SERVER_SIDE]
    placed = {n: server_machines[i % len(server_machines)] for i, n in enumerate(servers)}
    placed |= {n: trainer_machines[i % len(trainer_machines)] for i, n in enumerate(trainers)}
    return placed
