"""A job plan as a rich table: what each server holds, its size and its estimated load."""

from __future__ import annotations

from rich.table import Table

from recsync.model.spec import TableSpec
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
        kinds = "hash and fixed table" if any(t.kind == "fixed" for t in tables) else "hash table"
        return f"1/{layout.num_shards} of each {kinds}, by hash of id"
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
