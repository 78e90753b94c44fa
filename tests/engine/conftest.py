"""Fixtures the engine modules share."""

from __future__ import annotations

import pytest
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC, ENGINE_TRAIN

from recsync.data.synthetic import SyntheticTask
from recsync.trainer.reference import ReferenceTrainer


@pytest.fixture(scope="session")
def reference_auc() -> float:
    """The held-out AUC of the engine tests' job trained in one process, one pass (computed
    once for every module that compares with it: a minute of CPU on a busy machine)."""
    task = SyntheticTask(ENGINE_SYNTHETIC)
    trainer = ReferenceTrainer(ENGINE_MODEL, ENGINE_TRAIN)
    for batch in task.train_batches(ENGINE_TRAIN.batch_size):
        trainer.train_step(batch)
    return trainer.evaluate(task.test_set()[0]).auc
