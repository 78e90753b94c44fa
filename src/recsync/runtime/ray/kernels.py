"""A hash embedding server's compiled kernels, loaded in its process when the node is
built: before the node's CPU is counted and the job's clock starts.

The hash index's kernels are numba functions cached on disk (`ps/hash_index.py`); the
first call in a process loads them, ~0.5 s of CPU (a missing cache: seconds to compile).
Left to the first request, that load lands inside the job's first seconds, on each server
process, and in its measured CPU (docs/perf-log.md). A scratch shard of a small hash
layout (the real one's dim, admission and eviction) answers one lookup and one gradient
here instead; the kernels are typed by their arrays' dtypes, not the tables' sizes, so the
real shard's calls find them loaded."""

from __future__ import annotations

import dataclasses

from recsync.coordinator.node_specs import NodeSpec, ShardSpec
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import TableSpec
from recsync.ps.hash_layout import HashLayout
from recsync.ps.shard import row_gradients

SCRATCH_TABLES, SCRATCH_ROWS = 2, 64  # the scratch shard's tables: their size does not matter
_loaded = False  # in this process


def load_hash_kernels(spec: NodeSpec) -> bool:
    """Load the hash kernels in this process if `spec` is a hash embedding server and no
    node here loaded them yet; whether it did."""
    global _loaded
    if _loaded or not (isinstance(spec, ShardSpec) and isinstance(spec.layout, HashLayout)):
        return False
    real = spec.layout
    dim = real.tables[0].dim
    tables = tuple(TableSpec(f"warm{f}", SCRATCH_ROWS, dim) for f in range(SCRATCH_TABLES))
    config = dataclasses.replace(real.config, initial_rows=SCRATCH_ROWS)
    layout = HashLayout(tables, 1, config)
    shard = layout.new_shard(0, spec.optimizer, spec.seed)
    data = SyntheticSpec(
        num_train=64, num_test=1, table_rows=(SCRATCH_ROWS,) * SCRATCH_TABLES, keyed=True
    )
    batch = next(iter(SyntheticTask(data).train_batches(64)))
    request = layout.route(batch)[0]
    pooled = shard.lookup(request.rows, request.offsets, request.weights)
    shard.apply_gradients(*row_gradients(request.rows, request.offsets, pooled, request.weights))
    _loaded = True
    return True
