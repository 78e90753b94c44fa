"""The simulator's cost profile: a TOML file with one [cost] table (CostModel's keys, as
`recsync calibrate` writes it), named by [simulate] profile (or `simulate --profile`);
a deprecated inline [cost] table of the job config is layered on top of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, create_model

from recsync.app.config.base import Section, build_dataclass, section_from_dataclass
from recsync.app.config.load import merge_tables, read_toml_file, validation_message
from recsync.app.config.schema import Config
from recsync.app.runs.run_dir import COST_PROFILE, toml_text
from recsync.errors import ConfigError
from recsync.runtime.sim.cost import CostModel

if TYPE_CHECKING:
    CostProfile = Section
else:
    _CostSection = section_from_dataclass(CostModel)
    CostProfile = create_model(
        "CostProfile",
        __base__=Section,
        __doc__="A cost profile file: its [cost] table.",
        cost=(
            _CostSection,
            Field(default_factory=_CostSection, description="The simulator's prices."),
        ),
    )


def read_profile(path: str | Path) -> dict[str, Any]:
    """The tables of the profile file at `path` (ConfigError naming the file if it cannot
    be read or is not TOML)."""
    return read_toml_file(path, "cost profile")


def simulation_cost(config: Config) -> CostModel:
    """The cost model of a simulated run: CostModel's defaults, updated by the profile file
    [simulate] profile names (if any), then by the config's inline [cost] keys (deprecated).
    ConfigError names the source and the full key of a rejected value."""
    tree: dict[str, Any] = {}
    sources = []
    if config.simulate.profile is not None:
        tree = read_profile(config.simulate.profile)
        sources.append(f"cost profile {config.simulate.profile}")
    if config.cost is not None:
        tree = merge_tables(tree, {"cost": config.cost})
        sources.append("the config's [cost]")
    return profile_cost(tree, " with ".join(sources) or "cost defaults")


def profile_cost(tree: dict[str, Any], source: str) -> CostModel:
    """The cost model of a profile's tables `tree` (ConfigError naming `source` and the full
    key of a rejected value)."""
    try:
        profile = CostProfile.model_validate(tree)
        cost: CostModel = build_dataclass(CostModel, getattr(profile, "cost"), "cost")  # noqa: B009
    except ValidationError as error:
        raise ConfigError(validation_message(error, source)) from None
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    return cost


def profile_text(cost: CostModel) -> str:
    """`cost` as a profile file's text (what `read_profile` reads back equal)."""
    return toml_text({"cost": dataclasses.asdict(cost)})


def with_profile_in(config: Config, run_dir: Path, cost: CostModel) -> Config:
    """`config` naming `cost`, written as the profile file of `run_dir`, in place of its
    profile and inline [cost]: the run dir's config then resumes with the same costs."""
    path = run_dir.absolute() / COST_PROFILE
    path.write_text(profile_text(cost), encoding="utf-8")
    simulate = config.simulate.model_copy(update={"profile": str(path)})
    return config.model_copy(update={"simulate": simulate, "cost": None})
