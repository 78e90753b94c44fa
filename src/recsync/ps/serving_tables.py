"""Hash tables as plain key -> vector arrays, for export and serving.

A trained job's hash shards hold their live rows compacted in their states ("keys",
"weight"). `KeyedRows` gathers them into one sorted key array and its vectors, splits them
per table (the export's files), and pools a batch's bags by binary search, with no hash map
and no recsync shard: a key with no row (never admitted, evicted, or new) reads zeros, the
default vector of a hash table.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F_

from recsync.model.spec import TableSpec

KEY_SHIFT = 56
ID_MASK = (1 << KEY_SHIFT) - 1


class KeyedRows:
    """Every live row of a job's hash tables: K sorted keys and their K x D vectors."""

    def __init__(self, keys: torch.Tensor, vectors: torch.Tensor):
        order = torch.argsort(keys)
        self.keys = keys[order]
        self.vectors = vectors[order]
        assert self.keys.numel() == self.vectors.shape[0]
        assert self.keys.numel() < 2 or bool((self.keys[1:] != self.keys[:-1]).all())

    @classmethod
    def from_shards(cls, states: list[dict[str, Any]]) -> KeyedRows:
        """Every live row of the shards' states (a grouped shard's stores too); vectors of
        tables of several dims padded with zeros to the widest (`table` trims them)."""
        stores = [store for state in states for store in state.get("groups", [state])]
        width = max(int(store["weight"].shape[1]) for store in stores)
        keys = torch.cat([store["keys"] for store in stores])
        vectors = torch.cat(
            [
                F_.pad(
                    store["weight"][: store["keys"].numel()], (0, width - store["weight"].shape[1])
                )
                for store in stores
            ]
        )
        return cls(keys, vectors)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def table(self, table: int, dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, vectors) of one table's rows, ids without the table's prefix, ascending;
        `dim`: the vectors' first `dim` entries (the table's own, where tables differ)."""
        mine = ((self.keys >> KEY_SHIFT) & 0xFF) == table
        vectors = self.vectors[mine]
        return self.keys[mine] & ID_MASK, vectors if dim is None else vectors[:, :dim]

    def rows_of(self, keys: torch.Tensor) -> torch.Tensor:
        """Each key's row in `vectors`, or K (one past the last: the zero row) if absent."""
        count = self.keys.numel()
        if not count:
            return torch.zeros_like(keys)
        where = torch.searchsorted(self.keys, keys).clamp(max=count - 1)
        found = self.keys.index_select(0, where) == keys
        return torch.where(found, where, count)

    def pooled(
        self, tables: tuple[TableSpec, ...], ids: torch.Tensor, offsets: torch.Tensor
    ) -> torch.Tensor:
        """B x F x W pooled embeddings of a batch's feature-major bags (ids are keys)."""
        num_bags = offsets.numel() - 1
        B, D = num_bags // len(tables), self.dim
        weight = torch.cat([self.vectors, torch.zeros(1, D)])
        lengths = offsets[1:] - offsets[:-1]
        mean = torch.tensor([t.pooling == "mean" for t in tables]).repeat_interleave(B)
        per_bag = torch.where(mean, 1.0 / lengths.clamp(min=1).to(torch.float32), 1.0)
        weights = per_bag.repeat_interleave(lengths, output_size=ids.numel())
        pooled = F_.embedding_bag(
            self.rows_of(ids),
            weight,
            offsets,
            mode="sum",
            per_sample_weights=weights,
            include_last_offset=True,
        )
        return pooled.reshape(len(tables), B, D).transpose(0, 1)
