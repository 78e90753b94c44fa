"""ShadowSync's Fig. 8 in the simulator: S-EASGD over the number of Hogwild worker threads a
trainer (1, 12, 24, 32, 64), its train and eval loss and its EPS, at 5 and 10 trainers.

Claims under test: the loss rises with the threads, mildly against the EPS gained; EPS
stops growing at 24 threads and more (the paper: the trainers' memory bandwidth saturates).

The setting beside the paper's (Model-C on Dataset-3, 1.97 billion examples, 5 trainers with
1 sync server and 4 embedding servers, 10 trainers with 1 sync server and 6 embedding
servers, the same hyper-parameters for all): the same trainers and servers; the default
DLRM on the synthetic task. A trainer's compute is Fig. 5's, split over its threads and full
at 24 (`shadowsync_points.threads_cost`): EPS flat beyond 24 threads is this stated model,
not a finding; what the threads change in the loss (Hogwild staleness) is measured.

Quality in real math at 5 trainers only (the cut: not at 10), 5 seeds (settle.SEEDS),
QUALITY_EXAMPLES examples one pass (410 iterations a thread at 1 thread, 6.4 at 64), speed
noise on. The dense Adagrad rate is tuned at every thread count on one grid
(`shadowsync_threads_settle.GRID`, extended past an edge), scored by the held-out logloss of
seed 5, which no claim reads: one rate for every count (Table 3's, tuned for 4 threads)
would test the rate as much as the threads. Each run records its held-out loss 8 times
(settle.Flattening reads the curve). EPS in priced math, 20 iterations a thread
(EPS_ITERATIONS), one seed. The shadow thread waits for one new iteration a worker thread
before syncing again (recsync's default), so a single-thread trainer does not re-sync a
replica it has not changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean
from typing import Any, cast

from experiments.repro import reviewer, settle
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress, reproduction
from experiments.repro.settle import SEEDS
from experiments.repro.settled_words import settled
from experiments.repro.shadowsync_points import (
    DENSE_LR,
    Point,
    by_seed,
    examples_for,
    run_point,
    threads_cost,
)
from experiments.repro.shadowsync_threads_settle import (
    GRID,
    QualityRun,
    flattening,
    flattening_table,
    plot_curves,
    tune_and_run,
    tuning_table,
)
from experiments.repro.verdict import judge
from recsync.app.runs.plots import new_figure, save_figure
from recsync.optim.train_spec import TrainSpec

THREADS = (1, 12, 24, 32, 64)  # the paper's: single thread, then 12, 24, 32, 64
SERVERS = {5: (1, 4), 10: (1, 6)}  # trainers -> sync servers, embedding servers (the paper's)
QUALITY_TRAINERS = 5
QUALITY_EXAMPLES = 1 << 19
EPS_ITERATIONS = 20
EPS_SEEDS = (0,)
NOT_MILD = 2.0  # a loss this many times the one-thread loss is not a mild rise


def quality_base(examples: int = QUALITY_EXAMPLES) -> QualityRun:
    """The quality runs' setting; threads, seed and rate are set per run."""
    sync, embedding = SERVERS[QUALITY_TRAINERS]
    return QualityRun(QUALITY_TRAINERS, sync, embedding, 1, 0, 0.0, examples)


