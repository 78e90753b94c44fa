"""What the kernel knows of each node role: where its nodes are placed, what losing one
may do, whether a cut and an evaluation take its state, whether the run's summary counts
its nodes. The kernel's roles are listed here; a family declares its servers' roles
(`Family.roles`), registered with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from recsync.protocol.address import Role
from recsync.strategy.registry import load_families


@dataclass(frozen=True)
class RoleTraits:
    """`server_side`: placed on the servers' machines (the trainers' side: the rest);
    `recovery`: the actions a `[recovery]` key may name on losing one (the first the
    default); `holds_model`: a cut and an evaluation take its state; `counted`: the run's
    summary says how many the job ran (`num_<plural>`)."""

    server_side: bool = True
    recovery: tuple[str, ...] = ("rollback", "stop")
    holds_model: bool = False
    counted: bool = False


KERNEL_ROLES: dict[Role, RoleTraits] = {
    Role.READER: RoleTraits(recovery=("restart", "rollback", "stop")),
    Role.EMBEDDING_SERVER: RoleTraits(recovery=("rollback", "partial", "stop"), holds_model=True),
    Role.TRAINER: RoleTraits(
        server_side=False, recovery=("rollback", "restart", "stop"), holds_model=True
    ),
}
_FAMILY_ROLES: dict[Role, RoleTraits] = {}


def declare_roles(roles: Mapping[Role, RoleTraits]) -> None:
    """Make a family's roles known (family.register_family calls this); a role
    two families share is declared alike by both."""
    for role, traits in roles.items():
        known = KERNEL_ROLES.get(role) or _FAMILY_ROLES.get(role)
        assert known is None or known == traits, (role, known, traits)
        _FAMILY_ROLES[role] = traits


def forget_roles(
    roles: Mapping[Role, RoleTraits], kept: Sequence[Mapping[Role, RoleTraits]]
) -> None:
    """Forget a family's roles but those the families `kept` declare too."""
    for role in roles:
        if not any(role in other for other in kept):
            _FAMILY_ROLES.pop(role, None)


def known_roles() -> dict[Role, RoleTraits]:
    """Every role: the kernel's, then the families' in the order they declared them."""
    load_families()
    return KERNEL_ROLES | _FAMILY_ROLES


def traits_of(role: Role) -> RoleTraits:
    traits = known_roles().get(role)
    assert traits is not None, f"no family declared the role {role!r}"
    return traits


def server_side_roles() -> tuple[Role, ...]:
    return tuple(r for r, t in known_roles().items() if t.server_side)


def model_roles() -> tuple[Role, ...]:
    """The roles whose nodes hold a part of the model."""
    return tuple(r for r, t in known_roles().items() if t.holds_model)


def counted_roles() -> tuple[Role, ...]:
    """The families' roles whose node counts the run's summary gives."""
    return tuple(r for r, t in _FAMILY_ROLES.items() if t.counted)


def role_key(role: Role) -> str:
    """Its name in config keys: `embedding_server`."""
    return role.value.replace("-", "_")
