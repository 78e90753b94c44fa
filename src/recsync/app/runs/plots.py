"""Figures as PNG files, drawn on matplotlib's Agg canvas directly (no pyplot, no GUI
backend, no global state): a run's learning curves, and the helpers the reports use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter


def new_figure(width: float, height: float, columns: int = 1) -> tuple[Figure, Any]:
    """A figure of `columns` side-by-side axes (one Axes, or an array of them)."""
    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure, figure.subplots(1, columns)


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Lay out and write a figure as PNG."""
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return Path(path)


def _series(records: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["examples"], r[key]) for r in records if r.get(key) is not None]
    return [x for x, _ in points], [y for _, y in points]


def count_label(value: float, _: int) -> str:
    """An axis tick as a short count (250k, 1.5M): long numbers overlap."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    return f"{value / 1e3:g}k" if abs(value) >= 1e3 else f"{value:g}"


def plot_curves(
    records: Sequence[Mapping[str, Any]],
    out: str | Path,
    *,
    teacher_auc: float | None = None,
    title: str = "",
) -> Path:
    """Two panels over examples trained: train loss (mean since the previous point) with
    test logloss, and test AUC, with the teacher's AUC (the best reachable) dashed when
    known. Uses the Agg canvas directly, so no GUI backend and no global pyplot state are
    involved."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(figure)
    loss_axes, auc_axes = figure.subplots(1, 2)

    examples, losses = _series(records, "train_loss")
    loss_axes.plot(examples, losses, marker="o", markersize=3, label="train")
    examples, test_losses = _series(records, "test_logloss")
    loss_axes.plot(examples, test_losses, marker="s", markersize=3, label="test")
    loss_axes.set(title="logloss", xlabel="examples trained", ylabel="logloss")
    loss_axes.legend(loc="upper right")

    examples, aucs = _series(records, "test_auc")
    auc_axes.plot(examples, aucs, marker="o", markersize=3, label="model")
    if teacher_auc is not None:
        auc_axes.axhline(teacher_auc, linestyle="--", color="gray", label="teacher (best)")
    auc_axes.set(title="test AUC", xlabel="examples trained", ylabel="AUC")
    auc_axes.legend(loc="lower right")

    for axes in (loss_axes, auc_axes):
        axes.grid(alpha=0.3)
        axes.xaxis.set_major_formatter(FuncFormatter(count_label))
    if title:
        figure.suptitle(title)
    out = Path(out)
    figure.savefig(out, dpi=100)
    return out
