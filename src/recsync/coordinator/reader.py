"""The reader node: hands out every batch of the stream exactly once (one-pass training)."""

from __future__ import annotations

from collections.abc import Iterator

from recsync.data.batch import Batch


class ReaderNode:
    """Serves batches to trainers in request order; counts what each trainer was handed."""

    def __init__(self, batches: Iterator[Batch], num_trainers: int):
        self._batches = batches
        self.handed_batches = [0] * num_trainers
        self.handed_examples = [0] * num_trainers
        self.exhausted = False

    def next_batch(self, trainer: int) -> Batch | None:
        if self.exhausted:
            return None
        batch = next(self._batches, None)
        if batch is None:
            self.exhausted = True
            return None
        self.handed_batches[trainer] += 1
        self.handed_examples[trainer] += batch.batch_size
        return batch

    @property
    def total_examples(self) -> int:
        return sum(self.handed_examples)
