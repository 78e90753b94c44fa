"""The PSP reproduction's figures: time and loss by variant (the paper setting; the
no-delay panel), the delay-rate sweep's time ratios and losses, the held-out loss curves."""

from __future__ import annotations

import statistics
from pathlib import Path

from experiments.repro.psp_rows import (
    ByVariant,
    Results,
    mean,
    no_delay_runs,
    paper_runs,
    ratios,
    rows_of,
    sweep_runs,
)
from experiments.repro.psp_settings import DENSE_SERVERS, SWEEP_VARIANTS, SYNC, WORKERS
from experiments.repro.psp_settled import write_curves
from recsync.app.runs.plots import new_figure, save_figure


def write_figures(results: Results, out_dir: Path) -> None:
    """psp.png, and psp_no_delays.png, psp_delay_sweep.png and the held-out loss curves
    (`psp_settled.write_curves`) where the results hold them."""
    rows = rows_of(results)
    _bars(paper_runs(rows), out_dir / "psp.png", "0.16% of dense pulls delayed 4 s")
    clean = no_delay_runs(rows)
    if len(clean) > 1:
        _bars(clean, out_dir / "psp_no_delays.png", "no delays (the paper's Fig. 3)")
    sweep = sweep_runs(rows)
    if len(sweep) > 2:
        _sweep_plot(sweep, out_dir / "psp_delay_sweep.png")
    write_curves(results, out_dir)


def _bars(by: ByVariant, path: Path, title: str) -> None:
    fig, (left, right) = new_figure(10, 4, columns=2)
    labels = list(by)
    for ax, key, name in (
        (left, "virtual_seconds", "virtual seconds"),
        (right, "test_logloss", "test logloss"),
    ):
        means = [mean(by[v], key) for v in labels]
        spread = [
            [m - min(r[key] for r in by[v]) for v, m in zip(labels, means, strict=True)],
            [max(r[key] for r in by[v]) - m for v, m in zip(labels, means, strict=True)],
        ]
        ax.bar(labels, means, yerr=spread, capsize=4)
        ax.set_ylabel(f"{name} (mean, min-max over seeds)")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    right.set_ylim(min(r["test_logloss"] for runs in by.values() for r in runs) * 0.98, None)
    fig.suptitle(f"PSP: {WORKERS} workers, {DENSE_SERVERS} servers, {title} (simulated)")
    save_figure(fig, path)


def _sweep_plot(sweep: dict[float, ByVariant], path: Path) -> None:
    fig, (left, right) = new_figure(10, 4, columns=2)
    percent = [100 * f for f in sweep]
    clean = sweep[min(sweep)][SYNC]
    for variant in SWEEP_VARIANTS:
        base = {f: clean if variant == SYNC else by[SYNC] for f, by in sweep.items()}
        per_rate = [list(ratios(by[variant], base[f]).values()) for f, by in sweep.items()]
        means = [statistics.fmean(r) for r in per_rate]
        label = f"{variant}: over sync without delays" if variant == SYNC else variant
        left.errorbar(
            percent,
            means,
            yerr=[
                [m - min(r) for m, r in zip(means, per_rate, strict=True)],
                [max(r) - m for m, r in zip(means, per_rate, strict=True)],
            ],
            marker="o",
            capsize=3,
            linestyle="--" if variant == SYNC else "-",
            label=label,
        )
        losses = [[r["test_logloss"] for r in by[variant]] for by in sweep.values()]
        loss_means = [statistics.fmean(v) for v in losses]
        right.errorbar(
            percent,
            loss_means,
            yerr=[
                [m - min(v) for m, v in zip(loss_means, losses, strict=True)],
                [max(v) - m for m, v in zip(loss_means, losses, strict=True)],
            ],
            marker="o",
            capsize=3,
            label=variant,
        )
    left.axhline(1.0, color="grey", linewidth=0.8)
    left.set(xlabel="dense pulls delayed 4 s (%)", ylabel="virtual time / sync's at that rate")
    right.set(xlabel="dense pulls delayed 4 s (%)", ylabel="final test logloss")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("PSP: the delay rate against time and loss (mean, min-max over seeds)")
    save_figure(fig, path)
