"""Which batches each worker holds, so that a lost trainer's are handed out again, once.

Every request for a batch says how many of the worker's batches have had their pushes
sent (`pushed`, counted by the worker since its trainer started); the reader drops those
from what the worker holds (and notes their numbers as trained by it). When a trainer is
lost, the batches its workers still held go to the front of the stream (handed out to
whoever asks next, before any new batch), and requests of the lost incarnation that come
after are answered with nothing. A held batch whose pushes had partly left before the loss
is trained twice: the summary counts every batch handed out again as replayed.

Accounting, per trainer: every example handed to it was trained by its current
incarnation, trained by a lost one (`previous`), or handed out again (`requeued`).

A batch keeps its number (its reader's count of batches drawn when it was drawn) wherever
it goes, so that a lost reader's replacement knows which batches went where
(coordinator/reader_replay.py rebuilds these from what the workers took).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from recsync.data.batch import Batch
from recsync.protocol.reading import Requeued


class Handed(NamedTuple):
    """A batch with its number; `sequence`: for a batch a lost reader had drawn but never
    delivered, the sequence its GBA token is of (None: handed out again without one)."""

    number: int
    batch: Batch
    sequence: int | None = None


class Handouts:
    """The batches each worker holds, the batches to hand out again, and per trainer its
    incarnation and the examples its lost incarnations trained or gave back."""

    def __init__(self, num_trainers: int):
        self.held: dict[int, deque[Handed]] = {}
        self.pushed: dict[int, int] = {}  # per worker: batches dropped from `held`
        self.trained: dict[int, list[int]] = {}  # per worker: the numbers of those batches
        self.again: deque[Handed] = deque()
        self.incarnation = [0] * num_trainers
        self.requeued = [0] * num_trainers  # examples handed out again
        self.previous = [0] * num_trainers  # examples trained by lost incarnations
        self._since = [0] * num_trainers  # examples handed to it when it last restarted

    def current(self, trainer: int, incarnation: int) -> bool:
        """A request from the trainer's current incarnation (not a lost one's)."""
        return incarnation == self.incarnation[trainer]

    def acknowledge(self, worker: int, pushed: int) -> None:
        """`worker` has sent the pushes of its first `pushed` batches."""
        if worker < 0:
            return
        held = self.held.setdefault(worker, deque())
        trained = self.trained.setdefault(worker, [])
        done = self.pushed.get(worker, 0)
        while done < pushed and held:
            trained.append(held.popleft().number)
            done += 1
        self.pushed[worker] = done

    def hand(self, worker: int, handed: Handed) -> None:
        if worker >= 0:
            self.held.setdefault(worker, deque()).append(handed)

    def take_again(self) -> Handed | None:
        """The next batch to hand out again (None: none)."""
        return self.again.popleft() if self.again else None

    def restarted(self, trainer: int, since: int) -> None:
        """Trainer `trainer`'s current incarnation began once `since` examples had been
        handed to it (a replacement reader's count, rebuilt)."""
        self._since[trainer] = since

    def requeue(self, trainer: int, workers: range, handed: int) -> Requeued:
        """Trainer `trainer` (its `workers`, `handed` examples handed to it so far) was
        lost: what they held is handed out again; returns its examples, and the numbers of
        the batches the lost incarnation trained."""
        requeued, trained = 0, []
        for worker in workers:
            for held in self.held.pop(worker, deque()):
                self.again.append(held)
                requeued += held.batch.batch_size
            trained += self.trained.pop(worker, [])
            self.pushed[worker] = 0
        self.requeued[trainer] += requeued
        self.previous[trainer] += handed - self._since[trainer] - requeued
        self._since[trainer] = handed
        self.incarnation[trainer] += 1
        return Requeued(requeued, trained)
