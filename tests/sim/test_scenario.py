"""Cluster scenarios (app/runs/scenario.py): read, validated, turned into each day's cluster;
a continual run replays one on the simulator (and the Ray engine, in test_continual.py),
with the automatic controller switching within days."""

from __future__ import annotations

import json

import pytest
from small_jobs import small_continual

from recsync.app.config.load import load_config
from recsync.app.runs.continual import run_continual
from recsync.app.runs.continual_options import ContinualOptions
from recsync.app.runs.run_dir import RunDir
from recsync.app.runs.scenario import Scenario
from recsync.app.runs.simulate import run_simulation
from recsync.errors import ConfigError
from recsync.strategy.controller import ControllerConfig

SCENARIO = """
[[change]]
day = 1
stragglers = { fraction = 0.5, slowdown = 4.0, start_s = 0.0 }

[[change]]
day = 2
num_trainers = 3
server_slowdown = { "embedding-server-0" = 3.0 }
"""

SMALL = small_continual(4, **{"cluster.num_trainers": 4, "cluster.workers_per_trainer": 1})


def write(tmp_path, text):
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return path


def test_each_day_gets_its_change_as_overrides(tmp_path):
    scenario = Scenario.read(write(tmp_path, SCENARIO))
    config = load_config(None, SMALL)
    assert scenario.overrides(0, config) == {}  # before the first change: the base cluster
    day1 = scenario.overrides(1, config)
    assert sorted(day1["cluster.trainer_slowdown"]) == [1.0, 1.0, 4.0, 4.0]
    assert day1["cluster.slowdown_from_s"] == 0.0 and day1["cluster.slowdown_until_s"] is None
    assert scenario.overrides(1, config) == day1  # drawn from the seed and the day
    day3 = scenario.overrides(3, config)  # day 2's change holds on
    assert day3 == {
        "cluster.num_trainers": 3,
        "cluster.server_slowdown": {"embedding-server-0": 3.0},
        "cluster.trainer_slowdown": [],
        "cluster.slowdown_from_s": 0.0,
        "cluster.slowdown_until_s": None,
    }
    window = Scenario.read(
        write(tmp_path, "[[change]]\nday = 0\nstragglers = {fraction = 0.25, slowdown = 2.0, "
              "start_s = 5.0, duration_s = 10.0}\n")
    )  # fmt: skip
    day0 = window.overrides(0, config)
    assert (day0["cluster.slowdown_from_s"], day0["cluster.slowdown_until_s"]) == (5.0, 15.0)
    assert sorted(day0["cluster.trainer_slowdown"]) == [1.0, 1.0, 1.0, 2.0]
    later = window.overrides(0, config, elapsed_s=8.0)  # a segment starting 8 s into the day
    assert (later["cluster.slowdown_from_s"], later["cluster.slowdown_until_s"]) == (0.0, 7.0)
    assert window.overrides(0, config, elapsed_s=15.0)["cluster.trainer_slowdown"] == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[change]]\nday = 2\n[[change]]\nday = 1\n", "change days must increase"),
        ("[[change]]\nday = 0\nstragglers = {fraction = 2.0, slowdown = 2.0}\n", "fraction"),
        ("[[change]]\nday = 0\nslow = 1\n", "change.0.slow: Extra inputs"),
        (
            "[[change]]\nday = 0\nserver_slowdown = {x = 0.5}\n",
            "server_slowdown.x: Input should be greater than or equal to 1",
        ),
        ("day = 0\n", "change: Field required"),
        ("[[change]\n", "invalid TOML"),
    ],
)
def test_a_wrong_scenario_is_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        Scenario.read(write(tmp_path, text))


def test_a_server_the_job_lacks_fails_before_day_0(tmp_path):
    path = write(tmp_path, '[[change]]\nday = 0\nserver_slowdown = {"dense-server-9" = 2.0}\n')
    options = ContinualOptions("sim", scenario=str(path))
    with pytest.raises(ConfigError, match="no server named \\['dense-server-9'\\]"):
        run_continual(load_config(None, SMALL), tmp_path / "r", options, progress=False)


