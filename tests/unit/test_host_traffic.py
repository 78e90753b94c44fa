"""What crossed each machine's link (coordinator/host_traffic.py): node bytes by peer
machine, a ring all-reduce's share, and reports to the driver's machine."""

from __future__ import annotations

from recsync.coordinator.host_traffic import host_traffic, ring_bytes
from recsync.coordinator.hosting import ALL_REDUCE
from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.address import READER, Address, Role

T0, T1, T2 = (Address(Role.TRAINER, i) for i in range(3))
HOST = {READER: "a", T0: "b", T1: "b", T2: "c"}


def _measures(bytes_to=None, all_reduce=0, reported=0):
    m = NodeMeasures()
    m.bytes_to.update(bytes_to or {})
    if all_reduce:
        m.bytes_sent[ALL_REDUCE] = all_reduce
    if reported:
        m.control_bytes["report"] = reported
    return m


def test_only_bytes_to_other_machines_cross_a_link():
    measures = {
        READER: _measures({"b": 100, "c": 50, "a": 999}),  # "a": to itself, no link
        T0: _measures({"a": 10, "b": 7}),
        T1: _measures({"a": 20}),
        T2: _measures({"a": 5}),
    }
    hosts = host_traffic(measures, HOST)
    assert hosts["a"] == {"nodes": ["reader"], "sent_bytes": 150, "received_bytes": 35}
    assert hosts["b"] == {
        "nodes": ["trainer-0", "trainer-1"],
        "sent_bytes": 30,
        "received_bytes": 100,
    }
    assert hosts["c"]["sent_bytes"] == 5 and hosts["c"]["received_bytes"] == 50


def test_a_ring_all_reduce_sends_each_rank_s_share_to_the_next_rank():
    assert ring_bytes(900, 3) == 1200 and ring_bytes(900, 1) == 0
    measures = {
        T0: _measures(all_reduce=900),
        T1: _measures(all_reduce=900),
        T2: _measures(all_reduce=900),
    }
    hosts = host_traffic(measures, {T0: "b", T1: "b", T2: "c"}, [[T0, T1, T2]])
    # ring 0 -> 1 (same machine), 1 -> 2 and 2 -> 0 cross
    assert hosts["b"]["collective_sent_bytes"] == 1200 and hosts["b"]["sent_bytes"] == 1200
    assert hosts["c"]["collective_sent_bytes"] == 1200
    assert hosts["b"]["received_bytes"] == hosts["c"]["received_bytes"] == 1200


def test_reports_count_where_they_leave_a_machine_for_the_driver_s():
    measures = {
        READER: _measures(reported=40),
        T0: _measures(reported=300),
        T2: _measures(reported=5),
    }
    hosts = host_traffic(measures, HOST, driver_host="a")
    assert "control_sent_bytes" not in hosts["a"]  # the driver's own machine
    assert hosts["b"]["control_sent_bytes"] == 300 and hosts["c"]["control_sent_bytes"] == 5
    assert hosts["a"]["control_received_bytes"] == 305
