"""`recsync reproduce ...`: one command per reproduced figure or table, each writing a
report (markdown, PNG, JSON) under reports/."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from recsync.app import (
    fig5,
    norm_repro,
    psp_repro,
    staleness_repro,
    straggler_repro,
    switching_repro,
)

reproduce_app = typer.Typer(help="Reproduce the papers' figures (reports/).", no_args_is_help=True)


def _run(module, out: Path, show) -> Any:
    console = Console()
    with console.status("simulating") as status:

        def progress(item) -> None:
            text = show(item) if not isinstance(item, str) else item
            status.update(text)
            console.print(text, highlight=False)

        result = module.reproduce(out, progress=progress)
    console.print(f"report written to {out / 'report.md'}")
    return result


@reproduce_app.command("shadowsync-fig5")
def reproduce_fig5(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/shadowsync_fig5"),
) -> None:
    """ShadowSync Fig. 5 in the simulator: EPS vs trainers, S-EASGD vs FR-EASGD-5/30."""
    _run(
        fig5,
        out,
        lambda p: (
            f"{p['variant']:>12} {p['trainers']:>3} trainers: {p['eps']:>12,.0f} ex/s, "
            f"busiest sync NIC {p['sync_server_nic_utilization']:.0%}"
        ),
    )


@reproduce_app.command("async-staleness")
def reproduce_async_staleness(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/async_staleness"),
) -> None:
    """Async SGD in the simulator: mean staleness vs workers (10 ... 1,000), linear fit."""
    result = _run(
        staleness_repro,
        out,
        lambda p: (
            f"{p['workers']:>5} workers: mean staleness {p['mean_staleness']:8.2f}, "
            f"max {p['max_staleness']}"
        ),
    )
    fit = result["fit"]
    Console().print(
        f"fit: staleness = {fit['slope']:.4f} n {fit['intercept']:+.2f}, R^2 = {fit['r2']:.4f}"
    )


@reproduce_app.command("gba-stragglers")
def reproduce_gba_stragglers(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/gba_stragglers"),
) -> None:
    """Throughput, staleness and drops of every gradient strategy with 20% stragglers."""
    _run(
        straggler_repro,
        out,
        lambda r: (
            f"{r['variant']:>14}: {r['eps']:>10,.0f} ex/s, staleness "
            f"{r['mean_staleness']:.2f}/{r['max_staleness']}, AUC {r['test_auc']:.4f}"
        ),
    )


@reproduce_app.command("gba-switching")
def reproduce_gba_switching(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/gba_switching"),
) -> None:
    """Sync for 2 days, then each strategy from the checkpoint, then back to sync."""
    _run(switching_repro, out, str)


@reproduce_app.command("psp")
def reproduce_psp(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/psp"),
) -> None:
    """PSP partial push/pull vs full sync with 0.16% of pulls delayed 4 s."""
    _run(
        psp_repro,
        out,
        lambda r: (
            f"{r['variant']:>24}: {r['virtual_seconds']:8.2f} virtual s, "
            f"test logloss {r['test_logloss']:.4f}"
        ),
    )


@reproduce_app.command("staleness-norm")
def reproduce_staleness_norm(
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("reports/staleness_norm"),
) -> None:
    """Async with 1,000 workers: no normalization vs 1/tau vs rho(kappa=2, mu')."""
    _run(norm_repro, out, str)
