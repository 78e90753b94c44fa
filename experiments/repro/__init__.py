"""The papers' reproductions, one module per paper, and their registry.

Each entry is one command (`recsync reproduce NAME`) that writes a report directory
(report.md, figures, a results JSON) under reports/. `minutes` is about what the command
takes on this project's 2-core machine when nothing else runs (measured; a busy machine
takes up to 1.5x longer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recsync.app.repro import (
    async_at_scale,
    auto_switching,
    embeddings,
    failures,
    gba,
    gba_switching,
    hierarchical,
    psp,
    shadowsync,
    shadowsync_quality,
    staleness_norm,
    swap_days,
)
from recsync.app.repro.common import Progress


@dataclass(frozen=True)
class Reproduction:
    """One reproduced figure or table."""

    name: str
    paper: str
    claim: str
    run: Callable[[Path, Progress | None], Any]
    report_dir: str
    minutes: float
    show: Callable[[Any], str] = str


def _fig5_point(p: dict[str, Any]) -> str:
    return (
        f"{p['sync_servers']} sync servers, {p['variant']:>12} {p['trainers']:>3} trainers: "
        f"{p['eps']:>12,.0f} ex/s, "
        f"busiest sync NIC {p['sync_server_nic_utilization']:.0%}"
    )


def _quality_row(r: dict[str, Any]) -> str:
    table = {"gap": "Table 2(a)", "scale": "Table 3", "tune": "lr tuning"}[r["table"]]
    return (
        f"{table}, seed {r['seed']}, dense lr {r['dense_lr']:g}, {r['variant']:>12} "
        f"{r['trainers']:>3} trainers: train loss {r['train_loss']:.5f}, "
        f"eval logloss {r['test_logloss']:.5f}"
    )


def _staleness_point(p: dict[str, Any]) -> str:
    return (
        f"{p['workers']:>5} workers: mean staleness {p['mean_staleness']:8.2f}, "
        f"max {p['max_staleness']}"
    )


def _norm_run(r: dict[str, Any]) -> str:
    s = r["staleness"]
    return (
        f"{r['label']:>30} (lr x{r['lr_factor']:g}): AUC {r['final_auc']:.4f}, "
        f"staleness mean {s['mean']:.0f} sd {s['std']:.0f}"
    )


def _swap_row(r: dict[str, Any]) -> str:
    auc = r["next_day_auc"]
    return f"{r['variant']:>32}: next-day AUC day 1 {auc[0]:.4f} ... day {len(auc)} {auc[-1]:.4f}"


def _straggler_row(r: dict[str, Any]) -> str:
    return (
        f"{r['variant']:>14}: {r['eps']:>10,.0f} ex/s, staleness "
        f"{r['mean_staleness']:.2f}/{r['max_staleness']}, AUC {r['test_auc']:.4f}"
    )


def _failure_point(p: dict[str, Any]) -> str:
    if "eps" in p:
        return f"1,000 workers: {p['eps']:,.0f} ex/s, a cut costs {p['cost_per_cut_s']:.4f} s"
    return f"real-math run, seed {p['seed']:>2}: {p['losses']} losses, {p['seconds']:.4f} s"


def _psp_row(r: dict[str, Any]) -> str:
    setting = "lookups delayed too" if "extension" in r["setting"] else "dense pulls delayed"
    return (
        f"{setting}, seed {r['seed']}, {r['variant']:>24}: {r['virtual_seconds']:8.2f} virtual s, "
        f"test logloss {r['test_logloss']:.4f}"
    )


def _switching_row(r: dict[str, Any]) -> str:
    return (
        f"{r['variant']:>30} (lr x{r['lr_factor']:g}): {r['total_seconds']:7.2f} virtual s, "
        f"mean next-day AUC {r['mean_next_day_auc']:.4f}"
    )


def _hierarchical_row(r: dict[str, Any]) -> str:
    if "eps" in r:
        return f"{r['label']:>40}: {r['eps']:>12,.0f} ex/s (virtual), {r['trainers']} trainers"
    if "test_logloss" in r:
        return (
            f"{r['label']:>40} (lr x{r['lr_factor']:g}, seed {r['seed']}): train loss "
            f"{r['train_loss']:.5f}, AUC {r['test_auc']:.4f}"
        )
    return f"real engine, {r['label']}: AUC {r['real_auc']:.4f} (simulator {r['sim_auc']:.4f})"


def _embeddings_row(r: dict[str, Any]) -> str:
    if "days" in r:
        last = r["days"][-1]
        return (
            f"{r['variant']:>24}: {len(r['days'])} days, last day {last['rows_live']:,} rows "
            f"live, next-day AUC {last['next_day_auc']:.4f}"
        )
    return (
        f"{r['variant']:>24}, seed {r['seed']}: AUC {r['test_auc']:.4f}, NE {r['test_ne']:.4f}, "
        f"{r['rows_live']:,} rows live"
    )


REPRODUCTIONS: dict[str, Reproduction] = {
    r.name: r
    for r in (
        Reproduction(
            "shadowsync-fig5",
            "ShadowSync (Zheng et al. 2020)",
            "Fig. 5: EPS vs trainers, S-EASGD vs FR-EASGD-5/30, 2 and 4 sync servers",
            shadowsync.reproduce,
            "reports/shadowsync_fig5",
            17.0,
            _fig5_point,
        ),
        Reproduction(
            "shadowsync-quality",
            "ShadowSync (Zheng et al. 2020)",
            "Tables 2(a) and 3: loss vs sync gap, relative loss increase from 5 to 20 trainers",
            shadowsync_quality.reproduce,
            "reports/shadowsync_quality",
            17.5,
            _quality_row,
        ),
        Reproduction(
            "async-staleness",
            "Async SGD at extreme scale (Liu & Zhao 2021)",
            "mean staleness grows linearly with workers (10 ... 1,000)",
            async_at_scale.reproduce_staleness,
            "reports/async_staleness",
            2.0,
            _staleness_point,
        ),
        Reproduction(
            "staleness-norm",
            "Async SGD at extreme scale (Liu & Zhao 2021)",
            "Fig. 5, 6: async at 1K and 3K workers, no normalization vs 1/tau vs rho on the "
            "normalized staleness; data normalization over rho",
            staleness_norm.reproduce,
            "reports/staleness_norm",
            37.0,
            _norm_run,
        ),
        Reproduction(
            "swap-days",
            "Async SGD at extreme scale (Liu & Zhao 2021)",
            "Fig. 7: next-day AUC over 11 days, Adagrad vs per-step decay vs SWAP",
            swap_days.reproduce,
            "reports/swap_days",
            5.0,
            _swap_row,
        ),
        Reproduction(
            "gba-stragglers",
            "GBA (Alibaba, NeurIPS 2022)",
            "throughput, staleness and drops of every gradient strategy with 20% stragglers",
            gba.reproduce_stragglers,
            "reports/gba_stragglers",
            20.0,
            _straggler_row,
        ),
        Reproduction(
            "gba-switching",
            "GBA (Alibaba, NeurIPS 2022)",
            "Fig. 6: sync for 2 days, then each strategy from the checkpoint, back to sync",
            gba_switching.reproduce_switching,
            "reports/gba_switching",
            15.0,
        ),
        Reproduction(
            "auto-switching",
            "GBA (Alibaba, NeurIPS 2022), future work",
            "the automatic controller vs sync, GBA, async and a hindsight schedule over 11 "
            "days of a changing cluster; Fig. 6's switch and back in continual training",
            auto_switching.reproduce,
            "reports/auto_switching",
            3.0,
            _switching_row,
        ),
        Reproduction(
            "psp",
            "PSP-SGD (partial synchronous parameter server)",
            "Table 1: partial push/pull vs full sync with 0.16% of dense pulls delayed 4 s",
            psp.reproduce,
            "reports/psp",
            8.0,
            _psp_row,
        ),
        Reproduction(
            "failures",
            "Young/Daly checkpoint interval; CPR (Maeng et al., MLSys 2021)",
            "best checkpoint interval and recovery policy under node losses at 1,000 workers",
            failures.reproduce,
            "reports/failures",
            3.5,
            _failure_point,
        ),
        Reproduction(
            "hierarchical",
            "Hierarchical training (Huang et al., KDD 2021)",
            "Fig. 7, 8: EASGD 40 trainers vs HT 5/8/10 groups of 6 + 6; Fig. 10a/b: EPS over "
            "groups and nodes per group; Fig. 11: the ablation at 5 groups; a real-engine run",
            hierarchical.reproduce,
            "reports/hierarchical",
            48.0,
            _hierarchical_row,
        ),
        Reproduction(
            "embeddings",
            "GBA (seed 001) / Liu & Zhao (seed 003): expandable hash tables",
            "hash vs fixed tables at equal memory (AUC, NE over seeds), rows and next-day AUC "
            "over 10 days of id churn with and without eviction, examples/s, full vs delta "
            "checkpoints",
            embeddings.reproduce,
            "reports/embeddings",
            3.0,
            _embeddings_row,
        ),
    )
}
