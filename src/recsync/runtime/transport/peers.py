"""Where a node's loops reach the nodes they call: each node's channel endpoint, replaced
when a lost node restarts elsewhere.

Every endpoint has an incarnation (how many times its node was replaced). A call remembers
the incarnation it went to; if that node is gone and is one the job replaces
(`replaceable`), the caller waits for a newer incarnation and sends the call again."""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

from recsync.protocol.address import Address, Role
from recsync.protocol.messages import Message
from recsync.runtime.timeouts import CallWaits
from recsync.runtime.transport.channel import Endpoint, Ticket

POLL_S = 0.05  # how often a caller waiting for a replacement looks for it


class Sent(NamedTuple):
    """A call on its way: its reply's ticket, to whom, what, and the incarnation it went to."""

    ticket: Ticket
    target: Address
    message: Message
    incarnation: int


class Peers:
    """The endpoints of the nodes a node calls."""

    def __init__(
        self,
        endpoints: dict[Address, Endpoint],
        replaceable: frozenset[Role] = frozenset(),
        waits: CallWaits = CallWaits(),
    ):
        self.endpoints = dict(endpoints)
        self.replaceable = replaceable
        self.waits = waits
        self.incarnation: dict[Address, int] = dict.fromkeys(endpoints, 0)
        self._lock = threading.Lock()

    def __getitem__(self, address: Address) -> tuple[Endpoint, int]:
        with self._lock:
            return self.endpoints[address], self.incarnation[address]

    def replace(self, address: Address, endpoint: Endpoint) -> None:
        """`address` runs in a new actor now, reached at `endpoint`."""
        with self._lock:
            self.endpoints[address] = endpoint
            self.incarnation[address] += 1

    def successor(self, sent: Sent) -> tuple[Endpoint, int] | None:
        """The endpoint (and incarnation) of the actor that replaced the one `sent` went to,
        once there is one; None if none came within `waits.replace_s`."""
        deadline = time.perf_counter() + self.waits.replace_s
        while time.perf_counter() < deadline:
            endpoint, incarnation = self[sent.target]
            if incarnation > sent.incarnation:
                return endpoint, incarnation
            time.sleep(POLL_S)
        return None
