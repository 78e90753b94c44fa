"""The gradient family's messages between a worker and a dense server: pull a block of the
dense part (once the server reached a version), and push a gradient of one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from recsync.protocol.messages import Message, Work


@dataclass(slots=True, eq=False)
class PullDense(Message):
    """-> DenseBlock: a dense server's block, once its version reached `min_version`."""

    min_version: int = 0
    kind: ClassVar[str] = "PullDense"
    reply_delayable: ClassVar[bool] = True
    may_wait: ClassVar[bool] = True


@dataclass(slots=True, eq=False)
class DenseBlock:
    """A dense server's block of parameters and its version (updates applied)."""

    values: torch.Tensor
    version: int


@dataclass(slots=True, eq=False)
class PushDenseGradient(Message):
    """-> None. A worker's gradient of one dense block, computed from block version
    `version`; `token` is its batch's GBA token."""

    worker: int
    version: int
    grad: torch.Tensor
    token: int | None = None
    kind: ClassVar[str] = "PushDense"
    mutates: ClassVar[bool] = True
    retained: ClassVar[bool] = True
    answered: ClassVar[bool] = False

    def work(self) -> Work:
        return Work(elements=int(self.grad.numel()))
