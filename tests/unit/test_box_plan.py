"""The multi-host box's plan (tools/box/plan.py): names, addresses and the commands that
build, shape and remove it, checked without root; and the refusals of `recsync box`."""

from __future__ import annotations

import subprocess

import pytest
from typer.testing import CliRunner

from recsync.app.cli.main import app
from recsync.errors import ConfigError
from recsync.runtime.transport.faults import FAULTS_ENV, FrameFaults
from recsync.tools.box import ops
from recsync.tools.box.plan import BoxPlan, Link, qdisc


def test_every_name_starts_with_the_box_name_and_fits_a_device_name():
    plan = BoxPlan(12, name="rsbt", subnet="10.214.0.0/24")
    commands = plan.build_commands()
    devices = {c[3] for c in commands if c[:3] == ["ip", "link", "add"]}
    devices |= {c[-1] for c in commands if c[:3] == ["ip", "link", "add"] and "peer" in c}
    assert devices == {"rsbt-br"} | {f"rsbt-v{h}" for h in range(12)} | {
        f"rsbt-i{h}" for h in range(12)
    }
    assert all(len(d) <= 15 for d in devices)
    assert [plan.ip(h) for h in (0, 1, 11)] == ["10.214.0.10", "10.214.0.11", "10.214.0.21"]
    assert plan.gateway == "10.214.0.1" and plan.head_address == "10.214.0.10:6379"
    assert ["ip", "-n", "rsbt-h3", "addr", "add", "10.214.0.13/24", "dev", "eth0"] in commands
    assert plan.host_of("rsbt-h2") == plan.host_of("10.214.0.12") == plan.host_of("2") == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_hosts": 0}, "1 to 64 hosts"),
        ({"num_hosts": 2, "name": "Box_1"}, "lowercase letters or digits"),
        ({"num_hosts": 2, "name": "toolongname"}, "1 to 6"),
        ({"num_hosts": 2, "subnet": "10.0.0.0/16"}, "give a /24"),
        ({"num_hosts": 2, "subnet": "10.0.0.300/24"}, "box subnet"),
    ],
)
def test_a_bad_box_is_refused_by_name(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BoxPlan(**kwargs)
    with pytest.raises(ConfigError, match="no host 'rsbox-h9'"):
        BoxPlan(2).host_of("rsbox-h9")


def test_a_link_is_shaped_both_ways_and_cleared_both_ways():
    plan = BoxPlan(3, name="rsbt")
    shaped = plan.shape_commands(1, Link(100.0))
    assert shaped[0][:5] == ["ip", "netns", "exec", "rsbt-h1", "tc"]  # what host 1 sends
    assert shaped[0][5:10] == ["qdisc", "replace", "dev", "eth0", "root"]
    assert shaped[1][:6] == ["tc", "qdisc", "replace", "dev", "rsbt-v1", "root"]  # receives
    assert shaped[1][6:] == qdisc(Link(100.0))
    assert qdisc(Link(100.0)) == ["tbf", "rate", "100mbit", "burst", "50000", "latency", "50ms"]
    assert qdisc(Link(1.0))[4] == str(16 * 1514)  # at least 16 frames in the bucket
    assert qdisc(Link(10.0, delay_ms=5, loss=0.01)) == [
        "netem",
        "delay",
        "5ms",
        "loss",
        "1%",
        "rate",
        "10mbit",
    ]
    cleared = plan.shape_commands(1, Link())
    assert [c[-4:] for c in cleared] == [
        ["del", "dev", "eth0", "root"],
        ["del", "dev", "rsbt-v1", "root"],
    ]


def test_teardown_removes_only_what_carries_the_box_name():
    plan = BoxPlan(1, name="rsbt")
    namespaces = ["rsbt-h0", "rsbt-h7", "rsbox-h0", "other"]
    devices = ["lo", "eth0", "rsbt-br", "rsbt-v0", "rsbt-v7", "rsbox-v0"]
    commands = plan.teardown_commands(namespaces, devices)
    assert commands == [
        ["ip", "netns", "del", "rsbt-h0"],
        ["ip", "netns", "del", "rsbt-h7"],
        ["ip", "link", "del", "rsbt-v0"],
        ["ip", "link", "del", "rsbt-v7"],
        ["ip", "link", "del", "rsbt-br"],
    ]


def test_links_refuse_bad_rates_and_describe_themselves():
    with pytest.raises(ConfigError, match="rate must be > 0"):
        Link(0.0)
    with pytest.raises(ConfigError, match="loss must be a fraction"):
        Link(10.0, loss=1.5)
    assert Link().describe() == "unshaped"
    assert Link(200.0).describe() == "200 Mbit/s each way"


def test_without_root_or_iproute2_the_box_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(ops.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(ops.shutil, "which", lambda tool: None)
    with pytest.raises(ops.BoxError, match=r"needs root .*; and iproute2's ip and tc"):
        ops.require_tools()
    result = CliRunner().invoke(app, ["box", "up", "--hosts", "2", "--name", "rsnope"])
    assert result.exit_code == 1
    assert "the box needs root" in result.output and "apt-get install iproute2" in result.output


def test_without_netem_a_delay_and_a_loss_become_the_hosts_frame_faults(tmp_path, monkeypatch):
    """The rate still by tbf; the delay and loss written to the host's frame faults, which
    its recsync processes follow (their environment names the file), and healed by
    shaping without them."""
    ran: list[list[str]] = []

    def run(command, check=True):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(ops, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(ops, "run", run)
    state = ops.BoxState(BoxPlan(2, name="rsbt", subnet="10.214.0.0/24"), netem=False)
    ops._shape(state, 1, Link(50.0, delay_ms=20.0, loss=0.01))
    path = ops.frame_faults_path(state.plan, 1)
    assert FrameFaults.read(path) == FrameFaults(20.0, 0.01, seed=1)
    assert state.emulated == {1} and state.links[1] == Link(50.0, 20.0, 0.01)
    assert all("netem" not in c and "tbf" in c for c in ran) and len(ran) == 2
    assert f"{FAULTS_ENV}={path}" in ops.in_host(state.plan, 1, ["true"])
    ran.clear()
    ops._shape(state, 1, Link())
    assert not path.exists() and state.emulated == set()
    assert [c[-4:] for c in ran] == [
        ["del", "dev", "eth0", "root"],
        ["del", "dev", "rsbt-v1", "root"],
    ]
    ran.clear()
    ops._shape(state, 0, Link())  # nothing shaped before or now: no tc at all
    assert ran == []
