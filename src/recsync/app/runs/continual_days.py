"""The days of a continual run: the synthetic task's (day d: the stream's next examples,
scored on the next day's held-out ones) or day files (day d: file d whole, scored on file
d+1). Each says how its day's job is configured, where it starts and stops, that it ended
where it should, and how its model scores on the next day."""

from __future__ import annotations

import dataclasses
from typing import Any

from recsync.app.config.schema import Config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import evaluate_model
from recsync.coordinator.spec import plan_for
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.errors import ConfigError
from recsync.ps.hash_days import new_day
from recsync.ps.hash_delta import is_hash_state
from recsync.ps.hash_layout import hash_groups

NEXT_DAY_TEST = 20_000  # held-out examples of the next day each day's model is scored on


def day_sizes(config: Config) -> tuple[SyntheticSpec, list[int]]:
    """The synthetic task and the examples of each of its days (as the reader cuts them)."""
    specs = config.to_specs()
    if specs.files is not None or specs.synthetic is None:
        raise ConfigError(
            "continual: file data needs its day files in order (--day-file, repeated); "
            "without them, the synthetic task's days (data.source = 'synthetic')"
        )
    days = specs.synthetic.num_days
    if days < 2:
        raise ConfigError(
            f"continual: data.synthetic.num_days = {days}; it needs >= 2 days (each day's "
            "model is evaluated on the next day)"
        )
    total = specs.synthetic.num_train
    if specs.train.epochs != 1:
        raise ConfigError("continual: trains each day's examples once (train.epochs = 1)")
    sizes, batch = specs.synthetic.day_sizes(), specs.train.batch_size
    if any(size % batch for size in sizes):
        raise ConfigError(
            f"continual: each day's examples must be a whole number of batches: "
            f"data.synthetic.num_train = {total:,} over {days} days is {sizes[0]:,} a day, "
            f"not a multiple of train.batch_size = {batch} (try num_train = "
            f"{days * batch * max(1, sizes[0] // batch):,})"
        )
    return specs.synthetic, sizes


def day_started(config: Config, state: JobState) -> JobState:
    """The state a day starts from (the previous day's end): with hash tables that evict by
    days (`model.hash_tables.eviction.ttl_days`), each hash shard's new day started, the
    rows not seen in the last ttl_days days evicted (ps/hash_days.py)."""
    model = config.to_specs().model
    if model.hash_tables is None:
        return state
    days = [g.eviction.ttl_days for g in hash_groups(model.tables, model.hash_tables)]
    if all(ttl is None for ttl in days):
        return state

    def started(store: dict[str, Any], ttl_days: int | None) -> dict[str, Any]:
        return store if ttl_days is None else new_day(store, ttl_days)

    shards = []
    for s in state.shards:
        if not is_hash_state(s):
            shards.append(s)
        elif "groups" in s:  # one store per group of tables, each its own ttl_days
            groups = [started(g, ttl) for g, ttl in zip(s["groups"], days, strict=True)]
            shards.append({**s, "groups": groups})
        else:
            shards.append(started(s, days[0]))
    return dataclasses.replace(state, shards=shards)


class SyntheticDays:
    """The synthetic task's days: day d is the stream's next `sizes[d]` examples; the next
    day is scored on its own held-out examples."""

    def __init__(self, config: Config):
        self.config = config
        synthetic, self.sizes = day_sizes(config)
        self.batch_size = config.train.batch_size
        self.task = SyntheticTask(synthetic)
        self.count = len(self.sizes)

    def overrides(self, day: int) -> dict[str, Any]:
        return {}

    def carried(self, state: JobState) -> JobState:
        return day_started(self.config, state)

    def stretches(self, day: int, segments: int) -> list[int | None]:
        """Day `day`'s examples in `segments` stretches of whole batches (each one job)."""
        batches = self.sizes[day] // self.batch_size
        if segments > batches:
            raise ConfigError(
                f"continual: {segments} segments a day, but day {day} has {batches} batches"
            )
        cuts = [batches * i // segments for i in range(segments + 1)]
        return [(b - a) * self.batch_size for a, b in zip(cuts, cuts[1:], strict=False)]

    def check_end(self, day: int, end: JobState, summary: dict[str, Any]) -> None:
        expected = sum(self.sizes[: day + 1])
        if end.data_position != expected:
            raise ConfigError(
                f"continual: day {day} ended at example {end.data_position:,}, not at the "
                f"day's end {expected:,} (did the job stop early?)"
            )

    def next_day_quality(
        self, day: int, config: Config, summary: dict[str, Any], end: JobState
    ) -> dict[str, float]:
        spec = job_spec(config)
        test, _ = self.task.day_test_set(day + 1, NEXT_DAY_TEST)
        layout = plan_for(spec).embeddings.layout
        quality = evaluate_model(spec, layout, end.dense, end.shards, test)
        return {"auc": quality.auc, "logloss": quality.logloss, "ne": quality.ne}


class FileDays:
    """Day files: day d trains file d whole, from its first example, and its run's held-out
    set is file d+1."""

    def __init__(self, config: Config, files: list[str]):
        if config.data.source == "synthetic":
            raise ConfigError(
                "continual: day files need data.source set to their format (e.g. csv, "
                "parquet, criteo, libsvm or auto)"
            )
        if len(files) < 2:
            raise ConfigError(
                f"continual: {len(files)} day file(s); it needs >= 2 (each day's model is "
                "evaluated on the next day)"
            )
        self.config, self.files, self.count = config, files, len(files)

    def overrides(self, day: int) -> dict[str, Any]:
        return {
            "data.path": self.files[day],
            "data.test_path": self.files[day + 1],
            "data.test_fraction": 0.0,
        }

    def carried(self, state: JobState) -> JobState:
        """The day's end as the next day's start: the model, its data from the start (the
        next file, read however its readers share it)."""
        started = day_started(self.config, state)
        return dataclasses.replace(started, data_position=0, data_beyond=None, data_unit=None)

    def stretches(self, day: int, segments: int) -> list[int | None]:
        if segments != 1:
            raise ConfigError(
                "continual: a day file trains whole (segments = 1); segments within a day "
                "need the synthetic task's days"
            )
        return [None]

    def check_end(self, day: int, end: JobState, summary: dict[str, Any]) -> None:
        if summary["examples_trained"] == 0:
            raise ConfigError(f"continual: day {day} ({self.files[day]}) trained nothing")

    def next_day_quality(
        self, day: int, config: Config, summary: dict[str, Any], end: JobState
    ) -> dict[str, float]:
        return {k: summary[f"test_{k}"] for k in ("auc", "logloss", "ne")}
