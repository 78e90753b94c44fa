"""A lost reader replaced alone, while its trainers and the servers go on.

The lost reader's own state (which batch went to whom, what each worker still holds) is
gone with it; what survives is what its trainers' workers took (trainer/receipts.py: each
batch's number, in its reader's hand-out order) and what the driver kept of the trainers
restarted before (`ReaderLedger`: the numbers of the batches their lost incarnations
trained). The replacement is the lost reader's own spec, which reads its share from where
it started in this job start, and replays it up to the last batch anyone took, batch by
batch (`replay`):

- a batch a worker took is counted as handed to that worker's trainer, not handed again;
  if the worker had not pushed it yet, it is the worker's again (`Handouts.held`), so that
  a later restart of its trainer still hands it out again;
- a batch a lost incarnation of a trainer trained is counted as that trainer's (`previous`);
- any other batch the lost reader had drawn (a reply lost on its way, one a worker dropped
  as void, one a lost trainer gave back and nobody took yet) was never trained: it is
  handed out first, in order, with its own GBA token.

Then it goes on as any reader. Its counts (batches and examples handed, its position in
the stream, each trainer's examples) are those the lost reader would have had with every
batch handed once, so GBA's tokens, the cuts' positions and the summary's accounting go on
unchanged. A cut under way when the reader was lost is abandoned (coordinator/supervisor.py).
The replay reads the stream from the job's start again: its cost grows with the position.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain

from recsync.coordinator.handouts import Handed
from recsync.coordinator.reader import ReaderNode
from recsync.data.batch import Batch
from recsync.protocol.reading import Receipts, Requeued, StopReading


@dataclass(frozen=True)
class ReplayPlan:
    """What a lost reader's replacement starts from: its `incarnation`, the current
    incarnation of each of its trainers, each worker's trainer, the batches each worker
    took (numbers, in order) and how many of them it pushed, the workers told the data is
    consumed, the batches each trainer's lost incarnations trained, whether the job was
    told to stop reading, and (the simulator's crashed workers) the workers gone."""

    incarnation: int
    trainers: dict[int, int]
    trainer_of: dict[int, int]
    received: dict[int, list[int]]
    pushed: dict[int, int]
    dry: frozenset[int] = frozenset()
    retired: dict[int, list[int]] = field(default_factory=dict)
    stopped: bool = False
    left: int = 0


class ReaderLedger:
    """What a job's driver keeps of its readers for their replacement, for one job start
    (a rollback begins a new one): the numbers of the batches lost trainer incarnations
    trained, by reader and trainer, and each reader's incarnation."""

    def __init__(self) -> None:
        self.retired: dict[int, dict[int, list[int]]] = {}
        self.incarnation: dict[int, int] = {}

    def requeued(self, reader: int, trainer: int, reply: Requeued) -> int:
        """Reader `reader`'s answer to a lost trainer's `Requeue`: what its lost
        incarnation trained kept; returns the examples handed out again."""
        self.retired.setdefault(reader, {}).setdefault(trainer, []).extend(reply.trained)
        return reply.examples

    def next_incarnation(self, reader: int) -> int:
        """The incarnation of reader `reader`'s replacement (the fence of its trainers'
        receipts)."""
        return self.incarnation.get(reader, 0) + 1

    def plan(
        self,
        reader: int,
        receipts: Mapping[int, Receipts],
        incarnations: Mapping[int, int],
        stopped: bool,
        left: int = 0,
    ) -> ReplayPlan:
        """The replay of reader `reader`, replaced now: `receipts` of each of its trainers
        (joined over the trainer's processes), fenced at `next_incarnation`, and each
        trainer's current incarnation."""
        incarnation = self.incarnation[reader] = self.next_incarnation(reader)
        trainer_of = {w: t for t, r in receipts.items() for w in r.received}
        received = {w: n for r in receipts.values() for w, n in r.received.items()}
        pushed = {w: n for r in receipts.values() for w, n in r.pushed.items()}
        dry = frozenset(w for r in receipts.values() for w in r.dry)
        retired = {t: list(n) for t, n in self.retired.get(reader, {}).items()}
        return ReplayPlan(
            incarnation,
            dict(incarnations),
            trainer_of,
            received,
            pushed,
            dry,
            retired,
            stopped,
            left,
        )


def replay(reader: ReaderNode, plan: ReplayPlan) -> None:
    """Make `reader` (the lost reader's spec, just built: at the start of its share) its
    replacement, as `plan` says (module docstring)."""
    reader.incarnation = plan.incarnation
    handouts = reader.handouts
    owner: dict[int, int] = {}  # batch number -> the worker that took it
    for worker, numbers in plan.received.items():
        for number in numbers:
            assert number not in owner, f"batch {number} was taken by two workers"
            owner[number] = worker
    retired = {n: t for t, numbers in plan.retired.items() for n in numbers}
    assert not owner.keys() & retired.keys(), "a batch trained by a lost trainer was taken"
    unpushed = set()
    for worker, numbers in plan.received.items():
        assert plan.pushed.get(worker, 0) <= len(numbers), f"worker {worker} pushed more"
        unpushed.update(numbers[plan.pushed.get(worker, 0) :])
    kept: dict[int, Batch] = {}
    for number in range(1 + max(chain(owner, retired), default=-1)):
        sequence = reader.stream.sequence()
        batch = reader.stream.draw()
        assert batch is not None, f"the replayed stream ended before batch {number}"
        trainer = plan.trainer_of[owner[number]] if number in owner else retired.get(number)
        if trainer is None:  # drawn, never trained: handed out first
            handouts.again.append(Handed(number, batch, sequence))
            continue
        reader.handed_batches[trainer] += 1
        reader.handed_examples[trainer] += batch.batch_size
        if number in retired:
            handouts.previous[trainer] += batch.batch_size
        elif number in unpushed:
            kept[number] = batch
    for worker, numbers in plan.received.items():
        pushed = plan.pushed.get(worker, 0)
        handouts.trained[worker] = numbers[:pushed]
        handouts.held[worker] = deque(Handed(n, kept[n]) for n in numbers[pushed:])
        handouts.pushed[worker] = pushed
    for trainer, incarnation in plan.trainers.items():
        handouts.incarnation[trainer] = incarnation
        handouts.restarted(trainer, handouts.previous[trainer])
    reader.out, reader.left = set(plan.dry), plan.left
    if plan.stopped:
        reader.stop(StopReading())
    if reader.num_workers - len(reader.out) - reader.left <= 0 and not handouts.again:
        reader.stream.exhausted = True  # every worker was told the data is consumed
        reader.handed_at_stop = reader.total_examples
