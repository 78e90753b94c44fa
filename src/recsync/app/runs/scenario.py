"""A changing cluster, day by day: the scenario file a continual run replays.

A scenario is a TOML file of `[[change]]` tables, each holding from its `day` until the
next change's day (days before the first change run the base config's cluster):

    [[change]]
    day = 3                      # stragglers appear on day 3 ...
    stragglers = { fraction = 0.25, slowdown = 4.0, start_s = 10.0, duration_s = 60.0 }

    [[change]]
    day = 5                      # ... leave on day 5, when a trainer is added
    num_trainers = 5

    [[change]]
    day = 8
    server_slowdown = { "embedding-server-0" = 3.0 }

A change states the whole condition of its days: what it leaves out is the base config's
(no stragglers, its trainers, no slow server). Stragglers are whole trainers: the first
`round(fraction x num_trainers)` of a permutation drawn from the job's seed and the day,
slowed `slowdown` times from `start_s` for `duration_s` seconds of the day's training
(unset: to its end; a day trained in segments counts its earlier segments' seconds). Both
drivers carry it the same way (`cluster.trainer_slowdown` in its window,
`cluster.server_slowdown`): in virtual seconds on the simulator, in wall seconds on the Ray
engine.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field, ValidationError

from recsync.app.config.base import Section
from recsync.app.config.schema import Config
from recsync.errors import ConfigError


class StragglerChange(Section):
    """Slow trainers for a while of each day: whole trainers, drawn from the job's seed
    and the day."""

    fraction: float = Field(
        ge=0.0, le=1.0, description="The share of trainers that are slow (rounded)."
    )
    slowdown: float = Field(ge=1.0, description="How many times slower a slow trainer computes.")
    start_s: float = Field(
        default=0.0,
        ge=0.0,
        description="Seconds into the day's training when they become slow (a day trained in "
        "segments counts its earlier segments' seconds).",
    )
    duration_s: float | None = Field(
        default=None,
        gt=0.0,
        description="Seconds they stay slow.",
        json_schema_extra={"unset": "to the day's end"},
    )


class ClusterChange(Section):
    """The cluster from `day` on, until the next change; what it leaves out is the base
    config's."""

    day: int = Field(ge=0, description="The first day of the change; days increase.")
    num_trainers: int | None = Field(
        default=None,
        ge=1,
        description="The trainers of these days.",
        json_schema_extra={"unset": "the base config's cluster.num_trainers"},
    )
    stragglers: StragglerChange | None = Field(
        default=None,
        description="Slow trainers on these days.",
        json_schema_extra={"unset": "none"},
    )
    server_slowdown: dict[str, Annotated[float, Field(ge=1.0)]] = Field(
        default={},
        description='Servers by name (e.g. "embedding-server-0") and how many times slower '
        "each answers on these days.",
    )


class ScenarioFile(Section):
    """A scenario file: the changes of the cluster, by day."""

    change: list[ClusterChange] = Field(
        min_length=1, description="The changes, at least one, by increasing day."
    )


class Scenario:
    """The cluster of each day, as config overrides for that day's job."""

    def __init__(self, changes: list[ClusterChange], source: str = "scenario"):
        days = [c.day for c in changes]
        if days != sorted(set(days)):
            raise ConfigError(f"{source}: change days must increase, got {days}")
        self.changes, self.source = changes, source

    @classmethod
    def read(cls, path: str | Path) -> Scenario:
        """The scenario in the TOML file at `path` (ConfigError naming what is wrong)."""
        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"{path}: cannot read scenario: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: invalid TOML: {error}") from None
        try:
            scenario = ScenarioFile.model_validate(tree)
        except ValidationError as error:
            details = "; ".join(
                f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in error.errors()
            )
            raise ConfigError(f"{path}: {details}") from None
        return cls(scenario.change, str(path))

    def change_of(self, day: int) -> ClusterChange | None:
        started = [c for c in self.changes if c.day <= day]
        return started[-1] if started else None

    def overrides(self, day: int, config: Config, elapsed_s: float = 0.0) -> dict[str, Any]:
        """Day `day`'s cluster as dotted config overrides of the base `config`, for a job
        that starts `elapsed_s` seconds into the day's training."""
        change = self.change_of(day)
        if change is None:
            return {}
        trainers = change.num_trainers or config.cluster.num_trainers
        overrides: dict[str, Any] = {
            "cluster.num_trainers": trainers,
            "cluster.server_slowdown": dict(change.server_slowdown),
            "cluster.trainer_slowdown": [],
            "cluster.slowdown_from_s": 0.0,
            "cluster.slowdown_until_s": None,
        }
        s = change.stragglers
        start = 0.0 if s is None else s.start_s - elapsed_s
        stop = float("inf") if s is None or s.duration_s is None else start + s.duration_s
        if s is not None and round(s.fraction * trainers) > 0 and s.slowdown > 1.0 and stop > 0:
            slow = np.random.default_rng([config.run.seed, day]).permutation(trainers)
            factors = [1.0] * trainers
            for trainer in slow[: round(s.fraction * trainers)]:
                factors[int(trainer)] = s.slowdown
            overrides["cluster.trainer_slowdown"] = factors
            overrides["cluster.slowdown_from_s"] = max(0.0, start)
            if s.duration_s is not None:
                overrides["cluster.slowdown_until_s"] = stop
        return overrides

    def describe(self, day: int, config: Config) -> dict[str, Any]:
        """Day `day`'s cluster for its record: trainers, slow trainers, their slowdown and
        when in the day they are slow, slow servers."""
        day_cluster = self.overrides(day, config)
        change = self.change_of(day)
        stragglers = change.stragglers if change is not None else None
        factors = day_cluster.get("cluster.trainer_slowdown", [])
        return {
            "num_trainers": day_cluster.get("cluster.num_trainers", config.cluster.num_trainers),
            "slow_trainers": [t for t, f in enumerate(factors) if f > 1.0],
            "slowdown": max(factors, default=1.0),
            "stragglers": None if stragglers is None else stragglers.model_dump(),
            "server_slowdown": day_cluster.get("cluster.server_slowdown", {}),
        }
