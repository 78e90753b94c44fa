"""The reader's background batch producer: the same stream, in order; its failures and
its death raised in the reader; no process left behind."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch

from recsync.data.batch import Batch
from recsync.data.synthetic import SyntheticSpec
from recsync.io.background import BackgroundBatches
from recsync.io.sources import SyntheticData
from recsync.optim.train_spec import TrainSpec

SPEC = SyntheticSpec(num_train=6_000, num_dense=4, table_rows=(100,) * 8, num_test=500)
FIELDS = [f.name for f in dataclasses.fields(Batch)]


def _failing(after: int) -> Iterator[Batch]:
    yield from list(SyntheticData(SPEC, TrainSpec(batch_size=100)).train_batches())[:after]
    raise ValueError("line 7: bad record")


def _endless() -> Iterator[Batch]:
    batch = next(iter(SyntheticData(SPEC, TrainSpec(batch_size=100)).train_batches()))
    while True:
        yield batch


def test_the_background_stream_is_the_in_process_stream():
    train = TrainSpec(batch_size=128, epochs=2)
    here = list(SyntheticData(SPEC, train, start_example=300).train_batches())
    there = list(SyntheticData(SPEC, train, start_example=300, background=True).train_batches())
    assert len(there) == len(here) > 0
    for mine, theirs in zip(here, there, strict=True):
        for name in FIELDS:
            assert torch.equal(getattr(mine, name), getattr(theirs, name)), name


def test_the_producers_cpu_is_told_while_it_runs_and_kept_once_it_ended():
    spec = dataclasses.replace(SPEC, num_train=60_000)
    stream = SyntheticData(spec, TrainSpec(batch_size=128), background=True).train_batches()
    assert isinstance(stream, BackgroundBatches)
    for _ in range(200):
        next(stream)
    running = stream.cpu_seconds()
    assert running > 0.0
    assert sum(1 for _ in stream) == 60_000 // 128 + 1 - 200
    ended = stream.cpu_seconds()
    assert ended >= running
    assert stream.cpu_seconds() == ended  # its process is gone: the figure stays


def test_a_producer_error_is_raised_in_the_reader_after_the_batches_before_it():
    batches = BackgroundBatches(_failing_after_two)
    assert [b.batch_size for b in (next(batches), next(batches))] == [100, 100]
    with pytest.raises(RuntimeError, match="ValueError: line 7: bad record"):
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)


def _failing_after_two() -> Iterator[Batch]:
    return _failing(2)


def test_a_killed_producer_is_named_not_taken_for_the_end_of_the_data():
    batches = BackgroundBatches(_endless)
    os.kill(batches._process.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="died .*exit code -9"):
        for _ in range(10_000):  # what the pipe held first, then the death
            next(batches)


def test_close_stops_a_producer_whose_stream_did_not_end():
    batches = BackgroundBatches(_endless)
    next(batches)
    batches.close()
    assert not batches._process.is_alive()


def _files(tmp_path, strict: bool = False):
    from recsync.io.formats.libsvm.rows import LibSVMSchema
    from recsync.io.sources import FileData

    data = tmp_path / "rows.libsvm"
    lines = [f"{i % 2} 1:{i} 2:{i % 9}\n" for i in range(900)]
    lines[300] = "x 1:1\n"  # a bad label: skipped, or the end of a strict run
    data.write_text("".join(lines))
    return FileData(
        paths=(data,),
        fmt="libsvm",
        schema=LibSVMSchema(table_rows=50, dense_indices=(1,)),
        strict=strict,
        test_paths=(),
        test_fraction=0.2,
        test_max_examples=100,
        dense_log1p=False,
    )


def test_a_file_stream_in_the_background_holds_out_and_skips_what_it_would_here(tmp_path):
    from recsync.io.data_plan import one_reader_data

    train = TrainSpec(batch_size=64, epochs=2, shuffle_buffer=100)
    here = one_reader_data(None, _files(tmp_path), train)
    there = one_reader_data(None, _files(tmp_path), train, background=True)
    mine, theirs = list(here.train_batches()), list(there.train_batches())
    assert len(theirs) == len(mine) > 0
    for a, b in zip(mine, theirs, strict=True):
        for name in FIELDS:
            assert torch.equal(getattr(a, name), getattr(b, name)), name
    test_here, test_there = here.test_set(), there.test_set()
    assert test_here is not None and test_there is not None and test_here.batch_size == 100
    for name in FIELDS:
        assert torch.equal(getattr(test_here, name), getattr(test_there, name)), name
    assert there.skips.counts == here.skips.counts == {"bad_label": 1}
    assert there.skips.first == here.skips.first


def test_a_strict_file_streams_bad_line_is_a_data_error_in_the_reader(tmp_path):
    from recsync.errors import DataError
    from recsync.io.data_plan import one_reader_data

    source = one_reader_data(None, _files(tmp_path, strict=True), TrainSpec(), background=True)
    with pytest.raises(DataError, match="line 301"):
        list(source.train_batches())


MAIN_SCRIPT = """
import sys
if __name__ == "__mp_main__":
    open(sys.argv[1], "w").close()  # a spawned child ran this script again
elif __name__ == "__main__":
    from recsync.data.synthetic import SyntheticSpec
    from recsync.io.sources import SyntheticData
    from recsync.optim.train_spec import TrainSpec

    spec = SyntheticSpec(num_train=1_000, num_dense=2, table_rows=(20,) * 2, num_test=100)
    data = SyntheticData(spec, TrainSpec(batch_size=100), background=True)
    print(sum(batch.batch_size for batch in data.train_batches()))
"""


def test_the_producer_does_not_run_its_parents_main_script_again(tmp_path):
    # in a Ray actor the main script is Ray's worker's, which imports Ray
    script, ran = tmp_path / "main.py", tmp_path / "ran-again"
    script.write_text(MAIN_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(ran)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "1000", done.stdout + done.stderr
    assert not ran.exists()
