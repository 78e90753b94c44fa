"""Fixed tables of different dims on one shard: one stacked store per distinct dim.

A shard of a layout whose tables differ in dim keeps, per dim d of its tables, one
`EmbeddingShard` of R_d x d rows (its tables' slices stacked), the stores one after the
other in the shard's row space: group g (the g-th smallest dim) holds rows
[bases[g], bases[g+1]). A row's width is its group's dim, so requests and row gradients
travel **compact**: a lookup's partial pools are one flat vector, each bag's d values
after the other's (a bag's dim is that of its first row: the layout sends no empty bag to
such a shard), and a push's gradients are one flat vector of each row's d values. The
gradient servers, which sum several pushes per row, pad them to the widest dim first
(`padded`); a grouped shard applies padded gradients too.
"""

from __future__ import annotations

from typing import Any

import torch

from recsync.ps.shard import EmbeddingShard


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


class DimGroupedShard:
    """A shard of fixed tables of several dims: `RowShard`'s interface over one
    `EmbeddingShard` per dim (see the module docstring for the compact payloads)."""

    def __init__(self, stores: list[EmbeddingShard], dims: list[int]):
        assert len(stores) == len(dims) and dims == sorted(set(dims))
        self.stores = stores
        self.dims = dims
        self._dims = torch.tensor(dims, dtype=torch.int64)
        sizes = torch.tensor([s.num_rows for s in stores], dtype=torch.int64)
        self.bases = torch.zeros(len(stores) + 1, dtype=torch.int64)
        torch.cumsum(sizes, 0, out=self.bases[1:])
        self.global_step = 0

    @property
    def num_rows(self) -> int:
        return int(self.bases[-1])

    @property
    def dim(self) -> int:
        """The widest row's dim (the width of padded payloads)."""
        return self.dims[-1]

    def group_of(self, rows: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.bases[1:], rows, right=True)

    def widths_of(self, rows: torch.Tensor) -> torch.Tensor:
        return self._dims.index_select(0, self.group_of(rows))

    def padded(self, rows: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
        """U x W gradients of U rows, from their compact vector (or already padded)."""
        return grads if grads.dim() == 2 else pad(grads, self.widths_of(rows), self.dim)

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
        out = torch.zeros(num_bags, self.dim)
        for g, store in enumerate(self.stores):
            bags = group_of_bag == g
            if not bool(bags.any()):
                continue
            ids = group_of_id == g
            kept = lengths[bags]
            sub = torch.zeros(kept.numel() + 1, dtype=torch.int64)
            torch.cumsum(kept, 0, out=sub[1:])
            pick = store.peek if peek else store.lookup
            part = pick(rows[ids] - self.bases[g], sub, None if weights is None else weights[ids])
            out[bags, : self.dims[g]] = part
        return compact(out, self._dims.index_select(0, group_of_bag))

    def versions_of(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), dtype=torch.int64)
        group = self.group_of(rows)
        for g, store in enumerate(self.stores):
            mine = group == g
            if bool(mine.any()):
                out[mine] = store.versions_of(rows[mine] - self.bases[g])
        return out

    def evict_at_cut(self) -> int:
        return 0

    def apply_gradients(
        self, rows: torch.Tensor, grads: torch.Tensor, lr_scale: float = 1.0
    ) -> None:
        """Apply the gradients of U unique rows (compact, or padded U x W) to their stores."""
        if rows.numel():
            padded = self.padded(rows, grads)
            group = self.group_of(rows)
            for g, store in enumerate(self.stores):
                mine = group == g
                if bool(mine.any()):
                    store.global_step = self.global_step
                    local = rows[mine] - self.bases[g]
                    store.apply_gradients(local, padded[mine, : self.dims[g]], lr_scale)
        self.global_step += 1

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
