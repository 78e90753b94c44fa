"""The reader node: hands out every batch of the stream exactly once (one-pass training)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from recsync.coordinator.cut_barrier import CutBarrier
from recsync.coordinator.handouts import Handed, Handouts
from recsync.coordinator.reader_stream import ReaderStream
from recsync.data.batch import Batch
from recsync.data.held_out import mark_test_set
from recsync.data.shares import Deal
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import SyntheticData
from recsync.protocol.messages import Message
from recsync.protocol.node import Node
from recsync.protocol.reading import (
    AwaitCut,
    HandedBatch,
    HeldOutSample,
    NextBatch,
    Park,
    PauseReading,
    ReaderProgress,
    Requeue,
    Requeued,
    ResumeReading,
    StopReading,
)
from recsync.strategy.gradient import Tokens


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
    requeued_examples: list[int] = field(default_factory=list)  # per trainer: handed again
    previous_examples: list[int] = field(default_factory=list)  # trained by lost incarnations
    position: int | None = None  # units of its share consumed (None: `total_examples`)
    storage_retries: int = 0  # its background producer's reads of remote files retried

    @property
    def consumed(self) -> int:
        """Units of its share consumed: examples, or slots under line shares."""
        return self.total_examples if self.position is None else self.position


class ReaderNode(Node):
    """Serves batches to trainers in request order; counts what each trainer was handed.

    Its jobs are four parts: the data (its `ReaderStream`, coordinator/reader_stream.py:
    with several readers, `deal`, data/shares.py, its share of the stream, reader
    `index`; of each global step it hands out `step_share` batches, its workers' part of
    `batches_per_step`, so that a batch's step, its token and where a cut may fall, is its
    own count over `step_share`, the same for every reader; where a step does not split
    evenly, `step_share` None, a token is the batch's number in the stream's order and no
    cut is taken), the cut barrier, the hand-out ledger, and the family's tokens.

    With `tokens` (GBA's token control), a batch asked for `with_token` comes with its
    token. With `limit`, no batch that would take the examples handed out past it is handed
    out (then the job stops: a checkpoint).

    A cut (a checkpoint while training goes on): its `CutBarrier` (coordinator/
    cut_barrier.py) pauses after `PauseReading` at the end of the step under way; once
    every one of the `num_workers` worker loops that still has data parked, `AwaitCut` is
    answered; `ResumeReading` lets the parked workers go on. What each worker holds is in
    its `Handouts` (coordinator/handouts.py), for a lost trainer's or reader's replacement.

    Every batch has a number, its count of batches drawn in this job start, and each reply
    says the reader's `incarnation` (how many times it was lost and replaced): a lost
    reader's replacement is built from what the workers took and replays its share up to
    there (coordinator/reader_replay.py)."""

    handles: ClassVar[dict[type[Message], str]] = {
        NextBatch: "next_batch",
        ReaderProgress: "progress",
        HeldOutSample: "held_out_sample",
        StopReading: "stop",
        Requeue: "requeue",
        PauseReading: "pause",
        Park: "park",
        AwaitCut: "cut",
        ResumeReading: "resume",
    }
    defers = True
    name = "reader"

    def __init__(
        self,
        source: SyntheticData | SharedTextData,
        num_trainers: int,
        tokens: Tokens | None = None,
        limit: int | None = None,
        num_workers: int = 1,
        batches_per_step: int = 1,
        deal: Deal | None = None,
        index: int = 0,
        step_share: int | None = None,
    ):
        self.stream = ReaderStream(source, limit, deal, index, batches_per_step, step_share)
        self.tokens = tokens
        self.handed_batches = [0] * num_trainers
        self.handed_examples = [0] * num_trainers
        self.handed_at_stop: int | None = None
        self.stopped = False
        self.num_workers = num_workers
        self.out: set[int] = set()  # workers told the data is consumed (their loops end)
        self.left = 0  # workers gone untracked (crashed in the simulator)
        self.handouts = Handouts(num_trainers)
        self.barrier = CutBarrier(batches_per_step, self.stream.step_share, self.stream.shared)
        self.incarnation = 0  # times it was lost and replaced (coordinator/reader_replay.py)

    @property
    def total_examples(self) -> int:
        """The examples handed out to all trainers (drawn from its share)."""
        return self.stream.total_examples

    @property
    def exhausted(self) -> bool:
        """Nothing more will be handed out: its share ran out, or the limit was reached."""
        return self.stream.exhausted

    @property
    def paused(self) -> bool:
        """A cut is under way and the step in progress was handed out in full (or the data
        ran out)."""
        return self.barrier.paused(self.stream.batches_handed, self.exhausted)

    @property
    def pausing(self) -> bool:
        return self.barrier.pausing

    @property
    def parked(self) -> set[int]:
        return self.barrier.parked

    @property
    def at_cut(self) -> bool:
        """Every worker with data is parked and no batch waits to be handed out again:
        nothing handed out is still being trained, or still to be."""
        live = self.num_workers - len(self.out) - self.left
        settled = self.paused and not self.exhausted and not self.handouts.again
        return settled and len(self.parked) >= live

    @property
    def cut_settled(self) -> bool:
        """The cut under way can be taken (`at_cut`), or never will: the data ran out (the
        job's end is checkpointed instead)."""
        return self.at_cut or self.exhausted

    def ready(self, message: Message) -> bool:
        if isinstance(message, NextBatch):
            return message.parked not in self.parked  # a parked worker: once its cut ended
        if isinstance(message, AwaitCut):
            return self.cut_settled or not self.pausing
        return True

    def next_batch(self, message: NextBatch) -> HandedBatch:
        handouts, incarnation = self.handouts, self.incarnation
        if not handouts.current(message.trainer, message.incarnation):
            return HandedBatch(None, reader_incarnation=incarnation)  # a lost trainer asked
        handouts.acknowledge(message.worker, message.pushed)
        again = handouts.take_again()  # before a cut: it was handed out before it
        if again is not None:
            token = None
            if again.sequence is not None and message.with_token and self.tokens is not None:
                token = self.tokens.token(again.sequence)  # never delivered: its own token
            self.handed_examples[message.trainer] += again.batch.batch_size
            handouts.hand(message.worker, again._replace(sequence=None))
            return HandedBatch(again.batch, token, False, again.number, incarnation)
        if self.paused and not self.exhausted:
            return HandedBatch(None, paused=True, reader_incarnation=incarnation)
        token = None
        if message.with_token and self.tokens is not None:
            token = self.tokens.token(self.stream.sequence())
        number = self.stream.batches_handed
        batch = self._next(message.trainer)
        if batch is None:
            if self.handed_at_stop is None:
                self.handed_at_stop = self.total_examples
            self.out.add(message.worker)
            return HandedBatch(None, reader_incarnation=incarnation)
        handouts.hand(message.worker, Handed(number, batch))
        return HandedBatch(batch, token, False, number, incarnation)

    def requeue(self, message: Requeue) -> Requeued:
        t = message.trainer
        self.out -= set(message.workers)
        self.barrier.unpark(message.workers)
        return self.handouts.requeue(t, message.workers, self.handed_examples[t])

    def _next(self, trainer: int) -> Batch | None:
        """The stream's next batch, handed to `trainer` (None: none is left)."""
        batch = self.stream.draw()
        if batch is not None:
            self.handed_batches[trainer] += 1
            self.handed_examples[trainer] += batch.batch_size
        return batch

    def pause(self, message: PauseReading) -> int | None:
        stream = self.stream
        return self.barrier.pause(message.until, stream.batches_handed, stream.steps_split)

    def park(self, message: Park) -> None:
        self.barrier.park(message.worker, self.paused, replaced=self.incarnation > 0)

    def cut(self, message: AwaitCut) -> int | None:
        return self.stream.position if self.at_cut else None

    def worker_left(self) -> None:
        """A worker loop ended without being told the data is consumed (it crashed)."""
        self.left += 1

    def resume(self, message: ResumeReading) -> None:
        self.barrier.resume()

    def stop(self, message: StopReading) -> int:
        self.stopped = True
        return self.stream.stop()

    def progress(self, message: ReaderProgress) -> tuple[int, int | None, int]:
        """(units of its share consumed: examples, or slots under line shares; examples
        the job's stream holds, its readers' all, if known; examples it handed out)."""
        stream = self.stream
        return stream.position, stream.total(), stream.total_examples

    def held_out_sample(self, message: HeldOutSample) -> Batch | None:
        return mark_test_set(self.stream.source.test_set(), message.examples)

    def helper_cpu_seconds(self) -> float:
        """What its background producer spent making the stream (0.0 reading inline)."""
        return self.stream.helper_cpu_seconds()

    def close(self) -> None:
        self.stream.close()

    def report(self) -> ReaderReport:
        stream, source = self.stream, self.stream.source
        return ReaderReport(
            list(self.handed_examples),
            stream.total_examples,
            self.handed_at_stop,
            source.test_set(),
            source.teacher_auc,
            source.skips.as_dict(),
            self.stopped,
            list(self.handouts.requeued),
            list(self.handouts.previous),
            stream.position,
            stream.storage_retries(),
        )
