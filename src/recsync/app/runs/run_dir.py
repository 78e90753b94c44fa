"""A run's directory: resolved config, metrics as JSON lines, a summary, plots.

Layout of `runs/<name>/`:
- config.json, config.toml: the resolved configuration (the TOML loads back equal);
- metrics.jsonl: one JSON object per evaluation point;
- summary.json: the final measures;
- curves.png: train loss and test AUC over examples;
- checkpoint.pt: the job's end state, or its last cut while it runs (app/runs/checkpoints.py);
- checkpoint.prev.pt: the checkpoint before it;
- checkpoint.delta-NNNN.pt: hash tables' changes since checkpoint.pt, cut by cut;
- best.pt: the best evaluated model by run.early_stopping.metric (run.keep_best);
- tensorboard/: the same scalars as TensorBoard events, if [run].tensorboard;
- ray.log: Ray's own messages to the driver of a run on Ray (a worker that died...), kept
  out of the terminal (runtime/ray/ray_log.py).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from recsync.app.config.schema import Config
from recsync.app.runs.checkpoints import (
    BEST,
    BEST_TMP,
    CHECKPOINT,
    CHECKPOINT_TMP,
    DELTA_GLOB,
    PREVIOUS,
)
from recsync.errors import ConfigError

CONFIG_JSON = "config.json"
CONFIG_TOML = "config.toml"
COST_PROFILE = "cost_profile.toml"  # a simulated run's, named by its config.toml
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CURVES = "curves.png"
TENSORBOARD = "tensorboard"
RAY_LOG = "ray.log"
ARTIFACTS = (
    CONFIG_JSON,
    CONFIG_TOML,
    COST_PROFILE,
    METRICS,
    SUMMARY,
    CURVES,
    CHECKPOINT,
    CHECKPOINT_TMP,
    PREVIOUS,
    BEST,
    BEST_TMP,
    RAY_LOG,
)


def timestamped_name(runs_dir: Path) -> str:
    """'20250101-120000' (with '-2', '-3', ... if a run of that second exists)."""
    base = datetime.now().strftime("%Y%m%d-%H%M%S")
    name, counter = base, 1
    while (runs_dir / name).exists():
        counter += 1
        name = f"{base}-{counter}"
    return name


def toml_text(tree: Mapping[str, Any]) -> str:
    """Nested dicts of TOML-able values (None values omitted) as a TOML document."""
    return "\n".join(_toml_lines(tree, "")).lstrip("\n") + "\n"


def _toml_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):  # a table in an array ([[model.tables]]): inline
        items = (f"{k} = {_toml_literal(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return repr(value)


def _toml_lines(table: Mapping[str, Any], prefix: str) -> list[str]:
    scalars = {k: v for k, v in table.items() if v is not None and not isinstance(v, Mapping)}
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    lines = [f"[{prefix}]"] if prefix and (scalars or not tables) else []
    lines += [f"{key} = {_toml_literal(value)}" for key, value in scalars.items()]
    for key, sub in tables.items():
        lines += ["", *_toml_lines(sub, f"{prefix}.{key}" if prefix else key)]
    return lines


def json_ready(record: Mapping[str, Any]) -> dict[str, Any]:
    """NaN and infinities become null (JSON has no literal for them), in nested tables too."""
    return {k: _json_value(v) for k, v in record.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return json_ready(value)
    return value


class RunDir:
    """The directory one run writes into; create it with `RunDir.create`."""

    def __init__(self, path: Path, *, tensorboard: bool = False):
        from recsync.io.retrying import retries_so_far

        self.path = path
        self._retries_at_open = retries_so_far()  # this process's retried remote reads
        self._writer = _summary_writer(path / TENSORBOARD) if tensorboard else None

    def storage_retries(self) -> int:
        """Reads of remote data files this process retried since the run dir was opened
        (the driver's, and readers reading inline: the simulator's)."""
        from recsync.io.retrying import retries_so_far

        return retries_so_far() - self._retries_at_open

    @classmethod
    def create(
        cls,
        runs_dir: str | Path,
        name: str | None = None,
        *,
        force: bool = False,
        tensorboard: bool = False,
    ) -> RunDir:
        """`runs_dir/name` (a timestamp if no name). An existing directory of a run that
        ended (a summary or a checkpoint) is refused unless `force`; then, as for a run
        that failed before its end, the files a run writes (its checkpoint included) are
        removed, others are kept."""
        runs_dir = Path(runs_dir)
        name = name or timestamped_name(runs_dir)
        path = runs_dir / name
        if path.exists() and not path.is_dir():
            raise ConfigError(f"run directory {path} exists and is not a directory")
        if path.is_dir() and any(path.iterdir()):
            ended = (path / SUMMARY).exists() or (path / CHECKPOINT).exists()
            if ended and not force:
                raise ConfigError(
                    f"run directory {path} holds a run that ended or left a checkpoint; "
                    f"continue it with --resume {path}, pass --force to overwrite it, or "
                    "choose another --name"
                )
            for artifact in ARTIFACTS:
                (path / artifact).unlink(missing_ok=True)
            for delta in path.glob(DELTA_GLOB):
                delta.unlink()
            shutil.rmtree(path / TENSORBOARD, ignore_errors=True)
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, tensorboard=tensorboard)

    def write_config(self, config: Config) -> None:
        """config.json (every key, null where unset) and config.toml (loads back equal)."""
        tree = config.dump()
        (self.path / CONFIG_JSON).write_text(json.dumps(tree, indent=2) + "\n", encoding="utf-8")
        (self.path / CONFIG_TOML).write_text(toml_text(tree), encoding="utf-8")

    def append_metrics(self, record: Mapping[str, Any]) -> None:
        """One evaluation point: a line of metrics.jsonl, and TensorBoard scalars over
        record["examples"]."""
        record = json_ready(record)
        with open(self.path / METRICS, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        if self._writer is not None:
            step = int(record["examples"])
            for key, value in record.items():
                if key != "examples" and isinstance(value, int | float):
                    self._writer.add_scalar(key, value, step)
            self._writer.flush()

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        (self.path / SUMMARY).write_text(
            json.dumps(json_ready(summary), indent=2) + "\n", encoding="utf-8"
        )

    def close(self) -> None:
        """Flush and close the TensorBoard writer, if any."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _summary_writer(log_dir: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            "run.tensorboard: needs the optional extra: pip install 'recsync[tensorboard]'"
        ) from None
    return SummaryWriter(log_dir=str(log_dir))
