"""`recsync compare`: several runs' final metrics side by side, and their curves on one
figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.ticker import FuncFormatter

from recsync.app.runs.plots import count_label, new_figure, save_figure
from recsync.app.runs.run_dir import METRICS, SUMMARY
from recsync.errors import ConfigError

COLUMNS = (
    "engine",
    "strategy",
    "examples_trained",
    "eps_steady",  # None for a reference run: it has no steady window
    "eps",
    "test_auc",
    "test_ne",
    "test_logloss",
)


def read_run(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run directory's summary and metrics records."""
    summary_path, metrics_path = Path(run) / SUMMARY, Path(run) / METRICS
    if not summary_path.exists():
        raise ConfigError(f"{run}: no {SUMMARY} (not a run directory, or a run that failed)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    lines = metrics_path.read_text(encoding="utf-8").splitlines() if metrics_path.exists() else []
    return summary, [json.loads(line) for line in lines if line.strip()]


def compare_rows(runs: list[Path]) -> list[dict[str, Any]]:
    """One row per run: its name and the summary's COLUMNS (reference runs: engine and
    strategy 'reference'; a simulated run's EPS is in virtual time)."""
    rows = []
    for run in runs:
        summary, _ = read_run(run)
        row = {"run": Path(run).name, **{k: summary.get(k) for k in COLUMNS}}
        row["strategy"] = row["strategy"] or "reference"
        row["engine"] = row["engine"] or "reference"
        rows.append(row)
    return rows


def plot_runs(runs: list[Path], out: Path) -> Path:
    """Test AUC and train/test logloss over examples trained, one line per run."""
    figure, (auc_axes, loss_axes) = new_figure(11, 4, columns=2)
    for run in runs:
        _, records = read_run(run)
        name = Path(run).name
        points = [(r["examples"], r) for r in records if r.get("test_auc") is not None]
        examples = [x for x, _ in points]
        auc_axes.plot(examples, [r["test_auc"] for _, r in points], marker="o", ms=3, label=name)
        loss_axes.plot(
            examples, [r["test_logloss"] for _, r in points], marker="o", ms=3, label=name
        )
    auc_axes.set(title="test AUC", xlabel="examples trained", ylabel="AUC")
    loss_axes.set(title="test logloss", xlabel="examples trained", ylabel="logloss")
    for axes in (auc_axes, loss_axes):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        axes.xaxis.set_major_formatter(FuncFormatter(count_label))
    return save_figure(figure, out)
