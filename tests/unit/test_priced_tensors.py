"""Priced math's pieces alone: priced tensors (model/priced.py), the priced dense replica,
and a synthetic training stream without labels."""

from __future__ import annotations

import pytest
import torch

from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.families.gradient.messages import PushDenseGradient
from recsync.model.dlrm import build_dense, dense_num_params
from recsync.model.priced import PricedTensor, PricedValueRead, priced_math, pricing
from recsync.model.spec import ModelSpec
from recsync.optim.checks import all_finite
from recsync.optim.dense import DenseOptimizerSpec
from recsync.protocol.messages import wire_bytes
from recsync.trainer.replica import DenseReplica, PricedReplica, new_replica


def test_factories_make_model_tensors_priced_and_leave_counters_and_ids_real():
    with priced_math():
        assert pricing()
        weights = torch.zeros(4, 3)
        counter = torch.zeros(1)
        tallies = torch.zeros(5, dtype=torch.float64)
        versions = torch.zeros(5, dtype=torch.int64)
    assert not pricing()
    assert isinstance(weights, PricedTensor) and weights.shape == (4, 3)
    assert not any(isinstance(t, PricedTensor) for t in (counter, tallies, versions))
    assert not isinstance(torch.zeros(4, 3), PricedTensor)  # outside: real again


def test_operations_give_the_shapes_real_ones_would():
    priced = PricedTensor((10, 4))
    rows = torch.tensor([1, 2, 3, 7])
    assert priced.index_select(0, rows).shape == (4, 4)
    pooled = torch.nn.functional.embedding_bag(
        rows, priced, torch.tensor([0, 1, 4]), mode="sum", include_last_offset=True
    )
    assert isinstance(pooled, PricedTensor) and pooled.shape == (2, 4)
    assert (priced @ PricedTensor((4, 6))).shape == (10, 6)
    real = torch.ones(10, 4)
    assert real.add_(priced) is real and bool((real == 1).all())  # a real one keeps its values
    assert priced.add_(real) is priced


def test_a_priced_message_costs_the_bytes_of_the_real_one():
    real = PushDenseGradient(0, 3, torch.zeros(1000))
    priced = PushDenseGradient(0, 3, PricedTensor((1000,)))
    assert wire_bytes(priced) == wire_bytes(real) and priced.work() == real.work()


def test_reading_a_priced_value_is_an_error_and_a_check_passes():
    with pytest.raises(PricedValueRead, match="math"):
        bool(PricedTensor((3,)).sum() > 0)
    assert all_finite(PricedTensor((3,)))


def test_the_priced_replica_has_the_real_ones_shapes_and_no_values():
    spec = ModelSpec(bottom_mlp=(32, 16), top_mlp=(64, 1))
    real = DenseReplica(spec, 0, DenseOptimizerSpec())
    with priced_math():
        priced = new_replica(spec, 0, DenseOptimizerSpec())
    assert isinstance(priced, PricedReplica)
    assert priced.num_params == real.num_params == dense_num_params(spec)
    assert dense_num_params(spec) == sum(p.numel() for p in build_dense(spec, 0).parameters())
    pooled = torch.zeros(8, spec.num_features, spec.embedding_dim)
    loss, flat_grad, grad_pooled = priced.gradients(None, pooled)  # type: ignore[arg-type]
    assert torch.isnan(loss) and flat_grad.shape == real.flat.shape
    assert grad_pooled.shape == pooled.shape and isinstance(grad_pooled, PricedTensor)
    assert all(isinstance(v, PricedTensor) for v in priced.optimizer.state.values())


def test_an_unlabelled_training_stream_has_the_labelled_ones_ids_and_features():
    spec = SyntheticSpec(num_train=3_000, num_test=100, num_dense=3, table_rows=(20,) * 4)
    labelled = list(SyntheticTask(spec).train_batches(256))
    unlabelled = list(SyntheticTask(spec, labelled_train=False).train_batches(256))
    assert len(labelled) == len(unlabelled)
    for a, b in zip(labelled, unlabelled, strict=True):
        assert torch.equal(a.ids, b.ids) and torch.equal(a.offsets, b.offsets)
        assert torch.equal(a.dense, b.dense)
        assert b.labels.shape == a.labels.shape and not bool(b.labels.any())
    test_a, test_b = SyntheticTask(spec).test_set()[0], SyntheticTask(spec, False).test_set()[0]
    assert torch.equal(test_a.labels, test_b.labels)  # the test split labelled either way
