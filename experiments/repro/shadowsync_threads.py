"""ShadowSync's Fig. 8 in the simulator: S-EASGD over the number of Hogwild worker threads a
trainer (1, 12, 24, 32, 64), its train and eval loss and its EPS, at 5 and 10 trainers.

Claims under test: the loss rises with the threads, mildly against the EPS gained; EPS
stops growing at 24 threads and more (the paper: the trainers' memory bandwidth saturates).

The setting beside the paper's (Model-C on Dataset-3, 1.97 billion examples, 5 trainers with
1 sync server and 4 embedding servers, 10 trainers with 1 sync server and 6 embedding
servers, the same hyper-parameters for all): the same trainers and servers; the default
DLRM on the synthetic task. A trainer's compute is Fig. 5's, split over its threads and full
at 24 (`shadowsync_points.threads_cost`): EPS flat beyond 24 threads is this stated model,
not a finding; what the threads change in the loss (Hogwild staleness) is measured. Quality
in real math at 5 trainers only, 3 seeds, 524,288 examples one pass (410 iterations a thread
at 1 thread, 6 at 64: a small budget), dense lr 0.008 (Table 3's tuning), speed noise on;
EPS in priced math, 20 iterations a thread (EPS_ITERATIONS), one seed. The shadow thread
waits for one new iteration a worker thread before syncing again (recsync's default), so a
single-thread trainer does not re-sync a replica it has not changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean
from typing import Any

from experiments.repro import reviewer
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.shadowsync_points import (
    Point,
    by_seed,
    examples_for,
    run_point,
    threads_cost,
)
from experiments.repro.verdict import judge
from recsync.app.runs.plots import new_figure, save_figure

THREADS = (1, 12, 24, 32, 64)  # the paper's: single thread, then 12, 24, 32, 64
SERVERS = {5: (1, 4), 10: (1, 6)}  # trainers -> sync servers, embedding servers (the paper's)
QUALITY_TRAINERS = 5
QUALITY_EXAMPLES = 1 << 19
SEEDS = (0, 1, 2)
EPS_ITERATIONS = 20
EPS_SEEDS = (0,)
NOT_MILD = 2.0  # a loss this many times the one-thread loss is not a mild rise


def points() -> list[Point]:
    sync, embedding = SERVERS[QUALITY_TRAINERS]
    quality = [
        Point(
            "S-EASGD",
            QUALITY_TRAINERS,
            m,
            sync,
            embedding,
            seed,
            "real",
            QUALITY_EXAMPLES,
            cost="threads",
        )
        for seed in SEEDS
        for m in THREADS
    ]
    eps = [
        Point(
            "S-EASGD",
            n,
            m,
            s,
            e,
            seed,
            "priced",
            examples_for(n, m, EPS_ITERATIONS),
            cost="threads",
        )
        for seed in EPS_SEEDS
        for n, (s, e) in SERVERS.items()
        for m in THREADS
    ]
    return [*quality, *eps]


def _row(r: dict[str, Any]) -> str:
    what = (
        f"eval logloss {r['test_logloss']:.5f}" if r["math"] == "real" else f"{r['eps']:,.0f} ex/s"
    )
    return f"{r['trainers']:>3} trainers, {r['threads']:>2} threads, seed {r['seed']}: {what}"


@reproduction(
    "shadowsync-threads",
    paper="ShadowSync (Zheng et al. 2020)",
    claim="Fig. 8: S-EASGD's loss and EPS over 1 to 64 worker threads a trainer",
    report_dir="reports/shadowsync_threads",
    # quality: 15 real runs of 0.5M examples at ~1.2 core-minutes per million (~9); EPS: 10
    # priced points, 39,900 batches at ~17 ms of one core (~11); two at a time
    minutes=11.0,
    seeds=SEEDS,
    cost={f"{m} threads": threads_cost(m) for m in THREADS},
    show=_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> list[dict[str, Any]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = run_in_processes(run_point, points(), progress)
    (out_dir / "results.json").write_text(json.dumps(rows, indent=1))
    _plot(rows, out_dir / "threads.png")
    (out_dir / "report.md").write_text(report(rows))
    return rows


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, (loss_ax, eps_ax) = new_figure(11, 4, columns=2)
    quality = [r for r in rows if r["math"] == "real"]
    for key, label in (("train_loss", "train"), ("test_logloss", "eval")):
        ys = [mean(by_seed(quality, key, threads=m).values()) for m in THREADS]
        loss_ax.plot(THREADS, ys, marker="o", label=label)
    loss_ax.set_title(f"S-EASGD loss, {QUALITY_TRAINERS} trainers (simulated)")
    for n in SERVERS:
        ys = [
            mean(by_seed(rows, "eps", threads=m, trainers=n, math="priced").values())
            for m in THREADS
        ]
        eps_ax.plot(THREADS, ys, marker="o", label=f"{n} trainers")
    eps_ax.set_title("examples / s (virtual, priced math)")
    for ax in (loss_ax, eps_ax):
        ax.set_xlabel("worker threads a trainer")
        ax.grid(alpha=0.3)
        ax.legend()
    save_figure(fig, path)


def report(rows: list[dict[str, Any]]) -> str:
    quality = [r for r in rows if r["math"] == "real"]
    eps = [r for r in rows if r["math"] == "priced"]
    seeds = sorted({r["seed"] for r in quality})
    lines = [
        "# ShadowSync Fig. 8 in the simulator: S-EASGD over worker threads a trainer",
        "",
        "| | ours | the paper |",
        "| --- | --- | --- |",
        "| model, data | default DLRM (1.9 MB dense), synthetic task | Model-C, Dataset-3 |",
        f"| threads | {', '.join(map(str, THREADS))} | 1, 12, 24, 32, 64 |",
        "| trainers, servers | 5 (1 sync, 4 embedding), 10 (1 sync, 6 embedding) | the same |",
        f"| quality | real math, {QUALITY_TRAINERS} trainers, {len(seeds)} seeds, "
        f"{quality[0]['examples'] if quality else 0:,} examples one pass | both scales, "
        "1.97 billion examples |",
        f"| EPS | priced math, {EPS_ITERATIONS} iterations a thread, {len(EPS_SEEDS)} "
        f"seed{'s' if len(EPS_SEEDS) != 1 else ''} | measured |",
        "| a trainer's compute | Fig. 5's, shared by its threads, full at 24 (stated) | memory "
        "bandwidth saturated at 24 threads (measured) |",
        "| shadow thread | waits for one new iteration a worker thread | loops |",
        "",
        "Said plainly: EPS flat beyond 24 threads follows from the stated compute model, so "
        "Fig. 8's right panel is reproduced by construction; the left panel (the loss the "
        "threads' Hogwild staleness costs) is measured.",
        "",
        "![loss and EPS over threads](threads.png)",
        "",
        "| threads | train loss | eval logloss | sync gap a thread | "
        + " | ".join(f"EPS, {n} trainers" for n in SERVERS)
        + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in SERVERS) + " |",
    ]
    for m in THREADS:
        cells = [
            _spread(list(by_seed(quality, key, threads=m).values()))
            for key in ("train_loss", "test_logloss")
        ]
        gap = mean(by_seed(quality, "average_sync_gap_per_thread", threads=m).values())
        speeds = [
            f"{mean(by_seed(eps, 'eps', threads=m, trainers=n).values()):,.0f}" for n in SERVERS
        ]
        lines.append(f"| {m} | {' | '.join(cells)} | {gap:.2f} | {' | '.join(speeds)} |")
    text = "\n".join([*lines, "", *findings(quality, eps)])
    extra = [f"These quality results have {len(seeds)} seeds, the EPS points one each."]
    return reviewer.appended(text, "shadowsync-threads", extra)


def _spread(values: list[float]) -> str:
    return f"{mean(values):.5f} ({min(values):.5f} .. {max(values):.5f})"


def findings(quality: list[dict[str, Any]], eps: list[dict[str, Any]]) -> list[str]:
    few, most = THREADS[0], THREADS[-1]
    lines = ["Findings:", ""]
    for key, name in (("train_loss", "train loss"), ("test_logloss", "eval logloss")):
        high, low = by_seed(quality, key, threads=most), by_seed(quality, key, threads=few)
        v = judge(high, low, "higher")
        ratio = mean(high.values()) / mean(low.values())
        rise = 100 * (ratio - 1)
        plainly = (
            ""
            if ratio < NOT_MILD
            else f" Not mildly: {ratio:,.1f}x the {few}-thread {name}, so the paper's "
            f'"mildly" does not hold here: the worker threads\' Hogwild replicas train '
            f"far worse at {most} threads at this learning rate (Table 3's tuning), "
            "whatever the synced model's eval logloss does."
        )
        lines.append(
            f"- {name} at {most} threads above {few} thread (the paper: rising with the "
            f"threads, mildly): {v.describe(5)}; the mean rises {rise:+.2f}% (how mild is "
            f"for the reader: the paper gives no number).{plainly}"
        )
    for n in SERVERS:
        speed = {m: mean(by_seed(eps, "eps", threads=m, trainers=n).values()) for m in THREADS}
        loss = {m: mean(by_seed(quality, "test_logloss", threads=m).values()) for m in THREADS}
        lines.append(
            f"- {n} trainers: EPS at 24 threads {speed[24] / speed[few]:.1f}x one thread's, at "
            f"{most} {speed[most] / speed[24]:.2f}x 24's (the paper: it stops growing at 24; "
            f"here by the stated model); the eval logloss rises "
            f"{100 * (loss[24] - loss[few]) / loss[few]:+.3f}% from 1 to 24 threads."
        )
    return lines
