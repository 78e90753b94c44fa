"""The hash-embedding reproduction on a tiny setting: its report is built from its runs, its
Ray part is reused by a rerun; and the synthetic task's id churn and bucketing."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest
import torch

from experiments.repro import REPRODUCTIONS, embeddings, embeddings_report
from experiments.repro import embeddings_setting as setting
from experiments.repro.steady import MissingSteadyRate
from recsync.data.keys import table_of
from recsync.data.synthetic import SyntheticSpec, SyntheticTask

TINY = setting.Setting(
    scale=100_000,
    fixed_caps=(10, 4),
    churn=0.2,
    quality_examples=2_048,
    quality_days=2,
    seeds=(0, 1),
    test_examples=512,
    days=3,
    per_day=512,
    cuts_per_day=2,
    deltas_per_full=2,
    batch_size=64,
    bottom_mlp=(8,),
    top_mlp=(8,),
    engine_examples=0,
    capacity_fraction=1e-4,
    continual_seeds=(0, 1),
    validation_examples=512,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as the reproduction's worker processes use (two threads on a busy
    2-core machine spin at every barrier)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("embeddings")
    said: list = []
    return out, embeddings.reproduce(out, said.append, TINY), said


def test_the_tiny_reproduction_writes_its_report_and_figures(tiny):
    out, results, said = tiny
    for name in ("report.md", "results.json", "rows_per_day.png", "auc_per_day.png"):
        assert (out / name).stat().st_size > 0, name
    assert json.loads((out / "results.json").read_text())["quality"] == results["quality"]
    assert len(results["quality"]) == len(TINY.seeds) * len(setting.quality_variants(TINY))
    assert [(r["variant"], r["seed"]) for r in results["continual"]] == [
        (v, s) for s in TINY.continual_seeds for v in setting.CONTINUAL_VARIANTS
    ]
    assert all(len(r["days"]) == TINY.days for r in results["continual"])
    for part in ("quality", "continual"):  # every variant tuned on the one grid
        for label, tuned in results["tuning"][part].items():
            assert set(map(float, tuned["scores"])) >= set(TINY.grid), label
            runs = [r for r in results[part] if r["variant"] == label]
            assert {r["factor"] for r in runs} == {tuned["chosen"]}
    assert "quality: running" in said and "continual: running" in said
    text = (out / "report.md").read_text()
    for heading in ("## Setting", "## 1.", "## 2.", "## 3.", "## 4.", "What a reviewer"):
        assert heading in text
    assert "## Tuning and run length" in text and "| quality | fixed, 10 rows a table | " in text
    assert "settle.Flattening" in text and "evicting stale rows bounds memory" in text
    for name in ("quality_held_out.png", "continual_held_out.png"):
        assert (out / name).stat().st_size > 0, name
    assert "the cost model's ratio, not a measurement" in text
    assert "Ray engine: not measured" in text
    assert "embeddings" in REPRODUCTIONS


def test_the_reports_numbers_are_the_runs(tiny):
    out, results, _ = tiny
    text = (out / "report.md").read_text()
    fixed = [r["test_auc"] for r in results["quality"] if r["variant"] == "fixed, 10 rows a table"]
    assert f"{sum(fixed) / len(fixed):.4f} ± " in text
    for days in embeddings_report.continual_means(results["continual"]).values():
        for day in days:
            assert f"{day['next_day_auc']:.4f}" in text
    assert len(results["verdicts"]) == 2 * 4 * len(TINY.fixed_caps)
    for verdict in results["verdicts"]:
        assert f"| {verdict['a']} minus {verdict['b']} | " in text
        assert f"| {verdict['difference']:+.4f} | {verdict['spread']:.4f} | " in text
    # one run again, on its own: the simulator is deterministic, the results are its output
    saved = next(
        r
        for r in results["quality"]
        if (r["variant"], r["seed"]) == ("hash LRS, 4 rows a table", 1)
    )
    again = embeddings.quality_run((TINY, "hash LRS", 1, 4, saved["factor"]))
    assert again["test_auc"] == saved["test_auc"] and again["evicted"] == saved["evicted"]


def test_the_runs_count_what_the_tables_hold(tiny):
    _, results, _ = tiny
    for run in results["quality"]:
        assert run["test_auc"] < run["teacher_auc"]
        if run["max_rows_per_shard"] is not None:
            assert run["rows_live"] <= run["rows_budget"] and run["evicted"] > 0
        if run["variant"] == "hash unbounded":
            assert run["rows_live"] == run["inserted"] and run["evicted"] == 0
    kept, evicting = (r["days"] for r in results["continual"] if r["seed"] == 0)
    assert [d["rows_live"] for d in kept] == sorted(d["rows_live"] for d in kept)
    assert kept[-1]["rows_live"] > kept[0]["rows_live"]  # churn: new ids every day
    assert evicting[-1]["evicted"] > 0 and evicting[-1]["rows_live"] < kept[-1]["rows_live"]
    stats = results["continual"][1]["checkpoints"]
    assert stats["full"]["full"]["count"] == sum(stats["delta"][k]["count"] for k in stats["delta"])
    assert stats["delta"]["delta"]["count"] > 0


def test_a_rerun_computes_every_simulated_part_again_and_gets_the_same_numbers(tiny):
    out, results, _ = tiny
    said: list = []
    again = embeddings.reproduce(out, said.append, TINY)
    for new, old in zip(again["quality"], results["quality"], strict=True):
        assert {k: v for k, v in new.items() if k != "wall_s"} == {
            k: v for k, v in old.items() if k != "wall_s"
        }
    for new, old in zip(again["continual"], results["continual"], strict=True):
        assert new["days"] == old["days"]
    assert not any("reused" in str(s) for s in said)  # only the Ray part is ever reused
    assert not (out / "parts").exists()


def test_a_verdict_holds_only_beyond_twice_the_seed_spread():
    def rows(variant, values):
        return [{"variant": variant, "seed": s, "test_auc": v} for s, v in enumerate(values)]

    runs = setting.by_variant(rows("a", [0.70, 0.71, 0.72]) + rows("b", [0.60] * 3))
    assert setting.compare(runs, "a", "b", "test_auc")["verdict"] == "holds"
    runs = setting.by_variant(rows("a", [0.60, 0.64, 0.62]) + rows("b", [0.61] * 3))
    assert setting.compare(runs, "a", "b", "test_auc")["verdict"] == "too few seeds"  # disagree
    runs = setting.by_variant(rows("a", [0.60, 0.64, 0.62, 0.61, 0.63]) + rows("b", [0.61] * 5))
    assert setting.compare(runs, "a", "b", "test_auc")["verdict"] == "within noise"
    runs = setting.by_variant(rows("a", [0.50, 0.51, 0.52]) + rows("b", [0.60] * 3))
    assert setting.compare(runs, "a", "b", "test_auc")["verdict"] == "does not hold"
    assert setting.compare(runs, "a", "b", "test_auc")["difference"] < 0


def test_id_churn_brings_new_ids_each_day():
    spec = SyntheticSpec(
        num_train=3 * 4_096, num_test=100, table_rows=(50, 1_000), num_days=3, id_churn=0.1
    )
    assert spec.churned() == (5, 100) and spec.id_space() == (60, 1_200)
    task = SyntheticTask(spec)
    days = [task.day_test_set(d, 4_096)[0].ids.reshape(2, -1) for d in range(3)]
    assert int(days[0][1].max()) < 1_000
    assert int(days[2][1].max()) >= 1_100  # ids first seen on day 2
    assert set(days[2][1].tolist()) - set(days[0][1].tolist())
    again = SyntheticTask(spec).day_test_set(2, 4_096)[0].ids
    assert torch.equal(again, days[2].reshape(-1))


def test_bucket_rows_hash_only_the_features_that_do_not_fit():
    spec = SyntheticSpec(num_train=2_048, num_test=2_048, table_rows=(50, 1_000))
    bucketed = SyntheticTask(dataclasses.replace(spec, bucket_rows=(50, 64))).test_set()[0]
    plain = SyntheticTask(spec).test_set()[0]
    ids, plain_ids = bucketed.ids.reshape(2, -1), plain.ids.reshape(2, -1)
    assert torch.equal(ids[0], plain_ids[0])
    assert int(ids[1].max()) < 64 and not torch.equal(ids[1], plain_ids[1])
    assert torch.equal(bucketed.labels, plain.labels)


@pytest.mark.parametrize(
    "fields",
    [{"id_churn": 1.0}, {"id_churn": -0.1}, {"bucket_rows": (5,)}, {"bucket_rows": (0, 5)}],
)
def test_bad_churn_or_buckets_are_refused(fields):
    with pytest.raises(ValueError, match="synthetic"):
        SyntheticSpec(table_rows=(10, 10), **fields)


def test_buckets_are_for_fixed_tables_only():
    with pytest.raises(ValueError, match="not with keyed"):
        SyntheticSpec(table_rows=(10, 10), bucket_rows=(5, 5), keyed=True)


def test_continual_days_are_scored_on_keyed_ids():
    task = setting.synthetic(TINY, 0, 2, 1_024)
    with pytest.raises(ValueError, match="keyed"):
        embeddings.next_day_test(SyntheticTask(task), 0, 64)
    keyed = SyntheticTask(dataclasses.replace(task, keyed=True))
    ids = embeddings.next_day_test(keyed, 0, 64).ids.reshape(len(task.table_rows), -1)
    assert torch.equal(
        table_of(ids), torch.arange(len(task.table_rows)).unsqueeze(1).expand_as(ids)
    )


def test_a_saved_ray_part_is_reported_by_a_rerun_that_does_not_run_ray(tiny, tmp_path):
    out, _, _ = tiny
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    asked = dataclasses.replace(TINY, engine_examples=4_096, engine_repeats=2)
    steady = {"fixed": [100.0, 110.0], "hash": [90.0, 99.0]}
    engine = {"examples": 4_096, "repeats": 2, "eps_steady": steady, "ratios": [0.9, 0.9]}
    saved = {"setting": asked.as_dict(), "result": engine, "seconds": 1.0}
    (copy / "parts").mkdir()
    (copy / "parts" / "engine.json").write_text(json.dumps(saved))
    said: list = []
    results = embeddings.reproduce(copy, said.append, TINY)  # Ray not asked for: reused
    assert results["engine"] == engine and "engine: reused" in " ".join(map(str, said))
    assert "hash / fixed median 0.900" in (copy / "report.md").read_text()
    # a saved part with each run's whole-run rate only is not reused: Ray measures it again
    whole = {k: v for k, v in engine.items() if k != "eps_steady"} | {"eps": steady}
    (copy / "parts" / "engine.json").write_text(json.dumps({**saved, "result": whole}))
    results = embeddings.reproduce(copy, said.append, TINY)
    assert results["engine"] is None and "Ray engine: not measured" in (
        (copy / "report.md").read_text()
    )
    run = results["quality"][0]
    run["sim_eps"] = run.pop("sim_eps_steady")  # a quality run with the whole run's rate only
    name = f"{run['variant']}, seed {run['seed']}"
    with pytest.raises(MissingSteadyRate, match=re.escape(f"results.json, point {name}:")):
        embeddings_report.engine_lines(results)
