"""The Fig. 4 norms are what the dense server was pushed and what it applied."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from experiments.repro import gba_norms
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families.gradient.messages import PushDenseGradient
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.strategy.registry import load_families, strategy_config

load_families()
SYNTHETIC = SyntheticSpec(num_train=16 * 32, num_test=200, num_dense=4, table_rows=(50,) * 4)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(4)),
    bottom_mlp=(16,),
    top_mlp=(16,),
)


def spec_of(name: str, batch: int) -> JobSpec:
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    synthetic = dataclasses.replace(SYNTHETIC, num_train=4 * 8 * batch)
    return JobSpec(MODEL, TrainSpec(batch_size=batch), cluster, strategy_config(name), synthetic)


def test_push_norms_keeps_each_push_and_the_mean_of_each_m():
    norms = gba_norms.PushNorms(2)
    grads = [torch.tensor([3.0, 4.0]), torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])]
    for worker, grad in enumerate(grads):
        norms(PushDenseGradient(worker, 7, grad), None)
    norms("not a push", None)  # type: ignore[arg-type]
    assert norms.pushed == pytest.approx([5.0, 1.0, 2.0])
    assert norms.applied == pytest.approx([float(torch.tensor([2.0, 2.0]).norm())])
    assert norms.versions == [(0, 7), (1, 7), (2, 7)]
    assert grads[0].tolist() == [3.0, 4.0]  # the pushed gradients are left as they were
    with pytest.raises(ValueError, match="aggregate"):
        gba_norms.PushNorms(0)


def test_sync_run_is_seen_push_by_push_and_step_by_step():
    job, norms = gba_norms.observed(spec_of("sync", 16))
    summary = job.run()
    assert len(norms.pushed) == 4 * 8  # every worker's every step
    assert len(norms.applied) == summary["global_steps"] == 8
    for step in range(8):  # each aggregate: every worker once, of one version
        group = norms.versions[4 * step : 4 * step + 4]
        assert sorted(w for w, _ in group) == [0, 1, 2, 3]
        assert {v for _, v in group} == {step}
    assert all(n > 0 for n in norms.pushed)
    assert all(a <= max(norms.pushed) for a in norms.applied)


def test_larger_local_batches_push_smaller_norms():
    small, large = (gba_norms.observed(spec_of("bsp", b)) for b in (8, 128))
    for job, _ in (small, large):
        job.run()
    assert sum(large[1].pushed) / 32 < sum(small[1].pushed) / 32


def small_spec(name: str, batch: int, seed: int, steps: int, resume=None) -> JobSpec:
    spec = spec_of(name, batch)
    start = 0 if resume is None else resume.data_position
    synthetic = dataclasses.replace(spec.synthetic, num_train=start + 4 * steps * batch)
    return dataclasses.replace(spec, synthetic=synthetic, resume=resume)


def test_a_point_runs_from_the_warm_checkpoint_and_its_rows_make_the_report(monkeypatch, tmp_path):
    monkeypatch.setattr(gba_norms, "job_spec", small_spec)
    warm = gba_norms.warm_state(0, 2)
    assert warm.data_position == 4 * 2 * gba_norms.SYNC_BATCH
    points = (("bsp", 8, 0, 8, 2), ("bsp", 32, 0, 8, 2), ("sync", 8, 0, 8, 2))
    rows = [gba_norms.run_point(p) for p in points]
    sync = rows[-1]
    assert sync["aggregate_examples"] == 8 * 4 and len(sync["applied"]) == 8 - 2  # 25% left out
    assert len(sync["pushed"]) == 32 - 8 and sync["mean_staleness"] == 0.0
    assert sync["pushed_mean"] == pytest.approx(sum(sync["pushed"]) / len(sync["pushed"]))
    text = gba_norms.report(rows, dict(gba_norms.settings(), sync_batch=8))
    assert "| sync-8 | 8 | 32 |" in text and "over 1 seed: too few seeds" in text
    assert "from a checkpoint of 50 `sync` steps per worker" in text and "; 1 seed;" in text
    gba_norms.plot(rows, tmp_path / "norms.png")
