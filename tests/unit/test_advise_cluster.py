"""`recsync advise`'s cluster file (app/advise/cluster.py): its schema, bad input named by
the key, the presets and the cost model a cluster's machines give the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from recsync.app.advise.cluster import (
    PRESETS,
    SlowServerCondition,
    StragglersCondition,
    condition_cost,
    load_cluster,
    parse_cluster,
)
from recsync.errors import ConfigError
from recsync.runtime.sim.cost import CostModel

MACHINES = {"count": 4, "cores": 8}


def test_a_full_file_reads_back(tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text(
        "[machines]\ncount = 4\ncores = 16\nnic_gbps = 25\nlatency_us = 20\n"
        'preset = "xeon-16core"\n[grid]\ntrainers = [4, 2, 4]\n'
        '[[condition]]\nname = "stragglers"\nkind = "stragglers"\nfraction = 0.25\n'
        'slowdown = 3.0\n[[condition]]\nname = "slow ps"\nkind = "slow_server"\n'
        'role = "dense"\nslowdown = 4.0\n'
    )
    cluster = load_cluster(path)
    assert cluster.total_cores == 64
    assert [type(c) for c in cluster.condition] == [StragglersCondition, SlowServerCondition]
    cost = cluster.base_cost()
    assert cost.shared_cpus == 0  # every node on cores of its own
    assert cost.bandwidth_bytes_s == pytest.approx(25e9 / 8)
    assert cost.latency_s == pytest.approx(20e-6)
    assert cost.worker_flops == PRESETS["xeon-16core"][0]["worker_flops"]


@pytest.mark.parametrize(
    ("tree", "key"),
    [
        ({"machines": {**MACHINES, "preset": "cray"}}, "machines.preset: unknown preset 'cray'"),
        ({"machines": {"count": 4}}, "machines.cores: required key is missing"),
        ({"machines": {**MACHINES, "cores": 0}}, "machines.cores"),
        ({"machines": MACHINES, "grid": {"trainers": [0]}}, "grid.trainers[0]"),
        ({"machines": MACHINES, "racks": 2}, "racks: unknown key"),
        (
            {"machines": {**MACHINES, "preset": "default", "profile": "p.toml"}},
            "machines.preset or machines.profile",
        ),
        (
            {"machines": MACHINES, "condition": [{"name": "x", "kind": "fire"}]},
            "condition[0].kind",
        ),
        (
            {
                "machines": MACHINES,
                "condition": [{"name": "s", "kind": "stragglers", "fraction": 2, "slowdown": 3}],
            },
            "fraction",
        ),
        (
            {
                "machines": MACHINES,
                "condition": [{"name": "clean", "kind": "slow_server", "slowdown": 2}],
            },
            "condition names",
        ),
    ],
)
def test_bad_input_names_the_key(tree, key):
    with pytest.raises(ConfigError, match="cluster.toml") as error:
        parse_cluster(tree, "cluster.toml")
    assert key in str(error.value)


def test_an_unreadable_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_cluster(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[machines\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_cluster(bad)


def test_a_profile_gives_its_prices_and_the_files_network(tmp_path):
    (tmp_path / "profile.toml").write_text(
        "[cost]\nworker_flops = 1.5e10\nshared_cpus = 2\nbandwidth_bytes_s = 1e12\n"
        "process_idle_cpus = 0.1\n"
    )
    cluster = parse_cluster({"machines": {**MACHINES, "profile": "profile.toml"}}, "c")
    cost = cluster.base_cost(tmp_path)  # relative to the cluster file's folder
    assert cost.worker_flops == 1.5e10
    assert (cost.shared_cpus, cost.process_idle_cpus) == (0, 0.0)
    assert cost.bandwidth_bytes_s == pytest.approx(10e9 / 8)  # nic_gbps' default
    with pytest.raises(ConfigError, match="machines.profile"):
        parse_cluster({"machines": {**MACHINES, "profile": "nope.toml"}}, "c").base_cost(tmp_path)


def test_every_preset_is_a_valid_cost_model():
    for name, (prices, source) in PRESETS.items():
        cost = parse_cluster({"machines": {**MACHINES, "preset": name}}, "c").base_cost()
        assert isinstance(cost, CostModel) and source
        for key, value in prices.items():
            assert getattr(cost, key) == value


def test_stragglers_are_a_price_a_slow_server_is_not():
    cost = CostModel()
    slow = condition_cost(
        cost, StragglersCondition(name="s", kind="stragglers", fraction=0.5, slowdown=2)
    )
    assert (slow.stragglers.fraction, slow.stragglers.slowdown) == (0.5, 2)
    server = SlowServerCondition(name="p", kind="slow_server", slowdown=3)
    assert condition_cost(cost, server) == cost
    assert condition_cost(cost, None) == cost


def test_the_example_cluster_file_reads():
    root = Path(__file__).resolve().parents[2]
    cluster = load_cluster(root / "examples" / "cluster.toml")
    assert cluster.machines.preset == "xeon-16core"
    assert [c.kind for c in cluster.condition] == ["stragglers", "slow_server"]


def test_a_shared_machine_gives_its_cores_to_every_node(tmp_path):
    one = {"count": 1, "cores": 2, "shared": True, "latency_us": 0.0}
    cost = parse_cluster({"machines": {**one, "preset": "dev-2core"}}, "c").base_cost()
    assert (cost.shared_cpus, cost.latency_s) == (2, 0.0)
    assert cost.process_idle_cpus == PRESETS["dev-2core"][0]["process_idle_cpus"]
    (tmp_path / "profile.toml").write_text(
        "[cost]\nworker_flops = 1.5e10\nshared_cpus = 4\nbandwidth_bytes_s = 1e12\n"
        "latency_s = 1e-6\nprocess_idle_cpus = 0.1\n"
    )
    tree = {"machines": {**one, "profile": "profile.toml"}}
    cost = parse_cluster(tree, "c").base_cost(tmp_path)
    assert (cost.shared_cpus, cost.process_idle_cpus) == (2, 0.1)  # the file's cores
    assert (cost.bandwidth_bytes_s, cost.latency_s) == (1e12, 1e-6)  # the profile's loopback
    with pytest.raises(ConfigError, match=r"machines.shared with machines.count = 3: .*profile"):
        parse_cluster({"machines": {**one, "count": 3, "preset": "dev-2core"}}, "c")


def test_shared_hosts_of_one_machine_keep_the_links_their_profile_measured(tmp_path):
    """The multi-host box: hosts sharing one machine's cores, each with its own link."""
    (tmp_path / "box.toml").write_text(
        "[cost]\nshared_cpus = 2\nlatency_s = 0.0\nbandwidth_bytes_s = 1e12\n"
        "[cost.machines]\nlink_bytes_s = [1.2e7, 1.2e7, 1.2e6]\nlatency_s = 4e-6\n"
        'addresses = ["10.0.0.10", "10.0.0.11", "10.0.0.12"]\nflow_spread = 0.2\n'
    )
    hosts = {"count": 3, "cores": 2, "shared": True, "profile": "box.toml"}
    cost = parse_cluster({"machines": hosts}, "c").base_cost(tmp_path)
    assert cost.shared_cpus == 2 and cost.machines.link_bytes_s == (1.2e7, 1.2e7, 1.2e6)
    assert cost.machines.addresses[2] == "10.0.0.12" and cost.bandwidth_bytes_s == 1e12
    apart = parse_cluster({"machines": {**hosts, "shared": False}}, "c").base_cost(tmp_path)
    assert apart.shared_cpus == 0 and apart.machines.flow_spread == 0.2  # links kept
    with pytest.raises(ConfigError, match="names 3 machines .* machines.count is 4"):
        parse_cluster({"machines": {**hosts, "count": 4}}, "c").base_cost(tmp_path)
