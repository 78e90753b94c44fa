"""Cutting a batch (data/batch.py): `split` gives exactly the slices of its pieces, and
`rebatch` re-cuts a stream of any chunk sizes into the same batches, every example once."""

from __future__ import annotations

import random

import pytest
import torch

from recsync.data.batch import Batch, concat, rebatch

FIELDS = ("dense", "ids", "offsets", "labels")


def made(rng: random.Random, B: int, F: int) -> Batch:
    lengths = torch.tensor([rng.randint(0, 3) for _ in range(B * F)], dtype=torch.int64)
    offsets = torch.zeros(B * F + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    ids = torch.randint(0, 1000, (int(offsets[-1]),))
    return Batch(torch.rand(B, 2), ids, offsets, torch.rand(B))


def same(a: Batch, b: Batch) -> bool:
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


@pytest.mark.parametrize("seed", range(40))
def test_split_gives_the_slices_of_its_pieces(seed: int) -> None:
    rng = random.Random(seed)
    B, F, size = rng.randint(1, 70), rng.randint(0, 5), rng.randint(1, 25)
    batch = made(rng, B, F)
    pieces = batch.split(size)
    slices = [batch.slice(s, min(s + size, B)) for s in range(0, B, size)]
    assert len(pieces) == len(slices)
    assert all(same(p, s) for p, s in zip(pieces, slices, strict=True))


@pytest.mark.parametrize("seed", range(20))
def test_rebatch_keeps_every_example_once_in_order(seed: int) -> None:
    rng = random.Random(seed)
    F, size = rng.randint(1, 4), rng.randint(1, 16)
    chunks = [made(rng, rng.randint(1, 40), F) for _ in range(rng.randint(1, 6))]
    whole = concat(chunks)
    out = list(rebatch(chunks, size))
    assert [b.batch_size for b in out[:-1]] == [size] * (len(out) - 1)
    assert 0 < out[-1].batch_size <= size
    assert same(concat(out), whole)
