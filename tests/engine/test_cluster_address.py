"""Joining a running Ray cluster by its address, as docs/clusters.md shows: a real head started
with `ray start --head` (token authentication on), a job through `--address`, and an
address with no cluster behind it failing fast."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from test_cli import config_file, invoke

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def head(no_local_ray: None) -> Iterator[str]:
    assert not ray.is_initialized(), "another module left Ray running"
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True)
    start = [RAY, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    yield f"127.0.0.1:{port}"
    subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


def test_a_job_joins_a_token_authenticated_head_by_its_address(head, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    command = [sys.executable, "-c", "from recsync.app.cli import main; main()", "train"]
    command += ["-c", config_file(tmp_path), "--name", "joined", "--no-progress"]
    command += ["--strategy", "async", "--address", head]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "runs" / "joined" / "summary.json").read_text())
    assert summary["examples_trained"] == 2000 and summary["engine"] == "ray"


def test_an_address_with_no_cluster_fails_within_seconds(tmp_path):
    started = time.perf_counter()
    address = f"127.0.0.1:{free_port()}"
    result = invoke(
        "train", "-c", config_file(tmp_path), "--no-progress", "--strategy", "async",
        "--address", address,
    )  # fmt: skip
    assert result.exit_code == 1 and f"no Ray cluster answers at {address}" in result.output
    assert time.perf_counter() - started < 30
