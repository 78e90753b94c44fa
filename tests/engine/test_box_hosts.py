"""A job spread over the hosts of a 3-host box (network namespaces, each its own address,
link and Ray node), trained as a user would (`recsync train --address` on host 0): each
node where the placement rule or a pin puts it, listening on its host's address, and each
host's link carrying what the run's summary says its nodes sent and received, by the
kernel's own counters in the host's namespace, for one strategy of each family."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
import tomllib

import pytest
from box_hosts import (
    RECSYNC,
    Listening,
    recsync_on,
    running_box,
    skip_reason,
    train,
    train_args,
)

from recsync.runtime.transport import channel
from recsync.runtime.transport.channel import ChannelServer
from recsync.tools.box import ops
from recsync.tools.box.counters import counters
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
    "hierarchical": [
        "strategy.name=hierarchical",
        "strategy.groups=2",
        "cluster.num_dense_servers=1",
    ],
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
    before = counters(box)
    with Listening(box) as listening:
        done, summary = train(box, tmp_path, family, [*FAMILIES[family], *SIZE])
    after = counters(box)
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
            print(
                f"{family} {ip} {way}: link {carried:,} counted {counted:,} "
                f"({(carried - counted) / counted:+.3%})"
            )
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
    delayed = subprocess.run(
        [*recsync, "shape", "1", "--delay-ms", "5", "--loss", "0.01", *name],
        capture_output=True,
        text=True,
    )
    assert delayed.returncode == 0, delayed.stdout + delayed.stderr
    faults_file = ops.frame_faults_path(box.plan, 1)
    try:
        if not ops.netem_available(box.plan):  # this kernel: recsync's frames, said so
            assert "no netem" in delayed.stdout and "recsync's own connections" in delayed.stdout
            assert json.loads(faults_file.read_text())["delay_ms"] == 5.0
    finally:
        ops.shape(box.plan.name, 1, Link())
    assert not faults_file.exists()  # healed


STRANGERS = """
import json, socket, struct, sys, time
from recsync.runtime.transport import frames, handshake
from recsync.runtime.transport.channel import Connection
host, port, key = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
found = {}

def closed_after(sock, within_s=20.0):
    started = time.monotonic()
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return round(time.monotonic() - started, 2)

with socket.create_connection((host, port)) as garbage:
    garbage.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" * 8)
    found["garbage"] = closed_after(garbage)
with socket.create_connection((host, port)) as silent:
    found["silent"] = closed_after(silent)
try:
    Connection((host, port, bytes(len(key)))).request("in").result(10.0)
    found["wrong_key"] = "served"
except Exception as error:
    found["wrong_key"] = type(error).__name__
cut = Connection((host, port, key))  # a peer of the job whose frame stops short
cut.sock.sendall(frames.HEADER.pack(frames.OK, 0, 1000) + b"x" * 10)
found["truncated"] = closed_after(cut.sock)
big = Connection((host, port, key))
big.sock.sendall(frames.HEADER.pack(frames.OK, 0, 2**60))
found["oversized"] = closed_after(big.sock)
print(json.dumps(found))
"""


def test_strangers_on_another_host_are_closed_in_time_and_never_reach_the_node(
    box, monkeypatch, caplog
):
    """A channel on the box's bridge, its peers on host 1: garbage, silence, a wrong key,
    a truncated and an oversized frame each closed within its bound with a logged reason
    naming host 1, none reaching the node, while a good peer on host 2 is served."""
    caplog.set_level(logging.WARNING, logger=channel.__name__)
    monkeypatch.setattr(channel, "FRAME_REST_S", 3.0)
    handled: list = []
    server = ChannelServer(lambda request: handled.append(request) or request, box.plan.gateway)
    host, port, key = server.endpoint
    try:
        good = subprocess.Popen(
            ops.in_host(box.plan, 2, [sys.executable, "-c", GOOD_PEER, host, str(port), key.hex()]),
            stdout=subprocess.PIPE,
            text=True,
        )
        bad = subprocess.run(
            ops.in_host(box.plan, 1, [sys.executable, "-c", STRANGERS, host, str(port), key.hex()]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert bad.returncode == 0, bad.stderr[-2000:]
        found = json.loads(bad.stdout)
        good_out, _ = good.communicate(timeout=120)
    finally:
        assert server.close()
    handshake_s = channel.HANDSHAKE_TIMEOUT_S
    assert found["garbage"] < 1.0 and handshake_s - 0.5 < found["silent"] < handshake_s + 1.5
    assert found["wrong_key"] == "AuthenticationFailed"
    assert 2.5 < found["truncated"] < 4.5 and found["oversized"] < 1.0
    assert good_out.split() == ["served"] * 20  # all the while
    assert handled == [f"good {i}" for i in range(20)]  # no stranger's frame reached it
    reasons = [r.getMessage() for r in caplog.records]
    stranger = box.plan.ip(1)
    assert sum(f"from {stranger}" in r for r in reasons) == 5, reasons
    assert sum(f"from {stranger} in its handshake" in r for r in reasons) == 1  # the silent


GOOD_PEER = """
import sys, time
from recsync.runtime.transport.channel import Connection
host, port, key = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
peer = Connection((host, port, key))
for i in range(20):
    assert peer.request(f"good {i}").result(30.0) == f"good {i}"
    print("served", flush=True)
    time.sleep(0.5)
