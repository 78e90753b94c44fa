"""The batch format every reader produces and every trainer consumes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from recsync.data.keys import table_of


@dataclass
class Batch:
    """A mini-batch of B examples with F categorical features (multi-hot bags).

    dense:   B x num_dense float32 (already transformed, e.g. log(1+x)).
    ids:     N int64 ids, bags in feature-major order: bag (f, b) is ids[offsets[f*B+b]:
             offsets[f*B+b+1]]. Ids are local to feature f's table, in [0, rows_f); in
             keyed mode they are feature-prefixed keys whose top 8 bits are f (data/keys.py).
    offsets: F*B+1 int64, non-decreasing, offsets[0] = 0, offsets[-1] = N.
    labels:  B float32 in {0, 1}.
    """

    dense: torch.Tensor
    ids: torch.Tensor
    offsets: torch.Tensor
    labels: torch.Tensor

    @property
    def batch_size(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_features(self) -> int:
        return (int(self.offsets.shape[0]) - 1) // max(self.batch_size, 1)

    def bag_lengths(self) -> torch.Tensor:
        """F*B lengths of the bags, feature-major."""
        return self.offsets[1:] - self.offsets[:-1]

    def slice(self, start: int, stop: int) -> Batch:
        """Examples [start, stop) as a new batch (used to split a global batch into locals)."""
        B, F = self.batch_size, self.num_features
        assert 0 <= start <= stop <= B
        if start == 0 and stop == B:
            return self
        # only the F x (stop - start + 1) offsets of these examples are read: O(F n), not O(F B)
        # (index_select: advanced indexing of this small gather took milliseconds with 2 threads)
        at = (torch.arange(F) * B).unsqueeze(1) + torch.arange(start, stop + 1)
        bounds = self.offsets.index_select(0, at.reshape(-1)).reshape(F, stop - start + 1)
        starts = bounds[:, :-1].reshape(-1)
        ids, offsets = _gathered(self.ids, starts, (bounds[:, 1:] - bounds[:, :-1]).reshape(-1))
        return Batch(self.dense[start:stop], ids, offsets, self.labels[start:stop])

    def split(self, size: int) -> list[Batch]:
        """The batch cut into pieces of `size` examples in order (the last may be smaller):
        `slice` of each, with the whole pieces' ids gathered in one pass."""
        B, F = self.batch_size, self.num_features
        full = B // size
        if full < 2 or F == 0:
            return [self.slice(s, min(s + size, B)) for s in range(0, B, size)]
        n, bags = full * size, F * size  # the whole pieces' examples; a piece's bags
        # bag (f, b) of piece p = b // size goes to place (p, f, b % size)
        lengths = self.bag_lengths().reshape(F, B)[:, :n].reshape(F, full, size)
        starts = self.offsets[:-1].reshape(F, B)[:, :n].reshape(F, full, size)
        lengths, starts = lengths.transpose(0, 1).reshape(-1), starts.transpose(0, 1).reshape(-1)
        ids, offsets = _gathered(self.ids, starts, lengths)
        bounds = offsets[::bags].tolist()
        pieces = [
            Batch(
                self.dense[p * size : (p + 1) * size],
                ids[bounds[p] : bounds[p + 1]],
                offsets[p * bags : (p + 1) * bags + 1] - bounds[p],
                self.labels[p * size : (p + 1) * size],
            )
            for p in range(full)
        ]
        if n < B:
            pieces.append(self.slice(n, B))
        return pieces

    def select(self, keep: torch.Tensor) -> Batch:
        """The examples where the B-long bool mask `keep` is true, in order."""
        lengths = self.bag_lengths()
        bag_keep = keep.repeat(self.num_features)  # bag f*B + b belongs to example b
        kept_lengths = lengths[bag_keep]
        offsets = torch.zeros(kept_lengths.numel() + 1, dtype=torch.int64)
        torch.cumsum(kept_lengths, 0, out=offsets[1:])
        ids = self.ids[torch.repeat_interleave(bag_keep, lengths, output_size=self.ids.numel())]
        return Batch(self.dense[keep], ids, offsets, self.labels[keep])

    def take(self, order: torch.Tensor) -> Batch:
        """The examples at the B' int64 positions `order`, in that order (a shuffle)."""
        B, F = self.batch_size, self.num_features
        starts = self.offsets[:-1].reshape(F, B)[:, order].reshape(-1)
        lengths = self.bag_lengths().reshape(F, B)[:, order].reshape(-1)
        ids, offsets = _gathered(self.ids, starts, lengths)
        return Batch(self.dense[order], ids, offsets, self.labels[order])

    def validate(self, table_rows: list[int], keyed: bool = False) -> None:
        """Raise ValueError naming the feature if any id is out of its table's range; with
        `keyed`, if any key's prefix is not its feature (table_rows only counts features)."""
        B = self.batch_size
        if len(table_rows) != self.num_features:
            raise ValueError(
                f"batch has {self.num_features} categorical features, model has {len(table_rows)}"
            )
        lengths = self.bag_lengths().reshape(len(table_rows), B).sum(1).tolist()
        start = 0
        for f, (n, rows) in enumerate(zip(lengths, table_rows, strict=True)):
            chunk = self.ids[start : start + n]
            start += n
            if keyed:
                _check_prefix(chunk, f)
            elif n and (int(chunk.min()) < 0 or int(chunk.max()) >= rows):
                raise ValueError(
                    f"feature {f}: id out of range [0, {rows}) (min {int(chunk.min())}, "
                    f"max {int(chunk.max())})"
                )
        if not torch.isfinite(self.dense).all():
            raise ValueError("dense features contain NaN or infinity")


