"""Continual training (`recsync continual`): days in order from each other's checkpoints, the
next day's score, strategy changes at day boundaries, and resuming at the next day."""

from __future__ import annotations

import dataclasses
import json

import pytest
from small_jobs import small_continual

from recsync.app.cli.data import Split, write_synthetic_parquet
from recsync.app.config.load import load_config
from recsync.app.runs.checkpoints import load_run_checkpoint
from recsync.app.runs.continual import (
    day_dir_name,
    parse_schedule,
    run_continual,
    strategy_of_day,
)
from recsync.app.runs.continual_days import day_sizes
from recsync.app.runs.continual_options import ContinualOptions as Options
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError

SMALL = small_continual(3)


def test_schedule_is_parsed_and_read_per_day():
    schedule = parse_schedule("0=sync, 2=gba,5=sync")
    assert schedule == {0: "sync", 2: "gba", 5: "sync"}
    assert [strategy_of_day(d, schedule, "async") for d in range(7)] == [
        "sync", "sync", "gba", "gba", "gba", "sync", "sync",
    ]  # fmt: skip
    assert strategy_of_day(0, {2: "gba"}, "async") == "async"
    with pytest.raises(ConfigError, match="'2:gba' is not DAY=STRATEGY"):
        parse_schedule("2:gba")


def test_days_must_exist_and_hold_whole_batches():
    with pytest.raises(ConfigError, match="num_days = 1; it needs >= 2 days"):
        day_sizes(load_config(None, {**SMALL, "data.synthetic.num_days": 1}))
    with pytest.raises(ConfigError, match="1,000 a day, not a multiple of train.batch_size = 64"):
        day_sizes(load_config(None, {**SMALL, "data.synthetic.num_train": 3000}))
    _, sizes = day_sizes(load_config(None, SMALL))
    assert sizes == [1024, 1024, 1024]


def test_a_wrong_strategy_in_the_schedule_fails_before_any_day(tmp_path):
    with pytest.raises(ConfigError, match="strategy 'nope' .schedule or controller.: .*is none of"):
        run_continual(load_config(None, SMALL), tmp_path / "d", Options("sim", {2: "nope"}))
    assert not (tmp_path / "d" / day_dir_name(0)).exists()


def test_days_train_in_order_switch_strategy_and_resume_exactly(tmp_path):
    config = load_config(None, SMALL)
    root = tmp_path / "days"
    records = run_continual(config, root, Options("sim", {1: "gba"}), progress=False)
    assert [r["day"] for r in records] == [0, 1]  # day 2 is only scored
    assert [r["strategy"] for r in records] == ["sync", "gba"]
    assert records[1]["strategy_described"].startswith("GBA")
    assert all(r["examples"] == 1024 and 0.5 < r["next_day_auc"] < 1.0 for r in records)
    for day in (0, 1):
        state, _ = load_run_checkpoint(root / day_dir_name(day))
        assert state.data_position == 1024 * (day + 1)
    lines = (root / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["day"] for line in lines] == [0, 1]
    assert (root / "days.png").stat().st_size > 0

    done = run_continual(config, root, Options("sim", {1: "gba"}), progress=False)
    assert done == records  # all done
    # day 1 lost (no summary): resuming trains it again from day 0's checkpoint, to the bit
    (root / day_dir_name(1) / "summary.json").unlink()
    again = run_continual(config, root, progress=False)  # engine and schedule: the run's
    assert again[1]["strategy"] == "gba"
    assert again[1]["next_day_auc"] == records[1]["next_day_auc"]
    with pytest.raises(ConfigError, match="was started with schedule"):
        run_continual(config, root, Options("sim", {1: "async"}), progress=False)
    assert len((root / "metrics.jsonl").read_text().splitlines()) == 2


@pytest.mark.usefixtures("local_ray")
def test_days_on_ray_resume_from_each_other_and_switch_strategy(tmp_path):
    """Day 1 of the scenario: one of the two trainers 10x slower (its compute sleeps 9x as
    long again) and a slow embedding server; the step times measured on the engine show it."""
    config = load_config(None, {**SMALL, "strategy.name": "async", "cluster.num_cpus": 2})
    root = tmp_path / "ray-days"
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        "[[change]]\nday = 1\nstragglers = { fraction = 0.5, slowdown = 10.0 }\n"
        'server_slowdown = { "embedding-server-1" = 2.0 }\n'
    )
    options = Options("ray", {1: "sync"}, scenario=str(scenario))
    records = run_continual(config, root, options, progress=False)
    assert [(r["day"], r["strategy"], r["examples"]) for r in records] == [
        (0, "async", 1024),
        (1, "sync", 1024),
    ]
    assert all(r["engine"] == "ray" and 0.5 < r["next_day_auc"] < 1.0 for r in records)
    state, _ = load_run_checkpoint(root / day_dir_name(1))
    assert state.data_position == 2048  # day 1 continued where day 0 ended, exactly
    assert records[0]["cluster"]["slow_trainers"] == []
    assert records[1]["cluster"]["slowdown"] == 10.0
    # only day 1's Compute sleeps (the emulated straggler), and the slowed trainer's workers'
    # measured steps hold that sleep. (Their steps against the other trainer's are not
    # compared: a step is a few ms of math on two cores shared by eight processes and the
    # other test worker, and a starved process's math measured 0.040 s a step against the
    # slowed one's 0.023 with its sleep, in CI)
    summaries = [json.loads((root / day_dir_name(d) / "summary.json").read_text()) for d in (0, 1)]
    slept = [summary["blocked_seconds"]["Compute"] for summary in summaries]
    assert slept[0] < 0.01 < slept[1]
    (slow,) = records[1]["cluster"]["slow_trainers"]
    steps = summaries[1]["worker_step_seconds"]
    ours = [s for w, s in steps.items() if int(w) // 2 == slow]
    # sync: each of its workers steps once a global step, so its steps split evenly
    slow_steps = summaries[1]["examples_per_trainer"][slow] // 64
    assert sum(ours) * slow_steps / len(ours) >= 0.99 * slept[1]


def test_day_files_train_whole_each_and_score_the_next(tmp_path):
    """Three Parquet day files (three drifted teachers' days written by `recsync data synth`'s
    writer): day 0 trains the first file, is scored on the second, and so on."""
    base = SyntheticSpec(num_train=1024, num_test=256, table_rows=(50,) * 4, num_dense=3)
    files = []
    for day in range(3):
        path = tmp_path / f"day{day}.parquet"
        write_synthetic_parquet(dataclasses.replace(base, seed=day), path, Split.train)
        files.append(str(path))
    overrides = {k: v for k, v in SMALL.items() if not k.startswith("data.")}
    data = {"data.source": "parquet", "data.path": files[0], "data.test_path": files[1]}
    data["model.table_rows"] = 50
    config = load_config(None, {**overrides, **data})
    records = run_continual(config, tmp_path / "f", Options("sim", day_files=files), False)
    assert [(r["day"], r["data"], r["examples"]) for r in records] == [
        (0, files[0], 1024),
        (1, files[1], 1024),
    ]
    assert all(0.0 < r["next_day_auc"] < 1.0 for r in records)
    day1 = load_config(tmp_path / "f" / day_dir_name(1) / "config.toml")
    assert day1.data.test_path == files[2]
    with pytest.raises(ConfigError, match="1 day file"):
        run_continual(config, tmp_path / "g", Options("sim", day_files=files[:1]), False)
