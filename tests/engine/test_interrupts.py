"""Stopping a run: a signal stops the job as at a data limit (a checkpoint to resume from),
a second one aborts; a run that trains nothing, or resumes with nothing left, fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import config_file, invoke

from recsync.app.runs.checkpoints import load_checkpoint
from recsync.app.runs.interrupts import interrupts
from recsync.coordinator.reader import ReaderNode
from recsync.data.synthetic import SyntheticSpec
from recsync.io.sources import SyntheticData
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.reading import NextBatch, StopReading


def test_the_first_signal_stops_the_job_and_the_second_aborts():
    stops: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interrupts() as signals:
        signals.attach(stops.append)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs in the main thread between bytecodes
        assert stops == ["SIGTERM"] and signals.received == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_signal_before_the_job_starts_stops_it_as_soon_as_it_does():
    stops: list[str] = []
    with interrupts() as signals:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        signals.attach(stops.append)
    assert stops == ["SIGINT"]


def test_a_stopped_reader_hands_out_nothing_more_and_says_so():
    spec = SyntheticSpec(num_train=1000, num_test=100, table_rows=(20,) * 4)
    reader = ReaderNode(SyntheticData(spec, TrainSpec(batch_size=100)), num_trainers=1)
    assert reader.handle(NextBatch(0)).batch is not None
    assert reader.handle(StopReading()) == 100
    assert reader.handle(NextBatch(0)).batch is None
    report = reader.report()
    assert report.stopped and report.total_examples == 100


def test_resuming_a_run_whose_data_is_used_up_fails_before_training(tmp_path):
    path = config_file(tmp_path)
    first = invoke("simulate", "-c", path, "--name", "all", "--no-progress", "--strategy", "async")
    assert first.exit_code == 0, first.output
    again = invoke("simulate", "--resume", str(tmp_path / "runs" / "all"), "--no-progress")
    assert again.exit_code == 1 and "nothing left to train" in again.output
    assert "2,000 of 2,000" in again.output


def test_a_run_whose_every_line_is_skipped_fails(tmp_path):
    data, test = tmp_path / "junk.libsvm", tmp_path / "test.libsvm"
    data.write_text("".join(f"label? {i}:x\n" for i in range(50)))
    test.write_text("".join(f"{i % 2} 1:{i % 3} 2:{i % 5}\n" for i in range(50)))
    sets = {
        "data.source": "libsvm",
        "data.path": data.as_posix(),
        "data.test_path": test.as_posix(),
        "model.table_rows": "40",
    }
    args = [a for key, value in sets.items() for a in ("--set", f"{key}={value}")]
    result = invoke(
        "simulate", "-c", config_file(tmp_path), "--no-progress", "--strategy", "async", *args
    )
    assert result.exit_code == 1, result.output
    assert "trained 0 examples" in result.output and "50 lines" in result.output
    swapped = [a.replace(str(data), "TEST").replace(str(test), str(data)) for a in args]
    swapped = [a.replace("TEST", str(test)) for a in swapped]  # junk held out, good trained
    empty_test = invoke(
        "simulate", "-c", config_file(tmp_path), "--no-progress", "--strategy", "async",
        "--name", "no-test", *swapped,
    )  # fmt: skip
    assert empty_test.exit_code == 1 and "held-out set is empty" in empty_test.output


def ray_processes() -> set[int]:
    """Process ids of Ray's processes on this machine (its GCS, raylets, workers)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(name in command for name in ("raylet", "gcs_server", "ray::", "default_worker")):
            found.add(int(entry))
    return found


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize(
    ("signum", "status", "delay_s"),
    [(signal.SIGINT, 130, 1.0), (signal.SIGTERM, 143, 0.0)],  # SIGTERM: while Ray connects
)
@pytest.mark.usefixtures("no_local_ray")  # the run starts its own Ray
def test_a_signal_on_the_engine_ends_with_a_checkpoint_that_resumes(
    tmp_path, signum, status, delay_s
):
    path = config_file(tmp_path)
    run = tmp_path / "runs" / "cut"
    command = [sys.executable, "-c", "from recsync.app.cli import main; main()", "train"]
    command += ["-c", path, "--name", "cut", "--no-progress", "--strategy", "async"]
    command += ["--set", "data.synthetic.num_train=400000"]
    before = ray_processes()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
    )
    ray_log = run / "ray.log"  # Ray's own lines go there, not to the terminal
    deadline = time.monotonic() + 120
    while "Started a local Ray instance" not in _text(ray_log):  # before, nothing to keep
        assert process.poll() is None and time.monotonic() < deadline, _text(ray_log)
        time.sleep(0.05)
    time.sleep(delay_s)  # Ray's driver is connecting, the job is starting, or running
    process.send_signal(signum)
    signalled = time.monotonic()
    output, _ = process.communicate(timeout=180)
    # a hang guard, not a speed bound: that the run was cut is asserted below (examples)
    assert time.monotonic() - signalled < 90
    name = signal.Signals(signum).name
    assert process.returncode == status, output
    assert f"interrupted ({name})" in output and "--resume" in output
    deadline = time.monotonic() + 20  # Ray's processes take a moment to go
    while ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ray_processes() - before, "the run left Ray processes behind"
    summary = json.loads((run / "summary.json").read_text())
    state = load_checkpoint(run)
    assert summary["interrupted"] == name and summary["examples_trained"] < 400_000
    assert state.data_position == summary["examples_trained"]
    resumed = invoke("simulate", "--resume", str(run), "--no-progress", "--name", "rest")
    assert resumed.exit_code == 0, resumed.output
    rest = json.loads((tmp_path / "runs" / "rest" / "summary.json").read_text())
    assert rest["checkpoint"]["data_position"] == 400_000
