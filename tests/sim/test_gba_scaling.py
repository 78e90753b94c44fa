"""GBA Fig. 8's runs: GBA at a fixed global batch, priced for EPS and real for AUC."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.repro import gba_scaling
from recsync.model.spec import ModelSpec

JOB_SPEC = gba_scaling.job_spec  # the module's, before a test replaces it
SMALL_MODEL = ModelSpec(num_dense=13, bottom_mlp=(16,), top_mlp=(16,))


def small_spec(workers: int, seed: int, examples: int):
    spec = JOB_SPEC(workers, seed, examples)
    synthetic = dataclasses.replace(spec.synthetic, num_test=200)
    return dataclasses.replace(spec, model=SMALL_MODEL, synthetic=synthetic)


def test_the_local_batch_keeps_the_global_batch():
    for n in gba_scaling.THROUGHPUT_WORKERS + gba_scaling.AUC_WORKERS:
        spec = gba_scaling.job_spec(n, 0, gba_scaling.GLOBAL_BATCH)
        workers = spec.cluster.num_trainers * spec.cluster.workers_per_trainer
        assert workers == n and n * spec.train.batch_size == gba_scaling.GLOBAL_BATCH
    with pytest.raises(ValueError, match="dividing"):
        gba_scaling.job_spec(300, 0, gba_scaling.GLOBAL_BATCH)


def test_priced_and_real_points_give_the_same_times(monkeypatch):
    monkeypatch.setattr(gba_scaling, "GLOBAL_BATCH", 64)
    monkeypatch.setattr(gba_scaling, "job_spec", small_spec)
    priced = gba_scaling.run_point(("eps", 8, 0, 4 * 64))
    real = gba_scaling.run_point(("auc", 8, 0, 4 * 64))
    assert priced["test_auc"] is None and 0.0 < real["test_auc"] < 1.0
    assert priced["local_batch"] == 8 and priced["global_steps"] == real["global_steps"] == 4
    assert priced["eps"] == real["eps"] > 0
