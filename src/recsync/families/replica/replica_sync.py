"""How a replica trainer syncs its replica, one class per kind of replica strategy: never
(`independent`), through sync servers (`CenterStrategy`: EASGD) or through an all-reduce
(`CollectiveStrategy`: MA, BMUF); each in its strategy's timing. The rounds themselves are
the strategies' (easgd.py, families/synced_replicas/strategy.py); here is when they
run and on which thread.

Timing (ShadowSync): `shadow` runs rounds on a background thread as fast as the workers
allow (a round waits for `shadow_min_gap` new iterations per worker thread); `fixed` makes
worker threads sync in the foreground every k of their iterations or every P seconds.
Channels the trainer's loops await and notify: PROGRESS (iterations done), REQUESTS (a
worker asked for a collective sync), SERVED (a collective round completed).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any, Protocol

from recsync.families.replica.sync_requests import SyncRequests
from recsync.families.synced_replicas.strategy import (
    CenterStrategy,
    CollectiveStrategy,
    ReplicaStrategy,
)
from recsync.protocol.effects import Await, Effect, Loop, Notify
from recsync.strategy.timing import FixedTrigger
from recsync.trainer.replica import DenseReplica
from recsync.trainer.stats import TrainerStats, Wiring

PROGRESS, REQUESTS, SERVED = "progress", "sync-requests", "sync-served"


class ReplicaTrainer(Protocol):
    """What a sync needs of its trainer (replica_trainer.py)."""

    num_trainers: int
    num_workers: int
    strategy: ReplicaStrategy
    wiring: Wiring
    replica: DenseReplica
    stats: TrainerStats

    @property
    def workers_finished(self) -> bool: ...


class NoSync:
    """`independent`: the replicas are never synced."""

    def __init__(self, trainer: ReplicaTrainer) -> None:
        self.trainer = trainer
        timing = trainer.strategy.timing
        self.fixed = timing.mode == "fixed"
        # every P seconds is a per-trainer rate: one trigger shared by the worker threads
        self._shared = FixedTrigger(timing) if timing.every_seconds is not None else None

    def trigger(self) -> FixedTrigger | None:
        """The fixed-rate trigger a worker thread consults after each iteration."""
        if not self.fixed:
            return None
        return self._shared or FixedTrigger(self.trainer.strategy.timing)

    def foreground(self, worker: int) -> Generator[Effect, Any, None]:
        """Worker `worker`'s fixed-rate sync (none: an empty generator)."""
        yield from ()

    def loop(self) -> Loop | None:
        """The shadow thread's loop, if the trainer has one."""
        return None

    def _pace(self) -> int:
        """New iterations (all threads) a shadow round waits for after the previous one."""
        return math.ceil(self.trainer.strategy.timing.shadow_min_gap * self.trainer.num_workers)

    def _await_iterations(self, target: int) -> Await:
        stats, trainer = self.trainer.stats, self.trainer
        return Await(
            PROGRESS,
            lambda: stats.total_iterations >= target or trainer.workers_finished,
            "AwaitIterations",
        )


class CenterSync(NoSync):
    """EASGD: a round exchanges every slice of the replica with its sync server."""

    def __init__(self, trainer: ReplicaTrainer) -> None:
        super().__init__(trainer)
        strategy = trainer.strategy
        assert isinstance(strategy, CenterStrategy)
        if not trainer.wiring.dense:
            raise ValueError(f"{strategy.describe()} needs at least one sync server")
        self.strategy = strategy
        self.policy = strategy.make_replica(trainer.replica.flat.clone())

    def _round(self, row: int) -> Generator[Effect, Any, None]:
        """One round, counted in stats row `row` (the worker's, or the trainer's own)."""
        trainer = self.trainer
        wiring, replica = trainer.wiring, trainer.replica
        yield from self.strategy.round(
            self.policy, replica.flat, replica.writer, wiring.dense, wiring.dense_ranges
        )
        trainer.stats.count_sync(row)

    def foreground(self, worker: int) -> Generator[Effect, Any, None]:
        yield from self._round(worker)

    def loop(self) -> Loop | None:
        return None if self.fixed else self._shadow()

    def _shadow(self) -> Loop:
        trainer, pace = self.trainer, self._pace()
        while not trainer.workers_finished:
            target = trainer.stats.total_iterations + pace
            yield from self._round(trainer.stats.own_row)
            if pace:
                yield self._await_iterations(target)


class CollectiveSync(NoSync):
    """MA, BMUF: a round all-reduces the replicas. One thread per trainer joins the rounds
    (the shadow thread), and keeps joining after its workers finished until every
    trainer's have; with fixed timing it serves the worker threads' requests."""

    def __init__(self, trainer: ReplicaTrainer) -> None:
        super().__init__(trainer)
        strategy = trainer.strategy
        assert isinstance(strategy, CollectiveStrategy)
        self.strategy = strategy
        self.policy = strategy.make_replica(trainer.replica.flat.clone())
        self.requests = SyncRequests()

    def foreground(self, worker: int) -> Generator[Effect, Any, None]:
        requests = self.requests
        ticket = requests.request()
        yield Notify(REQUESTS)
        yield Await(SERVED, lambda: requests.is_served(ticket), "AwaitSync")

    def loop(self) -> Loop | None:
        return self._rounds()

    def _rounds(self) -> Loop:
        trainer, requests, pace = self.trainer, self.requests, self._pace()
        replica = trainer.replica
        while True:
            target = trainer.stats.total_iterations + pace
            if self.fixed:
                while not requests.pending and not trainer.workers_finished:
                    yield Await(REQUESTS, None, "AwaitSyncRequest")
                requests.start_round()
            num_done = yield from self.strategy.round(
                self.policy, replica.flat, replica.writer, trainer.workers_finished
            )
            trainer.stats.count_sync(trainer.stats.own_row)
            if self.fixed:
                requests.end_round()
                yield Notify(SERVED)
            if num_done == trainer.num_trainers:
                return
            if pace and not self.fixed and not trainer.workers_finished:
                yield self._await_iterations(target)


def process_refusal(strategy: ReplicaStrategy) -> str | None:
    """Why the strategy's workers cannot run in processes of their own (None: they can).
    State a fixed timing shares between a trainer's workers lives in one process: the
    per-trainer clock of `every_seconds`, and the requests a collective round serves."""
    timing = strategy.timing
    if timing.mode != "fixed":
        return None
    if timing.every_seconds is not None:
        return "a fixed sync every P seconds is timed per trainer, across its workers"
    if isinstance(strategy, CollectiveStrategy):
        return "a fixed-rate collective sync serves its workers' requests in one process"
    return None


def replica_sync(trainer: ReplicaTrainer) -> NoSync:
    """The sync of the trainer's strategy type (the most specific registered type)."""
    strategy: ReplicaStrategy = trainer.strategy
    for kind in type(strategy).__mro__:
        sync = SYNCS.get(kind)
        if sync is not None:
            return sync(trainer)
    raise AssertionError(f"no replica sync for {type(strategy).__name__}")


SYNCS: dict[type, type[NoSync]] = {
    CenterStrategy: CenterSync,
    CollectiveStrategy: CollectiveSync,
    ReplicaStrategy: NoSync,
}
