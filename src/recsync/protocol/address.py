"""Where a node is: its role and index. Names like `embedding-server-1` are derived."""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple


class Role(str):
    """The kind of a node (a process or Ray actor of the job): a name, one object per name.
    The kernel's roles are attributes here; a strategy family declares its own servers'
    roles in its package (`Role.declare`), with what the kernel needs to know of them
    (strategy/roles.py). A role unpickles to the same object (`is` compares roles)."""

    __slots__ = ()
    _declared: ClassVar[dict[str, Role]] = {}
    READER: ClassVar[Role]
    EMBEDDING_SERVER: ClassVar[Role]
    TRAINER: ClassVar[Role]

    @classmethod
    def declare(cls, value: str) -> Role:
        """The role named `value` (e.g. `sync-server`), made on its first declaration."""
        role = cls._declared.get(value)
        if role is None:
            if not value or not all(c.islower() or c == "-" for c in value):
                raise ValueError(f"a role is named in lowercase words joined by '-', got {value!r}")
            role = cls._declared[value] = str.__new__(cls, value)
        return role

    @classmethod
    def declared(cls) -> tuple[Role, ...]:
        """Every role declared in this process, in order of declaration."""
        return tuple(cls._declared.values())

    @property
    def value(self) -> str:
        return str.__str__(self)

    @property
    def plural(self) -> str:
        """The summary's key for this role: `embedding_servers`, `trainers`, `reader`."""
        return "reader" if self is Role.READER else self.value.replace("-", "_") + "s"

    def __repr__(self) -> str:
        return f"Role({self.value!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Role.declare, (self.value,)


Role.READER = Role.declare("reader")
Role.EMBEDDING_SERVER = Role.declare("embedding-server")
Role.TRAINER = Role.declare("trainer")


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
