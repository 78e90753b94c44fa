"""A trainer's coordination in virtual time: waiting for iterations and fixed-rate syncs."""

from __future__ import annotations

from recsync.runtime.sim.clock import Callback, Clock
from recsync.trainer import effects as fx
from recsync.trainer.node import TrainerNode


class TrainerState:
    """Who waits behind AwaitIterations, RequestSync and AwaitSyncRequest, released by
    progress, SyncRoundDone and finishing workers."""

    def __init__(self, clock: Clock, trainer: TrainerNode):
        self.clock = clock
        self.trainer = trainer
        self.requested = 0
        self.served = 0
        self.covering = 0
        self.request_waiters: list[tuple[int, Callback]] = []
        self.iteration_waiters: list[tuple[int, Callback]] = []
        self.sync_loop_waiting: Callback | None = None

    def progress(self) -> None:
        """A worker finished an iteration (or all did): wake who waits for iterations."""
        if not self.iteration_waiters:
            return
        done = self.trainer.stats.total_iterations
        finished = self.trainer.workers_finished
        keep = []
        for total, resume in self.iteration_waiters:
            if done >= total or finished:
                self.clock.soon(resume)
            else:
                keep.append((total, resume))
        self.iteration_waiters = keep

    def worker_finished(self) -> None:
        self.progress()
        self._wake_sync_loop()

    def _wake_sync_loop(self) -> None:
        if self.sync_loop_waiting is not None:
            resume, self.sync_loop_waiting = self.sync_loop_waiting, None
            self.clock.soon(self._await_request, resume)

    def handle(self, effect, resume: Callback) -> None:
        trainer = self.trainer
        if isinstance(effect, fx.AwaitIterations):
            if trainer.stats.total_iterations < effect.total and not trainer.workers_finished:
                self.iteration_waiters.append((effect.total, resume))
            else:
                resume(None)
        elif isinstance(effect, fx.RequestSync):
            self.requested += 1
            self.request_waiters.append((self.requested, resume))
            self._wake_sync_loop()
        elif isinstance(effect, fx.AwaitSyncRequest):
            self._await_request(resume)
        else:
            assert isinstance(effect, fx.SyncRoundDone), effect
            self.served = self.covering
            keep = []
            for seq, waiter in self.request_waiters:
                if seq <= self.served:
                    self.clock.soon(waiter)
                else:
                    keep.append((seq, waiter))
            self.request_waiters = keep
            resume(None)

    def _await_request(self, resume: Callback) -> None:
        if self.requested == self.served and not self.trainer.workers_finished:
            self.sync_loop_waiting = resume
            return
        self.covering = self.requested
        resume(None)
