"""A trainer's coordination in virtual time: waiting for iterations and fixed-rate syncs."""

from __future__ import annotations

import simpy

from recsync.trainer import effects as fx
from recsync.trainer.node import TrainerNode


class TrainerState:
    """SimPy events behind AwaitIterations, RequestSync, AwaitSyncRequest, SyncRoundDone."""

    def __init__(self, env: simpy.Environment, trainer: TrainerNode):
        self.env = env
        self.trainer = trainer
        self.requested = 0
        self.served = 0
        self.covering = 0
        self.request_waiters: list[tuple[int, simpy.Event]] = []
        self.iteration_waiters: list[tuple[int, simpy.Event]] = []
        self.sync_loop_waiting: simpy.Event | None = None

    def progress(self) -> None:
        """A worker finished an iteration (or all did): wake who waits for iterations."""
        done = self.trainer.stats.total_iterations
        finished = self.trainer.workers_finished
        keep = []
        for total, event in self.iteration_waiters:
            if done >= total or finished:
                event.succeed()
            else:
                keep.append((total, event))
        self.iteration_waiters = keep

    def worker_finished(self) -> None:
        self.progress()
        self._wake_sync_loop()

    def _wake_sync_loop(self) -> None:
        if self.sync_loop_waiting is not None and not self.sync_loop_waiting.triggered:
            self.sync_loop_waiting.succeed()

    def handle(self, effect):
        trainer = self.trainer
        if isinstance(effect, fx.AwaitIterations):
            if trainer.stats.total_iterations < effect.total and not trainer.workers_finished:
                event = self.env.event()
                self.iteration_waiters.append((effect.total, event))
                yield event
            return None
        if isinstance(effect, fx.RequestSync):
            self.requested += 1
            event = self.env.event()
            self.request_waiters.append((self.requested, event))
            self._wake_sync_loop()
            yield event
            return None
        if isinstance(effect, fx.AwaitSyncRequest):
            while self.requested == self.served and not trainer.workers_finished:
                self.sync_loop_waiting = self.env.event()
                yield self.sync_loop_waiting
            self.sync_loop_waiting = None
            self.covering = self.requested
            return None
        assert isinstance(effect, fx.SyncRoundDone), effect
        self.served = self.covering
        keep = []
        for seq, event in self.request_waiters:
            if seq <= self.served:
                event.succeed()
            else:
                keep.append((seq, event))
        self.request_waiters = keep
        return None
        yield  # a generator like every effect handler
