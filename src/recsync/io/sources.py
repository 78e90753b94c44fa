"""Training data sources of a run: the synthetic task, or files with a held-out split.

A source hands out training batches, `train.epochs` passes (data/epochs.py: the first in
order, later ones shuffled), and holds the test set: the synthetic task's test split (and
its teacher's AUC), test files read up front, or examples held out of the stream by a
seeded coin in the first pass, the same rows left out of every later pass.

With `background`, the training stream is made in a process of its own (io/background.py):
the synthetic task's, or a file source's (which sends back, beside its batches, the rows it
held out and its skip counts, so that the test set and the skips are what they would be
read here).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from recsync.data.batch import Batch, concat, rebatch
from recsync.data.criteo import CriteoSchema
from recsync.data.epochs import epochs_of
from recsync.data.libsvm import LibFFMSchema, LibSVMSchema
from recsync.data.shares import Select, selected
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask, skip_examples
from recsync.data.tabular import TabularSchema
from recsync.io.background import BackgroundBatches, decoded, encoded
from recsync.optim.train_spec import TrainSpec

TEST_READ_ROWS = 8192


@dataclass(frozen=True)
class FileData:
    """File data resolved from [data]: what `recsync.io.readers.open_dataset` needs."""

    paths: tuple[str, ...]  # local paths or URLs (io/storage.py)
    fmt: str
    schema: CriteoSchema | LibSVMSchema | LibFFMSchema | TabularSchema
    strict: bool
    test_paths: tuple[str, ...]
    test_fraction: float
    test_max_examples: int
    dense_log1p: bool


def prepared(batch: Batch, dense_log1p: bool) -> Batch:
    """A batch as read, its dense features as the model takes them (log(1 + x) if asked)."""
    if not dense_log1p:
        return batch
    return dataclasses.replace(batch, dense=torch.log1p(batch.dense.clamp_min(0.0)))


def read_test_files(files: FileData, skips: SkipReport) -> Batch | None:
    """The test files' first `test_max_examples` examples (None: none); their bad lines
    counted in `skips`."""
    from recsync.io.readers import open_dataset  # pyarrow, numba: only where files are read

    limit, held, count = files.test_max_examples, [], 0
    reader = open_dataset(
        files.test_paths,
        files.fmt,
        files.schema,
        batch_size=min(limit, TEST_READ_ROWS),
        strict=files.strict,
        skips=skips,
    )
    for batch in reader:
        room = limit - count
        part = prepared(
            batch if batch.batch_size <= room else batch.slice(0, room), files.dense_log1p
        )
        if part.batch_size:
            held.append(part)
            count += part.batch_size
        if count >= limit:
            break
    return concat(held) if held else None


class StreamPositions:
    """A source whose position counts the stream's examples (a reader's share of them)."""

    def position_after(self, examples: int) -> int:
        """The stream units of its share consumed after handing out `examples`."""
        return examples

    def position_at_end(self, examples: int) -> int:
        """The same, once its share ran out."""
        return examples


class SyntheticData(StreamPositions):
    """The synthetic task's training stream and test split, and its teacher's AUC."""

    def __init__(
        self,
        spec: SyntheticSpec,
        train: TrainSpec,
        start_example: int = 0,
        background: bool = False,
        select: Select | None = None,
        labelled: bool = True,
    ):
        """`labelled` False: the training stream's labels are left out (SyntheticTask)."""
        self.spec = spec
        self.labelled = labelled
        self.task = SyntheticTask(spec, labelled)
        self.train = train
        self.start_example = start_example
        self.background = background
        self.select = select
        self.total_examples: int | None = spec.num_train * train.epochs - start_example
        self.skips = SkipReport()

    @property
    def teacher_auc(self) -> float | None:
        return self.task.teacher_auc()

    def train_batches(self) -> Iterator[Batch]:
        if self.background:
            return BackgroundBatches(
                functools.partial(
                    _synthetic_stream,
                    self.spec,
                    self.train,
                    self.start_example,
                    self.select,
                    self.labelled,
                )
            )
        train, select = self.train, self.select
        if train.epochs == 1 and select is not None:
            return self.task.train_selected(train.batch_size, select)
        if select is not None:
            return selected(self._stream(), self.start_example, select, train.batch_size)
        return self._stream()

    def _stream(self) -> Iterator[Batch]:
        """The whole stream (every reader's share) from `start_example`."""
        train = self.train
        if train.epochs == 1:
            return self.task.train_batches(train.batch_size, self.start_example)
        passes = epochs_of(
            lambda _: self.task.train_batches(train.batch_size),
            train.epochs,
            train.shuffle_buffer,
            train.seed,
        )
        return rebatch(skip_examples(passes, self.start_example), train.batch_size)

    def test_set(self) -> Batch | None:
        return self.task.test_set()[0]


def _synthetic_stream(
    spec: SyntheticSpec,
    train: TrainSpec,
    start_example: int,
    select: Select | None,
    labelled: bool = True,
) -> Iterator[Batch]:
    """The synthetic training stream, made where this runs (a background producer)."""
    return SyntheticData(
        spec, train, start_example, select=select, labelled=labelled
    ).train_batches()


@dataclass(frozen=True)
class HeldOut:
    """Rows a background file stream held out of training (they join the test set)."""

    arrays: tuple[np.ndarray, ...]


