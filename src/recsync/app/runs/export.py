"""A run's trained model out of recsync: `recsync export` writes it as one plain module's
state dict with a JSON description (architecture, data format, schema and hashing), and
`recsync predict` scores a file of the run's format with it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recsync.app.config.load import load_config
from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import BEST, load_checkpoint, load_run_checkpoint
from recsync.app.runs.export_keyed import DENSE_PROGRAM, TABLES_DIR, dense_module, export_keyed
from recsync.app.runs.run_dir import CONFIG_TOML
from recsync.coordinator.checkpoint import JobState
from recsync.data.batch import Batch
from recsync.data.skips import SkipReport
from recsync.errors import ConfigError
from recsync.io.readers import open_dataset
from recsync.io.sources import prepared
from recsync.model.exported import ExportedDLRM
from recsync.model.spec import ModelSpec
from recsync.ps.dim_groups import rows_in_state
from recsync.ps.serving_tables import KeyedRows
from recsync.trainer.replica import DenseReplica

EXPORT_FORMAT = "recsync-export-1"
MODEL_FILE, DESCRIPTION_FILE = "model.pt", "model.json"
PREDICT_ROWS = 8192


def run_config(run: Path) -> Config:
    path = Path(run) / CONFIG_TOML
    if not path.exists():
        raise ConfigError(f"{run}: not a run directory (no {CONFIG_TOML})")
    return load_config(path)


def run_state(run: Path, best: bool = False) -> tuple[JobState, Config]:
    """The run's final state (its checkpoint; `best`: its best evaluated model, best.pt) and
    its config."""
    config = run_config(run)
    if best and not (Path(run) / BEST).exists():
        raise ConfigError(
            f"{run}: no {BEST} (the run kept no best model: no evaluation before its end, "
            "or run.keep_best = false)"
        )
    state = load_checkpoint(Path(run) / BEST) if best else load_run_checkpoint(Path(run))[0]
    return state, config


def exported_model(run: Path, best: bool = False) -> tuple[ExportedDLRM, Config]:
    """The run's final model (fixed tables) as one module, and the run's config."""
    state, config = run_state(run, best)
    specs = config.to_specs()
    if specs.model.hash_tables is not None:
        raise ConfigError(f"{run}: its tables are hash tables (exported as key -> vector files)")
    model = ExportedDLRM(specs.model)
    replica = DenseReplica(specs.model, specs.train.seed, specs.train.dense_optimizer)
    state.check_dense(replica.flat.numel())
    replica.load_flat(state.dense)
    model.dense.load_state_dict(replica.module.state_dict())
    for table, row_start, row_end, shard, shard_row in state.slices:
        rows = rows_in_state(state.shards[shard], shard_row, shard_row + row_end - row_start)
        model.set_rows(table, row_start, rows)
    return model.eval(), config


def description(config: Config, model: ExportedDLRM) -> dict[str, Any]:
    """What the state dict is and what data it scores (model.json)."""
    spec = model.dense.spec
    return {
        "format": EXPORT_FORMAT,
        "num_dense": spec.num_dense,
        "embedding_dim": spec.embedding_dim,
        "pooled_dim": spec.pooled_dim,
        "bottom_mlp": list(spec.bottom_mlp),
        "top_mlp": list(spec.top_mlp),
        "tables": [
            {"name": t.name, "rows": t.num_rows, "dim": t.dim, "pooling": t.pooling}
            for t in spec.tables
        ],
        "data": config.dump()["data"],
        "model_config": config.dump()["model"],
    }


def export_run(
    run: Path, out_dir: Path, best: bool = False, delta_from: Path | None = None
) -> list[str]:
    """Write the run's model into `out_dir`: fixed tables as DIR/model.pt (the state dict),
    hash tables as key -> vector files and a dense program (export_keyed.py); and
    DIR/model.json. Returns the files written, relative to DIR."""
    state, config = run_state(run, best)
    if config.to_specs().model.hash_tables is not None:
        content = export_keyed(config, state, out_dir, delta_from)
        names = [f"{TABLES_DIR}/{t['name']}.parquet" for t in content["tables"]]
        _write_description(out_dir, content)
        return [DENSE_PROGRAM, *names, DESCRIPTION_FILE]
    if delta_from is not None:
        raise ConfigError("--delta-from: only for hash tables (a fixed table's export is whole)")
    model, config = exported_model(run, best)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out_dir / MODEL_FILE)
    _write_description(out_dir, description(config, model))
    return [MODEL_FILE, DESCRIPTION_FILE]


def _write_description(out_dir: Path, content: dict[str, Any]) -> None:
    text = json.dumps(content, indent=2) + "\n"
    (out_dir / DESCRIPTION_FILE).write_text(text, encoding="utf-8")


def predict_file(run: Path, data: Path, out: Path, best: bool = False) -> tuple[int, SkipReport]:
    """Scores of every good line of `data` (the run's format and schema) into a Parquet
    file of `label` and `score` columns; returns the rows scored and the lines skipped."""
    state, config = run_state(run, best)
    specs = config.to_specs()
    files = specs.files
    if files is None:
        raise ConfigError(
            f"{run} trained on the synthetic task: predict reads files of a run's format "
            "(train on a file, e.g. one written by `recsync data synth`)"
        )
    skips = SkipReport()
    reader = open_dataset(
        [data], files.fmt, files.schema, batch_size=PREDICT_ROWS, strict=False, skips=skips
    )
    score = _scorer(run, best, specs.model, state)
    labels, scores = [], []
    with torch.no_grad():
        for batch in reader:
            batch = prepared(batch, files)
            labels.append(batch.labels)
            scores.append(score(batch))
    table = pa.table(
        {
            "label": torch.cat(labels).numpy() if labels else [],
            "score": torch.cat(scores).numpy() if scores else [],
        }
    )
    pq.write_table(table, out)
    return table.num_rows, skips


def _scorer(
    run: Path, best: bool, model: ModelSpec, state: JobState
) -> Callable[[Batch], torch.Tensor]:
    """Click probabilities of a batch: the exported module (fixed tables), or the key ->
    vector rows and the dense part an export of hash tables holds."""
    if model.hash_tables is None:
        exported, _ = exported_model(run, best)
        return lambda batch: exported(batch.dense, batch.ids, batch.offsets)
    rows = KeyedRows.from_shards(state.shards)
    dense = dense_module(run_config(run), state)
    return lambda batch: torch.sigmoid(
        dense(batch.dense, rows.pooled(model.tables, batch.ids, batch.offsets))
    )
