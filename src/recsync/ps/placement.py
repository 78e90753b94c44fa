"""Cost-based placement of a job's parameters on servers (the coordinator's plan).

Embedding tables go to embedding servers by greedy bin packing on an estimated lookup cost;
the flat dense parameter vector is cut into contiguous, byte-balanced ranges for the
sync/dense servers. Pure: plain arithmetic on specs and sample batches.

Cost unit: **row-values touched per example** = (mean ids looked up per example for the
feature) x (embedding dim). It is proportional to the bytes a server reads for lookups and
writes for updates per example, which is what a server's load scales with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from recsync.data.batch import Batch
from recsync.model.spec import ModelSpec, TableSpec
from recsync.ps.hash_layout import HashLayout, shard_of_keys
from recsync.ps.layout import EmbeddingLayout, TableLayout, TableSlice

BYTES_PER_FLOAT = 4


def table_costs(tables: tuple[TableSpec, ...], sample_batches: list[Batch]) -> list[float]:
    """Estimated cost per table in row-values touched per example (see module docstring).

    The mean number of ids per example of each feature is measured over all examples of the
    sample batches (bags of any length, empty bags count as 0 ids). With no sample (or only
    empty batches), every feature is assumed to look up exactly 1 id per example.
    """
    if not tables:
        raise ValueError("need at least one embedding table")
    F = len(tables)
    ids = torch.zeros(F, dtype=torch.float64)
    examples = 0
    for batch in sample_batches:
        B = batch.batch_size
        if B == 0:
            continue
        if batch.num_features != F:
            raise ValueError(f"sample batch has {batch.num_features} features, model has {F}")
        per_feature = batch.bag_lengths().reshape(F, B).sum(1)
        ids += per_feature.to(torch.float64)
        examples += B
    per_example = ids / examples if examples else torch.ones(F, dtype=torch.float64)
    return [float(n) * spec.dim for n, spec in zip(per_example.tolist(), tables, strict=True)]


@dataclass(frozen=True)
class EmbeddingPlan:
    """Where every table slice lives, and each server's estimated load and size.

    server_load: estimated cost per server (row-values touched per example, summed).
    server_rows: rows stored per server.
    server_bytes: float32 weights plus row-wise optimizer state per server.
    """

    layout: TableLayout
    server_load: list[float]
    server_rows: list[int]
    server_bytes: list[int]

    @property
    def num_servers(self) -> int:
        return self.layout.num_shards


def _split_rows(num_rows: int, parts: int) -> list[tuple[int, int]]:
    """[0, num_rows) as `parts` contiguous ranges whose sizes differ by at most 1."""
    q, r = divmod(num_rows, parts)
    ranges, start = [], 0
    for i in range(parts):
        stop = start + q + (1 if i < r else 0)
        ranges.append((start, stop))
        start = stop
    return ranges


def plan_embeddings(
    tables: tuple[TableSpec, ...],
    costs: list[float],
    num_servers: int,
    state_floats_per_row: int | None = None,
) -> EmbeddingPlan:
    """Place tables on `num_servers` embedding servers by longest-processing-time packing.

    1. A table with more rows than a server's share, ceil(total_rows / num_servers), is cut
       into ceil(rows / share) contiguous row ranges of near-equal size (sizes differ by at
       most 1). Each slice carries the table's cost times its fraction of the rows. This
       assumes ids spread over a table's rows in proportion to the rows; under skewed
       (e.g. Zipf) ids with hot rows at low indices, the first slice is underestimated.
    2. Items (whole tables and slices) in descending cost (ties: lower table, then lower
       row_start first) each go to the currently least-loaded server (ties: lower server
       index). Deterministic.
    3. On each server, slices are stacked from row 0 in the order they were placed.

    `state_floats_per_row`: optimizer state floats per row (default: the table's dim, as
    exact Adagrad keeps; 1 for row-wise Adagrad, 0 for SGD, 2*dim for Adam).
    """
    if num_servers < 1:
        raise ValueError(f"num_servers must be >= 1, got {num_servers}")
    if not tables:
        raise ValueError("need at least one embedding table")
    if len(costs) != len(tables):
        raise ValueError(f"got {len(costs)} costs for {len(tables)} tables")
    for spec, cost in zip(tables, costs, strict=True):
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"table {spec.name}: cost must be finite and >= 0, got {cost}")
    if state_floats_per_row is not None and state_floats_per_row < 0:
        raise ValueError(f"state_floats_per_row must be >= 0, got {state_floats_per_row}")

    total_rows = sum(spec.num_rows for spec in tables)
    share = -(-total_rows // num_servers)
    items: list[tuple[float, int, int, int]] = []  # (cost, table, row_start, row_end)
    for t, (spec, cost) in enumerate(zip(tables, costs, strict=True)):
        parts = -(-spec.num_rows // share)
        for start, stop in _split_rows(spec.num_rows, parts):
            items.append((cost * (stop - start) / spec.num_rows, t, start, stop))
    items.sort(key=lambda item: (-item[0], item[1], item[2]))

    load = [0.0] * num_servers
    rows = [0] * num_servers
    size = [0] * num_servers
    slices = []
    for cost, t, start, stop in items:
        server = min(range(num_servers), key=lambda s: (load[s], s))
        slices.append(TableSlice(t, start, stop, server, rows[server]))
        dim = tables[t].dim
        state = dim if state_floats_per_row is None else state_floats_per_row
        load[server] += cost
        rows[server] += stop - start
        size[server] += (stop - start) * (dim + state) * BYTES_PER_FLOAT
    layout = EmbeddingLayout(tuple(tables), slices, num_servers)
    return EmbeddingPlan(layout, load, rows, size)


def plan_hash_tables(
    model: ModelSpec,
    costs: list[float],
    num_servers: int,
    state_floats_per_row: int | None,
    sample_batches: list[Batch],
) -> EmbeddingPlan:
    """Hash tables spread over every server by hash of the key: each server takes an equal
    share of every table's load. A server's rows: the distinct keys of the sample batches
    it would hold, or its share of the tables' `num_rows` (the ids expected) if more,
    capped by `max_rows` (a lower bound where the data holds more ids than its sample)."""
    if num_servers < 1:
        raise ValueError(f"num_servers must be >= 1, got {num_servers}")
    config = model.hash_tables
    assert config is not None
    dim = model.tables[0].dim
    state = dim if state_floats_per_row is None else state_floats_per_row
    share = -(-sum(t.num_rows for t in model.tables) // num_servers)
    seen = torch.zeros(num_servers, dtype=torch.int64)
    if sample_batches:
        keys = torch.unique(torch.cat([b.ids for b in sample_batches]))
        seen = torch.bincount(shard_of_keys(keys, num_servers), minlength=num_servers)
    rows = [max(share, int(n)) for n in seen]
    if config.max_rows is not None:
        rows = [min(r, config.max_rows) for r in rows]
    load = sum(costs) / num_servers
    layout = HashLayout(model.tables, num_servers, config)
    size = [r * (dim + state) * BYTES_PER_FLOAT for r in rows]
    if len({t.dim for t in model.tables}) > 1:  # a row's bytes: its table's, on average
        size = [
            round(r * _mean_row_floats(model, state_floats_per_row, sample_batches))
            * BYTES_PER_FLOAT
            for r in rows
        ]
    return EmbeddingPlan(layout, [load] * num_servers, rows, size)


def _mean_row_floats(
    model: ModelSpec, state_floats_per_row: int | None, sample_batches: list[Batch]
) -> float:
    """A hash row's floats (weight and optimizer state) averaged over the tables, each
    weighed by its distinct keys in the sample (by its `num_rows` without one)."""
    floats = torch.tensor(
        [
            t.dim + (t.dim if state_floats_per_row is None else state_floats_per_row)
            for t in model.tables
        ],
        dtype=torch.float64,
    )
    weights = torch.tensor([t.num_rows for t in model.tables], dtype=torch.float64)
    if sample_batches:
        keys = torch.unique(torch.cat([b.ids for b in sample_batches]))
        found = torch.bincount((keys >> 56) & 0xFF, minlength=256)[: len(model.tables)]
        if int(found.sum()):
            weights = found.to(torch.float64)
    return float((floats * weights).sum() / weights.sum())


@dataclass(frozen=True)
class DensePlan:
    """The flat dense parameter vector cut into one contiguous [start, stop) per server."""

    ranges: list[tuple[int, int]]
    bytes_per_server: list[int]

    @property
    def num_params(self) -> int:
        return self.ranges[-1][1]


def plan_dense(num_params: int, num_servers: int) -> DensePlan:
    """Split [0, num_params) into `num_servers` contiguous ranges whose sizes differ by at
    most 1 element (float32: bytes balanced to within 4). Earlier servers get the extra."""
    if num_servers < 1:
        raise ValueError(f"num_servers must be >= 1, got {num_servers}")
    if num_params < 0:
        raise ValueError(f"num_params must be >= 0, got {num_params}")
    ranges = _split_rows(num_params, num_servers)
    return DensePlan(ranges, [(stop - start) * BYTES_PER_FLOAT for start, stop in ranges])


@dataclass(frozen=True)
class JobPlan:
    embeddings: EmbeddingPlan
    dense: DensePlan | None


def plan_job(
    model: ModelSpec,
    num_embedding_servers: int,
    num_dense_servers: int,
    sample_batches: list[Batch] | None = None,
    num_dense_params: int | None = None,
    state_floats_per_row: int | None = None,
) -> JobPlan:
    """Embedding placement from measured costs, plus the dense split when the job has
    servers of the dense part (`num_dense_servers` >= 1, which then needs
    `num_dense_params`)."""
    costs = table_costs(model.tables, list(sample_batches or []))
    if model.hash_tables is not None:
        embeddings = plan_hash_tables(
            model, costs, num_embedding_servers, state_floats_per_row, sample_batches or []
        )
    else:
        embeddings = plan_embeddings(
            model.tables, costs, num_embedding_servers, state_floats_per_row
        )
    if num_dense_servers < 0:
        raise ValueError(f"num_dense_servers must be >= 0, got {num_dense_servers}")
    dense = None
    if num_dense_servers:
        if num_dense_params is None:
            raise ValueError("num_dense_params is required when num_dense_servers >= 1")
        dense = plan_dense(num_dense_params, num_dense_servers)
    return JobPlan(embeddings, dense)


def single_shard_layout(model: ModelSpec) -> TableLayout:
    """Every table on one shard (the reference trainer, calibration)."""
    if model.hash_tables is not None:
        return HashLayout(model.tables, 1, model.hash_tables)
    return EmbeddingLayout.single_shard(model.tables)
