"""Which machine of a multi-machine cluster each node of a job runs on (pure; both drivers).

Machines are numbered as the cluster lists them: the Ray head first, then by address (the
engine), or as a cluster file lists them (the simulator). The rule, as a parameter-server
job is laid out: the server side (the reader, embedding, sync, dense and group servers) and
the trainers on different machines, so that a trainer's compute never competes with the
servers it calls. With M machines (M >= 2), the first max(1, M // 2) take the server side,
the rest the trainers; within each side the nodes of each role go round-robin, continuing
across roles, so that the load spreads. One machine: everything on it.

A role can be pinned (`[cluster.placement]`: role -> machines, each its address or its
index): its nodes go round-robin over those machines, in index order, and the rule places
the others as if there were no pins. Pins are resolved against the machines the job first
started on; after a machine is lost, a restart keeps the pins to the machines left (by
address: indices shift when one goes) and a role whose every pinned machine is gone is
placed by the rule (`pins_after_loss`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from recsync.protocol.address import Address, Role
from recsync.strategy.roles import known_roles, role_key, server_side_roles

Pins = Mapping[Role, Sequence[int]]  # a pinned role -> the machines (indices) it goes to


def assign_machines(
    nodes: Sequence[Address], num_machines: int, pins: Pins | None = None
) -> dict[Address, int]:
    """Machine index (0 .. num_machines - 1) of every node."""
    if num_machines < 1:
        raise ValueError(f"a cluster needs at least one machine, got {num_machines}")
    pins = pins or {}
    for role, machines in pins.items():
        assert machines and all(0 <= m < num_machines for m in machines), (role, machines)
    placed: dict[Address, int] = {}
    for role, machines in pins.items():
        of_role = [n for n in nodes if n.role is role]
        placed |= {n: machines[i % len(machines)] for i, n in enumerate(of_role)}
    free = [n for n in nodes if n not in placed]
    if num_machines == 1:
        return placed | {node: 0 for node in free}
    server_machines = list(range(max(1, num_machines // 2)))
    trainer_machines = list(range(len(server_machines), num_machines))
    server_side = server_side_roles()
    servers = [n for role in server_side for n in free if n.role is role]
    trainers = [n for n in free if n.role not in server_side]
    placed |= {n: server_machines[i % len(server_machines)] for i, n in enumerate(servers)}
    placed |= {n: trainer_machines[i % len(trainer_machines)] for i, n in enumerate(trainers)}
    return {node: placed[node] for node in nodes}


def role_named(name: str) -> Role:
    """The role a `[cluster.placement]` key names: `embedding_server` or `embedding-server`."""
    roles = known_roles()
    for role in roles:
        if name.replace("_", "-") == role.value:
            return role
    known = ", ".join(role_key(role) for role in roles)
    raise ValueError(f"cluster.placement: no role {name!r}; the roles: {known}")


def resolve_pins(
    placement: Sequence[tuple[str, Sequence[str]]], machines: Sequence[str]
) -> dict[Role, list[int]]:
    """The pins of `placement` (role name -> machines, each an address of `machines` or an
    index) as machine indices; a machine the cluster does not have is a ValueError that
    names it and the machines there are."""
    pins: dict[Role, list[int]] = {}
    for name, refs in placement:
        role = role_named(name)
        indices = []
        for ref in refs:
            if ref in machines:
                indices.append(list(machines).index(ref))
            elif ref.isdigit() and int(ref) < len(machines):
                indices.append(int(ref))
            else:
                there = ", ".join(f"{i}: {m}" for i, m in enumerate(machines))
                raise ValueError(
                    f"cluster.placement.{name.replace('-', '_')}: machine {ref!r} is not in "
                    f"the cluster (gone, or never there); its machines: {there}"
                )
        if not indices:
            raise ValueError(f"cluster.placement.{name}: give at least one machine")
        pins[role] = indices
    return pins


def pins_after_loss(
    placement: Sequence[tuple[str, Sequence[str]]],
    first_machines: Sequence[str],
    machines: Sequence[str],
) -> tuple[dict[Role, list[int]], list[str]]:
    """The pins of `placement`, resolved against `first_machines` (the machines the job
    first started on), kept to those still in `machines` and given as their indices
    there; and the roles whose every pinned machine is gone (now placed by the rule)."""
    first = resolve_pins(placement, first_machines)
    pins: dict[Role, list[int]] = {}
    unpinned = []
    for role, indices in first.items():
        left = [machines.index(first_machines[i]) for i in indices if first_machines[i] in machines]
        if left:
            pins[role] = left
        else:
            unpinned.append(role.value.replace("-", "_"))
    return pins, unpinned
