"""The figure of a continual run: next-day AUC and examples/s per day, the strategy of each
day written under its point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recsync.app.runs.plots import new_figure, save_figure


def label_strategies(axes: Any, days: list[dict[str, Any]], below: int, fontsize: int) -> None:
    """Writes each day's strategy (`a > b` for a switch) `below` points under its next-day
    AUC point."""
    for day in days:
        axes.annotate(
            day["strategy"].replace(" > ", ">"),
            (day["day"], day["next_day_auc"]),
            textcoords="offset points",
            xytext=(0, -below),
            ha="center",
            fontsize=fontsize,
        )


def plot_days(records: list[dict[str, Any]], path: Path) -> Path:
    fig, (quality, speed) = new_figure(11, 4, columns=2)
    days = [r["day"] for r in records]
    quality.plot(days, [r["next_day_auc"] for r in records], "o-")
    label_strategies(quality, records, below=14, fontsize=7)
    quality.set_xlabel("day trained")
    quality.set_ylabel("AUC on the next day")
    quality.set_title("next-day AUC")
    quality.grid(alpha=0.3)
    speed.bar(days, [r["eps"] for r in records])
    speed.set_xlabel("day trained")
    speed.set_ylabel("examples/s over the day's whole training time")
    speed.set_title("training speed per day")
    speed.grid(alpha=0.3)
    return save_figure(fig, path)
