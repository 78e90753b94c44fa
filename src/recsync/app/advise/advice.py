"""`advise`: from a job, a cluster file and options to every candidate measured and ranked
(pure of printing: the CLI and the documentation's generator print what it returns).

The steps, each point kept in the cache as soon as it is measured:

1. speed: every candidate (candidates.py) in priced math on a slice of the data, clean;
2. conditions: each strategy's fastest candidate under each of the cluster file's
   conditions (stragglers, a slow server);
3. quality: the fastest strategies' fastest candidates (at most `quality_candidates`, none
   slower than `fast_enough` times the fastest) in real math on a sample of the data, once
   per seed; a strategy's other candidates are given that quality (`quality_from`);
4. the ranking (rank.py).

With a budget, no point starts once it is spent; the points not measured are listed.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recsync.app.advise.cache import PointCache
from recsync.app.advise.candidates import Candidate, JobSource, Refusal, candidates
from recsync.app.advise.cluster import CLEAN, ClusterFile, condition_cost
from recsync.app.advise.measure import (
    FLAT_MIN_DELTA,
    FLAT_PATIENCE,
    QUALITY_EVALUATIONS,
    priced_point,
    quality_point,
)
from recsync.app.advise.points import Points, Progress
from recsync.app.advise.rank import LOWER_BOUND, Measured, Ranked, rank
from recsync.app.config.schema import Config
from recsync.data.shares import block_for
from recsync.errors import ConfigError, JobFailed
from recsync.ps.hash_shard import TableFullError
from recsync.runtime.pools import CallPool
from recsync.runtime.sim.cost import CostModel

REFUSALS = (ConfigError, JobFailed, TableFullError)  # a point refused, or its job failed


@dataclass(frozen=True)
class AdviseOptions:
    """How much an advice measures. `slice_examples`: examples of each priced point (at
    least `batches_per_thread` batches a worker thread and `blocks_per_reader` blocks of
    the stream a reader); `quality_examples` and `quality_test_examples`: the real-math
    sample, trained and held out; `seeds`: the
    quality points' seeds; `budget_s`: wall seconds after which no point starts (None:
    no bound); `examples_per_pass`: the data's examples (None: the synthetic task's, or
    1,000,000 for file data)."""

    strategies: list[str] | None = None
    slice_examples: int = 16_384
    batches_per_thread: int = 6
    blocks_per_reader: int = 4
    quality: bool = True
    quality_examples: int = 1_000_000
    quality_test_examples: int = 5_000
    seeds: tuple[int, ...] = (0, 1)
    quality_candidates: int = 3
    fast_enough: float = 2.0
    budget_s: float | None = None
    examples_per_pass: int | None = None

    def __post_init__(self) -> None:
        for name in ("slice_examples", "quality_examples", "quality_test_examples"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')}: must be >= 1")
        if not self.seeds:
            raise ConfigError("--seeds: give at least one seed")
        if self.budget_s is not None and not self.budget_s > 0:
            raise ConfigError(f"--budget: must be > 0 minutes, got {self.budget_s / 60:g}")
        if self.fast_enough < 1:
            raise ConfigError(f"--fast-enough: must be >= 1, got {self.fast_enough}")


@dataclass
class Advice:
    """An advice: the ranked candidates, what does not apply, what was not measured."""

    ranked: list[Ranked]
    refused: list[Refusal]
    conditions: list[str]
    not_measured: list[str]
    examples_per_pass: int
    cost: CostModel
    cached_points: int = 0
    measured_points: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def winner(self) -> Ranked | None:
        first = self.ranked[0] if self.ranked else None
        if first is None or first.eps is None or first.tier == LOWER_BOUND:
            return None  # nothing measured, or only lower bounds
        return first


def examples_per_pass(config: Config, given: int | None) -> int:
    """The examples one pass over the job's data trains."""
    if given is not None:
        return given
    synthetic = config.to_specs().synthetic
    if synthetic is not None:
        return synthetic.num_train * config.train.epochs
    return 1_000_000


def speed_slice(options: AdviseOptions, candidate: Candidate, batch_size: int, limit: int) -> int:
    """A speed point's examples: at least `batches_per_thread` batches a worker thread and
    `blocks_per_reader` of the readers' blocks each (readers deal the stream in blocks:
    with fewer, their shares are uneven and some trainers' data ends early)."""
    threads = candidate.trainers * candidate.workers_per_trainer
    readers = candidate.readers or 1
    wanted = max(
        options.slice_examples,
        options.batches_per_thread * threads * batch_size,
        options.blocks_per_reader * readers * block_for(batch_size),
    )
    return min(wanted, limit)


