"""Evaluation while a distributed job trains, the same on both drivers: at each multiple of
`eval_every` examples handed out that the stream goes past (a mark; one at the stream's
very end is the run's last record), the driver gathers the reports of the nodes that hold
the model (trainers, dense servers, embedding servers; their tensors are copies taken
while training goes on) and this module turns them into one metrics record: the examples
trained so far, the mean train loss since the previous record, and the model's held-out
quality. When to evaluate and in what order the records come: coordinator/supervisor.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import JobEnd, evaluate_model, final_dense, model_state
from recsync.coordinator.topology import Topology
from recsync.data.batch import Batch
from recsync.data.shares import StreamPosition
from recsync.metrics.quality import Quality
from recsync.protocol.address import Address, Role
from recsync.strategy.roles import model_roles
from recsync.trainer.stats import TrainerReport

STOPPING_METRICS = ("test_logloss", "test_ne", "test_auc")


@dataclass(frozen=True)
class EarlyStopping:
    """Stop training once `patience` evaluations in a row have not improved `metric` by
    more than `min_delta` (patience 0: never stop early), not before `min_examples`."""

    metric: str = "test_logloss"
    patience: int = 0
    min_delta: float = 0.0
    min_examples: int = 0

    def __post_init__(self) -> None:
        if self.metric not in STOPPING_METRICS:
            raise ValueError(f"metric must be one of {list(STOPPING_METRICS)}, got {self.metric!r}")
        if self.patience < 0 or self.min_delta < 0 or self.min_examples < 0:
            raise ValueError("patience, min_delta and min_examples must be >= 0")


class EarlyStopWatch:
    """The best record so far by the rule's metric, and whether to stop now."""

    def __init__(self, rule: EarlyStopping):
        self.rule = rule
        self.best: float | None = None
        self.best_examples: int | None = None
        self.waited = 0
        self.stopped_at: int | None = None
        self.improved = False  # the last record observed is the best so far

    def observe(self, record: dict[str, Any]) -> bool:
        """Take one record; True when training should stop (once)."""
        self.improved = False
        if record.get(self.rule.metric) is None:
            return False  # not evaluated (a held-out set of one class)
        value, rule = float(record[self.rule.metric]), self.rule
        higher = rule.metric == "test_auc"
        best = self.best
        if best is None or (
            value > best + rule.min_delta if higher else value < best - rule.min_delta
        ):
            self.best, self.best_examples, self.waited = value, int(record["examples"]), 0
            self.improved = True
            return False
        self.waited += 1
        examples = int(record["examples"])
        waited = rule.patience and self.waited >= rule.patience
        if waited and examples >= rule.min_examples and self.stopped_at is None:
            self.stopped_at = examples
            return True
        return False

    def summary(self) -> dict[str, Any] | None:
        """What the summary says of it (None: early stopping off)."""
        if not self.rule.patience:
            return None
        return self.best_record()

    def best_record(self) -> dict[str, Any]:
        """The best value of the rule's metric, where it was reached, where a run stopped."""
        return {
            "metric": self.rule.metric,
            "best": self.best,
            "best_examples": self.best_examples,
            "stopped_at_examples": self.stopped_at,
        }


def model_quality(topology: Topology, reports: dict[Address, Any], test: Batch) -> Quality:
    """Held-out quality of the model the nodes' reports hold (those of `Evaluations.nodes`)."""
    spec = topology.spec
    now = JobEnd("now", reports, {}, 0.0)
    return evaluate_model(
        spec,
        topology.layout,
        final_dense(spec, now),
        [s.state for s in now.of_role(Role.EMBEDDING_SERVER)],
        test,
    )


def reported_model(topology: Topology, reports: dict[Address, Any], examples: int) -> JobState:
    """The model the nodes' reports hold as a JobState, `examples` into the run (a model to
    export or score; its stream position is approximate: batches were in flight)."""
    now = JobEnd("now", reports, {}, 0.0)
    position = StreamPosition(topology.spec.start_example + examples)
    return model_state(topology, now, final_dense(topology.spec, now), position, 0)


