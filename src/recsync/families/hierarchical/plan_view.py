"""Hierarchical training's rows of `recsync plan`: its group placement as a rich table."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from recsync.families.hierarchical.placement import TRAINER, Utilisation
from recsync.families.hierarchical.plan import GroupPlan

MB = 1024 * 1024


def _load(before: Utilisation, after: Utilisation, dim: str, device: int) -> str:
    return f"{getattr(before, dim)[device]:.2f} -> {getattr(after, dim)[device]:.2f}"


def group_table(plan: GroupPlan) -> Table:
    """One row per device of a hierarchical-training group (its trainers, then each group
    PS): the operators (FC slices included) it runs, their parameters, and its estimated
    CPU, network and memory utilisation after tagging -> after greedy refinement."""
    placement = plan.placement
    tagged, refined = placement.tagged, placement.refined
    table = Table(
        title=(
            f"hierarchical group placement (max utilisation {tagged.maximum:.2f} tagged -> "
            f"{refined.maximum:.2f} refined, {len(placement.moves)} moves)"
        )
    )
    for column in ("device", "operators", "params MB", "cpu", "network", "memory"):
        table.add_column(column, justify="left" if column in ("device", "operators") else "right")
    for device in range(len(refined.cpu)):
        ops = [op for op in placement.ops if placement.device[op.name] == device]
        table.add_row(
            "trainers" if device == TRAINER else f"group-ps-{device - 1}",
            escape(", ".join(op.name for op in ops)) or "-",
            f"{sum(op.param_bytes for op in ops) / MB:.2f}",
            *(_load(tagged, refined, dim, device) for dim in ("cpu", "network", "memory")),
        )
    return table
