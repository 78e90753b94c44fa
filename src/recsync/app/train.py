"""One pass of training with the reference trainer, driven by a config, into a run directory.

The data is either the synthetic task (its teacher gives the best reachable AUC) or files
read by `recsync.io.readers`, with a held-out set from `data.test_path` or a seeded
`data.test_fraction` of the stream. Evaluation happens every `run.eval_every` examples and
at the end; EPS counts training wall time only (reading included, evaluation excluded).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from recsync.app.config import Config, FileData, RunSpecs
from recsync.app.plots import plot_curves
from recsync.app.run_dir import CURVES, RunDir
from recsync.data.batch import Batch, concat, rebatch
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.errors import DataError, RecsyncError
from recsync.io.readers import open_dataset
from recsync.metrics.quality import Quality
from recsync.trainer.reference import ReferenceTrainer

TEST_READ_ROWS = 8192


class SyntheticData:
    """The synthetic task's training stream and test split, and its teacher's AUC."""

    def __init__(self, spec: SyntheticSpec, batch_size: int):
        self.task = SyntheticTask(spec)
        self.batch_size = batch_size
        self.total_examples: int | None = spec.num_train
        self.skips = SkipReport()
        self.test, _ = self.task.test_set()
        self.teacher_auc: float | None = self.task.teacher_auc()

    def train_batches(self) -> Iterator[Batch]:
        return self.task.train_batches(self.batch_size)

    def test_set(self) -> Batch | None:
        return self.test


class FileTrainingData:
    """Batches from files, and a held-out set: the test files (read up front, at most
    test_max_examples), or examples held out of the stream by a seeded coin with probability
    test_fraction until test_max_examples are held (then the test set is the ones held so
    far: intermediate evaluations see a growing set)."""

    def __init__(self, files: FileData, batch_size: int, seed: int):
        self.files = files
        self.batch_size = batch_size
        self.total_examples: int | None = None
        self.teacher_auc: float | None = None
        self.skips = SkipReport()
        self._held: list[Batch] = []
        self._held_examples = 0
        self._test: Batch | None = None
        self._coin = torch.Generator().manual_seed(seed)
        if files.test_paths:
            self._read_test_files()
        self._reader = self._open(files.paths, batch_size)

    def _open(self, paths, batch_size: int):
        f = self.files
        reader = open_dataset(
            paths, f.fmt, f.schema, batch_size=batch_size, strict=f.strict, skips=self.skips
        )
        return map(self._prepared, reader)

    def _prepared(self, batch: Batch) -> Batch:
        if not self.files.dense_log1p:
            return batch
        return dataclasses.replace(batch, dense=torch.log1p(batch.dense.clamp_min(0.0)))

    def _read_test_files(self) -> None:
        limit = self.files.test_max_examples
        for batch in self._open(self.files.test_paths, min(limit, TEST_READ_ROWS)):
            room = limit - self._held_examples
            self._hold(batch if batch.batch_size <= room else batch.slice(0, room))
            if self._held_examples >= limit:
                break

    def _hold(self, batch: Batch) -> None:
        if batch.batch_size:
            self._held.append(batch)
            self._held_examples += batch.batch_size
            self._test = None

    def _split(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        for batch in batches:
            room = self.files.test_max_examples - self._held_examples
            if room <= 0:
                yield batch
                continue
            held = torch.rand(batch.batch_size, generator=self._coin) < self.files.test_fraction
            held[held.nonzero().flatten()[room:]] = False
            self._hold(batch.select(held))
            kept = batch.select(~held)
            if kept.batch_size:
                yield kept

    def train_batches(self) -> Iterator[Batch]:
        if self.files.test_fraction == 0:
            return self._reader
        return rebatch(self._split(self._reader), self.batch_size)

    def test_set(self) -> Batch | None:
        if self._test is None and self._held:
            self._test = concat(self._held)
        return self._test


def open_training_data(specs: RunSpecs, seed: int) -> SyntheticData | FileTrainingData:
    """The run's data source: synthetic, or files (opened now: a missing file fails early)."""
    if specs.synthetic is not None:
        return SyntheticData(specs.synthetic, specs.train.batch_size)
    assert specs.files is not None
    return FileTrainingData(specs.files, specs.train.batch_size, seed)


def _quality(trainer: ReferenceTrainer, test: Batch | None, examples: int) -> Quality | None:
    """Held-out quality; None if the held-out set is empty or of one class."""
    if test is None or test.batch_size == 0 or len(test.labels.unique()) < 2:
        return None
    try:
        return trainer.evaluate(test)
    except ValueError as error:
        raise RecsyncError(f"evaluation after {examples} examples failed: {error}") from None


