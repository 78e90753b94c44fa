"""Placement of a job's nodes on the machines of a cluster (coordinator/machines.py)."""

from __future__ import annotations

import pytest

from recsync.coordinator.machines import (
    assign_machines,
    pins_after_loss,
    resolve_pins,
    role_named,
)
from recsync.families.hierarchical.server import GROUP_SERVER
from recsync.families.synced_replicas.sync_server import SYNC_SERVER
from recsync.protocol.address import READER, Address, Role

NODES = [
    READER,
    *(Address(Role.EMBEDDING_SERVER, i) for i in range(3)),
    Address(SYNC_SERVER, 0),
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
    assert placed[READER] == 0 and placed[Address(SYNC_SERVER, 0)] == 0
    assert [placed[Address(Role.TRAINER, i)] for i in range(4)] == [1, 2, 1, 2]


def test_no_machine_is_an_error():
    with pytest.raises(ValueError, match="at least one machine"):
        assign_machines(NODES, 0)


def test_a_pinned_role_goes_round_robin_over_its_machines_and_the_rest_keep_the_rule():
    pins = {Role.EMBEDDING_SERVER: [2, 1], SYNC_SERVER: [1]}
    placed = assign_machines(NODES, 3, pins)
    assert [placed[Address(Role.EMBEDDING_SERVER, i)] for i in range(3)] == [2, 1, 2]
    assert placed[Address(SYNC_SERVER, 0)] == 1
    assert placed[READER] == 0  # unpinned: the rule, as without pins
    assert [placed[Address(Role.TRAINER, i)] for i in range(4)] == [1, 2, 1, 2]
    assert list(placed) == NODES  # in the nodes' order


def test_pins_name_machines_by_address_or_index_and_a_missing_one_is_named():
    machines = ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
    pins = resolve_pins([("embedding_server", ("10.0.0.12", "1")), ("trainer", ("2",))], machines)
    assert pins == {Role.EMBEDDING_SERVER: [2, 1], Role.TRAINER: [2]}
    with pytest.raises(
        ValueError,
        match=r"machine '10\.0\.0\.99' is not in the cluster.*"
        r"0: 10\.0\.0\.10, 1: 10\.0\.0\.11, 2: 10\.0\.0\.12",
    ):
        resolve_pins([("trainer", ("10.0.0.99",))], machines)
    with pytest.raises(ValueError, match="machine '3' is not in the cluster"):
        resolve_pins([("trainer", ("3",))], machines)
    with pytest.raises(ValueError, match="no role 'trainers'; the roles: reader, "):
        resolve_pins([("trainers", ("1",))], machines)
    assert role_named("group-server") is GROUP_SERVER


def test_the_config_takes_pins_and_refuses_an_unknown_role():
    from recsync.app.config.load import load_config
    from recsync.errors import ConfigError

    cfg = load_config(overrides={"cluster.placement.trainer": ["10.0.0.12", 2]})
    assert cfg.cluster.to_spec().placement == (("trainer", ("10.0.0.12", "2")),)
    with pytest.raises(ConfigError, match="no role 'trainerz'"):
        load_config(overrides={"cluster.placement.trainerz": [1]})


def test_after_a_loss_pins_follow_their_machines_by_address_and_a_role_left_with_none_is_freed():
    first = ["10.0.0.10", "10.0.0.11", "10.0.0.12", "10.0.0.13"]
    placement = [("embedding_server", ["1"]), ("trainer", ["10.0.0.12", "3"])]
    left = ["10.0.0.10", "10.0.0.12", "10.0.0.13"]  # host .11 lost: indices shift
    pins, unpinned = pins_after_loss(placement, first, left)
    assert pins == {Role.TRAINER: [1, 2]} and unpinned == ["embedding_server"]
    pins, unpinned = pins_after_loss(placement, first, ["10.0.0.10", "10.0.0.11", "10.0.0.13"])
    assert pins == {Role.EMBEDDING_SERVER: [1], Role.TRAINER: [2]} and unpinned == []
