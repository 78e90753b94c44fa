"""Effects: what a node's loop asks its driver to do, and what it gets back.

A loop (a worker thread's steps, a shadow thread's syncs) is a generator that yields
effects and receives their results. The simulator turns an effect into timed events in
virtual time, the Ray engine into real calls on real threads; a driver that meets an effect
it does not know raises `UnhandledEffect`. Every effect has a `label`, its name in the
measures (time blocked, calls made).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from recsync.protocol.address import Address
from recsync.protocol.messages import Message

Target = tuple[Address, Message]


class UnhandledEffect(TypeError):
    """A driver was given an effect (or a node a message) it has no handler for."""


@dataclass(slots=True, frozen=True)
class Quorum:
    """When a group of calls may go on without all its replies: once `need` of them
    arrived and `wait_s` seconds passed since the calls were made (or once all arrived)."""

    need: int
    wait_s: float


@dataclass(slots=True, eq=False)
class Call:
    """-> the reply of `target` to `message`."""

    target: Address
    message: Message

    @property
    def label(self) -> str:
        return self.message.awaited


@dataclass(slots=True, eq=False)
class CallEach:
    """-> the replies to concurrent calls, in order; with a `quorum`, None for a reply that
    had not arrived when the quorum let the caller go on."""

    calls: Sequence[Target]
    quorum: Quorum | None = None

    @property
    def label(self) -> str:
        return self.calls[0][1].awaited


@dataclass(slots=True, eq=False)
class Send:
    """-> None once the messages left (fire and forget), counted as in flight for `sender`
    until their servers handled them; and, where more than SENDS_IN_FLIGHT sends' worth of
    them are in flight (a slow link or server), once no more than that are (both drivers:
    the sender is held back as a TCP sender is by a full buffer)."""

    sender: int
    calls: Sequence[Target]

    @property
    def label(self) -> str:
        return self.calls[0][1].kind


SENDS_IN_FLIGHT = 2  # a sender's Sends whose messages may be in flight at once, at most


@dataclass(slots=True, eq=False)
class Drain:
    """-> None once every message `sender` sent was handled by its server."""

    sender: int
    label: str = "Drain"


@dataclass(slots=True, eq=False)
class Compute:
    """-> None. The dense forward/backward of `examples` examples took place (costs time):
    `flops` of math (None: the whole dense part's, per example). `applies`: the step also
    applied the dense optimizer to the worker's own replica (False: a worker that pushes its
    dense gradient to servers instead, which apply it)."""

    examples: int
    flops: float | None = None
    applies: bool = True
    label: str = "Compute"


@dataclass(slots=True, eq=False)
class AllReduce:
    """-> (mean of `values` over the node's collective group, number of members whose
    work is `done`)."""

    values: torch.Tensor
    done: bool
    label: str = "AllReduce"


@dataclass(slots=True, eq=False)
class Now:
    """-> seconds since the job started (virtual or wall clock)."""

    label: str = "Now"


@dataclass(slots=True, eq=False)
class Await:
    """-> None once `until()` holds: checked at once, at every Notify of `channel` on
    this node, and after every message that changed (`mutates`) the node. With `until`
    None: at the next Notify of `channel` (the loop re-checks what it waits for when it
    resumes)."""

    channel: str
    until: Callable[[], bool] | None = None
    label: str = "Await"


@dataclass(slots=True, eq=False)
class Notify:
    """-> None at once. Wakes this node's loops that await `channel`."""

    channel: str
    label: str = "Notify"


Effect = Call | CallEach | Send | Drain | Compute | AllReduce | Now | Await | Notify
Loop = Generator[Effect, Any, None]
