"""Hierarchical training's messages between a trainer and its group PSs: a stage's
forward and backward through the FC parts a group PS owns, and its answer. Their tensors
travel coded (compress/), counted by `register_sizer`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.families.hierarchical.compress.encoded import Encoded
from recsync.protocol.messages import Message, Work, register_sizer, wire_bytes


@dataclass(slots=True, eq=False)
class StageForward(Message):
    """-> StageValues: a group PS runs its parts of stage `stage` on `x`, the input of
    worker `worker`'s batch, and keeps what their backward needs; it answers each part's
    output (concatenated outputs) or their sum (summed outputs). `flops`: what the parts'
    math and the coding cost (the simulator's charge; the engine computes it)."""

    worker: int
    stage: int
    x: Encoded
    flops: float
    kind: ClassVar[str] = "StageForward"

    def work(self) -> Work:
        return Work(flops=self.flops)


@dataclass(slots=True, eq=False)
class StageBackward(Message):
    """-> StageValues: the gradients of the outputs of a group PS's parts of stage `stage`
    for worker `worker`'s batch (one per part for concatenated outputs, else one for their
    sum); the group PS updates those parts' parameters and returns their input gradients
    (summed where every part read the whole input; none if `wants_input` is off)."""

    worker: int
    stage: int
    grads: tuple[Encoded, ...]
    wants_input: bool
    flops: float
    kind: ClassVar[str] = "StageBackward"
    mutates: ClassVar[bool] = True

    def work(self) -> Work:
        return Work(flops=self.flops)


@dataclass(slots=True, eq=False)
class StageValues:
    """A group PS's answer for one stage (outputs forward, input gradients backward): a
    tensor per part it owns, in part order, or one summed over them."""

    values: tuple[Encoded, ...]


def _encoded_bytes(payloads: tuple[Encoded, ...]) -> int:
    return sum(wire_bytes(p) for p in payloads)


register_sizer(StageBackward, lambda m: _encoded_bytes(m.grads))
register_sizer(StageValues, lambda r: _encoded_bytes(r.values))
