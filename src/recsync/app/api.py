"""The Python API: a job from a TOML file or a dict, trained on Ray or simulated.

    job = Job.from_toml("job.toml", {"train.epochs": 2})
    summary = job.train(name="first")            # a local Ray cluster; address= joins one
    summary = job.simulate(name="what-if")       # the simulator; profile=, math=
    again = Job.resume("runs/first", strategy="async").train()

`train` and `simulate` write a run directory exactly as `recsync train` and `recsync
simulate` do (the CLI is built on this module) and return the run's summary: the dict
written to its summary.json, with `wall_seconds` added. User mistakes raise ConfigError.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recsync.app.config.load import load_config
from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.cost_profile import simulation_cost
from recsync.app.runs.distributed import job_spec, run_distributed
from recsync.app.runs.progress import deprecated, warn
from recsync.app.runs.reference import run_training
from recsync.app.runs.run_dir import RunDir
from recsync.app.runs.simulate import run_simulation, simulator_threads
from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.spec import initial_dense, plan_for
from recsync.errors import ConfigError

Overrides = Mapping[str, Any]


@dataclass(frozen=True)
class Job:
    """A job's config as given (the embedded default, then `path`'s file, then `table`, a
    config as nested tables, then `overrides`, dotted keys), and the checkpoint it resumes
    (`Job.resume`). The config is validated when the job is made and again with a run's
    own keys (its name, address, profile) when it runs."""

    path: Path | None = None
    table: Mapping[str, Any] = field(default_factory=dict)
    overrides: Overrides = field(default_factory=dict)
    sections: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    state: JobState | None = None
    resumed_from: Path | None = None

    def __post_init__(self) -> None:
        for message in self.validated.deprecations():  # a mistake is named where it is made
            deprecated(message)

    @functools.cached_property
    def validated(self) -> Config:
        """The job's own config, validated once."""
        return self.config()

    @classmethod
    def from_toml(cls, path: str | Path, overrides: Overrides | None = None) -> Job:
        """The job of a TOML config file, with `overrides` (dotted keys) on top."""
        return cls(path=Path(path), overrides=dict(overrides or {}))

    @classmethod
    def from_dict(cls, table: Mapping[str, Any], overrides: Overrides | None = None) -> Job:
        """The job of a config given as nested tables, as a TOML file would read, e.g.
        `{"strategy": {"name": "async"}, "train": {"epochs": 2}}`."""
        return cls(table=dict(table), overrides=dict(overrides or {}))

    @classmethod
    def resume(
        cls,
        run: str | Path,
        strategy: str | None = None,
        overrides: Overrides | None = None,
        path: str | Path | None = None,
    ) -> Job:
        """Continue the run directory `run` from its checkpoint: its config is the base
        (or the file at `path`), its [strategy] replaced by `strategy` if given (the other
        hyper-parameters stay); the new run is named `<run>-then-<strategy>` unless
        run.name is overridden."""
        try:
            state, refused = load_run_checkpoint(Path(run))
        except ValueError as error:
            raise ConfigError(f"--resume: {error}") from None
        if refused is not None:
            warn(f"--resume: {refused}")
        name = {"run.name": f"{Path(run).name}-then-{strategy or 'same'}"}
        job = cls(
            path=Path(path) if path is not None else Path(run) / "config.toml",
            overrides={**name, **(overrides or {})},
            sections={"strategy": {"name": strategy}} if strategy is not None else {},
            state=state,
            resumed_from=Path(run),
        )
        job._check_resume()
        return job

    def config(self, overrides: Overrides | None = None) -> Config:
        """The validated config, with `overrides` on top of the job's own."""
        keys = {**self.overrides, **(overrides or {})}
        return load_config(self.path, keys, self.sections, self.table)

    def with_overrides(self, overrides: Overrides) -> Job:
        """This job with more dotted keys set."""
        return replace(self, overrides={**self.overrides, **overrides})

    def train(
        self,
        address: str | None = None,
        name: str | None = None,
        force: bool = False,
        progress: bool = False,
        stop_after: int | None = None,
    ) -> dict[str, Any]:
        """Train on the Ray engine (the cluster at `address`, or a local one using this
        machine's cores, or cluster.num_cpus) or, for the `reference` strategy, in this
        process; `stop_after`: hand out at most that many examples, then checkpoint."""
        keys = _run_keys(name, {"cluster.address": address} if address is not None else {})
        config = self.config(keys)
        with _timed() as wall:
            run_dir = self._run_dir(config, force)
            if not config.strategy.distributed:
                if self.state is not None or stop_after is not None:
                    raise ConfigError("--resume and --stop-after need a distributed strategy")
                summary = run_training(config, run_dir, progress=progress)
            else:
                summary = run_distributed(config, run_dir, progress, self.state, stop_after)
        return summary | {"wall_seconds": wall()}

    def simulate(
        self,
        profile: str | Path | None = None,
        math: str | None = None,
        name: str | None = None,
        force: bool = False,
        progress: bool = False,
        stop_after: int | None = None,
    ) -> dict[str, Any]:
        """Run the job in the cluster simulator, in virtual time, on the cost profile
        `profile` (a file `recsync calibrate` wrote; default: [simulate] profile, else the
        cost model's defaults) with `math` "real" (default) or "priced" (shapes only)."""
        extra: dict[str, Any] = {}
        if profile is not None:
            extra["simulate.profile"] = str(Path(profile).absolute())
        if math is not None:
            extra["simulate.math"] = math
        config = self.config(_run_keys(name, extra))
        simulation_cost(config)  # the profile's mistakes named before the run dir is made
        with _timed() as wall, simulator_threads():
            run_dir = self._run_dir(config, force)
            summary = run_simulation(config, run_dir, progress, self.state, stop_after)
        return summary | {"wall_seconds": wall()}

    def _run_dir(self, config: Config, force: bool) -> RunDir:
        return RunDir.create(
            config.run.runs_dir, config.run.name, force=force, tensorboard=config.run.tensorboard
        )

    def _check_resume(self) -> None:
        """The checkpoint fits the config's layout and model, and data is left to train."""
        config, state = self.validated, self.state
        assert state is not None
        if not config.strategy.distributed:
            return
        spec = job_spec(config, state)
        try:
            state.check_layout(plan_for(spec).embeddings.layout)
            initial_dense(spec)
        except ValueError as error:
            raise ConfigError(f"--resume {self.resumed_from}: {error}") from None
        synthetic = spec.synthetic if spec.files is None else None
        stream = synthetic.num_train * spec.train.epochs if synthetic is not None else None
        if stream is not None and state.data_position >= stream:
            raise ConfigError(
                f"--resume {self.resumed_from}: nothing left to train: its checkpoint is at "
                f"example {state.data_position:,} of {stream:,} ({spec.train.epochs} "
                "epoch(s) of data.synthetic.num_train); train more passes with --epochs N"
            )


def _run_keys(name: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    return extra if name is None else {**extra, "run.name": name}


@contextlib.contextmanager
def _timed() -> Iterator[Callable[[], float]]:
    start = time.perf_counter()
    yield lambda: time.perf_counter() - start
