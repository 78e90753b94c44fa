"""Where a node is: its role and index. Names like `embedding-server-1` are derived."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Role(StrEnum):
    """The kind of a node (a process or Ray actor of the job)."""

    READER = "reader"
    EMBEDDING_SERVER = "embedding-server"
    SYNC_SERVER = "sync-server"
    DENSE_SERVER = "dense-server"
    GROUP_SERVER = "group-server"
    TRAINER = "trainer"

    @property
    def plural(self) -> str:
        """The summary's key for this role: `embedding_servers`, `trainers`, `reader`."""
        return "reader" if self is Role.READER else self.value.replace("-", "_") + "s"


class Address(NamedTuple):
    """A node of the job: role and index (the first reader is index 0, named `reader`;
    more readers are `reader-1`, ...). A tuple
    of a string enum and an int: hashed in C (the simulator looks nodes up per message)."""

    role: Role
    index: int = 0  # type: ignore[assignment]  # (shadows tuple.index, unused here)

    @property
    def name(self) -> str:
        if self.role is Role.READER and self.index == 0:
            return self.role.value
        return f"{self.role.value}-{self.index}"

    def __str__(self) -> str:
        return self.name


READER = Address(Role.READER)