def advise(
    job: JobSource,
    cluster: ClusterFile,
    options: AdviseOptions,
    folder: Path | None = None,
    on_progress: Progress | None = None,
    cluster_dir: Path | None = None,
    runner: CallPool | None = None,
) -> Advice:
    """Measure and rank every candidate of `job` on `cluster` (points cached in `folder`,
    none if None; `cluster_dir`: where a relative machines.profile is; `runner`: where the
    points of a phase run, this process one after another by default)."""
    base = job.config()
    found, refused = candidates(job, cluster, options.strategies)
    cost = cluster.base_cost(cluster_dir)
    per_pass = examples_per_pass(base, options.examples_per_pass)
    points = Points(PointCache(folder), options.budget_s, on_progress, runner)
    conditions = {c.name: c for c in cluster.condition}
    speed: dict[int, dict[str, dict[str, Any] | None]] = {i: {} for i in range(len(found))}
    unplaceable: set[int] = set()

    def priced(pairs: list[tuple[int, str]]) -> None:
        wanted = []
        for i, name in pairs:
            c, condition = found[i], conditions.get(name)
            slice_ = speed_slice(options, c, base.train.batch_size, per_pass)
            parts = {
                "kind": "priced",
                "config": c.config(job).dump(),
                "cost": dataclasses.asdict(condition_cost(cost, condition)),
                "condition": None if condition is None else condition.model_dump(),
                "examples": slice_,
            }
            measure = functools.partial(priced_point, job, c, condition, cost, slice_)
            wanted.append((f"{c.label} ({name})", parts, measure))
        for (i, name), outcome in zip(pairs, points.get_many(wanted), strict=True):
            if isinstance(outcome, REFUSALS):  # refused, or it failed
                refused.append(Refusal(found[i].strategy, found[i].label, str(outcome)))
                unplaceable.add(i)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                speed[i][name] = outcome

    points.plan(len(found))
    priced([(i, CLEAN) for i in range(len(found))])
    fastest = _fastest_per_strategy(found, speed)
    points.plan(len(fastest) * len(conditions))
    priced([(i, name) for name in conditions for i in fastest])
    quality: dict[int, list[dict[str, Any]]] = {}
    sample = min(options.quality_examples, per_pass)
    test_sample = options.quality_test_examples
    synthetic = base.to_specs().synthetic
    if synthetic is not None:
        test_sample = min(test_sample, synthetic.num_test)
    if options.quality:
        chosen = _fast_enough(fastest, speed, options)
        points.plan(len(chosen) * len(options.seeds))
        pairs = [(i, seed) for i in chosen for seed in options.seeds]
        wanted = []
        for i, seed in pairs:
            c = found[i]
            parts = {
                "kind": "quality",
                "config": c.config(job).dump(),
                "cost": dataclasses.asdict(cost),
                "examples": sample,
                "test_examples": test_sample,
                "flat_rule": [QUALITY_EVALUATIONS, FLAT_PATIENCE, FLAT_MIN_DELTA],
                "seed": seed,
            }
            measure = functools.partial(quality_point, job, c, cost, sample, test_sample, seed)
            wanted.append((f"{c.label} (quality, seed {seed})", parts, measure))
        for (i, _), (label, _, _), outcome in zip(
            pairs, wanted, points.get_many(wanted), strict=True
        ):
            if isinstance(outcome, REFUSALS):
                refused.append(Refusal(found[i].strategy, label, str(outcome)))
            elif isinstance(outcome, BaseException):
                raise outcome
            elif outcome is not None:
                quality.setdefault(i, []).append(outcome)
    measured = []
    at = {found[i].strategy: i for i in quality}  # where each strategy's quality was measured
    for i, c in enumerate(found):
        if i in unplaceable:
            continue
        j = i if i in quality else at.get(c.strategy)
        if j is None:
            measured.append(Measured(c, speed[i]))
        else:
            source = None if j == i else found[j].label
            measured.append(Measured(c, speed[i], quality[j], source))
    return Advice(
        ranked=rank(measured, per_pass),
        refused=refused,
        conditions=[CLEAN, *conditions],
        not_measured=points.not_measured,
        examples_per_pass=per_pass,
        cost=cost,
        cached_points=points.cached,
        measured_points=points.measured,
    )


def _clean_eps(point: dict[str, Any] | None) -> float:
    return 0.0 if point is None else float(point["eps_steady"])


def _fastest_per_strategy(
    found: list[Candidate], speed: dict[int, dict[str, dict[str, Any] | None]]
) -> list[int]:
    """Each strategy's fastest measured candidate (its index), fastest strategies first."""
    best: dict[str, int] = {}
    for i, c in enumerate(found):
        eps = _clean_eps(speed[i].get(CLEAN))
        if eps and (c.strategy not in best or eps > _clean_eps(speed[best[c.strategy]][CLEAN])):
            best[c.strategy] = i
    return sorted(best.values(), key=lambda i: -_clean_eps(speed[i][CLEAN]))


def _fast_enough(
    fastest: list[int], speed: dict[int, dict[str, dict[str, Any] | None]], options: AdviseOptions
) -> list[int]:
    """The strategies' fastest candidates whose quality is measured: at most
    `quality_candidates`, none slower than `fast_enough` times the fastest."""
    if not fastest:
        return []
    top = _clean_eps(speed[fastest[0]][CLEAN])
    near = [i for i in fastest if _clean_eps(speed[i][CLEAN]) * options.fast_enough >= top]
    return near[: options.quality_candidates]
