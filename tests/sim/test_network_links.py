"""The simulator's network (runtime/sim/network.py): links full duplex and cut through,
machines' nodes sharing their machine's link, loopback within a machine, a ring all-reduce
queued on the links it crosses; and a job's nodes placed on the cost model's machines."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC, ENGINE_TRAIN

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.families import strategy_config
from recsync.runtime.sim.clock import Clock
from recsync.runtime.sim.cost import CostModel, Machines
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.links import Link
from recsync.runtime.sim.network import Collective, Machine, Network

MB = 1_000_000


def _network(cost: CostModel) -> tuple[Clock, Network]:
    clock = Clock()
    return clock, Network(clock, cost, lambda: 0.0)


def _arrivals(clock: Clock, network: Network, sends: list[tuple[Machine, Machine, int]]):
    done: list[tuple[int, float]] = []
    for i, (src, dst, nbytes) in enumerate(sends):
        network.send(src, dst, nbytes, lambda i: done.append((i, clock.now)), i)
    clock.run()
    return dict(done)


def test_an_idle_path_costs_latency_plus_bytes_over_the_slower_link():
    clock, network = _network(CostModel(latency_s=0.001))
    fast, slow = Link("a", 100 * MB), Link("b", 10 * MB)
    a, b = Machine("a", link=fast), Machine("b", link=slow)
    assert _arrivals(clock, network, [(a, b, MB)]) == {0: pytest.approx(0.1 + 0.001)}
    clock, network = _network(CostModel(latency_s=0.001))
    a, b = Machine("a", link=Link("a", 10 * MB)), Machine("b", link=Link("b", 100 * MB))
    assert _arrivals(clock, network, [(a, b, MB)]) == {0: pytest.approx(0.1 + 0.001)}


def test_a_link_sends_and_receives_at_once_but_queues_each_way():
    clock, network = _network(CostModel(latency_s=0.0))
    a, b, c = (Machine(n, link=Link(n, 10 * MB)) for n in "abc")
    both_ways = _arrivals(clock, network, [(a, b, MB), (b, a, MB)])
    assert both_ways == {0: pytest.approx(0.1), 1: pytest.approx(0.1)}  # full duplex
    clock, network = _network(CostModel(latency_s=0.0))
    a, b, c = (Machine(n, link=Link(n, 10 * MB)) for n in "abc")
    into_one = _arrivals(clock, network, [(a, c, MB), (b, c, MB)])
    assert into_one == {0: pytest.approx(0.1), 1: pytest.approx(0.2)}  # c's link receives one


def test_nodes_of_one_machine_share_its_link_and_talk_over_its_loopback():
    cost = CostModel(latency_s=0.0, bandwidth_bytes_s=1000 * MB)
    clock, network = _network(cost)
    host, other = Link("h", 10 * MB), Link("o", 10 * MB)
    s1, s2, t = Machine("s1", link=host), Machine("s2", link=host), Machine("t", link=other)
    times = _arrivals(clock, network, [(s1, t, MB), (s2, t, MB), (s1, s2, MB)])
    assert times[0] == pytest.approx(0.1) and times[1] == pytest.approx(0.2)  # one link
    assert times[2] == pytest.approx(0.002)  # loopback: its socket queue, then s2's
    assert s1.sent_to == {"o": MB, "h": MB} and s2.sent_to == {"o": MB}
    assert host.tx.busy_s == pytest.approx(0.2) and other.rx.busy_s == pytest.approx(0.2)


def test_a_ring_all_reduce_across_machines_runs_at_the_slowest_link_and_queues_on_them():
    cost = CostModel(latency_s=0.0, machines=Machines((10 * MB, 5 * MB), latency_s=0.0))
    clock = Clock()
    links = [Link("a", 10 * MB), Link("b", 5 * MB)]
    collective = Collective(clock, cost, 2, links)
    finished: list[float] = []
    vector = torch.zeros(MB // 4)  # 1 MB
    for rank in range(2):
        collective.contribute(rank, vector, False, lambda _: finished.append(clock.now))
    clock.run()
    assert finished == [pytest.approx(0.2)] * 2  # each rank sends 1 MB; b's link at 5 MB/s
    assert links[0].tx.busy_s == pytest.approx(0.1) and links[1].rx.busy_s == pytest.approx(0.2)
    same = Collective(Clock(), cost, 2, [links[0], links[0]])
    assert same.links is None  # one machine: the loopback's ring


def test_a_job_on_machines_places_its_nodes_by_the_rule_and_the_pins():
    synthetic = dataclasses.replace(ENGINE_SYNTHETIC, num_train=4096, num_test=512)
    spec = JobSpec(
        ENGINE_MODEL, ENGINE_TRAIN, ClusterSpec(2, 2, 2), strategy_config("easgd"), synthetic
    )
    machines = Machines((1e8, 1e8, 1e8), latency_s=1e-4, addresses=("h0", "h1", "h2"))
    summary = SimJob(spec, plan_for(spec), CostModel(machines=machines)).run()
    assert summary["node_hosts"]["trainer-0"] == "h1" and summary["node_hosts"]["trainer-1"] == "h2"
    assert {h for n, h in summary["node_hosts"].items() if not n.startswith("trainer")} == {"h0"}
    h0 = summary["hosts"]["h0"]
    assert h0["sent_bytes"] > 0 and h0["received_bytes"] > 0
    assert (
        h0["sent_bytes"]
        == summary["hosts"]["h1"]["received_bytes"] + summary["hosts"]["h2"]["received_bytes"]
    )
    pinned = dataclasses.replace(
        spec, cluster=dataclasses.replace(spec.cluster, placement=(("trainer", ("h2",)),))
    )
    summary = SimJob(pinned, plan_for(pinned), CostModel(machines=machines)).run()
    assert {summary["node_hosts"]["trainer-0"], summary["node_hosts"]["trainer-1"]} == {"h2"}
    gone = dataclasses.replace(
        spec, cluster=dataclasses.replace(spec.cluster, placement=(("trainer", ("h9",)),))
    )
    with pytest.raises(ValueError, match="machine 'h9' is not in the cluster"):
        SimJob(gone, plan_for(gone), CostModel(machines=machines))


def test_machines_refuse_bad_links():
    with pytest.raises(ValueError, match="link_bytes_s must all be > 0"):
        Machines((1e8, 0.0))
    with pytest.raises(ValueError, match="2 addresses for 3 machines"):
        Machines((1e8, 1e8, 1e8), addresses=("a", "b"))


def _shared(rates: list[float], latency_s: float = 0.0, spread: float = 0.0):
    from recsync.runtime.sim.links import SharedLinks

    clock = Clock()
    links = [Link(f"m{i}", rate, i) for i, rate in enumerate(rates)]
    return clock, SharedLinks(clock, links, latency_s, spread, seed=0), links


def _ends(clock: Clock, shared, starts) -> dict[int, float]:
    """Start each (src, dst, bytes, channel) now; when each arrived."""
    done: dict[int, float] = {}
    for i, (src, dst, nbytes, channel) in enumerate(starts):
        shared.start(src, dst, nbytes, lambda i: done.setdefault(i, clock.now), i, channel)
    clock.run()
    return done


def test_shared_links_split_a_link_evenly_and_give_what_one_flow_cannot_use_to_the_other():
    clock, shared, links = _shared([10 * MB, 10 * MB, 1 * MB])
    ends = _ends(clock, shared, [(0, 1, MB, None), (0, 1, MB, None)])
    assert ends == {0: pytest.approx(0.2), 1: pytest.approx(0.2)}  # 5 MB/s each
    clock, shared, links = _shared([10 * MB, 10 * MB, 1 * MB])
    # the flow to the slow machine takes 1 MB/s; the other gets the 9 left (max-min)
    ends = _ends(clock, shared, [(0, 2, MB, None), (0, 1, 9 * MB, None)])
    assert ends[0] == pytest.approx(1.0) and ends[1] == pytest.approx(1.0)
    assert links[0].tx.busy_s == pytest.approx(1.0) and links[2].rx.busy_s == pytest.approx(1.0)
    assert shared.sent == [10 * MB, 0, 0] and shared.received == [0, 9 * MB, MB]


def test_a_connection_s_messages_cross_one_after_the_other_and_arrive_a_latency_later():
    clock, shared, _ = _shared([10 * MB, 10 * MB], latency_s=0.01)
    ends = _ends(clock, shared, [(0, 1, MB, "c"), (0, 1, 64, "c"), (0, 1, 64, "other")])
    assert ends[2] == pytest.approx(0.01, abs=1e-4)  # its own connection: at once
    assert ends[0] == pytest.approx(0.1 + 0.01, rel=1e-3)
    assert ends[1] == pytest.approx(0.1 + 0.01, rel=1e-3)  # behind the first on its way
    assert ends[1] >= ends[0]


def test_an_uneven_spread_is_drawn_from_the_seed_and_still_fills_the_link():
    runs = []
    for _ in range(2):
        clock, shared, _ = _shared([10 * MB, 10 * MB], spread=0.5)
        runs.append(_ends(clock, shared, [(0, 1, MB, None) for _ in range(4)]))
    assert runs[0] == runs[1]  # deterministic from the seed
    assert len(set(runs[0].values())) == 4  # uneven shares: one finishes first
    assert max(runs[0].values()) == pytest.approx(0.4)  # the link stays full: 4 MB at 10
