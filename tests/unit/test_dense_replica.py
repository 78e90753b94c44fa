"""The flat dense optimizer matches torch.optim; the replica's writes are Hogwild-safe."""

from __future__ import annotations

import pytest
import torch

from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.swap import Swap
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.local import LocalEmbeddings, build_shards
from recsync.trainer.replica import DenseReplica

MODEL = ModelSpec(
    num_dense=3,
    tables=tuple(TableSpec(f"C{i}", 20, 4) for i in range(3)),
    bottom_mlp=(8,),
    top_mlp=(8,),
)


def torch_optimizer(spec: DenseOptimizerSpec, params):
    if spec.name == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, foreach=False)
    if spec.name == "adagrad":
        return torch.optim.Adagrad(params, lr=spec.lr, eps=spec.eps, foreach=False)
    return torch.optim.Adam(params, lr=spec.lr, betas=spec.betas, eps=spec.eps, foreach=False)


@pytest.mark.parametrize(
    "spec",
    [
        DenseOptimizerSpec("sgd", lr=0.1),
        DenseOptimizerSpec("sgd", lr=0.1, momentum=0.9),
        DenseOptimizerSpec("adagrad", lr=0.05, eps=1e-10),
        DenseOptimizerSpec("adam", lr=0.01),
    ],
    ids=lambda s: f"{s.name}-{s.momentum}",
)
def test_flat_optimizer_matches_torch_optim(spec):
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(50, generator=gen)
    ours = start.clone()
    param = torch.nn.Parameter(start.clone())
    reference = torch_optimizer(spec, [param])
    flat = spec.build(50)
    for _ in range(6):
        grad = torch.randn(50, generator=gen)
        flat.step(ours, grad)
        param.grad = grad.clone()
        reference.step()
    torch.testing.assert_close(ours, param.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("period", [1, 3])
def test_swap_adagrad_decays_the_accumulator_at_every_period(period):
    """Liu & Zhao's Algorithm 2 written out: v_t = lambda_t v_{t-1} + g_t^2 with lambda_t =
    decay when t mod T = 0 (t > 0), w_t = w_{t-1} - lr g_t / (sqrt(v_t) + eps)."""
    lr, eps, decay = 0.05, 1e-10, 0.5
    spec = DenseOptimizerSpec("adagrad", lr=lr, eps=eps, swap=Swap(decay, period))
    gen = torch.Generator().manual_seed(2)
    ours = torch.randn(30, generator=gen)
    expected, v = ours.clone(), torch.zeros(30)
    flat = spec.build(30)
    for t in range(8):
        grad = torch.randn(30, generator=gen)
        flat.step(ours, grad)
        v = (decay if t > 0 and t % period == 0 else 1.0) * v + grad * grad
        expected = expected - lr * grad / (v.sqrt() + eps)
    torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(flat.state["sum"], v)


def test_swap_adam_decays_the_second_moment():
    decay, period = 0.25, 2
    plain = DenseOptimizerSpec("adam", lr=0.01).build(10)
    swapped = DenseOptimizerSpec("adam", lr=0.01, swap=Swap(decay, period)).build(10)
    gen = torch.Generator().manual_seed(3)
    a, b = torch.zeros(10), torch.zeros(10)
    for t in range(5):
        grad = torch.randn(10, generator=gen)
        if t > 0 and t % period == 0:
            plain.state["exp_avg_sq"].mul_(decay)
        plain.step(a, grad)
        swapped.step(b, grad)
    assert torch.equal(a, b)


def test_swap_on_sgd_is_refused():
    with pytest.raises(ValueError, match="swap needs an accumulator"):
        DenseOptimizerSpec("sgd", swap=Swap(0.5, 10))


@pytest.mark.parametrize(
    "spec",
    [
        DenseOptimizerSpec("sgd", lr=0.1, momentum=0.9),
        DenseOptimizerSpec("adagrad", lr=0.05),
        DenseOptimizerSpec("adam", lr=0.01),
    ],
    ids=lambda s: s.name,
)
def test_an_update_into_a_new_vector_equals_the_in_place_one(spec):
    gen = torch.Generator().manual_seed(1)
    in_place = torch.randn(40, generator=gen)
    replaced = in_place.clone()
    first, second = spec.build(40), spec.build(40)
    handed_out = []
    for _ in range(4):
        grad = torch.randn(40, generator=gen)
        first.step(in_place, grad)
        handed_out.append((replaced, replaced.clone()))
        replaced = second.updated(replaced, grad)
    assert torch.equal(in_place, replaced)
    # values handed out never change, whatever scratch later updates reuse
    assert all(torch.equal(values, kept) for values, kept in handed_out)


def test_replica_parameters_are_views_of_the_flat_vector():
    replica = DenseReplica(MODEL, 3, DenseOptimizerSpec())
    replica.writer.mul_(0.0)
    assert all(bool((p == 0).all()) for p in replica.module.parameters())
    assert replica.num_params == sum(p.numel() for p in replica.module.parameters())


def test_a_write_during_another_workers_backward_does_not_break_it():
    task = SyntheticTask(SyntheticSpec(num_train=64, num_test=8, num_dense=3, table_rows=(20,) * 3))
    batch = next(iter(task.train_batches(32)))
    layout = EmbeddingLayout.single_shard(MODEL.tables)
    embeddings = LocalEmbeddings(layout, build_shards(layout, RowOptimizerSpec(), 0))
    replica = DenseReplica(MODEL, 0, DenseOptimizerSpec())
    pooled, _ = embeddings.lookup(batch)

    def forward():
        return replica.module(batch.dense, pooled).sum()

    loss = forward()  # worker A's graph has saved the parameters
    replica.writer.add_(1e-3)  # worker B's Hogwild step lands meanwhile
    grads = torch.autograd.grad(loss, replica.params)
    assert all(torch.isfinite(g).all() for g in grads)

    loss = forward()
    with torch.no_grad():
        replica.module.top[0].weight.add_(1e-3)  # through a parameter: autograd objects
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(loss, replica.params)
