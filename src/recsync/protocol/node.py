"""The one interface every node offers its driver: answer messages, run loops, report.

A driver hosts any node the same way: it delivers each message to `handle` (once `ready`
says the node can answer it; until then the request waits, and is re-checked whenever a
message that `mutates` the node was handled), arms the timers the node asks for, starts the
node's `loops`, and at the end collects its `report`. Nothing here knows a driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from recsync.protocol.effects import Loop, Target, UnhandledEffect
from recsync.protocol.messages import Message


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Call the node's `timer(timer_id)` after `seconds` (virtual or wall)."""

    timer_id: int
    seconds: float


@dataclass(slots=True)
class LoopSpec:
    """One of a node's loops: the generator, the worker it computes for (None: a loop that
    does no training math, such as a shadow sync thread), and whether it runs in the
    background (at a lower priority than the workers)."""

    loop: Loop
    worker: int | None
    background: bool = False


class Node:
    """Base of every node. Subclasses list the messages they answer in `handles` (message
    type -> method name); `handle` dispatches on the message's type."""

    handles: ClassVar[dict[type[Message], str]] = {}
    defers: ClassVar[bool] = False  # `ready` can say no: requests may wait
    arms_timers: ClassVar[bool] = False  # `take_timers` can give timers
    _methods: ClassVar[dict[type[Message], Callable[[Any, Any], Any]]] = {}
    name: str = "node"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {kind: getattr(cls, method) for kind, method in cls.handles.items()}

    def handle(self, message: Message) -> Any:
        """The reply to `message` (None for a message that gets none)."""
        method = self._methods.get(type(message))
        if method is None:
            raise UnhandledEffect(f"{self.name} cannot answer {type(message).__name__}")
        return method(self, message)

    def ready(self, message: Message) -> bool:
        """Whether `message` can be answered now (only nodes that `defers` say no)."""
        return True

    def take_timers(self) -> list[StartTimer]:
        """Timers the node asked for since the last call (armed by the driver; only nodes
        that `arms_timers` ask for any)."""
        return []

    def timer(self, timer_id: int) -> None:
        """A timer the node asked for fired."""
        raise AssertionError(f"{self.name} armed no timer")

    def loops(self) -> list[LoopSpec]:
        """The loops the driver runs for this node (none for a pure server)."""
        return []

    def leave(self, worker: int) -> Sequence[Target]:
        """What to tell others when `worker`, one of this node's, is gone for good."""
        return []

    def shared_tensors(self) -> dict[str, torch.Tensor]:
        """The state its loops share, by name, for a driver that runs its worker loops in
        processes of their own over shared memory (empty: its loops must share one
        process)."""
        return {}

    def share(self, tensors: dict[str, torch.Tensor]) -> None:
        """Keep the state `shared_tensors` names in `tensors` (same shapes and values)."""
        raise AssertionError(f"{self.name} shares no state")

    def helper_cpu_seconds(self) -> float:
        """CPU seconds the node's helper processes spent (the reader's batch producer),
        which a driver adds to the node's own."""
        return 0.0

    def close(self) -> None:
        """Release what the node holds beyond its memory (the reader's batch producer), for
        a driver that hosts another node in the same process next."""

    def report(self) -> Any:
        """What the node did and holds at the end: stats, and its state for a checkpoint."""
        raise NotImplementedError