class Evaluations:
    """The schedule and the records of one run's evaluations (eval_every 0: none)."""

    def __init__(
        self,
        topology: Topology,
        eval_every: int,
        early_stopping: EarlyStopping | None = None,
        keep_best: bool = False,
        mark_examples: int = 0,
    ):
        """`keep_best`: keep the model of the best record by the early-stopping rule's
        metric (`best_state`), the end's included. `mark_examples`: held-out examples a mark
        in the middle of the run is scored on (data/held_out.py; 0: all)."""
        if eval_every < 0:
            raise ValueError(f"run.eval_every must be >= 0, got {eval_every}")
        if mark_examples < 0:
            raise ValueError(f"run.eval_examples must be >= 0, got {mark_examples}")
        self.topology, self.eval_every, self.keep_best = topology, eval_every, keep_best
        self.mark_examples = mark_examples
        self.best_state: JobState | None = None
        self.watch = EarlyStopWatch(early_stopping or EarlyStopping())
        self.stop_now = False  # the last record says: stop training
        self.next_mark = eval_every
        self.records: list[dict[str, Any]] = []
        self.offset = 0  # examples trained before the trainers' counts began (a rollback)
        self.merged = 0  # marks a snapshot for a later mark stood for (passed in one poll)
        self._loss_sum, self._examples = 0.0, 0  # over all trainers, at the last record

    def new_segment(self, topology: Topology, offset: int) -> None:
        """The job restarted (rolled back) with new trainers, `offset` examples in: their
        counts start from 0 again. The marks go on where they were: one recorded before the
        rollback is not evaluated again (`again_from` for those never scored)."""
        self.topology, self.offset = topology, offset
        self._loss_sum, self._examples = 0.0, offset

    def passed(self, handed: int, trained: int | None = None) -> list[int]:
        """The marks passed (each once) when `handed` examples went out and the model
        stands for `trained` of them (None: `handed`): those at or below `trained` that the
        stream went on past. A mark at the stream's end is not one: the run's last record
        stands for it."""
        trained = handed if trained is None else trained
        marks: list[int] = []
        while self.eval_every and self.next_mark <= trained and self.next_mark < handed:
            marks.append(self.next_mark)
            self.next_mark += self.eval_every
        return marks

    def again_from(self, mark: int) -> None:
        """The evaluations from `mark` on were dropped unscored (a rollback): due again."""
        self.next_mark = min(self.next_mark, mark)

    @staticmethod
    def nodes(topology: Topology) -> list[Address]:
        """The nodes whose reports an evaluation needs."""
        return [n.address for n in topology.nodes if n.address.role in model_roles()]

    def record(
        self, reports: dict[Address, Any], quality: Quality, seconds: float
    ) -> dict[str, Any]:
        """One metrics record: the trainers' counts in `reports`, the model's `quality`
        (`model_quality` of the same reports), `seconds` into training."""
        trainers: list[TrainerReport] = [
            r for a, r in sorted(reports.items()) if a.role is Role.TRAINER
        ]
        examples = self.offset + sum(t.stats.total_examples for t in trainers)
        loss_sum = sum(t.stats.loss_sum for t in trainers)
        new_examples = examples - self._examples
        record = {
            "examples": examples,
            "train_loss": (loss_sum - self._loss_sum) / new_examples if new_examples else None,
            "test_examples": quality.examples,
            "test_auc": quality.auc,
            "test_ne": quality.ne,
            "test_logloss": quality.logloss,
            "test_calibration": quality.calibration,
            "eps": examples / seconds if seconds > 0 else 0.0,
            "train_seconds": seconds,
        }
        self._loss_sum, self._examples = loss_sum, examples
        self.records.append(record)
        self.stop_now = self.watch.observe(record)
        if self.watch.improved and self.keep_best:
            self.best_state = reported_model(self.topology, reports, examples - self.offset)
        return record

    def final(self, summary: dict[str, Any], state: JobState | None = None) -> dict[str, Any]:
        """The run's last record, from its summary (its train loss: since the last record);
        `state`: the end's model, kept if it is the best."""
        trained = summary["examples_trained"]  # by the trainers since the offset
        examples = self.offset + trained
        loss_sum = (summary["train_loss"] or 0.0) * trained
        new_examples = examples - self._examples
        keys = ("test_examples", "test_auc", "test_ne", "test_logloss", "test_calibration")
        record = {
            "examples": examples,
            "train_loss": (loss_sum - self._loss_sum) / new_examples if new_examples else None,
            **{k: summary[k] for k in keys},
            "eps": summary["eps"],
            "train_seconds": summary["train_seconds"],
        }
        self.records.append(record)
        self.watch.observe(record)
        if self.watch.improved and self.keep_best:
            self.best_state = state
        summary["early_stopping"] = self.watch.summary()
        if self.merged:
            summary["evaluation_marks_merged"] = self.merged
        if self.keep_best and self.best_state is not None:
            summary["best"] = self.watch.best_record()
        return record
