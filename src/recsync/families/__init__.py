"""The strategy families: the one list of them. Each is a package with one `Family` subclass
(strategy/family.py: the interface) listing its strategies; importing this package
registers every family and its strategies, by name, with the kernel. A new family: one
package, and one line in `FAMILIES`.

Replica family (ShadowSync): ``independent``, ``easgd``, ``ma``, ``bmuf``, each in ``shadow``
or ``fixed`` timing. Gradient family: ``async`` (Downpour), ``sync``, ``bsp``,
``bounded_staleness`` (Hop-BS), ``backup_workers`` (Hop-BW), ``gba`` and ``psp``. All-reduce
family: ``allreduce``. Hierarchical training: ``hierarchical``. See docs/strategies.md.
"""

from __future__ import annotations

from recsync.families.allreduce import AllReduceFamily
from recsync.families.gradient import GradientFamily
from recsync.families.hierarchical import HierarchicalFamily
from recsync.families.replica import ReplicaFamily
from recsync.strategy.family import Family, register_family
from recsync.strategy.registry import STRATEGIES, strategy_config, strategy_fields

FAMILIES: tuple[Family, ...] = (
    ReplicaFamily(),
    GradientFamily(),
    AllReduceFamily(),
    HierarchicalFamily(),
)

for _family in FAMILIES:
    register_family(_family)

__all__ = ["FAMILIES", "STRATEGIES", "strategy_config", "strategy_fields"]
