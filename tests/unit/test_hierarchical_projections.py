"""Hierarchical training of tables projected to the interaction's size (per-table dims):
the projections are a stage of their own on a group PS, and a batch through the group PSs
is the unsplit model's step (loss, embedding gradient, parameters)."""

from __future__ import annotations

import pytest
import torch
from test_hierarchical import drive

from recsync.data.batch import Batch
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.group_model import EMBED, FlatProjections
from recsync.families.hierarchical.plan import group_plan_of
from recsync.families.hierarchical.server import GROUP_SERVER, GroupServerNode
from recsync.families.hierarchical.trainer import HierarchicalTrainer
from recsync.families.synced_replicas.sync_server import SYNC_SERVER
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import READER, Address
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerSetup, Wiring

B = 8
TRAIN = TrainSpec(batch_size=B)


def model(num_dense: int) -> ModelSpec:
    """Tables of dims 2, 4 and 6 (W = 6), the interaction's D = 4: two projected."""
    return ModelSpec(
        num_dense=num_dense,
        tables=(TableSpec("a", 20, 2), TableSpec("b", 20, 4), TableSpec("c", 20, 6, "mean")),
        bottom_mlp=(4,) if num_dense else (),
        top_mlp=(16, 8),
        interaction_dim=4,
    )


def batch(spec: ModelSpec, seed: int) -> tuple[Batch, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(B, spec.num_dense, generator=g)
    labels = (torch.rand(B, generator=g) > 0.5).float()
    pooled = torch.randn(B, spec.num_features, spec.pooled_dim, generator=g)
    for f, t in enumerate(spec.tables):  # a table's vector: its first dim entries
        pooled[:, f, t.dim :] = 0
    empty = torch.zeros(spec.num_features * B + 1, dtype=torch.int64)
    return Batch(dense, torch.empty(0, dtype=torch.int64), empty, labels), pooled


@pytest.mark.parametrize("num_dense", [2, 0], ids=["dense features", "none (FM terms)"])
@pytest.mark.parametrize("group_servers", [1, 2, 3])
def test_projected_tables_train_through_the_group_pss_as_the_unsplit_model(
    num_dense, group_servers
):
    spec = model(num_dense)
    strategy = HierarchicalConfig(groups=1)
    plan = group_plan_of(spec, strategy, 1, group_servers, 1, B)
    addresses = tuple(Address(GROUP_SERVER, j) for j in range(group_servers))
    servers = [
        GroupServerNode(
            0,
            j,
            plan.dense(spec, TRAIN.seed),
            TRAIN.dense_optimizer,
            strategy,
            Address(SYNC_SERVER, j),
            1,
        )
        for j in range(group_servers)
    ]
    setup = TrainerSetup(0, 1, 1, spec, TRAIN, None, Wiring(READER, (), addresses))  # type: ignore[arg-type]
    dense = plan.dense(spec, TRAIN.seed)
    trainer = HierarchicalTrainer(setup, strategy, dense)
    assert dense.embed is not None and dense.embed.mlp == EMBED
    (part,) = dense.parts(dense.embed.index)
    assert isinstance(part, FlatProjections) and part.flops == 3 * 2.0 * (2 * 4 + 6 * 4)
    reference = DenseReplica(spec, TRAIN.seed, TRAIN.dense_optimizer)

    def unsplit() -> torch.Tensor:
        return plan.unsplit(spec, TRAIN.seed, [s.flat for s in servers])

    assert torch.equal(unsplit(), reference.flat)  # same start, bit-exact
    for seed in range(3):
        data, pooled = batch(spec, seed)
        loss, grad_pooled, _ = drive(trainer._train(0, data, pooled), servers)
        want_loss, flat_grad, want_pooled = reference.gradients(data, pooled)
        reference.apply(flat_grad)
        assert loss == pytest.approx(float(want_loss), abs=1e-6)
        torch.testing.assert_close(grad_pooled, want_pooled, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(unsplit(), reference.flat, atol=1e-6, rtol=1e-5)
    assert all(not s.in_flight for s in servers)
    assert plan.split(spec, TRAIN.seed, reference.flat)[0].numel() == servers[0].flat.numel()
