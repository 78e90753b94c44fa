"""Where each table's rows live, and how a batch's bags are split into per-shard requests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from recsync.data.batch import Batch
from recsync.model.priced import PricedTensor, is_priced, shaped
from recsync.model.spec import TableSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.ps.dim_groups import DimGroupedShard, compact, pad
from recsync.ps.shard import EmbeddingShard, RowShard, init_table


@dataclass(frozen=True)
class TableSlice:
    """Rows [row_start, row_end) of table `table` stored from row `shard_row` of `shard`."""

    table: int
    row_start: int
    row_end: int
    shard: int
    shard_row: int

    @property
    def num_rows(self) -> int:
        return self.row_end - self.row_start


@dataclass(frozen=True)
class BagIndex:
    """For one batch size B: each bag's table (F*B), every bag (arange(F*B)), per shard the
    positions of the bags of its whole tables, and (whole tables only) the order that puts
    the shards' bags, concatenated in shard order, back in bag order."""

    table_of_bag: torch.Tensor
    all_bags: torch.Tensor
    of_shard: list[torch.Tensor]
    shard_order: torch.Tensor | None
    base_of_bag: torch.Tensor


@dataclass
class ShardRequest:
    """One shard's part of a batch: pooled lookup over `num_bags` bags whose positions in
    the batch's F*B feature-major bag order are `bag_index`."""

    shard: int
    rows: torch.Tensor
    offsets: torch.Tensor
    weights: torch.Tensor | None
    bag_index: torch.Tensor
    one_per_bag: bool = False  # every bag holds exactly one id (offsets = arange)


