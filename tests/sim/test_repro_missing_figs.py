"""The reproductions of GBA Fig. 8 (right; `gba_global_batch`) and HT Fig. 3
(`hierarchical_trainers`) at tiny settings, through their real runners and renderers, and
their claims on hand-made results."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
import torch

from experiments.repro import (
    gba,
    gba_global_batch,
    gba_global_batch_claims,
    gba_global_batch_report,
    gba_switching,
    hierarchical,
    hierarchical_settings,
    hierarchical_throughput,
    hierarchical_trainers,
    hierarchical_trainers_claims,
    hierarchical_trainers_report,
    settle,
)
from experiments.repro.claims import BUILT_IN, MEASURED
from experiments.repro.registry import REPRODUCTIONS
from experiments.repro.verdict import HOLDS, TOO_FEW_SEEDS, WITHIN_NOISE
from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec, TableSpec

TINY_MODEL = ModelSpec(  # small tables too: the default ones dominate a tiny run's time
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(4)),
    bottom_mlp=(16,),
    top_mlp=(16,),
)
TASK_SPEC = gba_switching.task_spec  # the module's, before a test replaces it


def tiny_task():
    return dataclasses.replace(TASK_SPEC(), num_dense=4, table_rows=(50,) * 4, num_test=200)


def inline(run, items, progress):
    """`run_in_processes` in this process, on one torch thread as its processes are (many
    threads on a loaded 2-core machine spin at every small op)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [run(item) for item in items]
    finally:
        torch.set_num_threads(threads)
    for row in rows:
        if progress:
            progress(row)
    return rows


def test_both_are_registered_with_their_minutes():
    assert REPRODUCTIONS["gba-global-batch"].minutes == 25.0
    assert REPRODUCTIONS["gba-global-batch"].report_dir == "reports/gba_global_batch"
    assert REPRODUCTIONS["hierarchical-trainers"].minutes == 18.0
    assert REPRODUCTIONS["hierarchical-trainers"].report_dir == "reports/hierarchical_trainers"


def test_the_real_setting_matches_sync_and_brackets_its_global_batch():
    assert gba.LOCAL_BATCH in gba_global_batch.LOCAL_BATCHES
    assert (
        min(gba_global_batch.LOCAL_BATCHES) < gba.LOCAL_BATCH < max(gba_global_batch.LOCAL_BATCHES)
    )
    assert 1.0 in gba_global_batch.LR_GRID
    assert gba_global_batch.SEEDS == settle.SEEDS
    assert gba_global_batch.TUNING_SEED not in gba_global_batch.SEEDS
    assert len(gba_global_batch.points()) == 15  # x1 alone before the tuning
    # x1 (the paper's untuned switch) and each batch's tuned factor, on every seed
    chosen = gba_global_batch.points({64: 0.25, 128: 1.0, 256: 2.0})
    assert len(chosen) == 25 and (4, 64, 0.25) in chosen and (4, 64, 1.0) in chosen
    assert hierarchical_trainers.TRAINERS == (10, 20, 30, 40)


@pytest.fixture
def tiny_gba(monkeypatch):
    small = functools.partial(gba_switching.run_segment, model=TINY_MODEL)
    monkeypatch.setattr(gba_switching, "task_spec", tiny_task)
    monkeypatch.setattr(gba_switching, "run_segment", small)
    monkeypatch.setattr(gba_global_batch, "run_segment", small)
    monkeypatch.setattr(gba_global_batch, "run_in_processes", inline)
    monkeypatch.setattr(gba, "LOCAL_BATCH", 16)
    monkeypatch.setattr(gba, "GLOBAL_BATCH", 16 * gba.WORKERS)
    monkeypatch.setattr(gba_switching, "PER_DAY", 2 * 32 * gba.WORKERS)
    monkeypatch.setattr(gba_switching, "TEST_PER_DAY", 400)
    monkeypatch.setattr(gba_switching, "SYNC_DAYS", 1)
    monkeypatch.setattr(gba_global_batch, "LOCAL_BATCHES", (8, 16, 32))
    monkeypatch.setattr(gba_global_batch, "LR_GRID", (0.5, 1.0, 2.0))
    monkeypatch.setattr(gba_global_batch, "SEEDS", (0,))
    monkeypatch.setattr(settle, "MAX_EXTENSIONS", 0)  # the grid as it is: no extension
    gba_switching.base_days.cache_clear()
    yield
    gba_switching.base_days.cache_clear()


