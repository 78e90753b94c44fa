"""Readers sharing text files by line blocks (io/shared_text.py) in simulated jobs: each
reader parses only its blocks, every example of one read is trained once, the readers'
skips merge to one read's, the held-out set is the coin's lines whatever the number of
readers, and a cut of 3 readers resumes onto 2 (and onto 1) with every example once; over
two epochs every example once an epoch, the second in an order that is the same whatever
the number of readers, cut inside it and resumed onto 2 readers still once an epoch.
Each line's dense value is its number in the files, so an example names its line."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
import torch
from reader_jobs import cuts_of, drained, file_job, names, one_read, readers_of
from test_sim import one_thread  # noqa: F401

from recsync.coordinator.readers import joined_report
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.shares import Deal
from recsync.errors import ConfigError
from recsync.io.file_shares import ReaderShare
from recsync.io.formats.libsvm.rows import LibFFMSchema
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import FileData
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.reading import NextBatch
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

SCHEMA = LibFFMSchema(table_rows=(10, 30), dense_fields=(1,))
MODEL = ModelSpec(
    num_dense=1,
    tables=(TableSpec("C0", 10, 8), TableSpec("C1", 30, 8)),
    bottom_mlp=(8,),
    top_mlp=(8,),
)
TRAIN = TrainSpec(batch_size=256)
BAD = ["", "3 0:1:1", "1 0:1", "1 4:1:1", "1 0:1:nan"]
LINES = (9_000, 7_500)  # 16,500 lines: 5 blocks of 4,096, one spanning both files


def _write(path: Path, count: int, seed: int, first: int) -> None:
    rng = random.Random(seed)
    lines = [
        rng.choice(BAD) if rng.random() < 0.05 else f"{rng.choice('01')} 0:3:1 1:5:{first + n}"
        for n in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def files(tmp_path: Path) -> FileData:
    paths = (tmp_path / "a.ffm", tmp_path / "b.ffm")
    _write(paths[0], LINES[0], 0, 0)
    _write(paths[1], LINES[1], 1, 100_000)
    return FileData(paths, "libffm", SCHEMA, False, (), 0.05, 300, False)


def job(files: FileData, readers: int, resume=None, epochs: int = 1) -> JobSpec:
    return file_job(MODEL, TRAIN, files, readers, resume, epochs)


def test_several_readers_parse_only_their_blocks_and_hand_out_one_read_once(files):
    every, skips = one_read(files)
    nodes = readers_of(job(files, 3))
    assert all(isinstance(n.stream.source, SharedTextData) for n in nodes)
    handed = drained(job(files, 3))
    test = nodes[0].stream.source.test_set()
    assert test is not None and 0 < test.batch_size <= 300
    assert names(handed) == sorted(set(names(handed)))  # each once
    assert sorted(names(handed) + names([test])) == every
    one = readers_of(job(files, 1))[0].stream.source  # one reader reads by blocks too
    assert isinstance(one, SharedTextData)
    one_test = one.test_set()
    assert one_test is not None and torch.equal(one_test.dense, test.dense)
    assert names(drained(job(files, 1))) == names(handed)


def test_a_simulated_job_of_three_readers_trains_every_example_once_and_merges_skips(files):
    every, skips = one_read(files)
    sim = SimJob(job(files, 3), plan_for(job(files, 3)), CostModel())
    summary = sim.run()
    test = sim.reader.test_set()
    assert test is not None
    assert summary["examples_trained"] == len(every) - test.batch_size
    state = sim.final_state
    assert state is not None and state.data_unit == "slots/4096"
    assert state.data_position == 5 * 4096  # every slot of the one pass consumed
    skipped = joined_report([r.report() for r in sim.reader.readers]).skipped
    assert skipped["by_reason"] == skips.counts and skipped["first"] == skips.first


def test_held_out_rows_are_the_same_on_any_number_of_readers(files):
    tests = []
    for readers in (2, 3):
        source = readers_of(job(files, readers))[0].stream.source
        assert isinstance(source, SharedTextData)
        tests.append(source.test_set())
    assert tests[0] is not None and tests[1] is not None
    assert torch.equal(tests[0].dense, tests[1].dense)


@pytest.mark.parametrize("onto", [2, 1])
def test_a_cut_of_three_readers_resumes_onto_fewer_with_every_example_once(files, onto):
    spec = job(files, 3)
    states = cuts_of(spec)
    state = next((s for s in states if s.data_beyond), None)
    assert state is not None and state.data_unit == "slots/4096"
    resumed_spec = job(files, onto, resume=state)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    resumed.run()
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == 5 * 4096
    every, _ = one_read(files)
    test = readers_of(spec)[0].stream.source.test_set()
    rest = names(drained(resumed_spec))
    # the examples in the slots the cut's position holds consumed: handed out before it
    position = state.stream_position
    handed = [
        n
        for n, slot in _slots(spec)
        if slot < position.prefix or any(a <= slot < b for a, b in position.beyond)
    ]
    assert sorted(rest + handed + names([test])) == every


def _slots(spec: JobSpec) -> list[tuple[int, int]]:
    """(name, slot) of every training example of the job's epochs: global block k (the
    p-th block of epoch e, k = e B + p) has its examples, in their epoch's order, fill slots
    kL, kL + 1, ... (line order in epoch 0)."""
    source = readers_of(spec)[0].stream.source
    assert isinstance(source, SharedTextData)
    lines, epochs = source.lines, spec.train.epochs
    share = ReaderShare(lines, Deal(1, lines.block_lines), 0, 1, epochs)
    pairs = []
    for block in range(epochs * lines.blocks):
        examples = share._block_examples(block)
        if examples is not None:
            first = block * lines.block_lines
            pairs += [(int(v), first + k) for k, v in enumerate(examples.dense[:, 0].tolist())]
    return pairs


def in_order(batches) -> list[int]:
    return [int(v) for b in batches for v in b.dense[:, 0].tolist()]


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_two_epochs_hand_out_every_example_once_an_epoch_and_never_a_held_out_one(files, readers):
    every, _ = one_read(files)
    spec = job(files, readers, epochs=2)
    nodes = readers_of(spec)
    by_reader = []
    for index, node in enumerate(nodes):
        trainer = next(t for t in range(3) if spec.cluster.reader_of(t) == index)
        mine = []
        while (handed := node.handle(NextBatch(trainer))).batch is not None:
            mine.append(handed.batch)
        by_reader.append(in_order(mine))
    test = nodes[0].stream.source.test_set()
    assert test is not None
    trained = sorted(set(every) - set(names([test])))
    assert sorted(n for mine in by_reader for n in mine) == sorted(trained + trained)
    slots = _slots(spec)  # one reader's map: the same whatever the number of readers
    one_pass = 5 * 4096
    first = [n for n, slot in slots if slot < one_pass]
    second = [n for n, slot in slots if slot >= one_pass]
    assert sorted(first) == sorted(second) == trained and first != second
    for index, mine in enumerate(by_reader):  # each hands out its global blocks' slots
        assert mine == [n for n, slot in slots if (slot // 4096) % readers == index]


def test_a_simulated_job_of_two_epochs_trains_each_example_twice_and_ends_at_two_passes(files):
    every, _ = one_read(files)
    spec = job(files, 3, epochs=2)
    sim = SimJob(spec, plan_for(spec), CostModel())
    summary = sim.run()
    test = sim.reader.test_set()
    assert test is not None
    assert summary["examples_trained"] == 2 * (len(every) - test.batch_size)
    state = sim.final_state
    assert state is not None and state.data_unit == "slots/4096"
    assert state.data_position == 2 * 5 * 4096 and not state.data_beyond
    with pytest.raises(ConfigError, match="past the end of train.epochs = 1 pass"):
        build_topology(job(files, 2, resume=state, epochs=1), plan_for(spec))
    build_topology(job(files, 2, resume=state, epochs=2), plan_for(spec))  # nothing left


def test_a_one_pass_checkpoint_counting_slots_resumes_into_a_second_epoch(files):
    every, _ = one_read(files)
    spec = job(files, 2)
    sim = SimJob(spec, plan_for(spec), CostModel())
    sim.run()
    assert sim.final_state is not None and sim.final_state.data_position == 5 * 4096
    more = job(files, 3, resume=sim.final_state, epochs=2)
    resumed = SimJob(more, plan_for(more), CostModel())
    summary = resumed.run()
    test = resumed.reader.test_set()
    assert test is not None
    assert summary["examples_trained"] == len(every) - test.batch_size  # the second pass
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == 2 * 5 * 4096


def test_a_cut_inside_the_second_epoch_of_three_readers_resumes_onto_two(files):
    spec = job(files, 3, epochs=2)
    one_pass = 5 * 4096
    states = cuts_of(spec, every_examples=1_500)  # a cut every 1,500 examples (not slots)
    state = next((s for s in states if s.data_beyond and s.data_position > one_pass), None)
    assert state is not None and state.data_unit == "slots/4096"
    resumed_spec = job(files, 2, resume=state, epochs=2)
    resumed = SimJob(resumed_spec, plan_for(resumed_spec), CostModel())
    resumed.run()
    assert resumed.final_state is not None
    assert resumed.final_state.data_position == 2 * one_pass
    every, _ = one_read(files)
    test = readers_of(spec)[0].stream.source.test_set()
    trained = sorted(set(every) - set(names([test])))
    rest = names(drained(resumed_spec))
    position = state.stream_position
    handed = [
        n
        for n, slot in _slots(spec)
        if slot < position.prefix or any(a <= slot < b for a, b in position.beyond)
    ]
    assert sorted(rest + handed) == sorted(trained + trained)


def test_a_share_parsed_in_a_background_process_hands_out_the_same_batches_and_slots(files):
    source = readers_of(job(files, 2))[1].stream.source
    assert isinstance(source, SharedTextData)
    made = {}
    for background in (False, True):
        share = SharedTextData(files, source.lines, TRAIN, source.deal, 1, background)
        marks = [(names([b]), share.position_after(0)) for b in share.train_batches()]
        made[background] = marks, share.position_at_end(0), share.skips.as_dict()
    assert made[True] == made[False]
    marks = [mark for _, mark in made[False][0]]
    assert marks == sorted(marks) and marks[-1] <= made[False][1]


def test_a_job_wide_limit_is_split_evenly_among_readers_sharing_lines(files):
    limited = dataclasses.replace(job(files, 3), stop_after_examples=1_000)
    handed = drained(limited)
    assert sum(b.batch_size for b in handed) <= 1_000
    assert [n.stream.limit for n in readers_of(limited)] == [334, 333, 333]


def test_a_file_checkpoint_that_counts_examples_is_refused_by_name(files):
    spec = job(files, 2)
    sim = SimJob(spec, plan_for(spec), CostModel())
    sim.run()
    state = sim.final_state
    assert state is not None and state.data_unit == "slots/4096"
    old = dataclasses.replace(state, data_unit=None, data_position=3_000)  # examples
    with pytest.raises(ConfigError, match="position counts examples of the file stream"):
        build_topology(job(files, 2, resume=old), plan_for(spec))