"""


def test_a_partition_shorter_than_failure_detection_is_ridden_through(box, tmp_path):
    """A trainer host's link down for 5 s mid-run, then up: its connections' frames wait
    in TCP and go on; no node is called lost, nothing is rolled back, every example is
    trained once."""
    overrides = ["strategy.name=easgd", *SIZE[1:], "data.synthetic.num_train=300000"]
    argv = [RECSYNC, *train_args(box, tmp_path, "partitioned", overrides)]
    driver = subprocess.Popen(ops.in_host(box.plan, 0, argv), stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(15.0)  # the nodes started and trained a while
        assert driver.poll() is None, "the run ended before the partition"
        ops.link_up(box, 2, False)
        time.sleep(5.0)
    finally:
        ops.link_up(box, 2, True)
    output, _ = driver.communicate(timeout=600)
    assert driver.returncode == 0, output[-2000:]
    summary = json.loads((tmp_path / "partitioned" / "summary.json").read_text())
    assert summary["node_hosts"]["trainer-1"] == box.plan.ip(2)
    assert summary["recovery"]["losses"] == [] and summary["examples_trained"] == 300_000


def test_the_head_s_host_lost_with_the_driver_leaves_a_checkpoint_the_run_resumes_from(
    box, tmp_path
):
    """Host 0 (the Ray head and the driver) killed at once mid-run: the whole cluster is
    gone with it and nothing recovers; the run's last checkpoint (a consistent cut, on the
    runs folder's disk) is there, and `--resume` on a new cluster trains the rest. Run last
    in this module: it rebuilds the box."""
    overrides = [
        "strategy.name=easgd",
        "data.synthetic.num_train=300000",
        "data.synthetic.num_test=2000",
        "run.eval_every=0",
        "run.checkpoint.every_examples=30000",
    ]
    argv = [RECSYNC, *train_args(box, tmp_path, "lost", overrides)]
    driver = subprocess.Popen(
        ops.in_host(box.plan, 0, argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    checkpoint = tmp_path / "lost" / "checkpoint.pt"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert checkpoint.exists(), driver.communicate()[0][-2000:]
    time.sleep(2.0)
    assert driver.poll() is None, "the run ended before its host was lost"
    assert ops.stop_host(box, 0) > 0
    assert driver.wait(timeout=30) == -signal.SIGKILL
    assert not (tmp_path / "lost" / "summary.json").exists()
    ops.down(box.plan.name)
    box.ray_address = ops.up(box.plan, Link()).ray_address  # a new cluster, same addresses
    resumed = recsync_on(
        box,
        0,
        ["train", "--resume", str(tmp_path / "lost"), "--name", "resumed", "--no-progress"]
        + ["--address", box.plan.head_address, "--set", f"run.runs_dir={tmp_path}"],
    )
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-2000:]
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    before = 300_000 - summary["examples_trained"]  # handed out before the resumed cut
    assert 30_000 <= before < 300_000 and summary["test_auc"] > 0.6
