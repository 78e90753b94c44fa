"""The plan of a hierarchical-training group, for both drivers and `recsync plan`: the FC
splits, the placement (tagging, then refinement) and, from it, the group PS of every FC
part the engines run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from recsync.errors import ConfigError
from recsync.families.hierarchical.compress.spec import CompressionSpec
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.fc_split import FcSplit, Split
from recsync.families.hierarchical.group_model import GroupDense
from recsync.families.hierarchical.op_graph import default_splits, dense_graph, part_op
from recsync.families.hierarchical.placement import GroupPlacement, GroupShape, place
from recsync.model.spec import ModelSpec

RATIOS = {"none": 1.0, "bf16": 0.5, "int8": 0.25}  # wire bytes over float32's


@dataclass(frozen=True)
class GroupPlan:
    """`plans`: the FC splits of the bottom and top MLP; `servers`: the group PS (0-based)
    of each FC part, by the name of its (first) FC op; `placement`: the whole plan with its
    utilisation before and after refinement."""

    plans: tuple[tuple[FcSplit, ...], tuple[FcSplit, ...]]
    servers: dict[str, int]
    placement: GroupPlacement

    def part_server(self, mlp: str, fc: int, split: FcSplit, part: int) -> int:
        return self.servers[part_op(mlp, fc, split, part)]

    def dense(self, model: ModelSpec, seed: int, initial: torch.Tensor | None = None) -> GroupDense:
        """The group's dense part cut into stages, its parts on their group PSs; from the
        unsplit model's flat vector `initial` (None: the seed's initial model)."""
        return GroupDense(model, seed, self.plans, self.part_server, initial)

    def split(self, model: ModelSpec, seed: int, flat: torch.Tensor) -> list[torch.Tensor]:
        """What each group PS of a group holds of the unsplit model's flat vector `flat`
        (a model, or a per-parameter optimizer tensor): `unsplit`'s inverse."""
        dense = self.dense(model, seed, flat)
        servers = range(len(set(self.servers.values())))
        return [dense.flat_of(j) for j in servers]

    def unsplit(self, model: ModelSpec, seed: int, values: Sequence[torch.Tensor]) -> torch.Tensor:
        """The unsplit model's flat vector from what each group PS of a group holds
        (`values[j]`: group PS j's flat vector of its parameters)."""
        dense = self.dense(model, seed)
        with torch.no_grad():
            for server, flat in enumerate(values):
                offset = 0
                for param in dense.parameters_of(server):
                    param.copy_(flat[offset : offset + param.numel()].view_as(param))
                    offset += param.numel()
                assert offset == flat.numel(), (server, offset, flat.numel())
        return dense.unsplit_flat()


def group_shape(
    strategy: HierarchicalConfig, trainers: int, servers: int, nets: int, batch_size: int
) -> GroupShape:
    """The shape the placement estimates utilisation for (the paper's machines): a group
    of `trainers` trainers and `servers` group PSs."""
    compression: CompressionSpec = strategy.compression
    return GroupShape(
        trainers=trainers,
        group_servers=servers,
        nets=nets,
        batch_size=batch_size,
        activation_ratio=RATIOS[compression.activations],
        gradient_ratio=RATIOS[compression.gradients],
    )


def group_plan(model: ModelSpec, strategy: HierarchicalConfig, shape: GroupShape) -> GroupPlan:
    """Split (if `fc_split`), tag (or not) and refine (if asked) the model's dense part;
    ConfigError if some group PS is left with no part (it would have nothing to do)."""
    p = shape.group_servers
    bottom = [model.num_dense, *model.bottom_mlp, model.embedding_dim] if model.num_dense else []
    top = [model.top_input, *model.top_mlp, 1]
    plans = (
        default_splits(bottom, p, strategy.fc_split) if bottom else (),
        default_splits(top, p, strategy.fc_split),
    )
    ops = dense_graph(model, *plans)
    placement = place(ops, shape, tagging=strategy.tagging, refinement=strategy.refinement)
    servers: dict[str, int] = {}
    for mlp, plan in zip(("bottom", "top"), plans, strict=True):
        for fc, split in enumerate(plan):
            second = fc > 0 and split.kind is Split.CO_PARTITION and plan[fc - 1] == split
            if second and part_op(mlp, fc - 1, split, 0) in servers:
                continue  # the second FC of a pair: its parts are the first's
            for part in range(split.parts):
                name = part_op(mlp, fc, split, part)
                servers[name] = placement.device[name] - 1
                assert servers[name] >= 0, f"{name} placed on a trainer"
    idle = sorted(set(range(p)) - set(servers.values()))
    if idle:
        raise ConfigError(
            f"cluster.num_dense_servers = {p}: group PS(s) {idle} would hold no FC part (the "
            f"dense part places {len(set(servers.values()))} unit(s)); lower "
            "cluster.num_dense_servers, or turn strategy.fc_split on for a model whose MLP "
            "widens then narrows"
        )
    return GroupPlan(plans, servers, placement)


def group_plan_of(
    model: ModelSpec,
    strategy: HierarchicalConfig,
    num_trainers: int,
    servers: int,
    nets: int,
    batch_size: int,
) -> GroupPlan:
    """The plan of a job of `num_trainers` trainers of `nets` worker threads each and
    `servers` group PSs a group (the same for every node that builds it: pure and
    deterministic)."""
    trainers = strategy.trainers_per_group(num_trainers)
    shape = group_shape(strategy, trainers, servers, nets, batch_size)
    return group_plan(model, strategy, shape)
