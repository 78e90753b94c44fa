"""A hash-table run's model for serving, readable without recsync.

`recsync export` of a run whose tables are hash tables writes:
- `tables/<name>.parquet`: one file per table, columns `id` (int64: the id as the data gave
  it, or its 56-bit hash, data/keys.py) and `vector` (D float32), one row per live row;
- `dense.pt2`: the dense part as a `torch.export` program, (dense B x num_dense, pooled
  B x F x D) -> B logits;
- `model.json`: the tables (name, pooling, rows; a fixed table among hash tables: its kind
  and num_rows, its ids taken modulo them), the data format and the key rule.
With `--delta-from OLD` it also writes `tables/<name>.delta.parquet`: the rows added or
changed since the export OLD (`deleted` false) and the ids OLD had that are gone (`deleted`
true, zero vector), for an online store to apply.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recsync.app.config.schema import Config
from recsync.coordinator.checkpoint import JobState
from recsync.errors import ConfigError
from recsync.model.dlrm import DenseArch
from recsync.model.spec import ModelSpec
from recsync.ps.serving_tables import KeyedRows
from recsync.trainer.replica import DenseReplica

KEYED_FORMAT = "recsync-export-keyed-1"
DENSE_PROGRAM, TABLES_DIR = "dense.pt2", "tables"


def dense_module(config: Config, state: JobState) -> DenseArch:
    """The run's trained dense part as a plain module."""
    specs = config.to_specs()
    replica = DenseReplica(specs.model, specs.train.seed, specs.train.dense_optimizer)
    state.check_dense(replica.flat.numel())
    replica.load_flat(state.dense)
    return replica.module.eval()


def table_arrow(ids: torch.Tensor, vectors: torch.Tensor, deleted: bool | None = None) -> pa.Table:
    """A table's rows as Arrow: `id`, `vector` (and `deleted`, for a delta)."""
    D = int(vectors.shape[1]) if vectors.dim() == 2 else 0
    flat = pa.array(vectors.contiguous().numpy().reshape(-1), type=pa.float32())
    columns: dict[str, Any] = {
        "id": pa.array(ids.numpy(), type=pa.int64()),
        "vector": pa.FixedSizeListArray.from_arrays(flat, D),
    }
    if deleted is not None:
        columns["deleted"] = pa.array(np.full(ids.numel(), deleted))
    return pa.table(columns)


def read_table(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, vectors) of a table file this module wrote."""
    table = pq.read_table(path)
    ids = torch.from_numpy(table.column("id").to_numpy().copy())
    vectors = table.column("vector").combine_chunks()
    D = vectors.type.list_size
    flat = vectors.flatten().to_numpy(zero_copy_only=False)
    return ids, torch.from_numpy(np.array(flat, dtype=np.float32)).reshape(-1, D)


def delta(
    old: tuple[torch.Tensor, torch.Tensor], new: tuple[torch.Tensor, torch.Tensor]
) -> pa.Table:
    """The rows of `new` that `old` lacks or holds otherwise, then the ids gone from `old`."""
    (old_ids, old_vectors), (new_ids, new_vectors) = old, new
    rows = KeyedRows(old_ids, old_vectors)
    at = rows.rows_of(new_ids)
    known = at < old_ids.numel()
    same = torch.zeros_like(known)
    same[known] = (rows.vectors[at[known]] == new_vectors[known]).all(1)
    changed = ~same
    gone = KeyedRows(new_ids, new_vectors).rows_of(rows.keys) == new_ids.numel()
    parts = [
        table_arrow(new_ids[changed], new_vectors[changed], deleted=False),
        table_arrow(rows.keys[gone], torch.zeros(int(gone.sum()), rows.dim), deleted=True),
    ]
    return pa.concat_tables(parts)


def export_keyed(
    config: Config, state: JobState, out_dir: Path, delta_from: Path | None = None
) -> dict[str, Any]:
    """Write the export (module docstring) into `out_dir`; returns model.json's content."""
    model: ModelSpec = config.to_specs().model
    dense = dense_module(config, state)
    B = 2
    example = (
        torch.zeros(B, model.num_dense),
        torch.zeros(B, model.num_features, model.pooled_dim),
    )
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(dense, example, dynamic_shapes=({0: batch}, {0: batch}))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / TABLES_DIR).mkdir(exist_ok=True)
    with warnings.catch_warnings():  # torch.export's note on weights not on a CPU
        warnings.filterwarnings("ignore", message="No complete tensor found")
        torch.export.save(program, out_dir / DENSE_PROGRAM)
    rows = KeyedRows.from_shards(state.shards)
    tables = []
    for f, spec in enumerate(model.tables):
        ids, vectors = rows.table(f, spec.dim)
        pq.write_table(table_arrow(ids, vectors), out_dir / TABLES_DIR / f"{spec.name}.parquet")
        if delta_from is not None:
            old_path = delta_from / TABLES_DIR / f"{spec.name}.parquet"
            if not old_path.exists():
                raise ConfigError(
                    f"--delta-from: {old_path} not found (not an export of this model?)"
                )
            changes = delta(read_table(old_path), (ids, vectors))
            pq.write_table(changes, out_dir / TABLES_DIR / f"{spec.name}.delta.parquet")
        entry = {"name": spec.name, "pooling": spec.pooling, "rows": int(ids.numel())}
        tables.append(entry | {"dim": spec.dim} | _fixed(model, f))
    key_rule = (
        "ids in [0, 2^56) as they are; other integers and strings: the low 56 bits "
        "of their mmh3 64-bit hash (recsync.data.keys)"
    )
    if model.fixed_rows:
        key_rule += "; a fixed table's (kind fixed): that id modulo its num_rows"
    return {
        "format": KEYED_FORMAT,
        "num_dense": model.num_dense,
        "embedding_dim": model.embedding_dim,
        "pooled_dim": model.pooled_dim,
        "tables": tables,
        "dense_program": DENSE_PROGRAM,
        "missing_id": "zero vector",
        "key_rule": key_rule,
        "data": config.dump()["data"],
        "model_config": config.dump()["model"],
    }


def _fixed(model: ModelSpec, f: int) -> dict[str, Any]:
    """A fixed table's kind and rows among hash tables (its ids are taken modulo them)."""
    spec = model.tables[f]
    return {"kind": "fixed", "num_rows": spec.num_rows} if spec.kind == "fixed" else {}
