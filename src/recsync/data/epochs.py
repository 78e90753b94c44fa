"""Several passes over a training stream: the first in the data's order (CTR data is in
time order, and one pass is the norm), every later one shuffled, seeded per epoch, within
consecutive blocks of `shuffle_buffer` examples (files bigger than memory stream through a
block at a time; data smaller than a block is shuffled whole)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch

from recsync.data.batch import Batch, concat

EPOCH_SEED_STRIDE = 1_000_003


def shuffled_blocks(
    batches: Iterable[Batch], block_examples: int, generator: torch.Generator
) -> Iterator[Batch]:
    """The examples of each block (whole batches, at least `block_examples` examples; the
    last may be fewer) in an order drawn from `generator`; every example once."""
    if block_examples < 1:
        raise ValueError(f"shuffle_buffer must be >= 1 to shuffle, got {block_examples}")
    pending: list[Batch] = []
    count = 0
    for batch in batches:
        pending.append(batch)
        count += batch.batch_size
        if count >= block_examples:
            block = concat(pending)
            yield block.take(torch.randperm(block.batch_size, generator=generator))
            pending, count = [], 0
    if count:
        block = concat(pending)
        yield block.take(torch.randperm(block.batch_size, generator=generator))


def epochs_of(
    one_pass: Callable[[int], Iterator[Batch]], epochs: int, shuffle_buffer: int, seed: int
) -> Iterator[Batch]:
    """`epochs` passes, pass e the stream `one_pass(e)` makes afresh; passes after the
    first shuffled (`shuffle_buffer` 0: repeated in order)."""
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    for epoch in range(epochs):
        stream = one_pass(epoch)
        if epoch and shuffle_buffer:
            generator = torch.Generator().manual_seed(seed * EPOCH_SEED_STRIDE + epoch)
            stream = shuffled_blocks(stream, shuffle_buffer, generator)
        yield from stream
