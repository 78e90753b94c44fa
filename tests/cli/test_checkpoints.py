"""Checkpoint files: written atomically behind a checksum; a truncated, altered, foreign or
non-finite one is refused naming the file, and the run's previous one used; --force clears
an old run's checkpoint."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_cli import config_file, invoke

from recsync.app.runs.checkpoints import (
    CHECKPOINT,
    PREVIOUS,
    CheckpointWriter,
    load_checkpoint,
    load_run_checkpoint,
    save_checkpoint,
)
from recsync.coordinator.checkpoint import JobState


def small_state(weight: torch.Tensor | None = None) -> JobState:
    weight = torch.arange(12.0).reshape(6, 2) if weight is None else weight
    shard = {
        "weight": weight,
        "versions": torch.zeros(6, dtype=torch.int64),
        "global_step": 3,
        "optimizer": {"sum": torch.ones(6, 2)},
    }
    return JobState(
        dense=torch.linspace(-1.0, 1.0, 10),
        dense_optimizer={"steps": 3, "sum": torch.full((10,), 0.5)},
        shards=[shard],
        slices=[(0, 0, 6, 0, 0)],
        data_position=300,
        global_step=3,
        in_flight_examples=0,
        strategy="async",
    )


def test_a_saved_checkpoint_loads_back_equal_and_leaves_no_temporary_file(tmp_path):
    path = save_checkpoint(tmp_path, small_state())
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT]
    loaded = load_checkpoint(tmp_path)
    assert torch.equal(loaded.dense, small_state().dense)
    assert torch.equal(loaded.shards[0]["weight"], small_state().shards[0]["weight"])
    assert loaded.data_position == 300 and path == tmp_path / CHECKPOINT


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "empty"])
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage):
    path = save_checkpoint(tmp_path, small_state())
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif damage == "foreign":
        torch.save(small_state().to_dict(), path)  # a plain torch file: no header, no checksum
    else:
        path.write_bytes(b"")
    with pytest.raises(ValueError, match=str(path)) as error:
        load_checkpoint(tmp_path)
    expected = "not a recsync checkpoint" if damage in ("foreign", "empty") else "checksum"
    assert expected in str(error.value)


def test_a_checkpoint_holding_nan_is_refused_naming_the_tensor(tmp_path):
    weight = torch.zeros(6, 2)
    weight[4, 1] = float("nan")
    save_checkpoint(tmp_path, small_state(weight))
    with pytest.raises(ValueError, match=r"shards\[0\]\.weight holds NaN"):
        load_checkpoint(tmp_path)


def test_resuming_a_corrupted_checkpoint_fails_with_the_file_named(tmp_path):
    path = config_file(tmp_path)
    first = invoke(
        "simulate", "-c", path, "--name", "head", "--no-progress", "--strategy", "async",
        "--stop-after", "1000",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    checkpoint = tmp_path / "runs" / "head" / CHECKPOINT
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    second = invoke("simulate", "--resume", str(tmp_path / "runs" / "head"), "--no-progress")
    assert second.exit_code == 1
    assert "checksum" in second.output and CHECKPOINT in second.output


def test_force_removes_the_old_runs_checkpoint(tmp_path):
    path = config_file(tmp_path)
    args = ("-c", path, "--name", "run", "--no-progress")
    first = invoke("simulate", *args, "--strategy", "async", "--stop-after", "1000")
    assert first.exit_code == 0, first.output
    assert (tmp_path / "runs" / "run" / CHECKPOINT).exists()
    second = invoke("train", *args, "--force", "--set", "train.epochs=2")  # the reference
    assert second.exit_code == 0, second.output
    state = load_checkpoint(tmp_path / "runs" / "run")
    assert state.strategy == "reference" and state.data_position == 4000  # not the old one


def test_the_previous_checkpoint_is_kept_and_used_when_the_latest_is_damaged(tmp_path):
    older, newer = small_state(), dataclasses.replace(small_state(), data_position=600)
    writer = CheckpointWriter(tmp_path)
    writer.write(older)
    writer.write(newer)  # waits for the first, keeps it as the previous one
    writer.wait()
    assert writer.written == 2 and {p.name for p in tmp_path.iterdir()} == {CHECKPOINT, PREVIOUS}
    state, refused = load_run_checkpoint(tmp_path)
    assert state.data_position == 600 and refused is None
    latest = tmp_path / CHECKPOINT
    latest.write_bytes(latest.read_bytes()[:-100])  # truncated after it was written
    state, refused = load_run_checkpoint(tmp_path)
    assert state.data_position == 300
    assert refused is not None and str(latest) in refused and str(tmp_path / PREVIOUS) in refused
    (tmp_path / PREVIOUS).write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a recsync checkpoint"):
        load_run_checkpoint(tmp_path)
