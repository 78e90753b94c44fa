"""The Ray engine loads a hash embedding server's kernels when it builds the node
(runtime/ray/kernels.py): once a process, only for hash tables, and then the real shard's
first request finds them loaded."""

from __future__ import annotations

import time

import pytest

from recsync.coordinator.node_specs import ShardSpec
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.hash_spec import HashTables
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address, Role
from recsync.ps.hash_layout import HashLayout
from recsync.ps.layout import TableLayout
from recsync.ps.placement import single_shard_layout
from recsync.ps.shard import row_gradients
from recsync.runtime.ray import kernels


def shard_spec(layout: TableLayout) -> ShardSpec:
    address = Address(Role.EMBEDDING_SERVER, 0)
    optimizer = TrainSpec().sparse_optimizer
    return ShardSpec(address, None, 1, True, layout, optimizer, 0, None, None, 1)


def test_a_hash_server_loads_them_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_loaded", False)
    model = ModelSpec()
    assert not kernels.load_hash_kernels(shard_spec(single_shard_layout(model)))  # fixed
    layout = HashLayout(model.tables, 2, HashTables(max_rows=10_000))
    spec = shard_spec(layout)
    assert kernels.load_hash_kernels(spec)
    assert not kernels.load_hash_kernels(spec)  # this process has them
    shard = layout.new_shard(0, spec.optimizer, 0)
    data = SyntheticSpec(num_train=64, num_test=1, table_rows=(1000,) * 26, keyed=True)
    request = layout.route(next(iter(SyntheticTask(data).train_batches(64))))[0]
    started = time.process_time()
    pooled = shard.lookup(request.rows, request.offsets, request.weights)
    shard.apply_gradients(*row_gradients(request.rows, request.offsets, pooled, request.weights))
    assert time.process_time() - started < 0.2  # loading them takes 0.5 s of CPU or more
