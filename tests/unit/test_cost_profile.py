"""The simulator's cost profile: a file of its own (as `recsync calibrate` writes it),
named by [simulate] profile; an inline [cost] table still loads, deprecated."""

from __future__ import annotations

import dataclasses

import pytest

from recsync.app.config.load import load_config
from recsync.app.runs.cost_profile import profile_text, simulation_cost, with_profile_in
from recsync.app.runs.run_dir import COST_PROFILE
from recsync.errors import ConfigError
from recsync.runtime.sim.cost import CostModel, Stragglers


def a_profile(tmp_path) -> tuple[CostModel, str]:
    cost = dataclasses.replace(
        CostModel(), worker_flops=3e9, stragglers=Stragglers(fraction=0.5, slowdown=3.0)
    )
    path = tmp_path / "cost_profile.toml"
    path.write_text(profile_text(cost))
    return cost, str(path)


def test_without_a_profile_the_cost_models_defaults():
    config = load_config(None, {"strategy.name": "sync"})
    assert simulation_cost(config) == CostModel()
    assert not config.deprecations()


def test_the_profile_the_config_names_is_read_back_equal(tmp_path):
    cost, path = a_profile(tmp_path)
    config = load_config(None, {"simulate.profile": path})
    assert simulation_cost(config) == cost and not config.deprecations()


def test_an_inline_cost_table_loads_with_a_deprecation_message(tmp_path):
    config_path = tmp_path / "run.toml"
    config_path.write_text("[cost]\nworker_flops = 3e9\n[cost.stragglers]\nfraction = 0.5\n")
    config = load_config(config_path, {"cost.stragglers.slowdown": 3.0})
    assert simulation_cost(config) == a_profile(tmp_path)[0]
    (message,) = config.deprecations()
    assert "[cost] in the job config" in message and "--profile FILE" in message


def test_inline_cost_keys_update_the_profile(tmp_path):
    cost, path = a_profile(tmp_path)
    config = load_config(None, {"simulate.profile": path, "cost.latency_s": 0.5})
    assert simulation_cost(config) == dataclasses.replace(cost, latency_s=0.5)


def test_a_wrong_key_or_value_names_the_source_and_the_key(tmp_path):
    _, path = a_profile(tmp_path)
    with pytest.raises(ConfigError, match=r"cost profile .*: cost.stragglers.fractio: unknown key"):
        simulation_cost(
            load_config(None, {"simulate.profile": path, "cost.stragglers.fractio": 1.0})
        )
    with pytest.raises(ConfigError, match="the config's .cost.: cost.latency_s: Input should be"):
        simulation_cost(load_config(None, {"cost.latency_s": "slow"}))
    with pytest.raises(ConfigError, match="cost profile nowhere.toml: cannot read it"):
        simulation_cost(load_config(None, {"simulate.profile": "nowhere.toml"}))


def test_a_simulated_run_keeps_its_profile_and_its_config_names_it(tmp_path):
    cost, path = a_profile(tmp_path)
    config = load_config(None, {"simulate.profile": path, "cost.latency_s": 0.5})
    kept = with_profile_in(config, tmp_path, simulation_cost(config))
    assert kept.simulate.profile == str(tmp_path.absolute() / COST_PROFILE) and kept.cost is None
    assert simulation_cost(kept) == dataclasses.replace(cost, latency_s=0.5)
