"""A job spread over the hosts of a 3-host box (network namespaces, each its own address,
link and Ray node), trained as a user would (`recsync train --address` on host 0): each
node where the placement rule or a pin puts it, listening on its host's address, and each
host's link carrying what the run's summary says its nodes sent and received, by the
kernel's own counters in the host's namespace, for one strategy of each family."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pytest
from box_hosts import RECSYNC, Listening, recsync_on, running_box, skip_reason, train

from recsync.tools.box import ops
from recsync.tools.box.plan import Link

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))

# A TCP segment's headers on the wire: Ethernet 14, IPv4 20, TCP 20 and its timestamp
# option 12 bytes; the kernel counts them once a packet (a GSO packet: once for the lot)
HEADERS_A_PACKET = 66
TOLERANCE = 0.05  # what the issue allows; measured: within 0.3% (Ray's own traffic)
SIZE = ["data.synthetic.num_train=60000", "data.synthetic.num_test=2000", "run.eval_every=0"]
FAMILIES = {
    "replica": ["strategy.name=easgd"],
    "gradient": ["strategy.name=async"],
    "allreduce": ["strategy.name=allreduce", "cluster.workers_per_trainer=1"],
    "hierarchical": ["strategy.name=hierarchical", "strategy.groups=2", "strategy.group_servers=1"],
}


@pytest.fixture(scope="module")
def box(no_local_ray):
    with running_box(hosts=3) as state:
        yield state


def _payload(after: dict[str, int], before: dict[str, int], way: str) -> int:
    """Bytes of TCP payload (and Ray's own, and the few ARP frames) a link carried one way."""
    sent = after[f"{way}_bytes"] - before[f"{way}_bytes"]
    return sent - HEADERS_A_PACKET * (after[f"{way}_packets"] - before[f"{way}_packets"])


@pytest.mark.parametrize("family", FAMILIES)
def test_each_host_s_link_carried_what_the_summary_says_its_nodes_sent(box, tmp_path, family):
    before = ops.counters(box)
    with Listening(box) as listening:
        done, summary = train(box, tmp_path, family, [*FAMILIES[family], *SIZE])
    after = ops.counters(box)
    assert done.returncode == 0 and summary is not None, done.stdout[-2000:]
    ips = [box.plan.ip(h) for h in box.plan.hosts]
    assert summary["machine_addresses"] == ips and summary["driver_host"] == ips[0]
    where = summary["node_hosts"]
    assert {ip for node, ip in where.items() if not node.startswith("trainer")} == {ips[0]}
    assert [where["trainer-0"], where["trainer-1"]] == ips[1:]
    for host, ip in enumerate(ips):
        entry = summary["hosts"][ip]
        sent = entry["sent_bytes"] + entry.get("control_sent_bytes", 0)
        received = entry["received_bytes"] + entry.get("control_received_bytes", 0)
        assert sent > 20e6 and received > 20e6, (ip, entry)  # far above Ray's own traffic
        for way, counted in (("tx", sent), ("rx", received)):
            carried = _payload(after[host], before[host], way)
            assert abs(carried - counted) <= TOLERANCE * counted, (
                family,
                ip,
                way,
                carried,
                counted,
            )
        assert listening.found[host] <= {ip}, listening.found  # its own address only
    assert any(listening.found.values())  # the sampling saw the nodes listen


def test_servers_pinned_off_the_head_s_host(box, tmp_path):
    ips = [box.plan.ip(h) for h in box.plan.hosts]
    pins = [
        f'cluster.placement.embedding_server=["{ips[1]}"]',
        "cluster.placement.sync_server=[1]",
        "cluster.placement.reader=[1]",
        "cluster.placement.trainer=[2]",
    ]
    done, summary = train(box, tmp_path, "pinned", ["strategy.name=easgd", *SIZE, *pins])
    assert done.returncode == 0 and summary is not None, done.stdout[-3000:]
    where = summary["node_hosts"]
    assert {ip for node, ip in where.items() if not node.startswith("trainer")} == {ips[1]}
    assert {where["trainer-0"], where["trainer-1"]} == {ips[2]}
    assert summary["examples_trained"] == 60_000
    assert summary["hosts"][ips[0]]["sent_bytes"] == 0  # the head's host holds no node


def test_a_pinned_machine_that_is_not_there_is_named_before_any_node_starts(box, tmp_path):
    done, summary = train(
        box, tmp_path, "gone", [*SIZE, 'cluster.placement.trainer=["10.214.0.99"]']
    )
    assert done.returncode == 1 and summary is None
    assert "cluster.placement.trainer: machine '10.214.0.99' is not in the cluster" in done.stdout
    assert "lost" not in done.stdout and "Traceback" not in done.stdout


def test_a_driver_whose_ray_authentication_differs_is_told_so(box, tmp_path):
    token = ["env", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN=" + "0123456789abcdef" * 2]
    done, summary = train(box, tmp_path, "auth", SIZE, wrap=token)
    assert done.returncode == 1 and summary is None
    assert "this driver uses Ray's token authentication" in done.stdout, done.stdout
    assert "RAY_AUTH_MODE=disabled" in done.stdout
    assert "lost reader" not in done.stdout  # not a node loss, no recovery attempted


def test_calibrate_network_measures_each_host_s_link(box, tmp_path):
    profile = tmp_path / "profile.toml"
    ops.shape(box.plan.name, 2, Link(20.0))
    try:
        done = recsync_on(
            box,
            0,
            ["calibrate", "--network", "--address", box.plan.head_address, "--out", str(profile)],
        )
    finally:
        ops.shape(box.plan.name, 2, Link())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    machines = tomllib.loads(profile.read_text())["cost"]["machines"]
    assert machines["addresses"] == [box.plan.ip(h) for h in box.plan.hosts]
    rates = [r * 8 / 1e6 for r in machines["link_bytes_s"]]  # Mbit/s of payload
    assert 0.85 * 20 < rates[2] < 20  # 20 Mbit/s on the wire: about 0.956 of it payload
    assert min(rates[0], rates[1]) > 5 * rates[2]  # the others: unshaped
    assert 0 <= machines["latency_s"] < 0.01 and 0 <= machines["flow_spread"] < 2
    assert "cost.machines written to" in done.stdout


def test_the_box_command_runs_a_command_on_a_host_shapes_its_link_and_shows_it(box):
    recsync = [RECSYNC, "box"]
    name = ["--name", box.plan.name]
    on_host_1 = subprocess.run(
        [*recsync, "exec", "1", *name, "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert on_host_1.returncode == 0 and f"inet {box.plan.ip(1)}/24" in on_host_1.stdout
    shaped = subprocess.run(
        [*recsync, "shape", box.plan.ip(1), "--mbit", "50", *name], capture_output=True, text=True
    )
    assert shaped.returncode == 0 and "50 Mbit/s each way" in shaped.stdout, shaped.stdout
    try:
        shown = subprocess.run(
            [*recsync, "status", "--json", *name], capture_output=True, text=True, check=True
        )
        status = json.loads(shown.stdout)
        assert status["links"]["1"]["mbit"] == 50.0 and status["ray_address"] == box.ray_address
        assert set(status["counters"]) == {"0", "1", "2"}
        assert status["counters"]["0"]["tx_bytes"] > 0
        qdiscs = subprocess.run(
            ["ip", "netns", "exec", box.plan.namespace(1), "tc", "qdisc", "show", "dev", "eth0"],
            capture_output=True,
            text=True,
        ).stdout
        assert "tbf" in qdiscs and "50Mbit" in qdiscs
    finally:
        ops.shape(box.plan.name, 1, Link())
    refused = subprocess.run(
        [*recsync, "shape", "1", "--delay-ms", "5", *name], capture_output=True, text=True
    )
    if not ops.netem_available(box.plan):  # this kernel: no netem, said and nothing changed
        assert refused.returncode == 1 and "no netem" in refused.stdout
