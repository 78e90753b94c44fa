"""The single-process reference trainer: it learns, it learns the synthetic task, it is
bit-reproducible from its seed."""

from __future__ import annotations

import math

import pytest
import torch

import recsync.trainer.reference as reference
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.trainer.reference import ReferenceTrainer

TASK_SPEC = SyntheticSpec(num_train=4000, num_test=2000, table_rows=(50,) * 4, num_dense=3)
MODEL = ModelSpec(
    num_dense=3,
    tables=tuple(TableSpec(f"C{i + 1}", 50, 4) for i in range(4)),
    bottom_mlp=(8,),
    top_mlp=(8,),
)
BATCH_SIZE = 64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Tiny tensors: intra-op threads only add contention (50x slower on a loaded machine).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def task() -> SyntheticTask:
    return SyntheticTask(TASK_SPEC)


def _train_spec(seed: int = 0, sparse: str = "adagrad") -> TrainSpec:
    return TrainSpec(
        batch_size=BATCH_SIZE,
        dense_optimizer=DenseOptimizerSpec(name="adagrad", lr=0.01),
        sparse_optimizer=RowOptimizerSpec(name=sparse, lr=0.05),
        seed=seed,
    )


def test_train_step_decreases_loss_on_a_repeated_batch(task):
    batch = next(task.train_batches(256))
    trainer = ReferenceTrainer(MODEL, _train_spec())
    losses = [float(trainer.train_step(batch)) for _ in range(15)]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.1, losses
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert trainer.examples_trained == 15 * 256
    shard = trainer.embeddings.shards[0]
    assert shard.global_step == 15
    touched = shard.versions > 0
    assert bool(touched.any()) and set(shard.versions[touched].tolist()) == {15}


@pytest.mark.parametrize("sparse", ["adagrad", "adam"])
def test_learns_the_synthetic_task(task, sparse):
    trainer = ReferenceTrainer(MODEL, _train_spec(sparse=sparse))
    test, _ = task.test_set()
    before = trainer.evaluate(test)
    for _epoch in range(2):
        for batch in task.train_batches(BATCH_SIZE):
            loss = trainer.train_step(batch)
            assert torch.isfinite(loss)
    after = trainer.evaluate(test)
    assert trainer.examples_trained == 2 * TASK_SPEC.num_train
    for name, value in after.as_dict().items():
        assert math.isfinite(value), name
    for p in trainer.dense.parameters():
        assert torch.isfinite(p).all()
    assert torch.isfinite(trainer.embeddings.shards[0].weight).all()
    assert after.auc > 0.62, (before, after)
    assert after.auc > before.auc + 0.05
    assert after.ne < 0.98
    assert after.auc <= task.teacher_auc() + 0.02


def _snapshot(trainer: ReferenceTrainer) -> dict[str, torch.Tensor]:
    out = {f"dense.{k}": v.clone() for k, v in trainer.dense.state_dict().items()}
    for i, shard in enumerate(trainer.embeddings.shards):
        out[f"shard{i}.weight"] = shard.weight.clone()
        out[f"shard{i}.versions"] = shard.versions.clone()
        for k, v in shard.optimizer.state_dict().items():
            out[f"shard{i}.opt.{k}"] = v.clone()
    for k, v in trainer.replica.optimizer.state.items():
        out[f"dense_opt.{k}"] = v.clone()
    return out


def test_same_seed_gives_bit_identical_parameters(task):
    batches = [b for b, _ in zip(task.train_batches(BATCH_SIZE), range(12), strict=False)]
    a = ReferenceTrainer(MODEL, _train_spec(seed=3))
    torch.rand(5)  # global RNG use in between must not matter
    b = ReferenceTrainer(MODEL, _train_spec(seed=3))
    c = ReferenceTrainer(MODEL, _train_spec(seed=4))
    sa, sc = _snapshot(a), _snapshot(c)
    assert not torch.equal(sa["shard0.weight"], sc["shard0.weight"])
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if k.startswith("dense."))
    for batch in batches:
        la, lb = a.train_step(batch), b.train_step(batch)
        assert torch.equal(la, lb)
    sa, sb = _snapshot(a), _snapshot(b)
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    test, _ = task.test_set()
    assert torch.equal(a.predict(test), b.predict(test))


def test_predict_in_chunks_equals_one_chunk(task, monkeypatch):
    trainer = ReferenceTrainer(MODEL, _train_spec())
    test, _ = task.test_set()
    part = test.slice(0, 100)
    whole = trainer.predict(part)
    monkeypatch.setattr(reference, "EVAL_CHUNK", 7)
    chunked = trainer.predict(part)
    assert whole.shape == (100,)
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-6)
    assert bool(((whole > 0) & (whole < 1)).all())


def test_train_spec_validates():
    with pytest.raises(ValueError, match="batch_size"):
        TrainSpec(batch_size=0)
