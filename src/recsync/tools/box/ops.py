"""The box's effects: carries out a plan's commands as root with iproute2 and tc, starts a
Ray node in every host's namespace, reads each host's link counters, and removes all of it
by name. The box's state (its plan, each link's shaping, the Ray address) is a JSON file
in its folder, `/tmp/recsync-box/NAME/`, which also holds each Ray node's logs."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from recsync.errors import RecsyncError
from recsync.runtime.transport.faults import FAULTS_ENV, FrameFaults
from recsync.tools.box.plan import BoxPlan, Command, Link

STATE_ROOT = Path("/tmp/recsync-box")
STATE_FILE = "box.json"
COMMAND_TIMEOUT_S = 60.0
RAY_START_TIMEOUT_S = 120.0
NODES_UP_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0  # SIGTERM, then SIGKILL, to a host's processes
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
NO_NETEM = (
    "this kernel has no netem (tc: 'Specified qdisc kind is unknown'): the delay and loss "
    "are applied to recsync's own connections of the host (their frames held back as a "
    "lossy link's TCP would deliver them: runtime/transport/faults.py), not to Ray's; "
    "the rate is shaped by tc (tbf)"
)
FRAME_FAULTS = "frame-faults-h{host}.json"  # in the box's folder: a host's emulated faults


class BoxError(RecsyncError):
    """The box cannot be built, shaped or used: the message says what is missing or wrong."""


@dataclass
class BoxState:
    """A box that is up: its plan, each host's link and the Ray cluster's address."""

    plan: BoxPlan
    links: dict[int, Link] = field(default_factory=dict)
    ray_address: str | None = None
    started_utc: str = ""
    netem: bool | None = None  # whether the kernel has netem (None: not asked yet)
    emulated: set[int] = field(default_factory=set)  # hosts whose delay and loss are frame faults

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": asdict(self.plan),
            "links": {str(h): asdict(link) for h, link in self.links.items()},
            "ray_address": self.ray_address,
            "started_utc": self.started_utc,
            "netem": self.netem,
            "emulated": sorted(self.emulated),
            "hosts": [
                {"host": h, "namespace": self.plan.namespace(h), "ip": self.plan.ip(h)}
                for h in self.plan.hosts
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> BoxState:
        return BoxState(
            BoxPlan(**data["plan"]),
            {int(h): Link(**link) for h, link in data["links"].items()},
            data.get("ray_address"),
            data.get("started_utc", ""),
            data.get("netem"),
            set(data.get("emulated", [])),
        )


def folder(name: str) -> Path:
    return STATE_ROOT / name


def require_tools() -> None:
    """Root and iproute2 (ip, tc), or a BoxError naming what is missing."""
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    problems = []
    if os.geteuid() != 0:
        problems.append("root (network namespaces, veth links and tc need it)")
    if missing:
        problems.append(f"iproute2's {' and '.join(missing)} (Debian: apt-get install iproute2)")
    if problems:
        raise BoxError("the box needs " + "; and ".join(problems))


def namespaces() -> list[str]:
    """The machine's network namespaces, by name."""
    listed = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def devices() -> list[str]:
    """The names of the network devices in this machine's own namespace."""
    listed = run(["ip", "-o", "link", "show"], check=False).stdout
    names = []
    for line in listed.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def load(name: str) -> BoxState:
    """The state of the box `name`, or a BoxError saying it is not up."""
    path = folder(name) / STATE_FILE
    if not path.is_file() or f"{name}-h0" not in namespaces():
        raise BoxError(f"no box {name!r} is up (start one with `recsync box up --name {name}`)")
    return BoxState.from_json(json.loads(path.read_text()))


def _save(state: BoxState) -> None:
    path = folder(state.plan.name) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state.to_json(), indent=2) + "\n")


def netem_available(plan: BoxPlan) -> bool:
    """Whether tc can make a netem qdisc here (tried on host 0's link, then cleared)."""
    ns = plan.namespace(0)
    tried = run(
        ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem"],
        check=False,
    )
    if tried.returncode == 0:
        run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False


