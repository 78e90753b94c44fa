"""The gradient servers as nodes: they answer messages, defer what they cannot answer yet,
and refuse bad input with errors that name the server."""

from __future__ import annotations

import pytest
import torch

from recsync.families.gradient.asynchronous import AsyncConfig
from recsync.families.gradient.dense_server import DenseBlockServer
from recsync.families.gradient.messages import PullDense, PushDenseGradient
from recsync.families.gradient.psp import PspConfig
from recsync.families.gradient.synchronous import SyncConfig
from recsync.families.synced_replicas.messages import Exchange
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.protocol.effects import UnhandledEffect
from recsync.protocol.messages import Lookup, MayStart, PushRowGradients, WorkerDone
from recsync.ps.gradient_servers import SparseShardServer
from recsync.ps.shard import EmbeddingShard

ROWS, DIM = 10, 4


def sparse_server(policy=None) -> SparseShardServer:
    shard = EmbeddingShard(torch.zeros(ROWS, DIM), RowOptimizerSpec().build(ROWS, DIM))
    return SparseShardServer(3, shard, policy or AsyncConfig().make_server(2, True))


def dense_server(policy=None) -> DenseBlockServer:
    policy = policy or AsyncConfig().make_server(2, False)
    return DenseBlockServer(1, torch.zeros(6), DenseOptimizerSpec(), policy)


@pytest.mark.parametrize("bad_row", [ROWS, -1])
def test_a_lookup_of_a_row_out_of_range_names_the_server(bad_row):
    rows = torch.tensor([0, bad_row, 2])
    with pytest.raises(ValueError, match=r"embedding-server-3: row out of range \[0, 10\)"):
        sparse_server().handle(Lookup(rows, torch.tensor([0, 3]), None))


def test_a_lookup_in_range_pools_the_rows_and_gives_their_versions():
    server = sparse_server()
    server.shard.weight.copy_(torch.arange(ROWS * DIM, dtype=torch.float32).reshape(ROWS, DIM))
    reply = server.handle(Lookup(torch.tensor([1, 2, 9]), torch.tensor([0, 2, 3]), None))
    torch.testing.assert_close(
        reply.pooled,
        torch.stack([server.shard.weight[1] + server.shard.weight[2], server.shard.weight[9]]),
    )
    assert reply.row_versions.tolist() == [0, 0, 0] and reply.version == 0


def test_non_finite_gradients_are_refused_by_name():
    with pytest.raises(ValueError, match="embedding-server-3: NaN or infinite row gradient"):
        grads = torch.tensor([[0.0, float("nan"), 0.0, 0.0]])
        sparse_server().handle(PushRowGradients(0, 0, torch.tensor([1]), grads, torch.tensor([0])))
    with pytest.raises(ValueError, match="dense-server-1: NaN or infinite gradient from 0"):
        grad = torch.tensor([0.0, 1.0, float("inf"), 0.0, 0.0, 0.0])
        dense_server().handle(PushDenseGradient(0, 0, grad))
    with pytest.raises(ValueError, match="dense-server-1: gradient of shape"):
        dense_server().handle(PushDenseGradient(0, 0, torch.zeros(5)))


def test_a_message_a_server_does_not_answer_is_an_error_naming_both():
    with pytest.raises(UnhandledEffect, match="dense-server-1 cannot answer Exchange"):
        dense_server().handle(Exchange(torch.zeros(6)))


def test_pulls_and_lookups_wait_for_the_version_they_ask_for():
    server = dense_server()
    assert server.ready(PullDense(0)) and not server.ready(PullDense(1))
    server.handle(PushDenseGradient(0, 0, torch.ones(6)))  # async applies it: version 1
    assert server.ready(PullDense(1))
    block = server.handle(PullDense(1))
    assert block.version == 1 and block.values.tolist() != [0.0] * 6
    shard = sparse_server()
    assert not shard.ready(Lookup(torch.tensor([1]), torch.tensor([0, 1]), None, min_version=1))


def test_may_start_is_the_policys_and_worker_done_releases_a_step():
    server = dense_server(SyncConfig().make_server(2, False))
    assert server.ready(MayStart(0, None))  # a first step may always start
    server.handle(PushDenseGradient(0, 0, torch.ones(6)))
    assert not server.ready(MayStart(0, 0))  # waits for worker 1's gradient of version 0
    server.handle(WorkerDone(1))  # worker 1 has no more data: the step completes without it
    assert server.version == 1 and server.ready(MayStart(0, 0))
    assert server.handle(MayStart(0, 0)) is True


def test_timers_the_policy_starts_are_handed_to_the_driver_once():
    policy = PspConfig(push_count=1, push_wait_s=2.0).make_server(2, False)
    server = dense_server(policy)
    server.handle(PushDenseGradient(0, 0, torch.ones(6)))
    timers = server.take_timers()
    assert [t.seconds for t in timers] == [2.0] and server.take_timers() == []
    server.timer(timers[0].timer_id)  # the wait ran out: the step is applied with one
    assert server.version == 1


def test_psp_rows_take_the_mean_gradient_at_the_learning_rate_times_d():
    """PSP's rule for rows as for dense blocks: w - d lr Updater(mean of the d gradients);
    with Adagrad that differs from Updater(sum) at the plain learning rate."""
    server = sparse_server(PspConfig().make_server(2, True))
    g0, g1 = torch.tensor([[1.0, 2.0, 0.0, -1.0]]), torch.tensor([[3.0, 0.0, 1.0, 1.0]])
    server.handle(PushRowGradients(0, 0, torch.tensor([4]), g0, torch.tensor([0])))
    server.handle(PushRowGradients(1, 0, torch.tensor([4]), g1, torch.tensor([0])))
    expected = torch.zeros(ROWS, DIM)
    RowOptimizerSpec().build(ROWS, DIM).apply(expected, torch.tensor([4]), (g0 + g1) / 2, 0, 2.0)
    torch.testing.assert_close(server.shard.weight, expected)
    assert server.shard.weight[4].abs().sum() > 0


def test_a_gba_step_of_stale_gradients_only_advances_the_version():
    from recsync.families.gradient.gba import GbaConfig

    server = dense_server(GbaConfig(num_aggregate=1, iota=0).make_server(2, False))
    server.handle(PushDenseGradient(0, 0, torch.ones(6), token=0))  # step 0 -> 1
    values = server.values.clone()
    server.handle(PushDenseGradient(1, 0, torch.ones(6), token=0))  # k - t = 1 > iota
    assert server.version == 2 and torch.equal(server.values, values)
    assert server.stats.dropped["stale"] == 1 and server.stats.steps == 2