class TrainingLoop:
    """Trains on every batch once, evaluates on schedule, logs records into the run dir."""

    def __init__(
        self,
        trainer: ReferenceTrainer,
        data: SyntheticData | FileTrainingData,
        run_dir: RunDir,
        eval_every: int,
        report: bool,
    ):
        self.trainer, self.data, self.run_dir = trainer, data, run_dir
        self.eval_every = eval_every
        self.report = report
        self.records: list[dict[str, Any]] = []
        self.quality: Quality | None = None
        self._loss_sum, self._loss_examples = 0.0, 0
        self._eval_seconds = 0.0
        self._started = time.perf_counter()

    @property
    def train_seconds(self) -> float:
        return time.perf_counter() - self._started - self._eval_seconds

    @property
    def eps(self) -> float:
        seconds = self.train_seconds
        return self.trainer.examples_trained / seconds if seconds > 0 else 0.0

    def run(self, progress: Progress) -> None:
        task = progress.add_task("train", total=self.data.total_examples, eps=0.0)
        next_eval = self.eval_every
        for batch in self.data.train_batches():
            loss = self.trainer.train_step(batch)
            self._loss_sum += float(loss) * batch.batch_size
            self._loss_examples += batch.batch_size
            examples = self.trainer.examples_trained
            progress.update(task, completed=examples, eps=self.eps)
            if self.eval_every and examples >= next_eval:
                next_eval += self.eval_every * ((examples - next_eval) // self.eval_every + 1)
                self.evaluate(progress)
        if self.trainer.examples_trained == 0:
            raise DataError("no training examples: the data is empty (or every line skipped)")
        last = self.records[-1] if self.records else None
        if last is None or last["examples"] != self.trainer.examples_trained:
            self.evaluate(progress)
        if self.quality is None:
            raise DataError("the held-out set is empty or has one class: cannot evaluate")

    def evaluate(self, progress: Progress) -> None:
        started = time.perf_counter()
        examples = self.trainer.examples_trained
        quality = _quality(self.trainer, self.data.test_set(), examples)
        self._eval_seconds += time.perf_counter() - started
        self.quality = quality
        record: dict[str, Any] = {
            "examples": examples,
            "train_loss": self._loss_sum / self._loss_examples if self._loss_examples else None,
            "test_examples": quality.examples if quality else None,
            "test_auc": quality.auc if quality else None,
            "test_ne": quality.ne if quality else None,
            "test_logloss": quality.logloss if quality else None,
            "test_calibration": quality.calibration if quality else None,
            "eps": self.eps,
            "train_seconds": self.train_seconds,
            "elapsed_seconds": time.perf_counter() - self._started,
        }
        self._loss_sum, self._loss_examples = 0.0, 0
        self.records.append(record)
        self.run_dir.append_metrics(record)
        if quality and self.report:
            message = f"{examples:,} examples: test AUC {quality.auc:.4f}, NE {quality.ne:.4f}"
            progress.console.print(message, highlight=False)


def _progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("examples  {task.fields[eps]:>9,.0f} ex/s"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def run_training(config: Config, run_dir: RunDir, progress: bool = True) -> dict[str, Any]:
    """Train one pass as `config` says, writing into `run_dir`; returns the summary (also
    written to summary.json): test_auc, test_ne, test_logloss, test_calibration,
    test_examples, train_loss, eps, train_seconds, examples_trained, teacher_auc (None for
    file data), skipped (SkipReport.as_dict(): total, by_reason, first) and run_dir."""
    specs = config.to_specs()
    try:
        run_dir.write_config(config)
        data = open_training_data(specs, config.run.seed)
        trainer = ReferenceTrainer(specs.model, specs.train)
        loop = TrainingLoop(trainer, data, run_dir, config.run.eval_every, report=progress)
        with _progress_bar(progress) as bar:
            loop.run(bar)
        quality = loop.quality
        assert quality is not None
        final = loop.records[-1]
        summary = {
            "run_dir": str(run_dir.path),
            "examples_trained": trainer.examples_trained,
            "train_seconds": final["train_seconds"],
            "eps": final["eps"],
            "train_loss": final["train_loss"],
            "test_examples": quality.examples,
            "test_auc": quality.auc,
            "test_ne": quality.ne,
            "test_logloss": quality.logloss,
            "test_calibration": quality.calibration,
            "teacher_auc": data.teacher_auc,
            "skipped": data.skips.as_dict(),
        }
        run_dir.write_summary(summary)
        plot_curves(
            loop.records,
            run_dir.path / CURVES,
            teacher_auc=data.teacher_auc,
            title=run_dir.path.name,
        )
    finally:
        run_dir.close()
    return summary