def up(plan: BoxPlan, link: Link, start_ray: bool = True) -> BoxState:
    """Build the box, shape every host's link to `link`, start its Ray cluster (a head on
    host 0, a worker node on every other host) and save its state. A half-built box is
    removed before the error is raised."""
    require_tools()
    if plan.namespace(0) in namespaces() or plan.bridge in devices():
        raise BoxError(
            f"box {plan.name!r} is up already (or left over from a crash): "
            f"`recsync box down --name {plan.name}` removes it"
        )
    state = BoxState(plan, started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    try:
        shutil.rmtree(folder(plan.name), ignore_errors=True)
        for command in plan.build_commands():
            run(command)
        for host in plan.hosts:
            _shape(state, host, link)
        _save(state)
        if start_ray:
            _start_ray(state)
            _save(state)
    except BaseException:
        down(plan.name)
        raise
    return state


def shape(name: str, host: int, link: Link) -> BoxState:
    """Shape one host's link of a box that is up (a job may be running on it)."""
    state = load(name)
    _shape(state, host, link)
    _save(state)
    return state


def frame_faults_path(plan: BoxPlan, host: int) -> Path:
    """The file whose frame faults every recsync process of `host` follows (faults.py)."""
    return folder(plan.name) / FRAME_FAULTS.format(host=host)


def _shape(state: BoxState, host: int, link: Link) -> None:
    """Shape the link by tc; a delay or loss where the kernel has no netem by frame faults
    (what `emulated` in the state records)."""
    previous = state.links.get(host, Link())
    faults_file = frame_faults_path(state.plan, host)
    if link.needs_netem and state.netem is None:
        state.netem = netem_available(state.plan)
    emulated = link.needs_netem and not state.netem
    if emulated:
        FrameFaults(link.delay_ms, link.loss, seed=host).write(faults_file)
        state.emulated.add(host)
    else:
        faults_file.unlink(missing_ok=True)
        state.emulated.discard(host)
    _tc(state, host, Link(link.mbit) if emulated else link, previous)
    state.links[host] = link


def _tc(state: BoxState, host: int, link: Link, previous: Link) -> None:
    if link == Link() and not previous.mbit and not (previous.needs_netem and state.netem):
        return  # nothing shaped by tc, before or now
    for command in state.plan.shape_commands(host, link):
        clearing = "del" in command
        done = run(command, check=not clearing)
        if clearing and done.returncode != 0 and "No such file" not in done.stderr:
            raise BoxError(f"`{shlex.join(command)}` failed: {done.stderr.strip()}")


def _ray_command(plan: BoxPlan, host: int) -> Command:
    ray = str(Path(sys.executable).with_name("ray"))
    if not Path(ray).is_file():
        ray_found = shutil.which("ray")
        if ray_found is None:
            raise BoxError("Ray's `ray` command is not installed beside this Python")
        ray = ray_found
    common = [
        f"--node-ip-address={plan.ip(host)}",
        f"--num-cpus={plan.cpus_per_host}",
        f"--object-store-memory={plan.object_store_mb * 1_000_000}",
        f"--temp-dir={folder(plan.name) / f'h{host}'}",
        "--disable-usage-stats",
    ]
    role = (
        ["--head", f"--port={plan.head_address.rsplit(':', 1)[1]}", "--include-dashboard=false"]
        if host == 0
        else [f"--address={plan.head_address}"]
    )
    return in_host(plan, host, [ray, "start", *role, *common])


def in_host(plan: BoxPlan, host: int, argv: Command) -> Command:
    """`argv` run inside host `host` (its network namespace), with the box's Ray settings
    and the host's frame faults (followed once `shape` writes them)."""
    settings = {**RAY_ENV, FAULTS_ENV: str(frame_faults_path(plan, host))}
    env = [f"{key}={value}" for key, value in settings.items()]
    return ["ip", "netns", "exec", plan.namespace(host), "env", *env, *argv]


def _start_ray(state: BoxState) -> None:
    plan = state.plan
    for host in plan.hosts:
        command = _ray_command(plan, host)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=RAY_START_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise BoxError(
                f"Ray did not start on host {host} in {RAY_START_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
            raise BoxError(f"Ray did not start on host {host} ({plan.ip(host)}):\n{tail}")
    _wait_for_nodes(plan)
    state.ray_address = plan.head_address


WAIT_SCRIPT = """
import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
deadline = time.monotonic() + float(sys.argv[2])
wanted = set(sys.argv[3:])
while True:
    alive = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])
    if wanted <= set(alive) or time.monotonic() > deadline:
        print(" ".join(alive))
        break
    time.sleep(0.2)
"""


def run(
    command: Command, check: bool = True, timeout_s: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run one command; a failure (with `check`) is a BoxError quoting it and its stderr."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BoxError(f"`{shlex.join(command)}` failed: {error}") from None
    if check and done.returncode != 0:
        raise BoxError(f"`{shlex.join(command)}` failed: {done.stderr.strip() or done.stdout}")
    return done


def _alive(plan: BoxPlan, wait_for: list[int], wait_s: float) -> set[str]:
    """The addresses of the Ray nodes alive in the head's view (a driver on host 0 asks),
    once the nodes of hosts `wait_for` are among them or `wait_s` passed."""
    ips = [plan.ip(h) for h in wait_for]
    argv = [sys.executable, "-c", WAIT_SCRIPT, plan.head_address, str(wait_s), *ips]
    done = run(in_host(plan, 0, argv), timeout_s=wait_s + 3 * COMMAND_TIMEOUT_S)  # a busy head
    return set(done.stdout.split())


def alive_hosts(state: BoxState) -> set[int]:
    """The hosts whose Ray node is alive in the head's view now (a host whose link was down
    long enough is called dead by Ray, and its node ends)."""
    alive = _alive(state.plan, [], 0.0)
    return {h for h in state.plan.hosts if state.plan.ip(h) in alive}


def _wait_for_nodes(plan: BoxPlan, hosts: list[int] | None = None) -> None:
    """The Ray nodes of `hosts` (None: every host) are alive in the head's view."""
    wanted = list(plan.hosts) if hosts is None else hosts
    alive = _alive(plan, wanted, NODES_UP_TIMEOUT_S)
    missing = [plan.ip(h) for h in wanted if plan.ip(h) not in alive]
    if missing:
        raise BoxError(f"Ray nodes not up after {NODES_UP_TIMEOUT_S:.0f} s: {missing}")


def stop_processes(namespace: str, graceful: bool = True) -> int:
    """End every process in `namespace` (SIGTERM, then SIGKILL after a grace; at once
    with SIGKILL if not `graceful`); their count."""
    pids = _pids(namespace)
    for sig in (signal.SIGTERM, signal.SIGKILL) if graceful else (signal.SIGKILL,):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + STOP_GRACE_S
        while _pids(namespace) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _pids(namespace):
            break
    return len(pids)


def _pids(namespace: str) -> list[int]:
    listed = run(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(p) for p in listed.split() if p.isdigit()]


def down(name: str) -> list[str]:
    """Remove every process, namespace, link and qdisc of the box `name` (found by name,
    with or without its state file) and its folder; what was removed."""
    require_tools()
    plan = BoxPlan(1, name=name)
    removed = []
    mine = [ns for ns in namespaces() if ns.startswith(f"{name}-h")]
    for ns in mine:
        count = stop_processes(ns)
        if count:
            removed.append(f"{count} processes in {ns}")
    for command in plan.teardown_commands(mine, devices()):
        run(command, check=False)
        removed.append(command[-1])
    shutil.rmtree(folder(name), ignore_errors=True)
    return removed


def host_processes(state: BoxState, host: int) -> list[int]:
    """The ids of every process running in host `host` (its namespace)."""
    return _pids(state.plan.namespace(host))


def stop_host(state: BoxState, host: int) -> int:
    """Lose a host: every process in its namespace killed at once (SIGKILL: as a machine
    that loses its power, nothing of it says goodbye), its Ray node included."""
    return stop_processes(state.plan.namespace(host), graceful=False)


def start_host(state: BoxState, host: int) -> None:
    """Bring a lost host back (not the head's): what is left of its processes killed, and a
    new Ray node started on it that joins the cluster, as a repaired machine does."""
    assert host != 0, "the head's host comes back only with a new box (`down`, `up`)"
    stop_processes(state.plan.namespace(host), graceful=False)
    shutil.rmtree(folder(state.plan.name) / f"h{host}", ignore_errors=True)
    done = subprocess.run(
        _ray_command(state.plan, host), capture_output=True, text=True, timeout=RAY_START_TIMEOUT_S
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise BoxError(f"Ray did not start again on host {host}:\n{tail}")
    _wait_for_nodes(state.plan, [host])


def link_up(state: BoxState, host: int, is_up: bool) -> None:
    """Take a host's link down (a partition) or bring it up again."""
    run(["ip", "link", "set", state.plan.outer_device(host), "up" if is_up else "down"])