class FileTrainingData(StreamPositions):
    """Batches from files, and a held-out set: the test files (read up front, at most
    test_max_examples), or examples held out of the stream by a seeded coin with probability
    test_fraction until test_max_examples are held (then the test set is the ones held so
    far: intermediate evaluations see a growing set)."""

    def __init__(
        self,
        files: FileData,
        train: TrainSpec,
        background: bool = False,
        select: Select | None = None,
    ):
        self.background = background
        self.start_example = 0
        self.select = select
        self.files = files
        self.train = train
        self.batch_size = batch_size = train.batch_size
        self.total_examples: int | None = None
        self.teacher_auc: float | None = None
        self.skips = SkipReport()
        self._held: list[Batch] = []
        self._held_examples = 0
        self._test: Batch | None = None
        if files.test_paths:
            self._read_test_files()
        self._reader = self._open(files.paths, batch_size)

    def _open(
        self, paths: tuple[str, ...], batch_size: int, skips: SkipReport | None = None
    ) -> Iterator[Batch]:
        from recsync.io.readers import open_dataset  # pyarrow, numba: only where files are read

        f = self.files
        skips = self.skips if skips is None else skips
        reader = open_dataset(
            paths, f.fmt, f.schema, batch_size=batch_size, strict=f.strict, skips=skips
        )
        return map(self._prepared, reader)

    def _prepared(self, batch: Batch) -> Batch:
        return prepared(batch, self.files.dense_log1p)

    def _read_test_files(self) -> None:
        self._hold_all(read_test_files(self.files, self.skips))

    def _hold_all(self, batch: Batch | None) -> None:
        if batch is not None:
            self._hold(batch)

    def _hold(self, batch: Batch) -> None:
        if batch.batch_size:
            self._held.append(batch)
            self._held_examples += batch.batch_size
            self._test = None

    def _split(self, batches: Iterator[Batch], first: bool) -> Iterator[Batch]:
        """The stream without its held-out rows: the same coin, drawn afresh each pass, so
        that a later pass leaves out exactly the rows the first one held out."""
        coin = torch.Generator().manual_seed(self.train.seed)
        held_examples = 0
        for batch in batches:
            room = self.files.test_max_examples - held_examples
            if room <= 0:
                yield batch
                continue
            held = torch.rand(batch.batch_size, generator=coin) < self.files.test_fraction
            held[held.nonzero().flatten()[room:]] = False
            held_examples += int(held.sum())
            if first:
                self._hold(batch.select(held))
            kept = batch.select(~held)
            if kept.batch_size:
                yield kept

    def _one_pass(self, epoch: int) -> Iterator[Batch]:
        if epoch == 0:
            reader = self._reader
        else:  # a line skipped is counted once, in the first pass
            reader = self._open(self.files.paths, self.batch_size, SkipReport())
        return reader if self.files.test_fraction == 0 else self._split(reader, epoch == 0)

    def train_batches(self) -> Iterator[Batch]:
        if self.background:
            make = functools.partial(
                _file_stream, self.files, self.train, self.start_example, self.select
            )
            return BackgroundBatches(make, on_side=self._learned)
        if self.select is not None:
            whole = self._whole_stream()
            return selected(whole, self.start_example, self.select, self.batch_size)
        return self._whole_stream()

    def _whole_stream(self) -> Iterator[Batch]:
        """The training stream (every reader's share) from `start_example`."""
        train = self.train
        stream = epochs_of(self._one_pass, train.epochs, train.shuffle_buffer, train.seed)
        if self.start_example:
            return rebatch(skip_examples(stream, self.start_example), self.batch_size)
        if self.files.test_fraction == 0 and train.epochs == 1:
            return stream
        return rebatch(stream, self.batch_size)

    def test_set(self) -> Batch | None:
        if self._test is None and self._held:
            self._test = concat(self._held)
        return self._test

    def _learned(self, item: HeldOut | SkipReport) -> None:
        """What the background stream learned: rows it held out, or its skips so far."""
        if isinstance(item, HeldOut):
            self._hold(decoded(item.arrays))
            return
        self.skips.counts, self.skips.first = dict(item.counts), dict(item.first)


def _file_stream(
    files: FileData, train: TrainSpec, start_example: int, select: Select | None
) -> Iterator[Batch | HeldOut | SkipReport]:
    """A file source's training stream, made where this runs (a background producer),
    with the rows it holds out and its skip counts (whenever they changed) before each
    batch, and both once more at the end."""
    source = FileTrainingData(dataclasses.replace(files, test_paths=()), train, select=select)
    source.start_example = start_example
    held, skipped = 0, 0

    def learned() -> Iterator[HeldOut | SkipReport]:
        nonlocal held, skipped
        yield from (HeldOut(encoded(rows)) for rows in source._held[held:])
        held = len(source._held)
        if source.skips.total != skipped:
            skipped = source.skips.total
            yield SkipReport(dict(source.skips.counts), dict(source.skips.first))

    for batch in source.train_batches():
        yield from learned()
        yield batch
    yield from learned()


def open_training_data(
    synthetic: SyntheticSpec | None,
    files: FileData | None,
    train: TrainSpec,
    start_example: int = 0,
    background: bool = False,
    select: Select | None = None,
    labelled: bool = True,
) -> SyntheticData | FileTrainingData:
    """The run's data source: synthetic, or files (opened now: a missing file fails early);
    the training stream (`train.epochs` passes, cut into `train.batch_size` batches) starts
    after `start_example` examples (a resumed run); `background`: the training stream is
    made in a process of its own; `select`: only the pieces of the stream it picks (a
    reader's share, data/shares.py; the stream's examples numbered from the job's first
    start); `labelled` False: a synthetic training stream's labels are left out (all 0:
    priced math needs the ids only; a file's labels are read as they come)."""
    if synthetic is not None:
        return SyntheticData(synthetic, train, start_example, background, select, labelled)
    assert files is not None
    source = FileTrainingData(files, train, background, select)
    source.start_example = start_example
    return source
