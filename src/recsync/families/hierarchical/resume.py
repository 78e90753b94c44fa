"""A hierarchical job's state in a checkpoint, and where a resumed one's group PSs and
global sync servers start.

A cut of a running hierarchical job is the other families' (coordinator/cuts.py): a worker
drives each batch through forward and backward on its group PSs before it asks for the next
one, so once every worker parked no batch is in flight on a group PS and every update it
made has landed. The checkpoint then holds, beyond the average model every strategy can
resume from, each group PS's parameters, optimizer state and sync state (BMUF's global
model and velocity) and the EASGD center on the sync servers (`family_state`). A job
resumed with the same groups and group PSs starts every node from them; any other job
(another strategy's checkpoint, or other groups) starts every group from the checkpoint's
dense model and optimizer state, split by its own plan, and the center from the same.
"""

from __future__ import annotations

from typing import Any

import torch

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.spec import JobSpec
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.group_model import GroupDense
from recsync.families.hierarchical.plan import GroupPlan
from recsync.families.hierarchical.server import GroupServerReport, GroupServerStart
from recsync.optim.state import copy_state

KIND = "hierarchical"


def group_state(
    strategy: HierarchicalConfig,
    group_servers: int,
    servers: list[GroupServerReport],
    centers: list[torch.Tensor],
) -> dict[str, Any]:
    """The family's part of a checkpoint: every group PS (in address order: group by group)
    and the center's slices (none where the reports did not include the sync servers)."""
    return {
        "kind": KIND,
        "groups": strategy.groups,
        "group_servers": group_servers,
        "servers": [
            {"values": s.values.clone(), "optimizer": copy_state(s.optimizer), "sync": s.sync}
            for s in servers
        ],
        "centers": [c.clone() for c in centers],
    }


def server_starts(
    strategy: HierarchicalConfig, plan: GroupPlan, dense: GroupDense, spec: JobSpec
) -> tuple[list[GroupServerStart], list[torch.Tensor]]:
    """Where each group PS (in address order) and each global sync server of a job resumed
    from `spec.resume` starts (module docstring)."""
    resume = spec.resume
    assert resume is not None
    p = spec.cluster.num_dense_servers
    sizes = [sum(q.numel() for q in dense.parameters_of(j)) for j in range(p)]
    held = resume.family_state
    if _fits(held, strategy, sizes):
        assert held is not None
        starts = [
            GroupServerStart(s["values"], s["optimizer"], s["sync"] or None)
            for s in held["servers"]
        ]
        centers = list(held["centers"]) or _mean_of_groups(starts, strategy)
        return starts, centers
    values = plan.split(spec.model, spec.train.seed, resume.dense)
    optimizers = _split_optimizer(plan, spec, resume)
    group = [GroupServerStart(v, o) for v, o in zip(values, optimizers, strict=True)]
    return group * strategy.groups, values


def _fits(held: dict[str, Any] | None, strategy: HierarchicalConfig, sizes: list[int]) -> bool:
    """The checkpoint holds the group PSs of a job with these groups and group PSs (one
    size a group PS of a group)."""
    if held is None or held.get("kind") != KIND:
        return False
    p = len(sizes)
    if (held["groups"], held["group_servers"]) != (strategy.groups, p):
        return False
    return all(s["values"].numel() == sizes[i % p] for i, s in enumerate(held["servers"]))


def _mean_of_groups(
    starts: list[GroupServerStart], strategy: HierarchicalConfig
) -> list[torch.Tensor]:
    """The center's slice j as the groups' group PSs j hold it on average (a checkpoint
    taken without the sync servers' reports)."""
    p = len(starts) // strategy.groups
    return [torch.stack([s.values for s in starts[j::p]]).mean(0) for j in range(p)]


def _split_optimizer(plan: GroupPlan, spec: JobSpec, resume: JobState) -> list[dict[str, Any]]:
    """The unsplit model's optimizer state, each per-parameter tensor split as the
    parameters are: one state per group PS."""
    state = resume.dense_optimizer
    p = len(set(plan.servers.values()))
    split: list[dict[str, Any]] = [{"steps": int(state["steps"])} for _ in range(p)]
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            for j, part in enumerate(plan.split(spec.model, spec.train.seed, value)):
                split[j][key] = part
    return split
