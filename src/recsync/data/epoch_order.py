"""The order of a later epoch under line shares (pure arithmetic, numpy;
docs/design-file-shares.md, "Epochs").

The stream path shuffles a later epoch within windows of `train.shuffle_buffer` consecutive
examples (data/epochs.py), which needs every example before the window. Readers that share
text files by line blocks (io/file_shares.py) each parse only their own blocks, so a later
epoch e > 0 is shuffled in two draws that any reader makes alone, whatever the number of
readers and on resume:

- the **order of the line blocks**: the p-th block of epoch e holds line block
  `block_order(seed, e, blocks)[p]`, a permutation seeded by (seed, e);
- the **examples within a block**: its m examples (known once the block is parsed) in the
  order `example_order(seed, e, block, m)`, a permutation seeded by (seed, e, block) of m,
  so the block's owner recomputes it after a resume.

Epoch 0 reads the blocks and their examples in order (CTR data is in time order). Each draw
is numpy's PCG64 generator seeded by a `SeedSequence` of the seed, what the draw is for, the
epoch (and the block); `Generator.permutation`'s output for a seed is what numpy gives
today (a test pins values: numpy does not promise it across releases).
"""

from __future__ import annotations

import numpy as np

_BLOCK_ORDER = 0x0B10C  # what a draw is for, part of its seed
_EXAMPLE_ORDER = 0xE8A3


def _generator(seed: int, *words: int) -> np.random.Generator:
    entropy = [seed % 2**64, *words]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def block_order(seed: int, epoch: int, blocks: int) -> np.ndarray:
    """Which line block the p-th block of epoch `epoch` holds (int64, a permutation of
    `blocks`): in order in epoch 0."""
    if epoch < 0 or blocks < 0:
        raise ValueError(f"epoch and block count must be >= 0, got {epoch}, {blocks}")
    if epoch == 0:
        return np.arange(blocks, dtype=np.int64)
    order: np.ndarray = _generator(seed, _BLOCK_ORDER, epoch).permutation(blocks)
    return order.astype(np.int64)


def example_order(seed: int, epoch: int, block: int, count: int) -> np.ndarray:
    """The order of the `count` examples of line block `block` in epoch `epoch` (int64,
    a permutation of `count`): in order in epoch 0."""
    if epoch < 0 or block < 0 or count < 0:
        raise ValueError(f"epoch, block and count must be >= 0, got {epoch}, {block}, {count}")
    if epoch == 0:
        return np.arange(count, dtype=np.int64)
    order: np.ndarray = _generator(seed, _EXAMPLE_ORDER, epoch, block).permutation(count)
    return order.astype(np.int64)
