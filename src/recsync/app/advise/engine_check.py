"""An advice checked on the real engine: its first and last ranked candidates (by speed:
the quality ranking needs seeds the engine cannot afford here) train the same slice of
the job's data on Ray, a few times each; whether the engine ranks them as the advice did,
and how far each predicted examples/s was from the engine's (the median run's; steady
examples/s on both sides, `coordinator/measures.steady_eps`).

It is a check of the simulator's prices and model against the engine on the machines the
advice was for, so it means something only where the Ray cluster is those machines: on
one machine, a `shared` cluster file of its cores (docs/advise.md)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from recsync.app.advise.advice import Advice
from recsync.app.advise.candidates import Candidate, JobSource
from recsync.app.advise.measure import data_changes, whole_batches
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.spec import JobSpec
from recsync.errors import ConfigError

TEST_EXAMPLES = 512  # held out: the runs are timed, their AUC is not the point

RunJob = Callable[[JobSpec], dict[str, Any]]  # the engine: a job's summary


@dataclass(frozen=True)
class EngineRun:
    """One candidate's predicted and measured speed (examples/s)."""

    label: str
    rank: int
    predicted_eps: float
    engine_eps: float  # the median run's
    engine_eps_each: list[float]

    @property
    def predicted_over_engine(self) -> float:
        return self.predicted_eps / self.engine_eps


@dataclass(frozen=True)
class EngineCheck:
    """The advice's fastest and slowest candidates on the engine."""

    examples: int
    top: EngineRun
    bottom: EngineRun

    @property
    def predicted_gap(self) -> float:
        return self.top.predicted_eps / self.bottom.predicted_eps

    @property
    def engine_gap(self) -> float:
        return self.top.engine_eps / self.bottom.engine_eps

    @property
    def ranking_held(self) -> bool:
        return self.top.engine_eps > self.bottom.engine_eps

    def as_dict(self) -> dict[str, Any]:
        runs = {}
        for name, run in (("top", self.top), ("bottom", self.bottom)):
            runs[name] = asdict(run) | {"predicted_over_engine": run.predicted_over_engine}
        return {
            "examples": self.examples,
            **runs,
            "predicted_gap": self.predicted_gap,
            "engine_gap": self.engine_gap,
            "ranking_held": self.ranking_held,
        }


def engine_config_changes(candidate: Candidate, job: JobSource, examples: int) -> dict[str, Any]:
    """The keys that make `candidate`'s job train `examples` examples (whole batches) and
    stop there, with a small held-out set, early stopping off."""
    more: dict[str, Any] = {"run.early_stopping.patience": 0}
    config = candidate.config(job, more)
    examples = whole_batches(examples, config.train.batch_size)
    return more | data_changes(config, examples, TEST_EXAMPLES)


def _run(
    candidate: Candidate,
    rank: int,
    predicted: float,
    job: JobSource,
    examples: int,
    repeats: int,
    run_job: RunJob,
) -> EngineRun:
    config = candidate.config(job, engine_config_changes(candidate, job, examples))
    spec = job_spec(config, stop_after=whole_batches(examples, config.train.batch_size))
    each = [float(run_job(spec)["eps_steady"]) for _ in range(repeats)]
    return EngineRun(candidate.label, rank, predicted, statistics.median(each), each)


def engine_check(
    advice: Advice, job: JobSource, examples: int, repeats: int, run_job: RunJob
) -> EngineCheck:
    """Run the advice's fastest and slowest measured candidates on the engine (`run_job`),
    `repeats` times each, on `examples` examples of the job's data."""
    if repeats < 1:
        raise ConfigError(f"repeats: must be >= 1, got {repeats}")
    speeds = [r for r in advice.ranked if r.eps is not None]
    if len(speeds) < 2:
        raise ConfigError("the advice has fewer than two candidates measured: nothing to rank")
    fastest = max(speeds, key=lambda r: r.eps or 0.0)
    slowest = min(speeds, key=lambda r: r.eps or 0.0)
    top, bottom = (
        _run(r.candidate, r.rank, float(r.eps or 0.0), job, examples, repeats, run_job)
        for r in (fastest, slowest)
    )
    return EngineCheck(examples, top, bottom)