def eps_points() -> list[Point]:
    return [
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


def _row(r: dict[str, Any]) -> str:
    what = (
        f"dense lr {r['dense_lr']:g}, eval logloss {r['test_logloss']:.5f}"
        if r["math"] == "real"
        else f"{r['eps']:,.0f} ex/s"
    )
    return f"{r['trainers']:>3} trainers, {r['threads']:>2} threads, seed {r['seed']}: {what}"


@reproduction(
    "shadowsync-threads",
    paper="ShadowSync (Zheng et al. 2020)",
    claim="Fig. 8: S-EASGD's loss and EPS over 1 to 64 worker threads a trainer",
    report_dir="reports/shadowsync_threads",
    # measured: a 1,048,576-example quality run with its 8 evaluations took 205 s of one
    # core (two beside each other and other work); at 524,288, ~100 s: 5 counts x 4 rates
    # + ~4 extensions + 25 claims' runs, two at a time, ~41; EPS as before, ~5
    minutes=45.0,
    seeds=SEEDS,
    cost={f"{m} threads": threads_cost(m) for m in THREADS},
    show=_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> list[dict[str, Any]]:
    results = run(out_dir, progress)
    rows: list[dict[str, Any]] = results["rows"]
    return rows


def run(
    out_dir: Path,
    progress: Progress | None = None,
    *,
    base: QualityRun | None = None,
    seeds: tuple[int, ...] = SEEDS,
    threads: tuple[int, ...] = THREADS,
    grid: settle.Grid = GRID,
) -> dict[str, Any]:
    """Tunes and runs the quality side, runs the EPS side; writes results.json, the plots
    and report.md. The keywords make the tests' and a smoke run's small setting."""
    out_dir.mkdir(parents=True, exist_ok=True)
    base = base or quality_base()
    quality = tune_and_run(base, threads, seeds, progress, grid)
    eps = run_in_processes(run_point, eps_points(), progress)
    results = {
        "examples": base.examples,
        "evaluations": base.evaluations,
        "grid": quality["grid"],
        "grid_step": grid.step,
        "tune_seed": quality["tune_seed"],
        "tuning": quality["tuning"],
        "lr_tuning": quality["lr_tuning"],
        "flattening": flattening(),
        "rows": [*quality["quality"], *eps],
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    _plot(results["rows"], out_dir / "threads.png")
    plot_curves(results, quality["quality"], out_dir)
    (out_dir / "report.md").write_text(report(results))
    return results


def rows_of(results: Any) -> list[dict[str, Any]]:
    """The rows of results.json: its "rows" (tuned results) or the list itself (rows of
    results without tuning)."""
    rows = results.get("rows", []) if isinstance(results, dict) else results
    return cast(list[dict[str, Any]], rows) if isinstance(rows, list) else []


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    fig, (loss_ax, eps_ax) = new_figure(11, 4, columns=2)
    quality = [r for r in rows if r["math"] == "real"]
    threads = [m for m in THREADS if by_seed(quality, "test_logloss", threads=m)]
    for key, label in (("train_loss", "train"), ("test_logloss", "eval")):
        ys = [mean(by_seed(quality, key, threads=m).values()) for m in threads]
        loss_ax.plot(threads, ys, marker="o", label=label)
    loss_ax.set_title(f"S-EASGD loss, {QUALITY_TRAINERS} trainers, tuned rates (simulated)")
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


def report(results: Any) -> str:
    """The report of results.json (tuned results; rows alone give no tuning tables)."""
    rows = rows_of(results)
    quality = [r for r in rows if r["math"] == "real"]
    eps = [r for r in rows if r["math"] == "priced"]
    seeds = sorted({r["seed"] for r in quality})
    threads = [m for m in THREADS if by_seed(quality, "test_logloss", threads=m)]
    lines = [
        "# ShadowSync Fig. 8 in the simulator: S-EASGD over worker threads a trainer",
        "",
        "| | ours | the paper |",
        "| --- | --- | --- |",
        "| model, data | default DLRM (1.9 MB dense), synthetic task | Model-C, Dataset-3 |",
        f"| threads | {', '.join(map(str, THREADS))} | 1, 12, 24, 32, 64 |",
        "| trainers, servers | 5 (1 sync, 4 embedding), 10 (1 sync, 6 embedding) | the same |",
        f"| quality | real math, {QUALITY_TRAINERS} trainers, {len(seeds)} seeds "
        f"({', '.join(map(str, seeds))}), {quality[0]['examples'] if quality else 0:,} examples "
        "one pass | both "
        "scales, 1.97 billion examples |",
        "| dense learning rate | tuned at every thread count on one grid (below) | the same "
        "hyper-parameters for all |",
        f"| EPS | priced math, {EPS_ITERATIONS} iterations a thread, {len(EPS_SEEDS)} "
        f"seed{'s' if len(EPS_SEEDS) != 1 else ''} | measured |",
        "| a trainer's compute | Fig. 5's, shared by its threads, full at 24 (stated) | memory "
        "bandwidth saturated at 24 threads (measured) |",
        "| shadow thread | waits for one new iteration a worker thread | loops |",
        "",
        "Said plainly: EPS flat beyond 24 threads follows from the stated compute model, so "
        "Fig. 8's right panel is reproduced by construction; the left panel (the loss the "
        "threads' Hogwild staleness costs) is measured, each thread count at its own tuned "
        "dense learning rate.",
        "",
        "![loss and EPS over threads](threads.png)",
        "",
        "| threads | dense lr | train loss | eval logloss | sync gap a thread | "
        + " | ".join(f"EPS, {n} trainers" for n in SERVERS)
        + " |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in SERVERS) + " |",
    ]
    for m in threads:
        cells = [
            _spread(list(by_seed(quality, key, threads=m).values()))
            for key in ("train_loss", "test_logloss")
        ]
        rates = ", ".join(
            sorted({f"{r.get('dense_lr', DENSE_LR):g}" for r in quality if r["threads"] == m})
        )
        gap = mean(by_seed(quality, "average_sync_gap_per_thread", threads=m).values())
        speeds = [
            f"{mean(by_seed(eps, 'eps', threads=m, trainers=n).values()):,.0f}" for n in SERVERS
        ]
        lines.append(f"| {m} | {rates} | {' | '.join(cells)} | {gap:.2f} | {' | '.join(speeds)} |")
    lines += ["", *findings(quality, eps)]
    extra = [f"These quality results have {len(seeds)} seeds, the EPS points one each."]
    if not (isinstance(results, dict) and "tuning" in results):
        return reviewer.appended("\n".join(lines), "shadowsync-threads", extra)
    lines += ["", *tuning_table(results), "", *flattening_table(results, quality, threads)]
    lines += ["", *_questions(quality, extra)]
    return "\n".join(lines) + "\n"


def _questions(quality: list[dict[str, Any]], extra: list[str]) -> list[str]:
    """What a reviewer would still ask of the tuned runs: the stated compute model and the
    simulator's Hogwild kept, the run length and the rates said as they now are."""
    kept = reviewer.QUESTIONS["shadowsync-threads"]
    examples = quality[0]["examples"] if quality else 0
    per_thread = {
        m: examples / (QUALITY_TRAINERS * m * TrainSpec().batch_size) for m in (1, THREADS[-1])
    }
    bullets = [
        kept[0],
        f"Quality at 5 trainers only, {examples:,} examples one pass "
        f"({per_thread[1]:,.0f} iterations a thread at 1 thread, {per_thread[THREADS[-1]]:.1f} "
        f"at {THREADS[-1]}): at {THREADS[-1]} threads each thread barely trains, which a "
        "one-pass run over billions would not show.",
        "The dense learning rate is tuned at every thread count on one grid, on one seed "
        "that none of the claims' runs uses, scored on the held-out logloss of the same "
        "synthetic task (the task has no separate validation split); the paper keeps one "
        "set of hyper-parameters for every thread count.",
        kept[3],
        *extra,
        reviewer.SEED_RULE,
    ]
    return [reviewer.TITLE, "", *(f"- {b}" for b in bullets)]


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
            f"far worse at {most} threads, each count at its tuned rate."
        )
        lines.append(
            f"- {name} at {most} threads above {few} thread (the paper: rising with the "
            f"threads, mildly): {settled(v)}; {v.describe(5)}; the mean rises {rise:+.2f}% "
            f"(how mild is for the reader: the paper gives no number).{plainly}"
        )
    for n in SERVERS:
        speed = {m: mean(by_seed(eps, "eps", threads=m, trainers=n).values()) for m in THREADS}
        loss = {m: mean(by_seed(quality, "test_logloss", threads=m).values()) for m in (few, 24)}
        lines.append(
            f"- {n} trainers: EPS at 24 threads {speed[24] / speed[few]:.1f}x one thread's, at "
            f"{most} {speed[most] / speed[24]:.2f}x 24's (the paper: it stops growing at 24; "
            f"here by the stated model); the eval logloss rises "
            f"{100 * (loss[24] - loss[few]) / loss[few]:+.3f}% from 1 to 24 threads."
        )
    return lines