def _check_prefix(keys: torch.Tensor, feature: int) -> None:
    """ValueError unless every key's top 8 bits (its table) are `feature`."""
    tables = table_of(keys)
    wrong = tables != feature
    if bool(wrong.any()):
        found = sorted(set(tables[wrong].tolist()))[:5]
        raise ValueError(f"feature {feature}: keys of other tables {found} (keyed batch)")


def collate(
    dense_rows: list[list[float]], bags: list[list[list[int]]], labels: list[float]
) -> Batch:
    """Build a Batch from per-example lists: bags[b][f] is the list of ids of feature f."""
    B = len(labels)
    F = len(bags[0]) if B else 0
    flat: list[int] = []
    lengths: list[int] = []
    for f in range(F):
        for b in range(B):
            bag = bags[b][f]
            flat.extend(bag)
            lengths.append(len(bag))
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    if lengths:
        torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0, out=offsets[1:])
    return Batch(
        dense=torch.tensor(dense_rows, dtype=torch.float32).reshape(B, -1),
        ids=torch.tensor(flat, dtype=torch.int64),
        offsets=offsets,
        labels=torch.tensor(labels, dtype=torch.float32),
    )


def concat(batches: list[Batch]) -> Batch:
    """Examples of several batches (same features) as one batch, in order."""
    batches = [b for b in batches if b.batch_size] or batches[:1]
    if len(batches) == 1:
        return batches[0]
    F = batches[0].num_features
    dense = torch.cat([b.dense for b in batches])
    labels = torch.cat([b.labels for b in batches])
    per_feature_ids, per_feature_lengths = [], []
    bag_lengths = [b.bag_lengths() for b in batches]
    starts = [b.offsets[:: b.batch_size].tolist() for b in batches]  # each feature's first id
    for f in range(F):
        for b, lengths, bounds in zip(batches, bag_lengths, starts, strict=True):
            B = b.batch_size
            per_feature_ids.append(b.ids[bounds[f] : bounds[f + 1]])
            per_feature_lengths.append(lengths[f * B : (f + 1) * B])
    lengths = _cat(per_feature_lengths, torch.int64)
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return Batch(dense, _cat(per_feature_ids, torch.int64), offsets, labels)


def _gathered(
    ids: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ids of bags that start at `starts` in `ids` and hold `lengths` ids each, in one
    gather (not a slice a bag and a cat), and their offsets."""
    offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    total = int(offsets[-1])
    # id p of output bag j sits at starts[j] + (p - offsets[j]) in the source
    shift = torch.repeat_interleave(starts - offsets[:-1], lengths, output_size=total)
    return ids.index_select(0, shift + torch.arange(total)), offsets


def _cat(parts: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """torch.cat of 1-D tensors, empty for no parts (a batch with no categorical feature)."""
    return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype)


def rebatch(chunks: Iterable[Batch], batch_size: int) -> Iterator[Batch]:
    """Re-cut a stream of batches of any sizes into batches of `batch_size` (last may be
    smaller), keeping every example once and in order."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    current: Batch | None = None
    position = 0
    for chunk in chunks:
        if current is None:
            current, position = chunk, 0
        else:
            current, position = concat([current.slice(position, current.batch_size), chunk]), 0
        full = current.batch_size // batch_size  # position is 0 here
        if full:
            yield from current.split(batch_size)[:full]
            position = full * batch_size
    if current is not None and current.batch_size > position:
        yield current.slice(position, current.batch_size)