def test_the_simulator_replays_the_scenario_and_the_controller_switches(tmp_path):
    path = write(tmp_path, SCENARIO)
    controller = ControllerConfig(probe=False)  # sync while balanced: the switch is seen
    options = ContinualOptions("sim", scenario=str(path), controller=controller, segments=2)
    config = load_config(None, SMALL)
    root = tmp_path / "auto"
    records = run_continual(config, root, options, progress=False)
    assert [r["day"] for r in records] == [0, 1, 2]
    calm, slow, fewer = (r["stretches"] for r in records)
    assert all(s["step_time_spread"] < 1.01 for s in calm)
    assert slow[0]["step_time_spread"] == pytest.approx(4.0)  # half the trainers 4x slower
    assert (slow[0]["strategy"], slow[0]["decision"]) == ("sync", "gba")  # within the day
    assert slow[0]["reason"].startswith("stragglers (slowest worker 4.00x a typical one")
    assert records[1]["strategy"] == "sync > gba"
    assert records[1]["cluster"]["slowdown"] == 4.0
    assert len(records[1]["cluster"]["slow_trainers"]) == 2
    assert records[2]["num_trainers"] == 3 and fewer[0]["workers"] == 3
    assert records[2]["cluster"]["server_slowdown"] == {"embedding-server-0": 3.0}
    assert all(r["examples"] == 1024 for r in records)
    assert (root / "day-01.1" / "summary.json").exists()
    # resuming replays the controller: a lost day is trained again, to the bit
    (root / "day-02.1" / "summary.json").unlink()
    again = run_continual(config, root, progress=False)
    assert again == records
    lines = (root / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["strategy"] for line in lines] == [r["strategy"] for r in records]
    with pytest.raises(ConfigError, match="was started with segments 2, not 3"):
        run_continual(config, root, ContinualOptions(segments=3), progress=False)


SLOW_MACHINES = {"cost.worker_flops": 1e7}  # compute, not messages, takes the time


def simulate(tmp_path, name, **overrides):
    config = load_config(None, {**SMALL, "data.synthetic.num_days": 1, **overrides})
    return run_simulation(config, RunDir.create(tmp_path, name), False, None, None)


def test_slow_servers_and_windowed_stragglers_cost_time_in_the_simulator(tmp_path):
    base = simulate(tmp_path, "base")
    server = simulate(tmp_path, "server", **{"cluster.server_slowdown": {"dense-server-0": 20.0}})
    assert server["train_seconds"] > 1.5 * base["train_seconds"]
    assert server["test_auc"] == base["test_auc"]  # sync: the same updates, later
    base = simulate(tmp_path, "slow-machines", **SLOW_MACHINES)
    slow = {**SLOW_MACHINES, "cluster.trainer_slowdown": [4.0, 1.0, 1.0, 1.0]}
    always = simulate(tmp_path, "always", **slow)
    late = simulate(tmp_path, "late", **slow, **{"cluster.slowdown_from_s": 1e6})
    assert always["step_time_spread"] == pytest.approx(4.0)
    assert always["train_seconds"] > 3 * base["train_seconds"]
    assert late["train_seconds"] == base["train_seconds"]  # the window never opened
    assert late["step_time_spread"] == base["step_time_spread"]


def test_options_that_cannot_go_together_are_refused(tmp_path):
    config = load_config(None, SMALL)
    with pytest.raises(ConfigError, match="a schedule or the controller"):
        options = ContinualOptions("sim", {1: "gba"}, controller=ControllerConfig())
        run_continual(config, tmp_path / "a", options, progress=False)
    with pytest.raises(ConfigError, match="segments within a day are for the controller"):
        run_continual(config, tmp_path / "b", ContinualOptions(segments=2), progress=False)
    with pytest.raises(ConfigError, match="17 segments a day, but day 0 has 16 batches"):
        options = ContinualOptions(controller=ControllerConfig(), segments=17)
        run_continual(config, tmp_path / "c", options, progress=False)
