"""Tables of different dims on one shard: one store per group of tables.

A shard of a layout whose tables differ in dim keeps one store per group of its tables:
fixed tables (`DimGroupedShard`) one `EmbeddingShard` per dim d, R_d x d rows (its tables'
slices stacked), the stores one after the other in the shard's row space (group g, the
g-th smallest dim, holds rows [bases[g], bases[g+1])); hash tables (`HashGroupedShard`)
one `HashEmbeddingShard` per distinct (dim, admission, eviction), a key's group by its
table (the key's top byte). A row's width is its group's dim, so requests and row
gradients travel **compact**: a lookup's partial pools are one flat vector, each bag's d
values after the other's (a bag's group is that of its first row: the layout sends no
empty bag to such a shard), and a push's gradients are one flat vector of each row's d
values. The gradient servers, which sum several pushes per row, pad them to the widest
dim first (`padded`); a grouped shard applies padded gradients too.
"""

from __future__ import annotations

from typing import Any

import torch

from recsync.ps.shard import EmbeddingShard, RowShard


def width_mask(widths: torch.Tensor, width: int) -> torch.Tensor:
    """N x W: True in the first widths[i] entries of row i (a compact vector's entries in
    a padded N x W, in row-major order)."""
    return torch.arange(width) < widths.unsqueeze(1)


def pad(flat: torch.Tensor, widths: torch.Tensor, width: int) -> torch.Tensor:
    """N x W zeros holding a compact vector's rows (row i its widths[i] values)."""
    padded = flat.new_zeros(widths.numel(), width)
    padded[width_mask(widths, width)] = flat
    return padded


