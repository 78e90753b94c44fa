"""CPU by kind of thread (runtime/thread_cpu.py): threads that ended and threads still
running are both counted, each under its kind."""

from __future__ import annotations

import threading
import time

from recsync.runtime.thread_cpu import counted, cpu_by_kind


def _spin(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_counted_threads_cpu_is_its_kinds_while_it_runs_and_after_it_ended():
    release = threading.Event()

    def spin_then_wait() -> None:
        _spin(0.05)
        release.wait()

    before = cpu_by_kind()
    ended = threading.Thread(target=counted("test-ended", _spin), args=(0.1,))
    running = threading.Thread(target=counted("test-running", spin_then_wait))
    ended.start()
    running.start()
    ended.join()
    deadline = time.monotonic() + 10
    while cpu_by_kind().get("test-running", 0.0) < 0.05 and time.monotonic() < deadline:
        time.sleep(0.01)
    during = cpu_by_kind()
    release.set()
    running.join()
    after = cpu_by_kind()
    assert "test-ended" not in before and "test-running" not in before
    assert 0.1 <= during["test-ended"] < 0.5
    assert 0.05 <= during["test-running"] < 0.5  # read off its clock while it runs
    assert after["test-running"] >= during["test-running"]  # kept once it ended
    assert after["test-ended"] == during["test-ended"]
