"""Two readers on real Ray actors: every example trained once, cuts record both readers'
positions, and a cut resumes onto one reader; text files shared by line blocks over two
epochs."""

from __future__ import annotations

import dataclasses
import random

import pytest
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.skips import SkipReport
from recsync.families import strategy_config
from recsync.io.formats.libsvm.rows import LibFFMSchema
from recsync.io.readers import open_dataset
from recsync.io.sources import FileData
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import run_job

pytestmark = pytest.mark.usefixtures("local_ray")

SYNTHETIC = dataclasses.replace(ENGINE_SYNTHETIC, num_train=20_000, num_test=4_000)
# the driver cuts only when it polls (every 0.5 s): on a quiet machine these jobs train in
# about one poll, so the cut tests slow their trainers (6x left no cut in CI: the file job
# trained in 0.78 s; 30x: 3.2-4.2 s, 2 cuts)
CUT_SLOWDOWN = 30.0


def spec(readers: int, resume=None, slowdown: float = 1.0) -> JobSpec:
    slowed = (slowdown, slowdown)
    cluster = ClusterSpec(
        2, 1, 1, trainer_slowdown=slowed, worker_processes=False, num_readers=readers
    )
    return JobSpec(
        model=ENGINE_MODEL,
        train=TrainSpec(batch_size=128),
        cluster=cluster,
        strategy=strategy_config("independent"),
        synthetic=SYNTHETIC,
        resume=resume,
    )


def test_two_readers_hand_out_every_example_once_and_a_cut_resumes_onto_one():
    states: list = []
    summary = run_job(
        spec(2, slowdown=CUT_SLOWDOWN),
        checkpoint_every=CheckpointEvery(examples=6_000),
        on_checkpoint=states.append,
    )
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["checkpoint"]["data_position"] == SYNTHETIC.num_train
    assert states, "no cut was taken"
    state = states[0]
    rest = run_job(spec(1, resume=state))
    assert rest["examples_trained"] == SYNTHETIC.num_train - state.stream_position.handed
    assert rest["checkpoint"]["data_position"] == SYNTHETIC.num_train


def test_two_readers_share_a_text_file_by_line_blocks_and_a_cut_resumes_onto_one(tmp_path):
    # each reader parses its own line blocks in its background producer (slot marks sent
    # beside the batches); the held-out lines and the skips are one read's
    path = tmp_path / "days.ffm"
    rng = random.Random(3)
    lines = [
        "1 0:1" if rng.random() < 0.03 else f"{rng.choice('01')} 0:{n % 7}:1 1:{n % 11}:1 2:5:0.5"
        for n in range(20_000)
    ]
    path.write_text("\n".join(lines) + "\n")
    schema = LibFFMSchema(table_rows=(7, 11), dense_fields=(2,))
    tables = (TableSpec("C0", 7, 8), TableSpec("C1", 11, 8))
    model = ModelSpec(num_dense=1, tables=tables, bottom_mlp=(8,), top_mlp=(8,))
    files = FileData((path,), "libffm", schema, False, (), 0.05, 500, False)
    skips = SkipReport()
    read = open_dataset([path], "libffm", schema, batch_size=1024, skips=skips)
    every = sum(batch.batch_size for batch in read)
    states: list = []
    slowed = spec(2, slowdown=CUT_SLOWDOWN)
    first = dataclasses.replace(slowed, model=model, synthetic=None, files=files)
    summary = run_job(
        first, checkpoint_every=CheckpointEvery(examples=6_000), on_checkpoint=states.append
    )
    held = summary["test_examples"]
    assert 0 < held <= 500
    assert summary["examples_trained"] == every - held
    assert summary["skipped"]["by_reason"] == skips.counts
    assert summary["checkpoint"]["data_position"] == 5 * 4096  # every slot consumed
    assert states, "no cut was taken"
    state = states[0]
    assert state.data_unit == "slots/4096"
    resumed = dataclasses.replace(first, cluster=spec(1).cluster, resume=state)
    rest = run_job(resumed)
    assert rest["checkpoint"]["data_position"] == 5 * 4096
    assert rest["test_examples"] == held
    assert 0 < rest["examples_trained"] < every - held  # what the cut had left, once
    # two epochs on two readers: the second pass shuffled by line blocks, each example
    # trained once a pass, the skips counted once, every slot of both passes consumed
    two_epochs = dataclasses.replace(first.train, epochs=2)
    twice = dataclasses.replace(first, cluster=spec(2).cluster, train=two_epochs)
    both = run_job(twice)
    assert both["test_examples"] == held
    assert both["examples_trained"] == 2 * (every - held)
    assert both["skipped"]["by_reason"] == skips.counts
    assert both["checkpoint"]["data_position"] == 2 * 5 * 4096