def test_gba_global_batch_runs_and_renders_at_a_tiny_setting(tiny_gba, tmp_path: Path):
    result = gba_global_batch.reproduce(tmp_path)
    runs = result["runs"]
    # the tuning: every batch on the grid, on the tuning seed alone
    assert [t["variant"] for t in result["tuning"]] == ["8", "16", "32"]
    assert all(list(t["scores"]) == ["0.5", "1", "2"] for t in result["tuning"])
    assert {r["seed"] for r in result["tuning_runs"]} == {gba_global_batch.TUNING_SEED}
    assert len(result["tuning_runs"]) == 9
    for t in result["tuning"]:
        losses = {
            r["lr_factor"]: r["mean_logloss"]
            for r in result["tuning_runs"]
            if r["local_batch"] == int(t["variant"])
        }
        assert t["chosen"] == min(losses, key=lambda f: (losses[f], f))
    chosen = gba_global_batch.chosen_factors(result["tuning"])
    assert [(r["local_batch"], r["lr_factor"]) for r in runs] == [
        (b, f) for b in (8, 16, 32) for f in dict.fromkeys((1.0, chosen[b]))
    ]
    for r in runs + result["tuning_runs"]:
        curve = r["last_day_curve"]
        assert curve[-1][0] == pytest.approx(1.0) and any(p <= 0.75 for p, _ in curve)
        assert r["last_day_change"] == pytest.approx(
            settle.Flattening().change([tuple(p) for p in curve])
        )
        assert len(r["logloss"]) == 3 and r["switch_logloss"] > 0
    for r in runs:
        assert r["global_batch"] == r["local_batch"] * gba.WORKERS
        # every switched day is 1,024 examples: 1,024 / global batch global steps
        assert r["global_steps"] == [2 * 32 // r["local_batch"]] * 3
        assert len(r["auc"]) == 3 and all(0.0 < a < 1.0 for a in r["auc"])
        assert r["mean_auc"] == pytest.approx(sum(r["auc"]) / 3)
    # the same sync checkpoint under every run
    assert len({tuple(r["sync_auc"]) for r in runs}) == 1
    assert all(len(r["sync_auc"]) == 1 for r in runs)  # one day of all-reduce here
    text = (tmp_path / "report.md").read_text()
    assert "| 16 (sync) | 256 |" in text and "Global batch 128 against sync's 256" in text
    assert "400 workers" in text and (tmp_path / "global_batch.png").exists()
    assert "Tuning (seed 5):" in text and "| 8 (128) | x0.5: " in text
    assert "Criterion (`settle.Flattening`)" in text and "runs the claims read met it" in text
    assert (tmp_path / "last_day_curves.png").exists()
    assert json.loads((tmp_path / "results.json").read_text()) == result
    assert gba_global_batch_report.render(result) == text
    found = gba_global_batch_claims.claims(result)
    assert len(found) == 2 and all(c.evidence == MEASURED for c in found)
    assert all(c.verdict.label == TOO_FEW_SEEDS for c in found)  # one seed


def made_gba(gap: float, spread: float) -> dict:
    runs = []
    for seed in (0, 1, 2):
        noise = spread * (seed - 1)
        for b in (64, 128, 256):
            for f in (0.5, 1.0, 2.0):
                auc = 0.75 + (0.0 if b == 128 else -gap) + noise + (0.001 if f == 1.0 else 0.0)
                runs.append(
                    {
                        "seed": seed,
                        "local_batch": b,
                        "lr_factor": f,
                        "mean_auc": auc,
                        "dropped": [1, 2, 3],
                        "mean_staleness": [1.0, 1.0, 1.0],
                    }
                )
    settings = {
        "workers": 16,
        "sync_local_batch": 128,
        "sync_global_batch": 2048,
        "local_batches": [64, 128, 256],
        "sync_days": 2,
        "switched_days": [2, 3, 4],
        "drift": 0.1,
        "per_day": 131072,
        "stragglers": "s",
        "test_per_day": 20000,
        "seeds": [0, 1, 2],
    }
    return {"runs": runs, "settings": settings}


def test_gba_global_batch_claims_hold_only_beyond_the_seeds_spread():
    clear = gba_global_batch_claims.claims(made_gba(0.01, 0.001))
    assert [c.verdict.label for c in clear] == [HOLDS, HOLDS]
    assert clear[0].effect.size == pytest.approx(0.01)
    assert gba_global_batch_report.best_factor(made_gba(0.01, 0.001), 64) == 1.0
    # paired by seed, a spread shared by every batch cancels; one batch's own spread blurs
    # its gap (all three seeds' gaps positive, their sd above half the mean)
    blurred = made_gba(0.001, 0.0)
    for r in blurred["runs"]:
        if r["local_batch"] == 64:
            r["mean_auc"] += 0.0009 * (r["seed"] - 1)
    assert gba_global_batch_report.untuned(blurred, 64).label == WITHIN_NOISE
    assert gba_global_batch_report.untuned(blurred, 256).label == HOLDS
    line = next(
        x
        for x in gba_global_batch_report.render(blurred).splitlines()
        if x.startswith("- Global batch 1,024")
    )
    assert "within noise" in line.split("Each at its tuned")[0]
    assert "not settled either way" in line
    assert gba_global_batch_claims.claims({"runs": []}) == []


def test_gba_global_batch_reads_its_tuning_and_the_last_days_curves():
    result = made_gba(0.01, 0.001)
    result["tuning"] = [
        {
            "variant": str(b),
            "scores": {"0.25": 0.5, "0.5": 0.49, "1": 0.495, "2": 0.5},
            "chosen": 0.5,
            "extensions": 1,
            "at_edge": False,
        }
        for b in (64, 128, 256)
    ]
    result["settings"]["tuning_seed"] = 5
    for r in result["runs"]:
        falling = 0.02 if r["local_batch"] == 256 else 0.001
        r["last_day_curve"] = [[0.5, 0.5 + 2 * falling], [0.75, 0.5 + falling], [1.0, 0.5]]
    assert gba_global_batch_report.best_factor(result, 64) == 0.5
    # at x0.5 the synthetic AUC gap is the same 0.01: holds, each at its tuned factor
    assert gba_global_batch_report.tuned(result, 64).label == HOLDS
    text = gba_global_batch_report.render(result)
    assert (
        "| 64 (1,024) | x0.25: 0.50000, x0.5: 0.49000, x1: 0.49500, x2: 0.50000 | x0.5 | "
        "no (grid extended 1x) |" in (text)
    )
    assert "Each at its tuned factor (x0.5 and x0.5)" in text
    assert "settled with the paper" in text
    # 256's runs fell 4% over the window: not flat; the other batches' 0.2%: flat
    assert "18 of the 27 runs the claims read met it" in text
    assert "local batch 256 x0.5 seed 0 (+4.00%)" in text
    assert gba_global_batch.last_day_curve(
        [{"examples": 1_100, "test_logloss": 0.6}, {"examples": 1_200, "test_logloss": 0.5}], 200
    ) == [[0.5, 0.6], [1.0, 0.5]]


@pytest.fixture
def tiny_ht(monkeypatch):
    monkeypatch.setattr(hierarchical_trainers, "run_in_processes", inline)
    monkeypatch.setattr(hierarchical_trainers, "TRAINERS", (1, 2))
    monkeypatch.setattr(hierarchical_trainers, "LR_FACTORS", (0.0625, 0.25))
    monkeypatch.setattr(hierarchical_trainers, "QUALITY_EXAMPLES", 2_048)
    monkeypatch.setattr(hierarchical, "LARGE_MODEL", TINY_MODEL)
    monkeypatch.setattr(hierarchical, "ModelSpec", lambda: TINY_MODEL)
    tiny = SyntheticSpec(num_dense=4, table_rows=(50,) * 4, num_test=500)
    monkeypatch.setattr(hierarchical, "SyntheticSpec", lambda: tiny)


def test_hierarchical_trainers_runs_and_renders_at_a_tiny_setting(tiny_ht, tmp_path: Path):
    result = hierarchical_trainers.reproduce(tmp_path)
    eps = {r["trainers"]: r for r in result["throughput"]}
    cores, batch = hierarchical_settings.CORES, hierarchical_settings.BATCH
    iterations = hierarchical_settings.ITERATIONS_PER_THREAD
    assert eps[1]["examples"] == cores * iterations * batch
    assert eps[2]["examples"] == 2 * cores * iterations * batch
    assert eps[2]["eps_steady"] > eps[1]["eps_steady"] > 0
    tuning = [r for r in result["quality"] if r["seed"] == 0]
    assert sorted((r["trainers"], r["lr_factor"]) for r in tuning) == [
        (1, 0.0625),
        (1, 0.25),
        (2, 0.0625),
        (2, 0.25),
    ]
    best = hierarchical_trainers_report.best_factors(result["quality"])
    assert {str(n): f for n, f in best.items()} == result["best"]
    assert result["shared"] == best[2]
    for n in (1, 2):  # each count at its best on every seed, and at the shared factor
        assert sorted(
            hierarchical_trainers_report.by_seed(result["quality"], n, best[n], "train_loss")
        ) == [0, 1, 2]
        assert sorted(
            hierarchical_trainers_report.by_seed(result["quality"], n, best[2], "train_loss")
        ) == [0, 1, 2]
    assert all(r["examples"] == 2_048 for r in result["quality"])
    text = (tmp_path / "report.md").read_text()
    assert "| 1 | " in text and "| 2 | " in text and "0.25% higher with 40" in text
    assert (
        hierarchical_trainers_report.render(json.loads((tmp_path / "results.json").read_text()))
        == text
    )
    assert (tmp_path / "trainers.png").exists()
    found = hierarchical_trainers_claims.claims(result)
    assert [c.evidence for c in found] == [BUILT_IN, MEASURED]
    assert found[0].verdict.label == TOO_FEW_SEEDS  # one deterministic run


def test_hierarchical_trainers_loss_rise_holds_only_beyond_the_spread():
    def made(rise: float, spread: float) -> dict:
        quality = [
            {
                "trainers": n,
                "lr_factor": 0.0625,
                "seed": s,
                "test_logloss": 0.5,
                "train_loss": 0.5 * (1 + (rise if n == 40 else 0.0) + spread * (s - 1) * (n == 40)),
            }
            for n in (10, 40)
            for s in (0, 1, 2)
        ]
        throughput = [
            {"trainers": 10, "eps_steady": 1000.0},
            {"trainers": 40, "eps_steady": 3800.0},
        ]
        settings = {
            "base": 10,
            "cores": 4,
            "sync_servers": 6,
            "embedding_servers": 8,
            "bandwidth_gbit": 25.0,
            "examples": 1_000_000,
            "lr_factors": [0.0625],
            "seeds": [0, 1, 2],
        }
        return {
            "throughput": throughput,
            "quality": quality,
            "best": {"10": 0.0625, "40": 0.0625},
            "shared": 0.0625,
            "settings": settings,
        }

    clear = hierarchical_trainers_claims.claims(made(0.0025, 0.0001))
    assert clear[1].verdict.label == HOLDS and clear[1].effect.size == pytest.approx(0.25)
    assert clear[0].effect.size == pytest.approx(0.95)
    noisy = made(0.0025, 0.01)
    assert "within noise" in hierarchical_trainers_report.render(noisy)
    assert hierarchical_trainers_claims.claims({}) == []


def test_hierarchical_fig9_utilization_per_group_ps(tiny_ht):
    """HT Fig. 9's bars from a throughput point: each group PS of the first group, in order,
    and the trainers' mean, all busy shares; and the report's table of them."""
    setting = hierarchical_settings.ht(2, 2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        row = hierarchical.throughput(setting)
    finally:
        torch.set_num_threads(threads)
    cpu, nic = row["group0_ps_cpu"], row["group0_ps_nic"]
    assert len(cpu) == len(nic) == 2
    assert all(0.0 < v <= 1.0 for v in [*cpu, *nic, row["trainer_cpu"]])
    assert max(cpu) <= row["group_ps_cpu"] + 1e-12  # the busiest over every group
    lines = hierarchical_throughput.other_figures({hierarchical_throughput.FIG9_SETTING.label: row})
    assert "| group PS 1 |" in "\n".join(lines) and "| group PS 3 |" not in "\n".join(lines)
    assert any(line.startswith("| trainers (mean) |") for line in lines)
    assert any("hierarchical-trainers" in line for line in lines)
    assert any("shadowsync-threads" in line for line in lines)
    older = hierarchical_throughput.other_figures({})
    assert any("predates the per-node utilization" in line for line in older)
