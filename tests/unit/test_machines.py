"""Placement of a job's nodes on the machines of a cluster (coordinator/machines.py)."""

from __future__ import annotations

import pytest

from recsync.coordinator.machines import assign_machines
from recsync.protocol.address import READER, Address, Role

NODES = [
    READER,
    *(Address(Role.EMBEDDING_SERVER, i) for i in range(3)),
    Address(Role.SYNC_SERVER, 0),
    *(Address(Role.TRAINER, i) for i in range(4)),
]


def test_one_machine_takes_every_node():
    assert set(assign_machines(NODES, 1).values()) == {0}


@pytest.mark.parametrize("machines", [2, 3, 4, 7])
def test_servers_and_trainers_never_share_a_machine_and_spread_evenly(machines):
    placed = assign_machines(NODES, machines)
    assert set(placed) == set(NODES)
    servers = [m for n, m in placed.items() if n.role is not Role.TRAINER]
    trainers = [m for n, m in placed.items() if n.role is Role.TRAINER]
    assert not set(servers) & set(trainers)
    assert set(servers) == set(range(max(1, machines // 2)))
    counts = [trainers.count(m) for m in set(trainers)]
    assert max(counts) - min(counts) <= 1


def test_three_machines_put_the_server_side_on_the_first():
    placed = assign_machines(NODES, 3)
    assert placed[READER] == 0 and placed[Address(Role.SYNC_SERVER, 0)] == 0
    assert [placed[Address(Role.TRAINER, i)] for i in range(4)] == [1, 2, 1, 2]


def test_no_machine_is_an_error():
    with pytest.raises(ValueError, match="at least one machine"):
        assign_machines(NODES, 0)
