"""A job plan as a rich table: what each server holds, its size and its estimated load."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from recsync.model.spec import TableSpec
from recsync.ps.group_placement import TRAINER, Utilisation
from recsync.ps.group_plan import GroupPlan
from recsync.ps.layout import EmbeddingLayout
from recsync.ps.placement import EmbeddingPlan, JobPlan

MB = 1024 * 1024


def imbalance(plan: JobPlan | EmbeddingPlan) -> float:
    """Max over mean estimated embedding-server load (1.0 = perfect; 1.0 if all loads are 0)."""
    loads = (plan.embeddings if isinstance(plan, JobPlan) else plan).server_load
    mean = sum(loads) / len(loads)
    return max(loads) / mean if mean > 0 else 1.0


def _holdings(plan: EmbeddingPlan, tables: tuple[TableSpec, ...], server: int) -> str:
    layout = plan.layout
    if not isinstance(layout, EmbeddingLayout):  # hash tables: every server a share of each
        return f"1/{layout.num_shards} of each hash table, by hash of id"
    parts = []
    for s in layout.slices:  # sorted by (table, row_start)
        if s.shard != server:
            continue
        name = tables[s.table].name
        whole = s.row_start == 0 and s.row_end == tables[s.table].num_rows
        parts.append(name if whole else f"{name}[{s.row_start}:{s.row_end})")
    return ", ".join(parts) or "-"


def plan_table(plan: JobPlan, tables: tuple[TableSpec, ...], dense_label: str = "sync") -> Table:
    """One row per embedding server (emb-i), then one per server of the dense part
    (`dense_label`-i: sync servers of EASGD, dense servers of a gradient strategy)."""
    emb = plan.embeddings
    total_load = sum(emb.server_load)
    table = Table(title=f"placement (load imbalance max/mean = {imbalance(plan):.3f})")
    table.add_column("server")
    table.add_column("holds")
    table.add_column("rows | params", justify="right")
    table.add_column("MB", justify="right")
    table.add_column("est. load", justify="right")
    table.add_column("load %", justify="right")
    for i in range(emb.num_servers):
        share = 100.0 * emb.server_load[i] / total_load if total_load > 0 else 0.0
        table.add_row(
            f"emb-{i}",
            _holdings(emb, tables, i),
            f"{emb.server_rows[i]:,}",
            f"{emb.server_bytes[i] / MB:.2f}",
            f"{emb.server_load[i]:.2f}",
            f"{share:.1f}",
        )
    if plan.dense is not None:
        for i, ((start, stop), size) in enumerate(
            zip(plan.dense.ranges, plan.dense.bytes_per_server, strict=True)
        ):
            table.add_row(
                f"{dense_label}-{i}",
                f"dense[{start}:{stop})",
                f"{stop - start:,}",
                f"{size / MB:.2f}",
            )
    return table


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
