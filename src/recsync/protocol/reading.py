"""The messages of the reader: batches asked for and handed out (with what a worker holds
and its trainer's incarnation), progress, and a job's stop and cuts (pause, park, await,
resume) and a lost trainer's batches given back; and what a trainer's workers took from a
lost reader, for its replacement (coordinator/reader_replay.py). Their bytes are counted as
every message's (`messages.wire_bytes`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.data.batch import Batch
from recsync.protocol.messages import Message, Work


@dataclass(slots=True, eq=False)
class NextBatch(Message):
    """-> HandedBatch: the reader's next batch for `trainer` (None once the data is
    consumed); with `with_token`, its GBA token, and never sent ahead of time (the token
    belongs to the batch handed at the request). `worker`: the job-wide worker asking (-1:
    untracked), `pushed`: how many of its batches' pushes it has sent since its trainer
    started, `incarnation`: its trainer's restarts (a lost trainer's batches are handed out
    again, coordinator/handouts.py). `parked`: the worker that stopped for a cut (it sent
    `Park`): answered once that cut ended."""

    trainer: int
    with_token: bool = False
    worker: int = -1
    pushed: int = 0
    incarnation: int = 0
    parked: int | None = None
    kind: ClassVar[str] = "NextBatch"
    may_wait: ClassVar[bool] = True  # a parked worker's request waits for the cut's end

    @property
    def prefetchable(self) -> bool:  # type: ignore[override]
        return not self.with_token and self.parked is None

    def work(self) -> Work:
        return Work(requests=0, batches=1)


@dataclass(slots=True, eq=False)
class HandedBatch:
    """A batch handed out by the reader (None: no more data) and its GBA token; or, with
    `paused`, none for now: the job is being cut (checkpointed), the worker parks.
    `number`: the batch's number in its reader's hand-out order (the reader's count of
    batches drawn from its share in this job start; a batch handed out again keeps its
    number; -1: no batch); `reader_incarnation`: how many times the reader that answered
    had been replaced (a worker drops a reply of a lost one that came after its
    replacement was planned, `CloseReceipts`)."""

    batch: Batch | None
    token: int | None = None
    paused: bool = False
    number: int = -1
    reader_incarnation: int = 0

    @property
    def last(self) -> bool:
        """No batch: the data is consumed, or a cut began (nothing to ask ahead for)."""
        return self.batch is None


@dataclass(slots=True, eq=False)
class Park(Message):
    """-> None. A worker told the reader is paused has sent every push of the batches it
    was handed and landed them: it holds nothing the job's state lacks."""

    worker: int
    kind: ClassVar[str] = "Park"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class Requeue(Message):
    """-> Requeued: trainer `trainer` (its `workers`) was lost and restarts as its next
    incarnation; what its workers held goes back to the front of the stream."""

    trainer: int
    workers: range
    kind: ClassVar[str] = "Requeue"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class Requeued:
    """A lost trainer's batches: the examples its workers held, handed out again, and the
    numbers of the batches its lost incarnation trained (their pushes had left), which the
    driver keeps: a replacement of the reader must not hand them out again."""

    examples: int
    trained: list[int]


@dataclass(slots=True, eq=False)
class CloseReceipts(Message):
    """-> Receipts. Asked of a trainer (every process of it) whose reader was lost and is
    replaced as incarnation `fence`: what its workers took from their reader so far. A
    reply of an earlier incarnation that a worker takes after this is void: it is not
    trained, the worker asks again and the replacement hands that batch out."""

    fence: int
    kind: ClassVar[str] = "CloseReceipts"
    control: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class Receipts:
    """What a trainer's workers (by job-wide index) took from their reader and did not
    drop: the numbers of the batches each took, in order (`received`), those told the data
    is consumed (`dry`), and how many of each one's batches' pushes left (`pushed`). A
    process of a trainer whose workers run in processes of their own knows its own
    workers' batches only: the driver joins every process's (`joined`)."""

    received: dict[int, list[int]]
    dry: list[int]
    pushed: dict[int, int]

    def joined(self, other: Receipts) -> Receipts:
        """These and another process's of the same trainer: each worker's batches from the
        process that ran it (the one that took any)."""
        received = dict(self.received)
        for worker, numbers in other.received.items():
            if len(numbers) > len(received.get(worker, [])):
                received[worker] = numbers
        dry = sorted(set(self.dry) | set(other.dry))
        workers = self.pushed.keys() | other.pushed.keys()
        pushed = {w: max(self.pushed.get(w, 0), other.pushed.get(w, 0)) for w in workers}
        return Receipts(received, dry, pushed)


@dataclass(slots=True, eq=False)
class PauseReading(Message):
    """-> the step it pauses at (None: one reader, or steps of one batch). Begin a cut: the
    reader stops handing out batches at the next boundary of a global step (the strategy's
    `batches_per_step`), and workers park as they come. Several readers each answer the
    global step they pause before (each counts the steps of its own share); the driver
    then sends every reader the latest as `until`: each hands out its batches of every
    step before it, so the cut falls between the same two steps for all
    (coordinator/readers.py)."""

    until: int | None = None
    kind: ClassVar[str] = "PauseReading"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class AwaitCut(Message):
    """-> examples handed out: answered once every worker with data parked (the job's
    state then holds exactly the batches handed out: a consistent cut); None if the data
    ran out first (no cut: the end is checkpointed)."""

    kind: ClassVar[str] = "AwaitCut"
    control: ClassVar[bool] = True
    may_wait: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class ResumeReading(Message):
    """-> None. End a cut: the reader hands out batches again (parked workers go on)."""

    kind: ClassVar[str] = "ResumeReading"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class ReaderProgress(Message):
    """-> (units of the stream consumed: its position, examples in the stream or None,
    examples handed out). Polled by a progress bar; the position is in the stream's units
    (examples, or slots where readers share files by blocks: a byte block's slots are its
    bytes), the progress, evaluations and cuts count examples."""

    kind: ClassVar[str] = "ReaderProgress"
    control: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class HeldOutSample(Message):
    """-> the held-out examples an evaluation in the middle of a run scores: `examples` of
    the set spread evenly over it (0: all), or None while there is no set of both classes
    (data/held_out.py, `mark_test_set`). Asked by the driver at each mark, so
    that only the sample crosses to the evaluator."""

    examples: int
    kind: ClassVar[str] = "HeldOutSample"
    control: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class StopReading(Message):
    """-> examples handed out: the reader hands out no more batches; the job then ends as at
    a data limit (the batches in flight finish, the end state is a checkpoint). Sent by the
    driver when the run is interrupted."""

    kind: ClassVar[str] = "StopReading"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True
