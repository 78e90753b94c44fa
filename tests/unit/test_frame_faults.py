"""Frame faults (runtime/transport/faults.py): a lossy or slow link emulated on the real
sockets. Each frame is held back by the delay and, per loss drawn, a retransmission
timeout doubling as TCP's does; the file is read again when it changes and its removal
heals the link; a process picks the file up from its environment; a real connection's
round trip is held back at both ends."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from recsync.runtime.transport import faults
from recsync.runtime.transport.channel import ChannelServer, Connection
from recsync.runtime.transport.faults import RTO_S, FrameFaults, WatchedFaults


def test_a_frame_is_held_by_the_delay_and_a_doubling_timeout_per_loss():
    assert FrameFaults(delay_ms=30).hold_s(random.Random(1)) == pytest.approx(0.03)
    lossy = FrameFaults(delay_ms=10, loss=0.25)
    rng = random.Random(7)
    holds = [lossy.hold_s(rng) for _ in range(20_000)]
    timeouts = {round((h - 0.01) / RTO_S) for h in holds}  # k losses: 2^k - 1 timeouts
    assert timeouts <= {2**k - 1 for k in range(12)} and {0, 1, 3, 7} <= timeouts
    lost = sum(h > 0.011 for h in holds) / len(holds)
    assert abs(lost - 0.25) < 0.015
    again = random.Random(7)
    assert [lossy.hold_s(again) for _ in range(100)] == holds[:100]  # drawn from the seed


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"loss": 1.0}, "loss must be in"), ({"delay_ms": -1}, "delay_ms must be >= 0")],
)
def test_bad_faults_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        FrameFaults(**fields)


def test_a_file_that_is_not_faults_is_named(tmp_path):
    path = tmp_path / "faults.json"
    path.write_text('{"delay": 3}')
    with pytest.raises(ValueError, match=r"faults.json .*not frame faults"):
        FrameFaults.read(path)


def test_the_faults_follow_their_file(tmp_path, monkeypatch):
    monkeypatch.setattr(faults, "CHECK_EVERY_S", 0.0)
    path = tmp_path / "faults.json"
    watched = WatchedFaults(path)
    assert watched.hold_s() == 0.0  # no file: no faults
    FrameFaults(delay_ms=20).write(path)
    assert watched.hold_s() == pytest.approx(0.02)
    time.sleep(0.01)  # a later modification time
    FrameFaults(delay_ms=50).write(path)
    assert watched.hold_s() == pytest.approx(0.05)
    path.unlink()  # healed
    assert watched.hold_s() == 0.0
    assert watched.frames_held == 2 and watched.seconds_held == pytest.approx(0.07)


def test_a_process_takes_its_faults_from_its_environment(tmp_path):
    path = tmp_path / "faults.json"
    FrameFaults(delay_ms=5).write(path)
    script = "from recsync.runtime.transport import faults; print(faults.WATCHED.hold_s())"
    env = {**os.environ, faults.FAULTS_ENV: str(path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(0.005)
    env.pop(faults.FAULTS_ENV)
    script = "from recsync.runtime.transport import faults; print(faults.WATCHED)"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "None"  # off unless asked


def test_a_round_trip_on_real_sockets_is_held_at_both_ends(tmp_path, monkeypatch):
    path = tmp_path / "faults.json"
    server = ChannelServer(lambda request: request, "127.0.0.1")
    connection = Connection(server.endpoint)
    try:
        assert connection.request("warm").result(10.0) == "warm"
        started = time.perf_counter()
        connection.request("fast").result(10.0)
        fast = time.perf_counter() - started
        FrameFaults(delay_ms=100).write(path)
        monkeypatch.setattr(faults, "WATCHED", WatchedFaults(path))
        started = time.perf_counter()
        assert connection.request("held").result(10.0) == "held"
        held = time.perf_counter() - started
    finally:
        connection.close()
        server.close()
    assert held >= 0.2 > fast  # the request's frame and the reply's
