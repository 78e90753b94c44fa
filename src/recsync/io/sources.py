"""The synthetic task's training source, and what a run's files are ([data] resolved).

The synthetic source hands out training batches, `train.epochs` passes (data/epochs.py: the
first in order, later ones shuffled), a reader's share of them (`select`), and holds the
task's test split and its teacher's AUC. With `background`, the training stream is made in
a process of its own (io/background.py). Files are read by io/shared_text.py.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from recsync.data.batch import Batch, concat, rebatch
from recsync.data.epochs import epochs_of
from recsync.data.keys import fixed_keys
from recsync.data.shares import Select, selected
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask, skip_examples
from recsync.io.background import BackgroundBatches
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
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
    # (feature, rows) of each fixed table among hash tables (ModelSpec.fixed_rows)
    fixed_rows: tuple[tuple[int, int], ...] = ()


def prepared(batch: Batch, files: FileData) -> Batch:
    """A batch as read, its dense features as the model takes them (log(1 + x) if asked),
    the ids of fixed tables among hash tables taken modulo their rows (data/keys.py)."""
    if files.fixed_rows:
        batch = dataclasses.replace(batch, ids=fixed_keys(batch.ids, files.fixed_rows))
    if not files.dense_log1p:
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
        part = prepared(batch if batch.batch_size <= room else batch.slice(0, room), files)
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
