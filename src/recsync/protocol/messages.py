"""The messages nodes send each other (requests, and the replies they get), and the one
function that counts their bytes.

A request says what the server must do (`Work`, in units the simulator's cost model turns
into seconds), whether it changes the server's state (waiting requests re-check), whether it
is coordination only (the simulator charges no network or CPU for it; the Ray engine makes a
real call), and whether fault injection may delay its reply.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch

HEADER_BYTES = 64  # a message that carries no tensor: its header


class Work(NamedTuple):
    """What a request costs its server: requests handled, embedding rows touched, dense
    elements touched, batches read, and dense FLOPs computed (a group PS's FC parts)."""

    requests: int = 1
    rows: int = 0
    elements: int = 0
    batches: int = 0
    flops: float = 0.0


class Message:
    """Base of every request. Subclasses are slotted dataclasses."""

    __slots__ = ()
    kind: ClassVar[str]  # its name in the measures (bytes sent, calls, blocked time)
    mutates: ClassVar[bool] = False  # changes the server's state: deferred requests re-check
    control: ClassVar[bool] = False  # coordination only: no network or CPU in the simulator
    may_wait: ClassVar[bool] = False  # its server may defer it until `ready`
    reply_delayable: ClassVar[bool] = False  # fault injection may delay its reply
    retained: ClassVar[bool] = False  # the server keeps its tensors after the call
    answered: ClassVar[bool] = True  # False: its reply carries nothing (not counted)
    prefetchable: bool = False  # the same request may be sent ahead of time (the next batch)

    def work(self) -> Work:
        return Work()

    def asks_again(self, reply: Any) -> bool:
        """Whether a driver sends this request again as `reply` to it comes back, ahead of
        the loop's next ask: a prefetchable one, unless that reply was the last (no batch
        left, or a cut began)."""
        return self.prefetchable and not reply.last

    @property
    def awaited(self) -> str:
        """The kind of request whose reply a caller waits for (its label in blocked time)."""
        return self.kind


@dataclass(slots=True, eq=False)
class Lookup(Message):
    """-> Pooled: an embedding shard's partial pools of `num_bags` bags (rows, offsets,
    optional per-id weights); answered once the shard's version reached `min_version`. A
    shard of a gradient strategy adds the looked-up rows' versions and its own version."""

    rows: torch.Tensor
    offsets: torch.Tensor
    weights: torch.Tensor | None
    min_version: int = 0
    kind: ClassVar[str] = "Lookup"
    reply_delayable: ClassVar[bool] = True
    may_wait: ClassVar[bool] = True

    def work(self) -> Work:
        return Work(rows=int(self.rows.numel()))


@dataclass(slots=True, eq=False)
class Pooled:
    """A lookup's answer: num_bags x D partial pools; with versions, each looked-up id's row
    version and the shard's version."""

    pooled: torch.Tensor
    row_versions: torch.Tensor | None = None
    version: int = 0


@dataclass(slots=True, eq=False)
class PushRows(Message):
    """-> None. Apply coalesced row gradients to an embedding shard (Hogwild, at once)."""

    rows: torch.Tensor
    grads: torch.Tensor
    kind: ClassVar[str] = "PushSparse"
    mutates: ClassVar[bool] = True
    answered: ClassVar[bool] = False

    def work(self) -> Work:
        return Work(rows=int(self.rows.numel()))


@dataclass(slots=True, eq=False)
class Fused(Message):
    """-> the request's reply: one call carrying a push of a worker's previous step (applied
    on arrival, first) and its next request (answered as it would be alone: it may wait
    for `ready`, the push never does). A driver handles the two halves; nodes see each
    alone. Its kind names both (e.g. "PushSparse+Lookup")."""

    push: Message
    request: Message
    mutates: ClassVar[bool] = True

    def __post_init__(self) -> None:
        assert self.push.mutates and not self.push.may_wait, "a push is applied on arrival"

    @property
    def kind(self) -> str:  # type: ignore[override]
        return f"{self.push.kind}+{self.request.kind}"

    @property
    def may_wait(self) -> bool:  # type: ignore[override]
        return self.request.may_wait

    @property
    def reply_delayable(self) -> bool:  # type: ignore[override]
        return self.request.reply_delayable

    @property
    def retained(self) -> bool:  # type: ignore[override]
        return self.push.retained or self.request.retained

    @property
    def answered(self) -> bool:  # type: ignore[override]
        return self.request.answered

    @property
    def awaited(self) -> str:
        return self.request.kind


@dataclass(slots=True, eq=False)
class PushRowGradients(Message):
    """-> None. A worker's row gradients for one shard: unique rows, their gradients and
    their versions at the lookup, computed from shard version `version`."""

    worker: int
    version: int
    rows: torch.Tensor
    grads: torch.Tensor
    row_versions: torch.Tensor
    token: int | None = None
    kind: ClassVar[str] = "PushSparse"
    mutates: ClassVar[bool] = True
    retained: ClassVar[bool] = True
    answered: ClassVar[bool] = False

    def work(self) -> Work:
        return Work(rows=int(self.rows.numel()))


@dataclass(slots=True, eq=False)
class MayStart(Message):
    """-> True once the server's policy lets `worker` start its next step, given the
    version its previous push here carried (None before its first step)."""

    worker: int
    last_version: int | None
    kind: ClassVar[str] = "AwaitStart"
    control: ClassVar[bool] = True
    may_wait: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class WorkerDone(Message):
    """-> None. `worker` pushes no more (its data ran out, or it failed)."""

    worker: int
    kind: ClassVar[str] = "WorkerDone"
    control: ClassVar[bool] = True
    mutates: ClassVar[bool] = True


Sizer = Callable[[Any], int]
_SIZERS: dict[type, Sizer] = {}


def _sizer(cls: type) -> Sizer:
    """The byte count of one payload type (made once per type, from its type hints): its
    tensor fields, and the payloads nested in it."""
    tensors: list[str] = []
    nested: list[str] = []
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
            if torch.Tensor in kinds:
                tensors.append(f.name)
            elif any(dataclasses.is_dataclass(k) for k in kinds):
                nested.append(f.name)
    get_tensors = operator.attrgetter(*tensors) if tensors else None
    single = len(tensors) == 1

    def size(value: Any) -> int:
        total = 0
        if get_tensors is not None:
            found = get_tensors(value)
            for tensor in (found,) if single else found:
                if tensor is not None:
                    total += tensor.nbytes
        for name in nested:
            payload = getattr(value, name)
            if payload is not None:
                total += (_SIZERS.get(payload.__class__) or _sizer(payload.__class__))(payload)
        return total

    _SIZERS[cls] = size
    return size


def _fused_bytes(fused: Fused) -> int:
    return wire_bytes(fused.push) + wire_bytes(fused.request)


_SIZERS[Fused] = _fused_bytes


def register_sizer(cls: type, size: Sizer) -> None:
    """Count the wire bytes of payload type `cls` with `size` (a family's message whose
    bytes its type hints do not say: a tuple of coded tensors, say)."""
    _SIZERS[cls] = size


def wire_bytes(payload: Any) -> int:
    """The bytes a message or reply puts on the wire: its tensors (nested payloads such as
    a handed batch included), or a header's worth if it carries none."""
    if payload is None:
        return HEADER_BYTES
    if isinstance(payload, torch.Tensor):
        return int(payload.nbytes) or HEADER_BYTES
    size = _SIZERS.get(payload.__class__) or _sizer(payload.__class__)
    return size(payload) or HEADER_BYTES