def compact(padded: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """The compact vector of an N x W tensor's first widths[i] entries of each row."""
    return padded[width_mask(widths, padded.shape[1])]


class GroupedShard:
    """`RowShard`'s interface over one store per group of tables (the module docstring:
    compact payloads). Subclasses say each row's group and its address in the store."""

    def __init__(self, stores: list[RowShard], dims: list[int]):
        assert len(stores) == len(dims)
        self.stores = stores
        self.dims = dims
        self._dims = torch.tensor(dims, dtype=torch.int64)
        self.width = max(dims)
        self.global_step = 0

    def group_of(self, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def local(self, group: int, rows: torch.Tensor) -> torch.Tensor:
        """The rows' addresses in their group's store."""
        return rows

    @property
    def num_rows(self) -> int:
        return sum(store.num_rows for store in self.stores)

    @property
    def dim(self) -> int:
        """The widest row's dim (the width of padded payloads)."""
        return self.width

    def widths_of(self, rows: torch.Tensor) -> torch.Tensor:
        return self._dims.index_select(0, self.group_of(rows))

    def padded(self, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        """U x W gradients of U rows, from their compact vector (or already padded)."""
        return grads if grads.dim() == 2 else pad(grads, self.widths_of(rows), self.width)

    def lookup(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The bags' partial pools, compact (each bag's dim values in turn)."""
        return self._pooled(rows, offsets, weights, peek=False)

    def peek(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self._pooled(rows, offsets, weights, peek=True)

    def _pooled(
        self, rows: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor | None, peek: bool
    ) -> torch.Tensor:
        num_bags = offsets.numel() - 1
        if not num_bags:
            return torch.zeros(0)
        lengths = offsets[1:] - offsets[:-1]
        if bool((lengths == 0).any()):
            raise ValueError("a shard of tables of several dims got an empty bag")
        group_of_id = self.group_of(rows)
        group_of_bag = group_of_id.index_select(0, offsets[:-1])
        out = torch.zeros(num_bags, self.width)
        for g, store in enumerate(self.stores):
            bags = group_of_bag == g
            if not bool(bags.any()):
                continue
            ids = group_of_id == g
            kept = lengths[bags]
            sub = torch.zeros(kept.numel() + 1, dtype=torch.int64)
            torch.cumsum(kept, 0, out=sub[1:])
            pick = store.peek if peek else store.lookup
            mine = self.local(g, rows[ids])
            part = pick(mine, sub, None if weights is None else weights[ids])
            out[bags, : self.dims[g]] = part
        return compact(out, self._dims.index_select(0, group_of_bag))

    def versions_of(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), dtype=torch.int64)
        group = self.group_of(rows)
        for g, store in enumerate(self.stores):
            mine = group == g
            if bool(mine.any()):
                out[mine] = store.versions_of(self.local(g, rows[mine]))
        return out

    def evict_at_cut(self) -> int:
        return sum(store.evict_at_cut() for store in self.stores)

    def apply_gradients(
        self, rows: torch.Tensor, grads: torch.Tensor, lr_scale: float = 1.0
    ) -> None:
        """Apply the gradients of U unique rows (compact, or padded U x W) to their stores
        (`every_store`: each store takes the update, an empty one where it has no row)."""
        padded = self.padded(rows, grads)
        group = self.group_of(rows)
        for g, store in enumerate(self.stores):
            mine = group == g
            if self.every_store or bool(mine.any()):
                store.global_step = self.global_step
                local = self.local(g, rows[mine])
                store.apply_gradients(local, padded[mine, : self.dims[g]], lr_scale)
        self.global_step += 1

    every_store = False

    def state_dict(self) -> dict[str, Any]:
        return {
            "groups": [store.state_dict() for store in self.stores],
            "dims": list(self.dims),
            "global_step": self.global_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if list(state["dims"]) != self.dims:
            raise ValueError(f"a shard of dims {state['dims']} loaded onto one of {self.dims}")
        for store, part in zip(self.stores, state["groups"], strict=True):
            store.load_state_dict(part)
        self.global_step = int(state["global_step"])


class DimGroupedShard(GroupedShard):
    """Fixed tables of several dims: one `EmbeddingShard` per dim (ascending), the stores'
    rows one after the other in the shard's row space."""

    def __init__(self, stores: list[EmbeddingShard], dims: list[int]):
        assert dims == sorted(set(dims))
        super().__init__(list(stores), dims)
        sizes = torch.tensor([s.num_rows for s in stores], dtype=torch.int64)
        self.bases = torch.zeros(len(stores) + 1, dtype=torch.int64)
        torch.cumsum(sizes, 0, out=self.bases[1:])

    def group_of(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.bases[1:], rows, right=True)

    def local(self, group: int, rows: torch.Tensor) -> torch.Tensor:
        return rows - self.bases[group]


class HashGroupedShard(GroupedShard):
    """Hash tables in groups (dim, admission, eviction): one `HashEmbeddingShard` per
    group; a key's group is its table's (`group_of_table`, by the key's top byte). Every
    update reaches every store, so their clocks (and `ttl_steps`) count the shard's
    updates, as one store's would."""

    every_store = True

    def __init__(self, stores: list[RowShard], dims: list[int], group_of_table: list[int]):
        super().__init__(stores, dims)
        table_group = torch.zeros(256, dtype=torch.int64)
        table_group[: len(group_of_table)] = torch.tensor(group_of_table, dtype=torch.int64)
        self._table_group = table_group

    def group_of(self, rows: torch.Tensor) -> torch.Tensor:
        return self._table_group.index_select(0, (rows >> 56) & 0xFF)


def rows_in_state(state: dict[str, Any], start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of a fixed shard's row space (within one table's slice) from its
    state: an `EmbeddingShard`'s, or a `DimGroupedShard`'s (its stores one after the
    other)."""
    if "groups" not in state:
        weight: torch.Tensor = state["weight"]
        return weight[start:stop]
    base = 0
    for group in state["groups"]:
        part: torch.Tensor = group["weight"]
        if start < base + part.shape[0]:
            return part[start - base : stop - base]
        base += part.shape[0]
    raise IndexError(f"rows [{start}, {stop}) are past the shard's {base} rows")
