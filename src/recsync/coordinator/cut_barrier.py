"""A reader's side of a cut (a checkpoint while training goes on): after the supervisor's
pause the reader hands out batches up to the end of the global step under way (a step is
never cut in two), then answers every request with a pause; each worker loop then lands its
pushes and parks. The cut is taken once every worker that still has data parked (the
job's state then holds exactly the batches handed out); resuming lets the parked workers go
on.

With several readers each pauses before the same global step: its own count of batches
over `step_share` (its workers' part of a step); a reader behind the others is told the
step the cut falls at (`pause(until)`) and lets its parked workers go on until there."""

from __future__ import annotations


class CutBarrier:
    """The cut under way at one reader (`pausing`), the step it pauses before
    (`pause_step`, several readers) and the workers parked for it."""

    def __init__(self, batches_per_step: int, step_share: int, shared: bool):
        self.batches_per_step, self.step_share, self.shared = batches_per_step, step_share, shared
        self.pausing = False  # a cut was asked for
        self.pause_step = 0  # several readers: the global step it pauses before
        self.parked: set[int] = set()

    def paused(self, batches_handed: int, exhausted: bool) -> bool:
        """A cut is under way and the step in progress was handed out in full (or the data
        ran out)."""
        if not self.shared:
            boundary = batches_handed % self.batches_per_step == 0
        else:
            boundary = batches_handed >= self.pause_step * self.step_share
        return self.pausing and (boundary or exhausted)

    def pause(self, until: int | None, batches_handed: int, steps_split: bool) -> int | None:
        """Begin the cut; several readers: the step it pauses before (`until`: the one the
        others pause before, if later than its own)."""
        self.pausing = True
        if not self.shared or self.batches_per_step == 1:
            return None
        assert steps_split, "a cut of readers whose steps do not split evenly"
        if until is None:
            self.pause_step = -(-batches_handed // self.step_share)
        elif until > self.pause_step:  # behind the others: its parked workers go on
            self.pause_step = until
            self.parked.clear()
        return self.pause_step

    def park(self, worker: int, paused: bool, replaced: bool) -> None:
        """Worker `worker` parked (`replaced`: the reader replaces a lost one)."""
        if (self.shared or replaced) and not paused:
            # parked before the cut's step moved on (`pause` with `until`), or for a cut a
            # lost predecessor was taking (abandoned): the worker asks again and goes on
            return
        assert paused, f"worker {worker} parked with no cut under way"
        self.parked.add(worker)

    def unpark(self, workers: range) -> None:
        """The loops of `workers` were lost: a park of theirs stands no more (their next
        incarnation lands its own pushes and parks again before the cut is taken)."""
        self.parked -= set(workers)

    def resume(self) -> None:
        self.pausing = False
        self.parked.clear()
