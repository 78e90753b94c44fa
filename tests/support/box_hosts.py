"""The multi-host box for engine tests: a box of network-namespace hosts (`recsync box`),
built by a fixture and removed after it (also what a crashed run left, by name), and jobs
trained on it as a user would, with `recsync train --address` run on host 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recsync.tools.box import ops
from recsync.tools.box.plan import BoxPlan, Link

BOX_NAME = "rsbt"  # not the default box's name: a user's box is never touched
SUBNET = "10.214.0.0/24"
RECSYNC = str(Path(sys.executable).with_name("recsync"))
JOB_TIMEOUT_S = 600


def skip_reason() -> str | None:
    """Why the box cannot be built here (None: it can)."""
    if os.geteuid() != 0:
        return "the box needs root (network namespaces, veth links, tc)"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"the box needs iproute2 ({', '.join(missing)} not found)"
    return None


@contextmanager
def running_box(hosts: int = 3, link_mbit: float | None = None) -> Iterator[ops.BoxState]:
    """A box of `hosts` hosts with a Ray node each, every link at `link_mbit` (None:
    unshaped); removed afterwards, whatever happened."""
    ops.down(BOX_NAME)  # what a crashed run left
    state = ops.up(BoxPlan(hosts, name=BOX_NAME, subnet=SUBNET), Link(link_mbit))
    try:
        yield state
    finally:
        ops.down(BOX_NAME)


def recsync_on(
    state: ops.BoxState,
    host: int,
    args: list[str],
    timeout_s: float = JOB_TIMEOUT_S,
    wrap: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`recsync ARGS` run on `host` of the box (its namespace), as `recsync box exec` does
    (after the command `wrap`, e.g. `env KEY=VALUE`)."""
    command = ops.in_host(state.plan, host, [*(wrap or []), RECSYNC, *args])
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)


def train_args(state: ops.BoxState, runs_dir: Path, name: str, overrides: list[str]) -> list[str]:
    """`recsync train`'s arguments for a run on the box named `name` under `runs_dir`."""
    args = ["train", "--address", state.plan.head_address, "--name", name, "--force"]
    args += ["--no-progress", "--set", f"run.runs_dir={runs_dir}"]
    for override in overrides:
        args += ["--set", override]
    return args


def train(
    state: ops.BoxState,
    runs_dir: Path,
    name: str,
    overrides: list[str],
    host: int = 0,
    wrap: list[str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """Train on the box from `host` (the driver's); the command's result (its output
    and errors together in `stdout`) and the run's summary (None where it wrote none)."""
    done = recsync_on(state, host, train_args(state, runs_dir, name, overrides), wrap=wrap)
    done.stdout += done.stderr
    summary = runs_dir / name / "summary.json"
    return done, json.loads(summary.read_text()) if summary.is_file() else None


RAY_WORKER_PORTS = range(10002, 20000)  # Ray's own server in each worker process (all addresses)


class Listening:
    """The addresses of the listening TCP sockets that the job's node processes
    (`ray::NodeActor`) opened on each host, sampled every `every_s` seconds while a job
    runs (`ss` in each namespace); Ray's own server in every worker process (on every
    address, a port of Ray's worker range) left out."""

    def __init__(self, state: ops.BoxState, every_s: float = 0.5):
        self.state, self.every_s = state, every_s
        self.found: dict[int, set[str]] = {h: set() for h in state.plan.hosts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Listening:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            for host in self.state.plan.hosts:
                ns = self.state.plan.namespace(host)
                listed = subprocess.run(
                    ["ip", "netns", "exec", ns, "ss", "-tlnpH"], capture_output=True, text=True
                ).stdout
                for line in listed.splitlines():
                    address, _, port = line.split()[3].rpartition(":")
                    if "ray::NodeActor" in line and int(port) not in RAY_WORKER_PORTS:
                        self.found[host].add(address)
