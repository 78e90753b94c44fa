"""A continual run's options, kept in its directory (continual.json) so that a resumed run
goes on exactly as it was started: where it trains, the strategy schedule, the day files,
the cluster scenario, the automatic controller and the segments of a day."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recsync.errors import ConfigError
from recsync.strategy.controller import ControllerConfig

ENGINES = ("sim", "ray")
OPTIONS = "continual.json"


@dataclass(frozen=True)
class ContinualOptions:
    """None: as the run was started (a new run: the default). `schedule`: from day k on,
    strategy; `scenario`: a scenario file's path; `controller`: switch strategies
    automatically (not with a schedule); `segments`: stretches a day is trained in, the
    controller deciding after each (synthetic days only)."""

    engine: str | None = None
    schedule: dict[int, str] | None = None
    day_files: list[str] | None = None
    scenario: str | None = None
    controller: ControllerConfig | None = None
    segments: int | None = None


@dataclass(frozen=True)
class ResolvedOptions:
    engine: str
    schedule: dict[int, str]
    day_files: list[str] | None
    scenario: str | None
    controller: ControllerConfig | None
    segments: int


def resolve_options(root: Path, given: ContinualOptions) -> ResolvedOptions:
    """The run's options: as given when it starts, kept in continual.json; a resumed run
    reads them back (one given differently is refused)."""
    path = root / OPTIONS
    if not path.exists():
        new = ResolvedOptions(
            engine=given.engine or "sim",
            schedule=given.schedule or {},
            day_files=given.day_files,
            scenario=given.scenario,
            controller=given.controller,
            segments=given.segments or 1,
        )
        _check(new)
        path.write_text(json.dumps(_stored(new)))
    kept = _loaded(json.loads(path.read_text()))
    for key in ("engine", "schedule", "day_files", "scenario", "controller", "segments"):
        value = getattr(given, key)
        if value is not None and value != getattr(kept, key):
            raise ConfigError(
                f"continual: {root} was started with {key} {getattr(kept, key)!r}, not {value!r}"
            )
    return kept


def _check(options: ResolvedOptions) -> None:
    if options.engine not in ENGINES:
        raise ConfigError(
            f"continual: engine must be one of {list(ENGINES)}, got {options.engine!r}"
        )
    if options.controller is not None and options.schedule:
        raise ConfigError("continual: a schedule or the controller decides strategies, not both")
    if options.segments < 1:
        raise ConfigError(f"continual: segments must be >= 1, got {options.segments}")
    if options.segments > 1 and options.controller is None:
        raise ConfigError("continual: segments within a day are for the controller (--controller)")


def _stored(options: ResolvedOptions) -> dict[str, Any]:
    stored = dataclasses.asdict(options)
    stored["controller"] = (
        None if options.controller is None else dataclasses.asdict(options.controller)
    )
    return stored


def _loaded(stored: dict[str, Any]) -> ResolvedOptions:
    controller = stored.get("controller")
    return ResolvedOptions(
        engine=stored["engine"],
        schedule={int(day): name for day, name in stored["schedule"].items()},
        day_files=stored["day_files"],
        scenario=stored.get("scenario"),
        controller=None if controller is None else ControllerConfig(**controller),
        segments=stored.get("segments", 1),
    )


def parse_controller(text: str) -> ControllerConfig:
    """'default' or 'spread_on=1.3,stragglers=async' -> a ControllerConfig."""
    fields = {f.name: f for f in dataclasses.fields(ControllerConfig)}
    values: dict[str, Any] = {}
    for part in [] if text.strip() == "default" else text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in fields:
            raise ConfigError(
                f"--controller: {part.strip()!r} is not KEY=VALUE with KEY one of {sorted(fields)}"
            )
        default = fields[key].default
        try:
            if isinstance(default, bool):
                if value not in ("true", "false"):
                    raise ValueError
                values[key] = value == "true"
            else:
                values[key] = float(value) if isinstance(default, float) else (value or None)
        except ValueError:
            kind = "true or false" if isinstance(default, bool) else "a number"
            raise ConfigError(f"--controller: {key} = {value!r} is not {kind}") from None
    try:
        return ControllerConfig(**values)
    except ValueError as error:
        raise ConfigError(f"--controller: {error}") from None
