"""The actors a node's loops call, by node: replaced when a lost node restarts elsewhere.

Every handle has an incarnation (how many times its node was replaced). A call remembers
the incarnation it went to; if that actor is gone and its node is one the job replaces
(`replaceable`), the caller waits for a newer incarnation and sends the call again."""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

from recsync.protocol.address import Address, Role
from recsync.protocol.messages import Message
from recsync.runtime.ray.errors import NodeFailure

REPLACE_WAIT_S = 300.0  # the longest a caller waits for a lost node's replacement
POLL_S = 0.05


class Sent(NamedTuple):
    """A call on its way: its reply's ref, to whom, what, and the incarnation it went to."""

    ref: Any
    target: Address
    message: Message
    incarnation: int


class Peers:
    """The handles of the nodes a node calls."""

    def __init__(self, handles: dict[Address, Any], replaceable: frozenset[Role] = frozenset()):
        self.handles = dict(handles)
        self.replaceable = replaceable
        self.incarnation: dict[Address, int] = dict.fromkeys(handles, 0)
        self._lock = threading.Lock()

    def __getitem__(self, address: Address) -> tuple[Any, int]:
        with self._lock:
            return self.handles[address], self.incarnation[address]

    def replace(self, address: Address, handle: Any) -> None:
        """`address` runs in a new actor now."""
        with self._lock:
            self.handles[address] = handle
            self.incarnation[address] += 1

    def successor(self, sent: Sent, name: str) -> tuple[Any, int]:
        """The actor that replaced the one `sent` went to (waits for it)."""
        deadline = time.perf_counter() + REPLACE_WAIT_S
        while time.perf_counter() < deadline:
            handle, incarnation = self[sent.target]
            if incarnation > sent.incarnation:
                return handle, incarnation
            time.sleep(POLL_S)
        raise NodeFailure(
            f"{name}: {sent.target} was lost and not replaced within {REPLACE_WAIT_S:.0f} s",
            lost=sent.target.name,
        )