class TableLayout:
    """Where a job's embedding rows live: how a batch's bags become one request per shard,
    how the shards' partial pools combine, and how each shard is built. `EmbeddingLayout`
    places fixed tables as row slices; `HashLayout` (hash_layout.py) spreads hash tables
    over every shard by a hash of the key."""

    tables: tuple[TableSpec, ...]
    num_shards: int
    width: int  # W: the pooled embeddings' width, the widest table's dim
    mixed: bool = False  # several dims (or hash groups): a shard keeps one store per group
    _table_dims: torch.Tensor  # each table's dim
    lock_free: bool = True  # its shards may serve requests concurrently (Hogwild)

    def route(self, batch: Batch) -> list[ShardRequest]:
        """Split a batch's bags into one request per shard that owns any of its rows."""
        raise NotImplementedError

    def combine(
        self, batch_size: int, requests: list[ShardRequest], partials: list[torch.Tensor]
    ) -> torch.Tensor:
        """Sum per-shard partial pools into B x F x D pooled embeddings."""
        raise NotImplementedError

    def new_shard(self, shard: int, optimizer: RowOptimizerSpec, seed: int) -> RowShard:
        """Shard `shard` with its initial rows (from `seed`) and its row-wise optimizer."""
        raise NotImplementedError

    def signature(self) -> list[tuple[int, ...]]:
        """What a checkpoint records of the layout, to resume only onto the same one."""
        raise NotImplementedError

    def rows_summary(self, states: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Rows live, inserted and evicted, and lookups admitted and refused, in all and per
        table, from the shards' states (None: fixed tables, whose rows never change)."""
        return None

    def wire_grads(self, shard: int, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        """The row gradients (U x W) a push to `shard` carries: themselves, or with tables of
        several dims each row's own dim of them, compact (ps/dim_groups.py)."""
        return grads

    def _padded(
        self, batch_size: int, requests: list[ShardRequest], partials: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        """Compact partial pools (tables of several dims) as num_bags x W."""
        return [
            pad(partial, self._table_dims.index_select(0, r.bag_index // batch_size), self.width)
            for r, partial in zip(requests, partials, strict=True)
        ]

    def _priced_pool(self, batch_size: int, partials: list[torch.Tensor]) -> torch.Tensor | None:
        """The B x F x W pooled embeddings of priced partials (their shape, made without a
        dispatch: model/priced.py); None for real ones."""
        if not partials or not is_priced(partials[0]):
            return None
        return PricedTensor((batch_size, len(self.tables), self.width), partials[0].dtype)

    def _scattered(
        self, batch_size: int, requests: list[ShardRequest], partials: list[torch.Tensor]
    ) -> torch.Tensor:
        """B x F x W: each request's partial pools put at its bags (one request holding
        every bag as it is), summed where bags meet on several shards."""
        F, D = len(self.tables), self.width
        if len(requests) == 1 and requests[0].bag_index.numel() == F * batch_size:
            return partials[0].reshape(F, batch_size, D).transpose(0, 1)
        pooled = torch.zeros(F * batch_size, D)
        for request, partial in zip(requests, partials, strict=True):
            pooled.index_add_(0, request.bag_index, partial)
        return pooled.reshape(F, batch_size, D).transpose(0, 1)

    @staticmethod
    def bag_gradients(grad_pooled: torch.Tensor, request: ShardRequest) -> torch.Tensor:
        """The part of a B x F x D pooled gradient that belongs to one request's bags."""
        return TableLayout.requests_gradients(grad_pooled, [request])[0]

    @staticmethod
    def requests_gradients(
        grad_pooled: torch.Tensor, requests: list[ShardRequest]
    ) -> list[torch.Tensor]:
        """Per request, the part of a B x F x D pooled gradient that belongs to its bags."""
        B, F, D = grad_pooled.shape
        if is_priced(grad_pooled):  # shapes only, made without a dispatch
            return [shaped(r.bag_index.numel(), D, grad_pooled.dtype) for r in requests]
        flat = grad_pooled.transpose(0, 1).reshape(F * B, D)
        return [
            flat if r.bag_index.numel() == F * B else flat.index_select(0, r.bag_index)
            for r in requests
        ]


class EmbeddingLayout(TableLayout):
    """Fixed tables placed on shards as slices of rows. Built by the placement planner, or
    `single_shard` for the reference trainer (every table whole on shard 0)."""

    def __init__(self, tables: tuple[TableSpec, ...], slices: list[TableSlice], num_shards: int):
        self.tables = tables
        self.dims = sorted({t.dim for t in tables})
        self.width = self.dims[-1]
        self.mixed = len(self.dims) > 1  # a shard keeps one store per dim (dim_groups.py)
        if self.mixed:
            slices = stacked_by_dim(tables, slices)
        self.slices = sorted(slices, key=lambda s: (s.table, s.row_start))
        self.num_shards = num_shards
        self.shard_rows = [0] * num_shards
        covered = [0] * len(tables)
        for s in self.slices:
            assert 0 <= s.shard < num_shards and s.row_start < s.row_end
            self.shard_rows[s.shard] = max(self.shard_rows[s.shard], s.shard_row + s.num_rows)
            covered[s.table] += s.num_rows
        for t, spec in enumerate(tables):
            if covered[t] != spec.num_rows:
                raise ValueError(
                    f"table {spec.name}: slices cover {covered[t]} of {spec.num_rows} rows"
                )
        self._whole = all(
            len([s for s in self.slices if s.table == t]) == 1 for t in range(len(tables))
        )
        self._table_shard = torch.tensor(
            [self._slices_of(t)[0].shard for t in range(len(tables))], dtype=torch.int64
        )
        self._table_base = torch.tensor(
            [self._slices_of(t)[0].shard_row for t in range(len(tables))], dtype=torch.int64
        )
        self._mean_tables = torch.tensor([spec.pooling == "mean" for spec in tables])
        self._shard_tables = [
            (self._table_shard == shard).nonzero().flatten() for shard in range(num_shards)
        ]
        self._any_mean = bool(self._mean_tables.any())
        self._owners = [s for s, tables in enumerate(self._shard_tables) if tables.numel()]
        # several shards of whole sum-pooled tables: a one-hot batch routes without masks
        self._one_hot_route = self._whole and num_shards > 1 and not self._any_mean
        self._bags_of: dict[int, BagIndex] = {}
        self._aranges: dict[int, torch.Tensor] = {}
        self._table_dims = torch.tensor([t.dim for t in tables], dtype=torch.int64)
        self._group_bases = [self._bases_of(shard) for shard in range(num_shards)]

    def _bases_of(self, shard: int) -> torch.Tensor:
        """Where each dim's store starts in the shard's row space, and where the last ends."""
        rows = [0] * len(self.dims)
        for s in self.slices:
            if s.shard == shard:
                rows[self.dims.index(self.tables[s.table].dim)] += s.num_rows
        bases = torch.zeros(len(self.dims) + 1, dtype=torch.int64)
        torch.cumsum(torch.tensor(rows, dtype=torch.int64), 0, out=bases[1:])
        return bases

    @classmethod
    def single_shard(cls, tables: tuple[TableSpec, ...]) -> EmbeddingLayout:
        slices, base = [], 0
        for t, spec in enumerate(tables):
            slices.append(TableSlice(t, 0, spec.num_rows, 0, base))
            base += spec.num_rows
        return cls(tables, slices, 1)

    def _slices_of(self, table: int) -> list[TableSlice]:
        return [s for s in self.slices if s.table == table]

    def _bags(self, B: int) -> BagIndex:
        """Index tensors that depend on the batch size only (kept: they are read, never
        written)."""
        bags = self._bags_of.get(B)
        if bags is None:
            F = len(self.tables)
            table_of_bag = torch.arange(F).repeat_interleave(B)
            of_shard = [
                (tables.unsqueeze(1) * B + torch.arange(B)).reshape(-1)
                for tables in self._shard_tables
            ]
            shard_order = torch.argsort(torch.cat(of_shard)) if self._whole else None
            base_of_bag = self._table_base.index_select(0, table_of_bag)
            bags = BagIndex(table_of_bag, torch.arange(F * B), of_shard, shard_order, base_of_bag)
            self._bags_of[B] = bags
        return bags

    def route(self, batch: Batch) -> list[ShardRequest]:
        """Split a batch's bags into one request per shard that owns any of its tables
        (with tables of several dims, without its empty bags: dim_groups.py)."""
        requests = self._route(batch)
        return [without_empty_bags(r) for r in requests] if self.mixed else requests

    def _route(self, batch: Batch) -> list[ShardRequest]:
        B, F = batch.batch_size, len(self.tables)
        bags = self._bags(B)
        if self._one_hot_route and self._one_per_bag(batch):
            return self._route_one_per_bag(batch, bags)
        lengths = batch.bag_lengths()
        table_of_bag = bags.table_of_bag
        table_of_id = table_of_bag.repeat_interleave(lengths, output_size=batch.ids.numel())
        weights = None
        if self._any_mean:
            inv_len = 1.0 / lengths.clamp(min=1).to(torch.float32)
            per_bag = torch.where(self._mean_tables[table_of_bag], inv_len, 1.0)
            weights = per_bag.repeat_interleave(lengths, output_size=batch.ids.numel())
        if self.num_shards == 1 and self._whole:
            rows = batch.ids + self._table_base.index_select(0, table_of_id)
            return [ShardRequest(0, rows, batch.offsets, weights, bags.all_bags)]
        if self._whole:
            return self._route_whole_tables(batch, lengths, table_of_id, weights, bags)
        bag_of_id = torch.arange(F * B).repeat_interleave(lengths, output_size=batch.ids.numel())
        requests = []
        for shard in range(self.num_shards):
            keep = torch.zeros_like(batch.ids, dtype=torch.bool)
            rows = torch.empty_like(batch.ids)
            bag_keep = torch.zeros(F * B, dtype=torch.bool)
            for s in self.slices:
                if s.shard != shard:
                    continue
                mask = (
                    (table_of_id == s.table) & (batch.ids >= s.row_start) & (batch.ids < s.row_end)
                )
                keep |= mask
                rows = torch.where(mask, batch.ids - s.row_start + s.shard_row, rows)
                bag_keep[s.table * B : (s.table + 1) * B] = True
            if not bool(bag_keep.any()):
                continue
            bag_index = bag_keep.nonzero().squeeze(1)
            kept_bag_of_id = bag_of_id[keep]
            position = torch.full((F * B,), -1, dtype=torch.int64)
            position[bag_index] = torch.arange(bag_index.numel())
            counts = torch.bincount(position[kept_bag_of_id], minlength=bag_index.numel())
            offsets = torch.zeros(bag_index.numel() + 1, dtype=torch.int64)
            torch.cumsum(counts, 0, out=offsets[1:])
            requests.append(
                ShardRequest(
                    shard,
                    rows[keep],
                    offsets,
                    None if weights is None else weights[keep],
                    bag_index,
                )
            )
        return requests

    def _arange(self, n: int) -> torch.Tensor:
        cached = self._aranges.get(n)
        if cached is None:
            cached = self._aranges[n] = torch.arange(n)
        return cached

    def _one_per_bag(self, batch: Batch) -> bool:
        n = batch.offsets.numel()
        return batch.ids.numel() == n - 1 and torch.equal(batch.offsets, self._arange(n))

    def _route_one_per_bag(self, batch: Batch, bags: BagIndex) -> list[ShardRequest]:
        """Whole tables, one id per bag (one-hot features): a shard's ids are its tables'
        rows of the F x B id matrix, its offsets 0, 1, ..., no mask needed."""
        B, F = batch.batch_size, len(self.tables)
        rows_all = (batch.ids + bags.base_of_bag).view(F, B)
        requests = []
        for shard, tables in enumerate(self._shard_tables):
            if not tables.numel():
                continue
            rows = rows_all.index_select(0, tables).view(-1)
            offsets = self._arange(rows.numel() + 1)
            requests.append(ShardRequest(shard, rows, offsets, None, bags.of_shard[shard], True))
        return requests

    def _route_whole_tables(
        self,
        batch: Batch,
        lengths: torch.Tensor,
        table_of_id: torch.Tensor,
        weights: torch.Tensor | None,
        bags: BagIndex,
    ) -> list[ShardRequest]:
        """Every table lives whole on one shard: a shard's bags are whole features."""
        B, F = batch.batch_size, len(self.tables)
        rows_all = batch.ids + self._table_base.index_select(0, table_of_id)
        shard_of_id = self._table_shard.index_select(0, table_of_id)
        lengths = lengths.reshape(F, B)
        requests = []
        for shard in range(self.num_shards):
            tables = self._shard_tables[shard]
            if not tables.numel():
                continue
            keep = shard_of_id == shard
            bag_index = bags.of_shard[shard]
            offsets = torch.zeros(bag_index.numel() + 1, dtype=torch.int64)
            torch.cumsum(lengths.index_select(0, tables).reshape(-1), 0, out=offsets[1:])
            requests.append(
                ShardRequest(
                    shard,
                    rows_all[keep],
                    offsets,
                    None if weights is None else weights[keep],
                    bag_index,
                )
            )
        return requests

    def combine(
        self, batch_size: int, requests: list[ShardRequest], partials: list[torch.Tensor]
    ) -> torch.Tensor:
        """Sum per-shard partial pools into B x F x W pooled embeddings."""
        priced = self._priced_pool(batch_size, partials)
        if priced is not None:
            return priced
        F, D = len(self.tables), self.width
        if self.mixed:
            partials = self._padded(batch_size, requests, partials)
        bags = self._bags(batch_size)
        if len(requests) > 1 and bags.shard_order is not None and self._every_shard(requests, bags):
            pooled = torch.cat(partials).index_select(0, bags.shard_order)
            return pooled.view(F, batch_size, D).transpose(0, 1)
        return self._scattered(batch_size, requests, partials)

    def _every_shard(self, requests: list[ShardRequest], bags: BagIndex) -> bool:
        """The requests are each table-owning shard's whole-table request, in shard order."""
        owners = self._owners
        return len(requests) == len(owners) and all(
            r.shard == s and r.bag_index is bags.of_shard[s]
            for r, s in zip(requests, owners, strict=True)
        )

    def new_shard(self, shard: int, optimizer: RowOptimizerSpec, seed: int) -> RowShard:
        if self.mixed:
            bases = self._group_bases[shard].tolist()
            stores = []
            for g, dim in enumerate(self.dims):
                weight = self.shard_weight(shard, seed, dim)[bases[g] : bases[g + 1]]
                stores.append(EmbeddingShard(weight.contiguous(), optimizer.build(*weight.shape)))
            return DimGroupedShard(stores, self.dims)
        weight = self.shard_weight(shard, seed)
        return EmbeddingShard(weight, optimizer.build(*weight.shape))

    def shard_weight(self, shard: int, seed: int, dim: int | None = None) -> torch.Tensor:
        """Initial rows of one shard: each table's rows come from (seed, table) whatever the
        sharding, so every layout of the same tables starts from the same model. `dim`:
        only the tables of that dim, in the rows of the shard's store of them (the others
        left unset)."""
        weight = torch.empty(self.shard_rows[shard], self.width if dim is None else dim)
        for s in self.slices:
            spec = self.tables[s.table]
            if s.shard == shard and dim in (None, spec.dim):
                table = init_table(spec.num_rows, spec.dim, seed * 1000 + s.table)
                weight[s.shard_row : s.shard_row + s.num_rows] = table[s.row_start : s.row_end]
        return weight

    def wire_grads(self, shard: int, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        if not self.mixed:
            return grads
        group = torch.searchsorted(self._group_bases[shard][1:], rows, right=True)
        return compact(grads, torch.tensor(self.dims).index_select(0, group))

    def signature(self) -> list[tuple[int, ...]]:
        return [(s.table, s.row_start, s.row_end, s.shard, s.shard_row) for s in self.slices]


def stacked_by_dim(tables: tuple[TableSpec, ...], slices: list[TableSlice]) -> list[TableSlice]:
    """The slices restacked so that on every shard the slices of one dim are contiguous
    (dims ascending, each dim's slices in their given order): its store's rows."""
    order = sorted(slices, key=lambda s: (s.shard, tables[s.table].dim, s.shard_row))
    restacked: list[TableSlice] = []
    next_row: dict[int, int] = {}
    for s in order:
        row = next_row.get(s.shard, 0)
        restacked.append(TableSlice(s.table, s.row_start, s.row_end, s.shard, row))
        next_row[s.shard] = row + s.num_rows
    return restacked


def without_empty_bags(request: ShardRequest) -> ShardRequest:
    """The request without its bags that hold no id (they pool to zeros; a shard of tables
    of several dims tells a bag's dim by its first row)."""
    lengths = request.offsets[1:] - request.offsets[:-1]
    kept = lengths > 0
    if bool(kept.all()):
        return request
    offsets = torch.zeros(int(kept.sum()) + 1, dtype=torch.int64)
    torch.cumsum(lengths[kept], 0, out=offsets[1:])
    return ShardRequest(
        request.shard,
        request.rows,
        offsets,
        request.weights,
        request.bag_index[kept],
        request.one_per_bag,
    )
