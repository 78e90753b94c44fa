"""Hash tables spread over every embedding shard by a hash of the key.

Each id of a batch is a 64-bit key (the feature in its top 8 bits, data/keys.py), so one
shard's map holds the rows of every table without two features sharing a row (a fixed
table among hash tables too: its keys' ids are below its rows, its store of its own admits
every id and evicts none). A key's shard
is a multiplicative hash of it, taken from other bits than the shard's own index uses, so
keys stay spread within a shard. A shard gets the bags that hold any of its ids and pools
its part of each; the partial pools sum to the bag's pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from recsync.data.batch import Batch
from recsync.data.keys import ID_MASK, table_of
from recsync.model.hash_spec import Admission, Eviction, HashTables
from recsync.model.spec import TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.dim_groups import HashGroupedShard, compact
from recsync.ps.layout import ShardRequest, TableLayout, without_empty_bags
from recsync.ps.shard import RowShard

if TYPE_CHECKING:
    from recsync.ps.hash_shard import HashEmbeddingShard

# an odd 64-bit multiplier (as a signed int64); a key's shard reads bits 32..62 of the product
SHARD_MIX = -0x29170147799A026D  # 0xD6E8FEB86659FD93
SHARD_BITS = 32


@dataclass(frozen=True)
class HashGroup:
    """Hash tables that share one store on each shard: their dim, admission and eviction
    (`fixed`: fixed tables, every id admitted, none evicted, no bound)."""

    dim: int
    admission: Admission
    eviction: Eviction
    tables: tuple[int, ...]
    fixed: bool = False


def hash_groups(tables: tuple[TableSpec, ...], config: HashTables) -> list[HashGroup]:
    """The tables grouped by (dim, admission, eviction), a table's own admission and
    eviction where it has them, else `config`'s, fixed tables apart (by dim); groups in
    the order of their first table."""
    found: dict[tuple[int, Admission, Eviction, bool], list[int]] = {}
    for f, t in enumerate(tables):
        if t.kind == "fixed":
            key = (t.dim, Admission(), Eviction(), True)
        else:
            key = (t.dim, t.admission or config.admission, t.eviction or config.eviction, False)
        found.setdefault(key, []).append(f)
    return [HashGroup(d, a, e, tuple(fs), fixed) for (d, a, e, fixed), fs in found.items()]


def shard_of_keys(keys: torch.Tensor, num_shards: int) -> torch.Tensor:
    """Each key's shard in [0, num_shards): deterministic, independent of the batch (31
    mixed bits scaled to the shards, no division)."""
    mixed = ((keys * SHARD_MIX) >> SHARD_BITS) & 0x7FFFFFFF  # int64 products wrap
    return (mixed * num_shards) >> 31


class HashLayout(TableLayout):
    """Hash tables (`HashTables`) on `num_shards` shards, a key's shard by hash of the key.
    A shard's map changes on lookups (inserts): its requests are served one at a time."""

    lock_free = False

    def __init__(self, tables: tuple[TableSpec, ...], num_shards: int, config: HashTables):
        assert num_shards >= 1
        self.tables = tables
        self.num_shards = num_shards
        self.width = max(t.dim for t in tables)
        self.config = config
        self.groups = hash_groups(tables, config)
        self.mixed = len(self.groups) > 1  # a shard keeps one store per group
        self._table_dims = torch.tensor([t.dim for t in tables], dtype=torch.int64)
        self._key_dims = torch.zeros(256, dtype=torch.int64)
        self._key_dims[: len(tables)] = self._table_dims
        self._mean_tables = torch.tensor([spec.pooling == "mean" for spec in tables])
        self._any_mean = bool(self._mean_tables.any())
        self._aranges: dict[int, torch.Tensor] = {}
        # each table's bound on its keys' ids: a fixed table's rows, else none
        self._id_bounds: torch.Tensor | None = None
        if any(t.kind == "fixed" for t in tables):
            self._id_bounds = torch.full((256,), ID_MASK + 1, dtype=torch.int64)
            for f, t in enumerate(tables):
                if t.kind == "fixed":
                    self._id_bounds[f] = t.num_rows

    def _arange(self, n: int) -> torch.Tensor:
        cached = self._aranges.get(n)
        if cached is None:
            cached = self._aranges[n] = torch.arange(n)
        return cached

    def _weights(self, batch: Batch, lengths: torch.Tensor) -> torch.Tensor | None:
        """Per-id weights 1/len for mean-pooled tables (None: all sum-pooled)."""
        if not self._any_mean:
            return None
        B = batch.batch_size
        table_of_bag = self._arange(len(self.tables)).repeat_interleave(B)
        inv_len = 1.0 / lengths.clamp(min=1).to(torch.float32)
        per_bag = torch.where(self._mean_tables[table_of_bag], inv_len, 1.0)
        return per_bag.repeat_interleave(lengths, output_size=batch.ids.numel())

    def route(self, batch: Batch) -> list[ShardRequest]:
        if self._id_bounds is not None:
            self._check_fixed(batch.ids)
        requests = self._route(batch)
        return [without_empty_bags(r) for r in requests] if self.mixed else requests

    def _check_fixed(self, keys: torch.Tensor) -> None:
        """ValueError naming the table if a fixed table's key has an id past its rows (the
        readers take its ids modulo its rows: ModelSpec.fixed_rows)."""
        assert self._id_bounds is not None
        tables = table_of(keys)
        bad = (keys & ID_MASK) >= self._id_bounds.index_select(0, tables)
        if bool(bad.any()):
            at = int(bad.nonzero()[0, 0])
            spec = self.tables[int(tables[at])]
            raise ValueError(
                f"table {spec.name}: id {int(keys[at]) & ID_MASK} is past its {spec.num_rows} "
                "rows (a fixed table among hash tables takes ids below its rows)"
            )

    def _route(self, batch: Batch) -> list[ShardRequest]:
        F, B = len(self.tables), batch.batch_size
        bags = self._arange(F * B)
        lengths = batch.bag_lengths()
        weights = self._weights(batch, lengths)
        one_per_bag = batch.ids.numel() == F * B and torch.equal(
            batch.offsets, self._arange(F * B + 1)
        )
        if self.num_shards == 1:
            return [ShardRequest(0, batch.ids, batch.offsets, weights, bags, one_per_bag)]
        shard_of_id = shard_of_keys(batch.ids, self.num_shards)
        if one_per_bag:
            return self._route_one_per_bag(batch, shard_of_id)
        bag_of_id = bags.repeat_interleave(lengths, output_size=batch.ids.numel())
        requests = []
        for shard in range(self.num_shards):
            keep = shard_of_id == shard
            counts = torch.bincount(bag_of_id[keep], minlength=F * B)
            bag_index = counts.nonzero().squeeze(1)
            if not bag_index.numel():
                continue
            offsets = torch.zeros(bag_index.numel() + 1, dtype=torch.int64)
            torch.cumsum(counts.index_select(0, bag_index), 0, out=offsets[1:])
            requests.append(
                ShardRequest(
                    shard,
                    batch.ids[keep],
                    offsets,
                    None if weights is None else weights[keep],
                    bag_index,
                )
            )
        return requests

    def _route_one_per_bag(self, batch: Batch, shard_of_id: torch.Tensor) -> list[ShardRequest]:
        """One id a bag (one-hot features): a shard's bags are those of its ids, each its
        own bag, no counting needed (sum and mean pooling are the same)."""
        requests = []
        shards = shard_of_id.numpy()
        for shard in range(self.num_shards):
            bag_index = torch.from_numpy(np.flatnonzero(shards == shard))
            if bag_index.numel():
                rows = batch.ids.index_select(0, bag_index)
                offsets = self._arange(bag_index.numel() + 1)
                requests.append(ShardRequest(shard, rows, offsets, None, bag_index, True))
        return requests

    def combine(
        self, batch_size: int, requests: list[ShardRequest], partials: list[torch.Tensor]
    ) -> torch.Tensor:
        priced = self._priced_pool(batch_size, partials)
        if priced is not None:
            return priced
        if self.mixed:
            partials = self._padded(batch_size, requests, partials)
        return self._scattered(batch_size, requests, partials)

    def new_shard(self, shard: int, optimizer: RowOptimizerSpec, seed: int) -> RowShard:
        """A hash shard; with tables in several groups, one store per group."""
        stores = [self._store(shard, optimizer, seed, group) for group in self.groups]
        if not self.mixed:
            return stores[0]
        group_of_table = [0] * len(self.tables)
        for g, group in enumerate(self.groups):
            for f in group.tables:
                group_of_table[f] = g
        return HashGroupedShard(list(stores), [g.dim for g in self.groups], group_of_table)

    def new_hash_shard(
        self, shard: int, optimizer: RowOptimizerSpec, seed: int
    ) -> HashEmbeddingShard:
        """`new_shard` of a layout of one group of tables, typed as the hash shard it is."""
        assert not self.mixed, "tables in several groups: new_shard's grouped shard"
        return self._store(shard, optimizer, seed, self.groups[0])

    def _store(
        self, shard: int, optimizer: RowOptimizerSpec, seed: int, group: HashGroup
    ) -> HashEmbeddingShard:
        from recsync.ps.hash_shard import HashEmbeddingShard, HashTableConfig  # numba: slow

        config = HashTableConfig(
            dim=group.dim,
            admission=group.admission,
            eviction=group.eviction,
            max_rows=None if group.fixed else self.config.max_rows,
            initial_rows=self.config.initial_rows,
            seed=seed,
            table_names=tuple(t.name for t in self.tables),
        )
        return HashEmbeddingShard(config, optimizer, f"embedding-server-{shard}")

    def wire_grads(self, shard: int, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        if not self.mixed:
            return grads
        return compact(grads, self._key_dims.index_select(0, (rows >> 56) & 0xFF))

    def signature(self) -> list[tuple[int, ...]]:
        return [(-1, self.num_shards)]

    def rows_summary(self, states: list[dict[str, Any]]) -> dict[str, Any] | None:
        F = len(self.tables)
        per_shard = [sum(int(s["keys"].numel()) for s in stores_of(state)) for state in states]
        states = [store for state in states for store in stores_of(state)]
        counters = {
            name: sum(
                (state["counters"][name][:F] for state in states), torch.zeros(F, dtype=torch.int64)
            )
            for name in states[0]["counters"]
        }
        live = torch.zeros(F, dtype=torch.int64)
        for state in states:
            live += torch.bincount((state["keys"] >> 56) & 0xFF, minlength=256)[:F]
        per_table = {
            spec.name: {"live": int(live[f])}
            | {name: int(counts[f]) for name, counts in counters.items()}
            for f, spec in enumerate(self.tables)
        }
        return {
            "live": int(live.sum()),
            **{name: int(counts.sum()) for name, counts in counters.items()},
            "per_shard": per_shard,
            "per_table": per_table,
        }


def stores_of(state: dict[str, Any]) -> list[dict[str, Any]]:
    """A hash shard's state, or a grouped one's stores' states."""
    groups: list[dict[str, Any]] | None = state.get("groups")
    return [state] if groups is None else groups
