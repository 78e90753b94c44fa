"""A node hosted in virtual time: the node as every driver hosts it (coordinator/hosting.py),
the simulated machine it runs on (a NIC and CPU slots), and its loops' waits on its
channels."""

from __future__ import annotations

from collections.abc import Callable

from recsync.coordinator.hosting import HostedNode
from recsync.protocol.address import Address
from recsync.protocol.node import Node
from recsync.runtime.sim.clock import Callback
from recsync.runtime.sim.network import Machine

Waiter = tuple[Callable[[], bool] | None, Callback]


class SimHost(HostedNode):
    """One node of a simulated job."""

    __slots__ = ("address", "machine", "waiters", "down_until")

    def __init__(self, address: Address, node: Node, machine: Machine):
        super().__init__(node)
        self.address = address
        self.machine = machine
        self.waiters: dict[str, list[Waiter]] = {}
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
