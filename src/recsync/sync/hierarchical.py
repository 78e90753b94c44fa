"""``hierarchical``: hierarchical training (Huang et al., "Hierarchical Training: Scaling Deep
Recommendation Models on Large CPU Clusters", KDD 2021).

The trainers form `groups` groups of equal size. Each group has one dense replica,
partitioned over its `group_servers` group parameter servers: they own the parameterised
operators (the FCs, split by the plan) and apply their updates lock-free for every worker
thread of the group. Trainers run the rest (input, embedding lookups, interaction, loss) and
drive each batch: the input activation of each stage to its group PSs, the output back;
then the output gradient to them, the input gradient back, the group PSs updating their own
weights (Sec. 3.2). Embedding servers and the reader are shared by all groups. Across
groups, each group PS runs a background EASGD loop (ShadowSync, Sec. 3.3) for the
parameters it owns against a global sync server: group PS j of every group against sync
server j.

Placement (Sec. 3.2.1: tagging rules, greedy refinement), FC splitting (Sec. 4.1) and the
compression of trainer <-> group-PS traffic (Sec. 4.2) are switches here so that the
paper's ablation (Fig. 11) can turn each off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.compress.spec import CompressionSpec
from recsync.sync.easgd import EasgdConfig
from recsync.sync.family import StrategyFamily
from recsync.sync.replica import check_fraction


@dataclass(frozen=True)
class HierarchicalConfig(StrategyFamily):
    """`groups` (g) groups of `cluster.num_trainers / g` trainers (t), each trainer's
    `cluster.workers_per_trainer` worker threads its nets (r); `group_servers` (p) group
    PSs per group. `alpha`: the cross-group EASGD's elastic parameter; a group PS's sync
    round waits for `shadow_min_gap` new batches per worker thread of its group (as
    ShadowSync's shadow threads do; 0: back to back). `fc_split`:
    co-partition each widening FC with the narrowing one after it over the group PSs;
    `tagging`: the paper's tagging rules (off: every parameterised op on group PS 0);
    `refinement`: greedy refinement of the placement. `activations` / `gradients`: the
    codec of forward activations / backward gradients between trainers and group PSs
    ("none", "bf16", "int8"; the paper: int8 and bf16)."""

    groups: int = 2
    group_servers: int = 2
    alpha: float = 0.1
    shadow_min_gap: float = 1.0
    fc_split: bool = True
    tagging: bool = True
    refinement: bool = True
    activations: str = "none"
    gradients: str = "none"

    name: ClassVar[str] = "hierarchical"
    label: ClassVar[str] = "HT"

    def __post_init__(self) -> None:
        for field in ("groups", "group_servers"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"hierarchical: {field} must be an integer >= 1, got {value!r}")
        check_fraction("alpha", self.alpha)
        gap = self.shadow_min_gap
        if isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 <= gap < 1e9:
            raise ValueError(f"hierarchical: shadow_min_gap must be a number >= 0, got {gap!r}")
        CompressionSpec(self.activations, self.gradients)  # ValueError for an unknown codec

    @property
    def compression(self) -> CompressionSpec:
        return CompressionSpec(self.activations, self.gradients)

    @property
    def cross_group(self) -> EasgdConfig:
        """The sync each group PS runs against its global sync server."""
        return EasgdConfig(alpha=self.alpha)

    def trainers_per_group(self, num_trainers: int) -> int:
        """t; ValueError unless the trainers divide into the groups."""
        if num_trainers % self.groups:
            raise ValueError(
                f"hierarchical: cluster.num_trainers = {num_trainers} does not divide into "
                f"groups = {self.groups}"
            )
        return num_trainers // self.groups

    def cut_refusal(self) -> str | None:
        return (
            "its group PSs hold batches in flight between forward and backward; cuts are "
            "not built for it yet"
        )

    def _params(self) -> str:
        codecs = f" act={self.activations} grad={self.gradients}"
        compressed = codecs if self.compression.enabled else ""
        return f"g={self.groups} p={self.group_servers} alpha={self.alpha:g}{compressed}"
