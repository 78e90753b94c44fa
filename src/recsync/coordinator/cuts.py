"""Checkpoints while a job trains, the same on both drivers: when one is due, and the job's
state at a cut.

A cut is a consistent snapshot taken without stopping the job's other loops: the driver
tells the reader to pause (it finishes handing out the global step in progress, then
answers every request with a pause), each worker lands the pushes of every batch it was
handed and parks, and once all are parked (`AwaitCut` answered) the nodes that hold the
model (and any state its family keeps) report it; then the reader goes on. The state then
holds exactly the batches handed out so far, so a job restarted from it hands out the
rest, none twice and none lost. A shadow sync thread keeps syncing meanwhile: the replicas
and the center only move towards each other, which changes no batch's count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.outcome import JobEnd, final_dense, model_state
from recsync.coordinator.readers import position_of
from recsync.coordinator.topology import Topology
from recsync.protocol.address import Address
from recsync.strategy.family import family_of
from recsync.strategy.roles import model_roles


@dataclass(frozen=True)
class CheckpointEvery:
    """Cut the running job every `examples` examples handed out and/or every `seconds` of
    training (0: never by that measure; both 0: only the end is checkpointed)."""

    examples: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.examples < 0 or self.seconds < 0:
            raise ValueError(
                f"checkpoint intervals must be >= 0, got {self.examples} examples, {self.seconds} s"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.examples or self.seconds)


class CutSchedule:
    """When the next cut is due: after `every.examples` more examples handed out or
    `every.seconds` more seconds, counted from the last cut."""

    def __init__(self, every: CheckpointEvery):
        self.every = every
        self.last_examples, self.last_seconds = 0, 0.0
        self.cuts = 0

    def due(self, handed: int, seconds: float) -> bool:
        every = self.every
        by_examples = every.examples and handed - self.last_examples >= every.examples
        by_seconds = every.seconds and seconds - self.last_seconds >= every.seconds
        return bool(by_examples or by_seconds)

    def taken(self, handed: int, seconds: float) -> None:
        self.last_examples, self.last_seconds = handed, seconds
        self.cuts += 1


def cut_nodes(topology: Topology) -> list[Address]:
    """The nodes whose reports a cut needs: those that hold the model, and those whose
    state the job's family keeps too (`Family.state_roles`)."""
    strategy = topology.spec.strategy
    roles = (*model_roles(), *family_of(strategy).state_roles(strategy))
    return [n.address for n in topology.nodes if n.address.role in roles]


def cut_state(topology: Topology, reports: dict[Address, Any], handed: Sequence[int]) -> JobState:
    """The job's state at a cut: the reports of `cut_nodes`, taken with every worker
    parked after reader r handed `handed[r]` examples."""
    now = JobEnd("cut", reports, {}, 0.0)
    position = position_of(topology, handed)
    return model_state(topology, now, final_dense(topology.spec, now), position, 0)
