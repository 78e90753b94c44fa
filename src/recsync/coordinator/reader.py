"""The reader node: hands out every batch of the stream exactly once (one-pass training)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from recsync.data.batch import Batch
from recsync.io.sources import FileTrainingData, SyntheticData
from recsync.protocol.messages import (
    HandedBatch,
    Message,
    NextBatch,
    ReaderProgress,
    StopReading,
)
from recsync.protocol.node import Node
from recsync.sync.gradient import Tokens


@dataclass
class ReaderReport:
    """The reader at the end: examples handed to each trainer, how many were handed when
    it first said the data was consumed, the held-out set with what is known of it, and
    whether it was told to stop."""

    handed_examples: list[int]
    total_examples: int
    handed_at_stop: int | None
    test: Batch | None
    teacher_auc: float | None
    skipped: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False  # told to stop handing out (an interrupted run)


class ReaderNode(Node):
    """Serves batches to trainers in request order; counts what each trainer was handed.

    With `tokens` (GBA's token control), a batch asked for `with_token` comes with its
    token. With `limit`, no batch that would take the examples handed out past it is handed
    out (then the job stops: a checkpoint)."""

    handles: ClassVar[dict[type[Message], str]] = {
        NextBatch: "next_batch",
        ReaderProgress: "progress",
        StopReading: "stop",
    }
    name = "reader"

    def __init__(
        self,
        source: SyntheticData | FileTrainingData,
        num_trainers: int,
        tokens: Tokens | None = None,
        limit: int | None = None,
    ):
        self.source = source
        self._batches: Iterator[Batch] = iter(source.train_batches())
        self.limit = limit
        self.tokens = tokens
        self.batches_handed = 0
        self.handed_batches = [0] * num_trainers
        self.handed_examples = [0] * num_trainers
        self.total_examples = 0  # handed out to all trainers
        self.handed_at_stop: int | None = None
        self.exhausted = False
        self.stopped = False

    def next_batch(self, message: NextBatch) -> HandedBatch:
        token = None
        if message.with_token and self.tokens is not None:
            token = self.tokens.token(self.batches_handed)
        batch = self._next(message.trainer)
        if batch is None:
            if self.handed_at_stop is None:
                self.handed_at_stop = self.total_examples
            return HandedBatch(None)
        return HandedBatch(batch, token)

    def _next(self, trainer: int) -> Batch | None:
        if self.exhausted:
            return None
        batch = next(self._batches, None)
        limit = self.limit
        if (
            batch is not None
            and limit is not None
            and self.total_examples + batch.batch_size > limit
        ):
            batch = None  # it stays in the stream: not handed out
        if batch is None:
            self.exhausted = True
            return None
        self.batches_handed += 1
        self.handed_batches[trainer] += 1
        self.handed_examples[trainer] += batch.batch_size
        self.total_examples += batch.batch_size
        return batch

    def stop(self, message: StopReading) -> int:
        self.limit, self.stopped = self.total_examples, True
        return self.total_examples

    def progress(self, message: ReaderProgress) -> tuple[int, int | None]:
        return self.total_examples, self.source.total_examples

    def report(self) -> ReaderReport:
        source = self.source
        return ReaderReport(
            list(self.handed_examples),
            self.total_examples,
            self.handed_at_stop,
            source.test_set(),
            source.teacher_auc,
            source.skips.as_dict(),
            self.stopped,
        )
