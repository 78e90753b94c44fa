"""`recsync calibrate --data FILE`: what a reader node spends making one example of the
job's own files, written into the cost profile for the simulator to charge.

The reader is timed doing what its background producer does for a file job (io/sources.py,
io/background.py): the job's files read in the job's format and schema, the test rows held
out, each batch encoded and pickled for the pipe, and unpickled and decoded again on the
reader's side. CPU seconds of the process (pyarrow's threads included), over the examples
handed out; a first pass over a small sample loads compiled code and tables once, as a
producer's first batch does (not charged: io/background.py starts counting after it)."""

from __future__ import annotations

import dataclasses
import pickle
import statistics
import time
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import torch

from recsync.app.config.load import load_config
from recsync.app.runs.cost_profile import profile_cost, read_profile
from recsync.errors import ConfigError
from recsync.io.background import decoded, encoded
from recsync.io.data_plan import one_reader_data
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import FileData
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import CostModel

WARM_EXAMPLES = 2_048  # the first pass: compiled code and tables loaded once
READER_PASSES = 3  # timed passes, their median taken


@dataclass(frozen=True)
class ReaderCost:
    """A file's reader cost: CPU seconds an example in each timed pass (`passes`, each
    over the first examples handed out: `examples` in the shortest, where the file or the
    time ran out first) and their median."""

    fmt: str
    examples: int
    passes: tuple[float, ...]
    example_bytes: float  # the files' bytes as stored over their rows (or lines)

    @property
    def example_s(self) -> float:
        return statistics.median(self.passes)


def job_files(
    data: Path, fmt: str | None, config: Path | None, overrides: dict[str, Any]
) -> tuple[FileData, TrainSpec]:
    """The files and training spec of the job `config` describes (its schema, held-out
    set and batch size; the defaults without one), reading `data` in format `fmt` (None:
    the config's file format, or the one `data`'s name says), --set `overrides` on top."""
    if not data.is_file():
        raise ConfigError(f"--data {data}: no such file")
    job = load_config(config).data if config is not None else None
    given: dict[str, Any] = {"data.path": str(data)}
    if fmt is not None:
        given["data.source"] = fmt
    elif job is None or job.source == "synthetic":
        given["data.source"] = "auto"
    if job is None or (job.test_path is None and not job.test_fraction):
        given["data.test_path"] = str(data)  # read up front, not timed: nothing held out
    specs = load_config(config, {**given, **overrides}).to_specs()
    assert specs.files is not None  # data.source is a file format here
    return specs.files, specs.train


def _reader_source(files: FileData, train: TrainSpec) -> SharedTextData:
    """What a job's only reader reads the files with (io/data_plan.py)."""
    source = one_reader_data(None, files, train)
    assert isinstance(source, SharedTextData)
    return source


def _pass_seconds(
    files: FileData, train: TrainSpec, examples: int, budget_s: float
) -> tuple[float, int]:
    """CPU seconds an example of one pass over the first `examples` examples handed out
    (fewer where the file ends, or `budget_s` of CPU went by first), and how many."""
    source = _reader_source(dataclasses.replace(files, test_paths=()), train)
    handed = 0
    start = time.process_time()
    for batch in source.train_batches():
        arrays = ForkingPickler.dumps(encoded(batch))  # what the producer's pipe sends
        decoded(pickle.loads(arrays))  # and the reader's process takes back
        handed += batch.batch_size
        if handed >= examples or time.process_time() - start > budget_s:
            break
    spent = time.process_time() - start
    if not handed:
        raise ConfigError(f"--data {files.paths[0]}: no example to read (an empty file?)")
    return spent / handed, handed


def measure_reader(
    files: FileData,
    train: TrainSpec,
    examples: int = 50_000,
    repeats: int = READER_PASSES,
    budget_s: float = 20.0,
) -> ReaderCost:
    """The reader's CPU an example of `files`: `repeats` passes over the first `examples`
    (each at most `budget_s` CPU seconds), after a first pass over a small sample."""
    if repeats < 1 or examples < 1:
        raise ConfigError(f"reader calibration: repeats and examples must be >= 1, got {repeats}")
    torch.set_num_threads(1)  # as in the producer (io/background.py)
    _pass_seconds(files, train, min(examples, WARM_EXAMPLES), budget_s)
    passes = [_pass_seconds(files, train, examples, budget_s) for _ in range(repeats)]
    handed = min(count for _, count in passes)
    seconds = tuple(seconds for seconds, _ in passes)
    return ReaderCost(files.fmt, handed, seconds, stored_bytes_per_example(files))


def stored_bytes_per_example(files: FileData) -> float:
    """The files' bytes as stored over their rows (Parquet: the footers' counts) or lines
    (text, counted): what a reader downloads an example from an object store."""
    import pyarrow.parquet as pq

    from recsync.io.readers import infer_format, open_text
    from recsync.io.storage import file_size

    size = rows = 0
    for path in files.paths:
        size += file_size(path)
        fmt = files.fmt if files.fmt != "auto" else infer_format(path, files.schema)
        if fmt == "parquet":
            rows += pq.ParquetFile(path).metadata.num_rows
        else:
            with open_text(path) as lines:
                rows += sum(1 for _ in lines)
    if not rows:
        raise ConfigError(f"--data {files.paths[0]}: no example to read (an empty file?)")
    return size / rows


def with_reader_cost(cost: CostModel | None, measured: ReaderCost) -> CostModel:
    """`cost` (None: the defaults) with the reader's price of an example of `measured`'s
    format set to it."""
    cost = cost or CostModel()
    reading = dataclasses.replace(cost.file_example_s, **{measured.fmt: measured.example_s})
    stored = dataclasses.replace(cost.file_example_bytes, **{measured.fmt: measured.example_bytes})
    return dataclasses.replace(cost, file_example_s=reading, file_example_bytes=stored)


def base_profile(path: Path) -> CostModel | None:
    """The cost profile at `path` (None if there is no file there)."""
    if not path.exists():
        return None
    return profile_cost(read_profile(path), f"cost profile {path}")
