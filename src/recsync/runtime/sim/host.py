"""A node hosted in virtual time: the node itself, the simulated machine it runs on (a NIC
and CPU slots), what the driver measures of it, and its loops' waits on its channels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recsync.coordinator.outcome import NodeMeasures
from recsync.protocol.address import Address
from recsync.protocol.messages import Message
from recsync.protocol.node import Node
from recsync.runtime.sim.clock import Callback
from recsync.runtime.sim.network import Machine

Waiter = tuple[Callable[[], bool] | None, Callback]
Observer = Callable[[Message, Any], None]


class SimHost:
    """One node of a simulated job."""

    __slots__ = (
        "address",
        "node",
        "machine",
        "measures",
        "defers",
        "arms_timers",
        "waiters",
        "observer",
        "slowdown_at",
        "down_until",
    )

    def __init__(self, address: Address, node: Node, machine: Machine):
        self.address = address
        self.node = node
        self.machine = machine
        self.measures = NodeMeasures()
        self.defers = type(node).defers
        self.arms_timers = type(node).arms_timers
        self.waiters: dict[str, list[Waiter]] = {}
        self.observer: Observer | None = None  # told of every message the node answered
        self.slowdown_at: Callable[[float], float] | None = None  # a slowed node's factor
        self.down_until = 0.0  # a lost node being replaced: messages wait until then

    def wake(self, soon: Callable[[Callback], None]) -> None:
        """A message changed the node: resume (through `soon`) every loop whose Await
        condition now holds."""
        for channel, waiters in self.waiters.items():
            keep: list[Waiter] = []
            for until, resume in waiters:
                if until is not None and until():
                    soon(resume)
                else:
                    keep.append((until, resume))
            self.waiters[channel] = keep
