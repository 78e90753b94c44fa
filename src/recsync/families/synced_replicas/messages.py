"""A replica's exchange with a sync server (EASGD) and the center slice it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from recsync.protocol.messages import Message, Work


@dataclass(slots=True, eq=False)
class Exchange(Message):
    """-> Center: one EASGD exchange of a replica slice with its sync server."""

    values: torch.Tensor
    kind: ClassVar[str] = "Exchange"
    mutates: ClassVar[bool] = True

    def work(self) -> Work:
        return Work(elements=int(self.values.numel()))


@dataclass(slots=True, eq=False)
class Center:
    """A sync server's center slice after an exchange."""

    values: torch.Tensor
