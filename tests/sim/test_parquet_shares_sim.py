"""Readers sharing Parquet files by row group (io/parquet_groups.py): each reader reads and
parses only its row groups, every example of one read is trained once, skips merge to one
read's, the held-out rows are the coin's whatever the number of readers, and a cut of 3
readers resumes onto 2. Each row's dense value is its name (file offset + row)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from reader_jobs import cuts_of, drained, file_job, names, one_read, readers_of
from test_sim import one_thread  # noqa: F401

from recsync.coordinator.readers import joined_report
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.shares import Deal
from recsync.errors import ConfigError
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.parquet_groups import ParquetGroups
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import FileData
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

SCHEMA = TabularSchema(
    label="label", dense=("name",), categorical=("c0", "c1"), table_rows=(10, 30)
)
MODEL = ModelSpec(
    num_dense=1,
    tables=(TableSpec("C0", 10, 8), TableSpec("C1", 30, 8)),
    bottom_mlp=(8,),
    top_mlp=(8,),
)
TRAIN = TrainSpec(batch_size=256)
ROWS = (9_000, 7_500)
GROUP = 1_000  # rows a row group: 9 + 8 row groups, the last of each file shorter


def _write(path: Path, count: int, seed: int, first: int) -> None:
    rng = random.Random(seed)
    labels: list[float | None] = []
    for _ in range(count):
        bad = rng.random() < 0.03
        labels.append(rng.choice([3.0, None]) if bad else float(rng.random() < 0.3))
    table = pa.table(
        {
            "label": labels,
            "name": [float(first + n) for n in range(count)],
            "c0": [n % 10 for n in range(count)],
            "c1": [n % 30 for n in range(count)],
        }
    )
    pq.write_table(table, path, row_group_size=GROUP)


@pytest.fixture
def files(tmp_path: Path) -> FileData:
    paths = (tmp_path / "a.parquet", tmp_path / "b.parquet")
    _write(paths[0], ROWS[0], 0, 0)
    _write(paths[1], ROWS[1], 1, 100_000)
    return FileData(paths, "parquet", SCHEMA, False, (), 0.05, 300, False)


def job(files: FileData, readers: int, resume=None, epochs: int = 1) -> JobSpec:
    return file_job(MODEL, TRAIN, files, readers, resume, epochs)


def test_readers_read_only_their_row_groups_and_hand_out_one_read_once(files):
    every, skips = one_read(files)
    assert skips.total > 0  # the files have bad rows
    nodes = readers_of(job(files, 3))
    source = nodes[0].stream.source
    assert isinstance(source, SharedTextData) and isinstance(source.lines, ParquetGroups)
    assert source.lines.blocks == 17 and source.lines.block_lines == GROUP
    test = source.test_set()
    assert test is not None and 0 < test.batch_size <= 300
    handed = names(drained(job(files, 3)))
    assert handed == sorted(set(handed))
    assert sorted(handed + names([test])) == every


def test_a_simulated_job_trains_every_example_once_and_merges_skips(files):
    every, skips = one_read(files)
    sim = SimJob(job(files, 3), plan_for(job(files, 3)), CostModel())
    summary = sim.run()
    test = sim.reader.test_set()
    assert test is not None
    assert summary["examples_trained"] == len(every) - test.batch_size
    state = sim.final_state
    assert state is not None and state.data_unit == f"rowgroups/{GROUP}"
    assert state.data_position == 17 * GROUP
    skipped = joined_report([r.report() for r in sim.reader.readers]).skipped
    assert skipped["by_reason"] == skips.counts and skipped["first"] == skips.first


def test_held_out_rows_are_the_same_on_any_number_of_readers(files):
    tests = [readers_of(job(files, r))[0].stream.source.test_set() for r in (2, 3)]
    assert tests[0] is not None and tests[1] is not None
    assert torch.equal(tests[0].dense, tests[1].dense)


def test_a_cut_of_three_readers_resumes_onto_two_with_every_example_once(files):
    spec = job(files, 3)
    states = cuts_of(spec)
    state = next((s for s in states if s.data_beyond), states[0] if states else None)
    assert state is not None and state.data_unit == f"rowgroups/{GROUP}"
    resumed_spec = job(files, 2, resume=state)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    resumed.run()
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == 17 * GROUP
    every, _ = one_read(files)
    source = readers_of(spec)[0].stream.source
    assert isinstance(source, SharedTextData)
    test = source.test_set()
    assert test is not None
    # the examples in the slots the cut's position holds consumed: handed out before it
    share = source.lines.share(Deal(1, GROUP), 0, 1, 1, False)
    position = state.stream_position
    handed = []
    for block in range(17):
        examples = share._block_examples(block)
        for k, name in enumerate([] if examples is None else examples.dense[:, 0].tolist()):
            slot = block * GROUP + k
            if slot < position.prefix or any(a <= slot < b for a, b in position.beyond):
                handed.append(int(name))
    assert sorted(names(drained(resumed_spec)) + handed + names([test])) == every


def test_a_checkpoint_of_row_groups_refuses_files_dealt_otherwise(files, tmp_path):
    spec = job(files, 2)
    sim = SimJob(spec, plan_for(spec), CostModel())
    sim.run()
    other = tmp_path / "c.parquet"
    _write(other, 3_000, 2, 0)
    pq.write_table(pq.read_table(other), other, row_group_size=500)
    moved = FileData((other,), "parquet", SCHEMA, False, (), 0.05, 300, False)
    with pytest.raises(ConfigError, match="not the same files"):
        build_topology(job(moved, 2, resume=sim.final_state), plan_for(spec))


def test_two_epochs_of_row_groups_train_every_example_twice_in_another_order(files):
    every, _ = one_read(files)
    spec = job(files, 3, epochs=2)
    handed = drained(spec)
    test = readers_of(spec)[0].stream.source.test_set()
    assert test is not None
    trained = names(handed)
    assert trained == sorted(2 * sorted(set(every) - set(names([test]))))
    sim = SimJob(spec, plan_for(spec), CostModel())
    assert sim.run()["examples_trained"] == len(trained)
    assert sim.final_state is not None and sim.final_state.data_position == 2 * 17 * GROUP
