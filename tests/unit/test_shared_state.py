"""A trainer's state in shared memory: the file layout, a second process's writes, two
trainer nodes (as two worker processes would build them) training one replica, and a worker
process waking the node's home."""

from __future__ import annotations

import glob
import multiprocessing
import os
import threading

import pytest
import torch

from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.runtime.ray.shared_memory import (
    attach_shared,
    create_shared,
    release_shared,
    shared_path,
)
from recsync.runtime.ray.wakeup import Bell, WakeListener, wake_path
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerStats

MODEL = ModelSpec(num_dense=3, tables=(TableSpec("C0", 10, 4),), bottom_mlp=(8,), top_mlp=(8,))


def _tensors() -> dict[str, torch.Tensor]:
    return {
        "flat": torch.arange(5, dtype=torch.float32),
        "stats": torch.full((3, 6), 2.0, dtype=torch.float64),
        "steps": torch.zeros(1, dtype=torch.float64),
    }


def _child(path: str) -> None:
    mapped = attach_shared(path, _tensors())
    mapped["flat"].add_(10.0)
    mapped["stats"][1, 0] = 99.0


def _ring(path: str, times: int) -> None:
    bell = Bell(path)
    for _ in range(times):
        bell.ring()


@pytest.fixture
def path():
    name = shared_path("test")
    yield name
    release_shared(name)
    release_shared(wake_path(name))


def test_created_tensors_hold_the_values_and_another_process_writes_them(path):
    mine = create_shared(path, _tensors())
    for name, tensor in _tensors().items():
        assert torch.equal(mine[name], tensor) and mine[name].dtype == tensor.dtype
    child = multiprocessing.get_context("spawn").Process(target=_child, args=(path,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert torch.equal(mine["flat"], torch.arange(5, dtype=torch.float32) + 10.0)
    assert mine["stats"][1, 0] == 99.0 and mine["stats"][0, 0] == 2.0
    assert mine["steps"].item() == 0.0


def test_released_files_are_gone_and_the_mapping_lives_on(path):
    mine = create_shared(path, _tensors())
    assert os.stat(path).st_mode & 0o777 == 0o600  # the node's user's alone
    release_shared(path)
    assert not glob.glob(path)
    mine["flat"].fill_(3.0)
    assert mine["flat"].sum().item() == 15.0
    with pytest.raises(FileNotFoundError, match="is gone"):
        attach_shared(path, _tensors())


def test_attaching_with_another_layout_is_refused(path):
    create_shared(path, _tensors())
    wrong = {**_tensors(), "flat": torch.zeros(500)}
    with pytest.raises(ValueError, match="holds .* bytes"):
        attach_shared(path, wrong)


def test_two_replicas_sharing_their_state_train_one_model(path):
    spec = DenseOptimizerSpec("adam", lr=0.01)
    first, second = DenseReplica(MODEL, 0, spec), DenseReplica(MODEL, 0, spec)
    first.rebind(create_shared(path, first.tensors()))
    second.rebind(attach_shared(path, second.tensors()))
    grad = torch.ones(first.num_params)
    first.apply(grad)
    second.apply(grad)
    alone = DenseReplica(MODEL, 0, spec)
    alone.apply(grad)
    alone.apply(grad)
    assert torch.equal(first.flat, alone.flat) and torch.equal(second.flat, alone.flat)
    assert first.optimizer.steps == 2
    params = dict(second.module.named_parameters())
    flat_start = 0
    for name, p in first.module.named_parameters():
        assert torch.equal(p, params[name])
        flat_start += p.numel()
    assert flat_start == first.num_params


def test_trainer_stats_add_up_per_worker_and_detach():
    stats = TrainerStats(2)
    stats.count_step(0, 100, 0.5)
    stats.count_step(1, 50, 1.0)
    stats.count_step(1, 50, 1.0)
    stats.count_sync(stats.own_row)
    stats.count_sync(1)
    assert stats.iterations == [1, 2] and stats.examples == [100, 100]
    assert stats.total_iterations == 3 and stats.total_examples == 200
    assert stats.loss_sum == pytest.approx(150.0) and stats.syncs == 2
    assert stats.trained_when_dry is None and stats.workers_done == 0
    stats.note_dry(1)
    stats.count_step(0, 10, 0.0)
    stats.note_dry(0)
    stats.note_dry(1)
    stats.finish(0)
    assert stats.trained_when_dry == 200 and stats.workers_done == 1
    copy = stats.detached()
    stats.count_step(0, 1, 0.0)
    assert copy.total_examples == 210 and stats.total_examples == 211


def test_a_worker_process_ringing_wakes_the_home_at_once(path):
    woken = threading.Event()
    listener = WakeListener(wake_path(path), woken.set)
    try:
        assert not woken.wait(0.2)  # nothing rang yet
        child = multiprocessing.get_context("spawn").Process(
            target=_ring, args=(wake_path(path), 3)
        )
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        assert woken.wait(5)
    finally:
        listener.close()


def test_ringing_never_blocks_on_a_full_pipe_and_a_missing_one_is_named(path):
    os.mkfifo(wake_path(path))
    unread = os.open(wake_path(path), os.O_RDWR | os.O_NONBLOCK)  # a home that never reads
    try:
        _ring(wake_path(path), 200_000)  # more bytes than a pipe holds
    finally:
        os.close(unread)
    with pytest.raises(FileNotFoundError, match="wake pipe .*home is gone"):
        Bell(wake_path(shared_path("nobody")))
