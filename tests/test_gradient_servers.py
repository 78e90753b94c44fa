"""The gradient servers refuse bad input with errors that name the server."""

from __future__ import annotations

import pytest
import torch

from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.gradient_servers import DenseBlockServer, SparseShardServer
from recsync.ps.shard import EmbeddingShard
from recsync.sync.asynchronous import AsyncConfig

ROWS, DIM = 10, 4


def sparse_server() -> SparseShardServer:
    shard = EmbeddingShard(torch.zeros(ROWS, DIM), RowOptimizerSpec().build(ROWS, DIM))
    return SparseShardServer(3, shard, AsyncConfig().make_server(2, True))


def dense_server() -> DenseBlockServer:
    return DenseBlockServer(
        1, torch.zeros(6), DenseOptimizerSpec(), AsyncConfig().make_server(2, False)
    )


@pytest.mark.parametrize("bad_row", [ROWS, -1])
def test_a_lookup_of_a_row_out_of_range_names_the_server(bad_row):
    rows = torch.tensor([0, bad_row, 2])
    with pytest.raises(ValueError, match=r"embedding server 3: row out of range \[0, 10\)"):
        sparse_server().lookup(rows, torch.tensor([0, 3]), None)


def test_a_lookup_in_range_pools_the_rows_and_gives_their_versions():
    server = sparse_server()
    server.shard.weight.copy_(torch.arange(ROWS * DIM, dtype=torch.float32).reshape(ROWS, DIM))
    pooled, versions = server.lookup(torch.tensor([1, 2, 9]), torch.tensor([0, 2, 3]), None)
    torch.testing.assert_close(
        pooled,
        torch.stack([server.shard.weight[1] + server.shard.weight[2], server.shard.weight[9]]),
    )
    assert versions.tolist() == [0, 0, 0]


def test_non_finite_gradients_are_refused_by_name():
    with pytest.raises(ValueError, match="embedding server 3: NaN or infinite row gradient"):
        grads = torch.tensor([[0.0, float("nan"), 0.0, 0.0]])
        sparse_server().push(0, 0, torch.tensor([1]), grads, torch.tensor([0]))
    with pytest.raises(ValueError, match="dense server 1: NaN or infinite gradient from 0"):
        dense_server().push(0, 0, torch.tensor([0.0, 1.0, float("inf"), 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="dense server 1: gradient of shape"):
        dense_server().push(0, 0, torch.zeros(5))
