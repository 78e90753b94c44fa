"""``hierarchical``: hierarchical training (Huang et al., "Hierarchical Training: Scaling Deep
Recommendation Models on Large CPU Clusters", KDD 2021).

The trainers form `groups` groups of equal size. Each group has one dense replica,
partitioned over its `group_servers` group parameter servers: they own the parameterised
operators (the FCs, split by the plan) and apply their updates lock-free for every worker
thread of the group. Trainers run the rest (input, embedding lookups, interaction, loss) and
drive each batch: the input activation of each stage to its group PSs, the output back;
then the output gradient to them, the input gradient back, the group PSs updating their own
weights (Sec. 3.2). Embedding servers and the reader are shared by all groups. Across
groups, each group PS runs a background ShadowSync loop (Sec. 3.3) for the parameters it
owns: EASGD against a global sync server (group PS j of every group against sync server
j), or MA / BMUF over an all-reduce among group PS j of every group.

Placement (Sec. 3.2.1: tagging rules, greedy refinement), FC splitting (Sec. 4.1) and the
compression of trainer <-> group-PS traffic (Sec. 4.2) are switches here so that the
paper's ablation (Fig. 11) can turn each off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recsync.families.hierarchical.compress.spec import CompressionSpec
from recsync.families.synced_replicas.strategy import CenterStrategy, CollectiveStrategy
from recsync.sync.config import StrategyConfig
from recsync.sync.registry import strategy_config

CROSS_GROUP = ("easgd", "ma", "bmuf")
BMUF_KEYS = {"block_lr": 1.0, "block_momentum": 0.0, "nesterov": False}  # and their defaults


@dataclass(frozen=True)
class HierarchicalConfig(StrategyConfig):
    """`groups` (g) groups of `cluster.num_trainers / g` trainers (t), each trainer's
    `cluster.workers_per_trainer` worker threads its nets (r); `group_servers` (p) group
    PSs per group. `cross_group`: how the groups' replicas are synced, each group PS in a
    background loop for the parameters it owns (ShadowSync's "easgd" through the global
    sync servers, "ma" or "bmuf" over an all-reduce among the group PSs that own the same
    parts; BMUF's `block_lr`, `block_momentum`, `nesterov`); `alpha`: its elastic
    parameter; a group PS's sync round waits for `shadow_min_gap` new batches per worker
    thread of its group (as ShadowSync's shadow threads do; 0: back to back). `fc_split`:
    co-partition each widening FC with the narrowing one after it over the group PSs;
    `tagging`: the paper's tagging rules (off: every parameterised op on group PS 0);
    `refinement`: greedy refinement of the placement. `activations` / `gradients`: the
    codec of forward activations / backward gradients between trainers and group PSs
    ("none", "bf16", "int8"; the paper: int8 and bf16); `topk_fraction`: sparsify the
    gradients to that fraction of their elements (the largest), with error feedback
    unless `error_feedback` is off (Sec. 4.2)."""

    groups: int = 2
    group_servers: int = 2
    cross_group: str = "easgd"
    alpha: float = 0.1
    block_lr: float = 1.0
    block_momentum: float = 0.0
    nesterov: bool = False
    shadow_min_gap: float = 1.0
    fc_split: bool = True
    tagging: bool = True
    refinement: bool = True
    activations: str = "none"
    gradients: str = "none"
    topk_fraction: float | None = None
    error_feedback: bool = True

    name: ClassVar[str] = "hierarchical"
    label: ClassVar[str] = "HT"

    def __post_init__(self) -> None:
        for field in ("groups", "group_servers"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"hierarchical: {field} must be an integer >= 1, got {value!r}")
        if self.cross_group not in CROSS_GROUP:
            raise ValueError(
                f"hierarchical: cross_group must be one of {list(CROSS_GROUP)}, got "
                f"{self.cross_group!r}"
            )
        if self.cross_group != "bmuf":
            for key, default in BMUF_KEYS.items():
                if getattr(self, key) != default:
                    raise ValueError(
                        f"hierarchical: {key} is BMUF's; it needs cross_group = 'bmuf' "
                        f"(got {self.cross_group!r})"
                    )
        _ = self.cross_sync  # ValueError for a bad alpha or BMUF key
        gap = self.shadow_min_gap
        if isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 <= gap < 1e9:
            raise ValueError(f"hierarchical: shadow_min_gap must be a number >= 0, got {gap!r}")
        if not isinstance(self.error_feedback, bool):
            raise ValueError(
                f"hierarchical: error_feedback must be a bool, got {self.error_feedback!r}"
            )
        _ = self.compression  # ValueError for an unknown codec or a bad top-k fraction

    @property
    def compression(self) -> CompressionSpec:
        return CompressionSpec(
            self.activations, self.gradients, self.topk_fraction, self.error_feedback
        )

    @property
    def cross_sync(self) -> CenterStrategy | CollectiveStrategy:
        """The sync each group PS runs in the background: EASGD against its global sync
        server, or MA / BMUF in an all-reduce with the group PSs owning the same parts (the
        replica family's strategies, found by name)."""
        fields: dict[str, object] = {"alpha": self.alpha}
        if self.cross_group == "bmuf":
            fields.update(
                block_lr=self.block_lr, block_momentum=self.block_momentum, nesterov=self.nesterov
            )
        cross = strategy_config(self.cross_group, **fields)
        assert isinstance(cross, CenterStrategy | CollectiveStrategy), cross
        return cross

    @property
    def needs_sync_servers(self) -> bool:
        return isinstance(self.cross_sync, CenterStrategy)

    def trainers_per_group(self, num_trainers: int) -> int:
        """t; ValueError unless the trainers divide into the groups."""
        if num_trainers % self.groups:
            raise ValueError(
                f"hierarchical: cluster.num_trainers = {num_trainers} does not divide into "
                f"groups = {self.groups}"
            )
        return num_trainers // self.groups

    def _params(self) -> str:
        codecs = f" act={self.activations} grad={self.gradients}"
        if self.topk_fraction is not None:
            codecs += f" topk={self.topk_fraction:g}" + ("+ef" if self.error_feedback else "")
        compressed = codecs if self.compression.enabled else ""
        cross = StrategyConfig.describe(self.cross_sync)  # its label: no timing across groups
        return f"g={self.groups} p={self.group_servers} {cross}{compressed}"
