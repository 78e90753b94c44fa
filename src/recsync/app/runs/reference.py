"""One pass of training with the reference trainer, driven by a config, into a run directory.

The data is either the synthetic task (its teacher gives the best reachable AUC) or files
read by `recsync.io.readers`, with a held-out set from `data.test_path` or a seeded
`data.test_fraction` of the stream. Evaluation happens every `run.eval_every` examples and
at the end; EPS counts training wall time only (reading included, evaluation excluded).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from rich.progress import Progress

from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import BEST, save_checkpoint
from recsync.app.runs.plots import plot_curves
from recsync.app.runs.progress import examples_bar
from recsync.app.runs.run_dir import CURVES, RunDir
from recsync.coordinator.checkpoint import JobState, layout_slices
from recsync.coordinator.evaluation import EarlyStopping, EarlyStopWatch
from recsync.data.batch import Batch
from recsync.errors import DataError, RecsyncError
from recsync.io.data_plan import one_reader_data
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import SyntheticData
from recsync.metrics.quality import Quality
from recsync.optim.state import copy_state
from recsync.trainer.reference import ReferenceTrainer


def _quality(trainer: ReferenceTrainer, test: Batch | None, examples: int) -> Quality | None:
    """Held-out quality; None if the held-out set is empty or of one class."""
    if test is None or test.batch_size == 0 or torch.unique(test.labels).numel() < 2:
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
        data: SyntheticData | SharedTextData,
        run_dir: RunDir,
        eval_every: int,
        report: bool,
        early_stopping: EarlyStopping | None = None,
        keep_best: bool = False,
    ):
        self.trainer, self.data, self.run_dir = trainer, data, run_dir
        self.eval_every = eval_every
        self.watch = EarlyStopWatch(early_stopping or EarlyStopping())
        self.keep_best = keep_best
        self.best_state: JobState | None = None  # the best record's model (keep_best)
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
                if self.evaluate(progress):
                    break
        if self.trainer.examples_trained == 0:
            raise DataError("no training examples: the data is empty (or every line skipped)")
        last = self.records[-1] if self.records else None
        if last is None or last["examples"] != self.trainer.examples_trained:
            self.evaluate(progress)
        if self.quality is None:
            raise DataError("the held-out set is empty or has one class: cannot evaluate")

    def evaluate(self, progress: Progress) -> bool:
        """Record the model's held-out quality; True if training should stop early."""
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
        stop = self.watch.observe(record)
        if self.watch.improved and self.keep_best:
            self.best_state = reference_state(self.trainer, examples)
        return stop


def reference_state(trainer: ReferenceTrainer, data_position: int) -> JobState:
    """The reference trainer as a checkpoint (its one shard holds every table)."""
    embeddings = trainer.embeddings
    return JobState(
        dense=trainer.replica.flat.detach().clone(),
        dense_optimizer=copy_state(trainer.replica.optimizer.state_dict()),
        shards=[copy_state(s.state_dict()) for s in embeddings.shards],
        slices=layout_slices(embeddings.layout),
        data_position=data_position,
        global_step=embeddings.shards[0].global_step,
        in_flight_examples=0,
        strategy="reference",
    )


def run_training(config: Config, run_dir: RunDir, progress: bool = True) -> dict[str, Any]:
    """Train one pass as `config` says, writing into `run_dir`; returns the summary (also
    written to summary.json): test_auc, test_ne, test_logloss, test_calibration,
    test_examples, train_loss, eps, train_seconds, examples_trained, teacher_auc (None for
    file data), skipped (SkipReport.as_dict(): total, by_reason, first), run_dir, and the
    checkpoint it wrote (the model at the end, as a distributed run's)."""
    specs = config.to_specs()
    try:
        run_dir.write_config(config)
        data = one_reader_data(specs.synthetic, specs.files, specs.train)
        trainer = ReferenceTrainer(specs.model, specs.train)
        loop = TrainingLoop(
            trainer,
            data,
            run_dir,
            config.run.eval_every,
            report=progress,
            early_stopping=config.run.early_stopping.to_spec(),
            keep_best=config.run.keep_best,
        )
        with examples_bar("training", progress) as bar:
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
            "early_stopping": loop.watch.summary(),
        }
        state = reference_state(trainer, trainer.examples_trained)
        summary["checkpoint"] = {
            "path": str(save_checkpoint(run_dir.path, state)),
            "data_position": state.data_position,
            "global_step": state.global_step,
            "in_flight_examples": 0,
        }
        if loop.best_state is not None:
            best = save_checkpoint(run_dir.path, loop.best_state, BEST)
            summary["best"] = {**loop.watch.best_record(), "path": str(best)}
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
