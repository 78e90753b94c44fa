"""``hierarchical``: hierarchical training (Huang et al., "Hierarchical Training: Scaling Deep
Recommendation Models on Large CPU Clusters", KDD 2021).

The trainers form `groups` groups of equal size. Each group has one dense replica,
partitioned over its `cluster.num_dense_servers` group parameter servers: they own the parameterised
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

from dataclasses import dataclass, field
from typing import ClassVar

from recsync.families.hierarchical.compress.spec import PRECISIONS, CompressionSpec
from recsync.families.synced_replicas.strategy import CenterStrategy, CollectiveStrategy
from recsync.strategy.config import StrategyConfig
from recsync.strategy.registry import strategy_config

CROSS_GROUP = ("easgd", "ma", "bmuf")
BMUF_KEYS = {"block_lr": 1.0, "block_momentum": 0.0, "nesterov": False}  # and their defaults


@dataclass(frozen=True)
class HierarchicalConfig(StrategyConfig):
    """Hierarchical training: groups of trainers, each group's dense replica on its group
    PSs, the groups synced in the background.

    Symbols of the paper: g groups of t = `cluster.num_trainers / g` trainers, each
    trainer's `cluster.workers_per_trainer` worker threads its nets (r), p =
    `cluster.num_dense_servers` group PSs per group. `fc_split`, `tagging` and `refinement`
    are switches so that the paper's ablation (Fig. 11) can turn each off."""

    groups: int = field(
        default=2,
        metadata={
            "doc": "g, the groups the trainers form; cluster.num_trainers divides into them.",
            "values": ">= 1",
        },
    )
    cross_group: str = field(
        default="easgd",
        metadata={
            "doc": "How the groups' replicas sync, each group PS in a background loop: easgd "
            "through the global sync servers, ma or bmuf over an all-reduce.",
            "values": list(CROSS_GROUP),
        },
    )
    alpha: float = field(
        default=0.1,
        metadata={"doc": "The elastic parameter of the cross-group sync.", "values": "(0, 1]"},
    )
    block_lr: float = field(
        default=1.0,
        metadata={"doc": "BMUF's block learning rate (cross_group = bmuf).", "values": "> 0"},
    )
    block_momentum: float = field(
        default=0.0,
        metadata={"doc": "BMUF's block momentum (cross_group = bmuf).", "values": "[0, 1)"},
    )
    nesterov: bool = field(
        default=False, metadata={"doc": "BMUF's Nesterov momentum (cross_group = bmuf)."}
    )
    shadow_min_gap: float = field(
        default=1.0,
        metadata={
            "doc": "A group PS's sync round waits for this many new batches per worker thread "
            "of its group (0: back to back).",
            "values": ">= 0",
        },
    )
    fc_split: bool = field(
        default=True,
        metadata={
            "doc": "Co-partition each widening FC layer with the narrowing one after it over "
            "the group PSs."
        },
    )
    tagging: bool = field(
        default=True,
        metadata={
            "doc": "Place operators by the paper's tagging rules; false: every parameterised "
            "operator on group PS 0."
        },
    )
    refinement: bool = field(
        default=True, metadata={"doc": "Refine the placement greedily after tagging."}
    )
    activations: str = field(
        default="none",
        metadata={
            "doc": "The codec of forward activations between trainers and group PSs.",
            "values": list(PRECISIONS),
        },
    )
    gradients: str = field(
        default="none",
        metadata={
            "doc": "The codec of backward gradients between trainers and group PSs.",
            "values": list(PRECISIONS),
        },
    )
    topk_fraction: float | None = field(
        default=None,
        metadata={
            "doc": "Sparsify the backward gradients to this share of their elements, the "
            'largest (with gradients = "none").',
            "unset": "off (every element sent)",
            "values": "(0, 1]",
        },
    )
    error_feedback: bool = field(
        default=True,
        metadata={"doc": "With topk_fraction: carry what top-k left out into the next gradient."},
    )

    name: ClassVar[str] = "hierarchical"
    label: ClassVar[str] = "HT"
    # its group PSs, cluster.num_dense_servers a group; its group plan splits the dense part
    on_dense_servers: ClassVar[bool] = True

    def __post_init__(self) -> None:
        value = self.groups
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"hierarchical: groups must be an integer >= 1, got {value!r}")
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
        return f"g={self.groups} {cross}{compressed}"
