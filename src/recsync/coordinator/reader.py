"""The reader node: hands out every batch of the stream exactly once (one-pass training)."""

from __future__ import annotations

from collections.abc import Iterator

from recsync.data.batch import Batch


class ReaderNode:
    """Serves batches to trainers in request order; counts what each trainer was handed.

    With ``tokens_per_step`` M (GBA), each batch comes with its token: the batches handed out
    so far divided by M, so tokens run 0 (M times), 1 (M times), ... in hand-out order. With
    ``limit``, no batch that would take the examples handed out past it is handed out."""

    def __init__(
        self,
        batches: Iterator[Batch],
        num_trainers: int,
        tokens_per_step: int | None = None,
        limit: int | None = None,
    ):
        self._batches = batches
        self.limit = limit  # hand out at most this many examples (then stop: a checkpoint)
        self.stopped_by_limit = False
        self.tokens_per_step = tokens_per_step
        self.batches_handed = 0
        self.handed_batches = [0] * num_trainers
        self.handed_examples = [0] * num_trainers
        self.total_examples = 0  # handed out to all trainers
        self.exhausted = False

    def next_batch(self, trainer: int) -> Batch | None:
        if self.exhausted:
            return None
        batch = next(self._batches, None)
        limit = self.limit
        if (
            batch is not None
            and limit is not None
            and self.total_examples + batch.batch_size > limit
        ):
            self.stopped_by_limit = True  # the batch stays in the stream: not handed out
            batch = None
        if batch is None:
            self.exhausted = True
            return None
        self.batches_handed += 1
        self.handed_batches[trainer] += 1
        self.handed_examples[trainer] += batch.batch_size
        self.total_examples += batch.batch_size
        return batch

    def next_batch_with_token(self, trainer: int) -> tuple[Batch | None, int | None]:
        """The next batch and its token (None without tokens_per_step, or with no batch)."""
        token = None
        if self.tokens_per_step:
            token = self.batches_handed // self.tokens_per_step
        batch = self.next_batch(trainer)
        return batch, token if batch is not None else None
