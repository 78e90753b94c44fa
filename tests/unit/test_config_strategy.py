"""[strategy]: one section per strategy generated from its dataclass, nested timing, the
old flat keys (deprecated), and errors that name the key."""

from __future__ import annotations

import dataclasses

import pytest

from recsync.app.config.load import load_config
from recsync.app.config.strategy import SECTIONS, section_keys
from recsync.errors import ConfigError
from recsync.families import STRATEGIES, strategy_config, strategy_fields


def write(tmp_path, text: str):
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def error_of(overrides) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(None, overrides).to_specs()
    return str(caught.value)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_each_strategy_section_has_its_dataclass_fields_and_accepts_them(name):
    assert section_keys(name) == ["name", *strategy_fields(name)]
    every_key = SECTIONS[name]().model_dump()  # each key, at its default
    one_worker = {"cluster.workers_per_trainer": 1}  # all-reduce's ranks
    config = load_config(None, one_worker, sections={"strategy": every_key})
    assert config.to_specs().strategy == strategy_config(name)
    assert not config.deprecations()


def test_reference_takes_no_other_key():
    assert load_config(None, {"strategy.name": "reference"}).to_specs().strategy is None
    message = error_of({"strategy.name": "reference", "strategy.alpha": 0.5})
    assert "strategy.alpha: unknown key for strategy 'reference'; it takes: name" in message


@pytest.mark.parametrize(
    ("name", "foreign", "takes"),
    [
        ("async", "alpha", "name, staleness_norm"),
        ("easgd", "staleness", "name, alpha, timing"),
        ("sync", "timing.mode", "name"),
        ("gba", "num_backup", "name, num_aggregate, iota, decay, stale_slot"),
    ],
)
def test_a_key_of_another_strategy_is_rejected_with_the_keys_it_takes(name, foreign, takes):
    message = error_of({"strategy.name": name, f"strategy.{foreign}": 1})
    key = foreign.split(".")[0]
    assert f"strategy.{key}: unknown key for strategy {name!r}; it takes: {takes}" in message


def test_timing_is_a_nested_table(tmp_path):
    text = '[strategy]\nname = "ma"\n[strategy.timing]\nmode = "fixed"\nevery_seconds = 0.5\n'
    config = load_config(write(tmp_path, text))
    strategy = config.to_specs().strategy
    assert strategy.timing.every_seconds == 0.5 and strategy.describe().startswith("FR-MA-0.5s")
    assert not config.deprecations()
    assert config.dump()["strategy"]["timing"]["mode"] == "fixed"
    message = error_of({"strategy.timing.period": 3})
    assert "strategy.timing.period: unknown key; strategy.timing takes: mode, every_iterations" in (
        message
    )


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (
            {"strategy.timing.mode": "fixed", "strategy.timing.every_iterations": 0},
            "timing.every_iterations",
        ),
        ({"strategy.timing.shadow_min_gap": -1.0}, "timing.shadow_min_gap"),
        ({"strategy.alpha": 1.5}, "alpha"),
        ({"strategy.name": "async", "strategy.staleness_norm.kappa": 0.0}, "staleness_norm.kappa"),
        ({"strategy.name": "hierarchical", "strategy.cross_group": "x"}, "cross_group"),
        ({"strategy.name": "backup_workers", "strategy.num_backup": -1}, "num_backup"),
    ],
)
def test_a_value_out_of_bounds_names_the_full_key(overrides, key):
    message = error_of(overrides)
    assert f": strategy.{key}: " in message


def test_old_flat_timing_keys_load_where_they_now_sit_and_say_so(tmp_path):
    text = '[strategy]\nname = "bmuf"\ntiming = "fixed"\nevery_iterations = 5\n'
    old = load_config(write(tmp_path, text))
    new = load_config(
        None,
        {
            "strategy.name": "bmuf",
            "strategy.timing.mode": "fixed",
            "strategy.timing.every_iterations": 5,
        },
    )
    assert old.dump() == new.dump() and old.to_specs().strategy.describe().startswith("FR-BMUF-5")
    messages = old.deprecations()
    assert any("strategy.timing is deprecated: write strategy.timing.mode" in m for m in messages)
    assert any(
        "strategy.every_iterations is deprecated: write strategy.timing.every_iterations" in m
        for m in messages
    )


def test_old_flat_keys_as_overrides_and_over_a_nested_table(tmp_path):
    text = '[strategy]\nname = "easgd"\n[strategy.timing]\nmode = "fixed"\nevery_iterations = 2\n'
    config = load_config(
        write(tmp_path, text), {"strategy.every_iterations": 7, "strategy.shadow_min_gap": 0.0}
    )
    timing = config.to_specs().strategy.timing
    assert (timing.mode, timing.every_iterations, timing.shadow_min_gap) == ("fixed", 7, 0.0)
    assert len(config.deprecations()) == 2


def test_old_flat_timing_keys_of_a_strategy_without_timing_are_ignored_with_a_message():
    config = load_config(
        None,
        {"strategy.name": "async", "strategy.timing": "shadow", "strategy.shadow_min_gap": 1.0},
    )
    assert config.to_specs().strategy == strategy_config("async")
    (message,) = config.deprecations()
    assert (
        "strategy.timing, strategy.shadow_min_gap" in message and "'async' has no timing" in message
    )
    hierarchical = load_config(
        None, {"strategy.name": "hierarchical", "strategy.shadow_min_gap": 2.0}
    )
    assert hierarchical.to_specs().strategy.shadow_min_gap == 2.0  # its own key, not timing's
    assert not hierarchical.deprecations()


def test_a_run_dirs_dumped_config_loads_back_equal(tmp_path):
    from recsync.app.runs.run_dir import toml_text

    config = load_config(
        None,
        {
            "strategy.name": "bounded_staleness",
            "strategy.staleness": 2,
            "strategy.staleness_norm.rule": "inverse",
        },
    )
    again = load_config(write(tmp_path, toml_text(config.dump())))
    assert again == config
    assert dataclasses.asdict(again.to_specs().strategy)["staleness_norm"]["rule"] == "inverse"
