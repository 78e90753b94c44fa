"""How ShadowSync Fig. 8's loss side settles: S-EASGD's dense learning rate tuned at every
thread count on one grid (`settle.tune`, scored by the held-out logloss of a tuning seed no
claim reads), the claims' runs on `settle.SEEDS` at each count's chosen rate, each with its
held-out loss curve (`settle.Flattening`). The quality runs themselves, the tuning and the
report's tuning and flattening tables; the EPS side (priced math) stays
`shadowsync_points.run_point`'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any, cast

from experiments.repro import settle
from experiments.repro.common import run_in_processes
from experiments.repro.registry import Progress
from experiments.repro.shadowsync_points import strategy_of, threads_cost
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.job import SimJob

# the dense Adagrad rates tried at every thread count (Table 3's tuning tried 0.001-0.008),
# multiplied or divided by 4 past an edge where the best sits there (at 64 threads 0.004
# diverged in a 1M-example trial: the most threads may need far below 0.001)
GRID = settle.Grid((0.001, 0.002, 0.004, 0.008), step=4.0)
TUNE_SEED = 5  # the tuning's runs: a seed none of the claims reads
RULE = settle.Flattening()
EVALUATIONS = 8  # held-out evaluations a run (a multiple of 4: one at the last quarter's start)

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class QualityRun:
    """One real-math S-EASGD run of Fig. 8: `threads` a trainer at `dense_lr`, `examples`
    one pass, the held-out loss `evaluations` times over the run (a deterministic repr:
    one item of `common.run_in_processes`)."""

    trainers: int
    sync_servers: int
    embedding_servers: int
    threads: int
    seed: int
    dense_lr: float
    examples: int
    test_examples: int = 20_000
    evaluations: int = EVALUATIONS


def run_quality(run: QualityRun) -> dict[str, Any]:
    """The run's losses, sync gaps and held-out `curve` ((examples trained, logloss) at each
    evaluation and the end), in the row shape the report and claims read (math "real")."""
    synthetic = dataclasses.replace(
        SyntheticSpec(), num_train=run.examples, num_test=run.test_examples
    )
    train = TrainSpec(dense_optimizer=DenseOptimizerSpec(lr=run.dense_lr), seed=run.seed)
    cluster = ClusterSpec(
        run.trainers, run.threads, run.embedding_servers, num_dense_servers=run.sync_servers
    )
    spec = JobSpec(ModelSpec(), train, cluster, strategy_of("S-EASGD", None), synthetic)
    records: list[dict[str, Any]] = []
    every = max(1, run.examples // run.evaluations)
    job = SimJob(
        spec, plan_for(spec), threads_cost(run.threads), eval_every=every, on_eval=records.append
    )
    summary = job.run()
    return dataclasses.asdict(run) | {
        "variant": "S-EASGD",
        "math": "real",
        "cost": "threads",
        "eps": float(summary["eps_steady"]),
        "average_sync_gap": summary["average_sync_gap"],
        "average_sync_gap_per_thread": summary["average_sync_gap_per_thread"],
        "train_loss": summary["train_loss"],
        "test_logloss": summary["test_logloss"],
        "curve": curve_of(records, summary),
    }


def curve_of(records: Rows, summary: dict[str, Any]) -> list[list[float]]:
    """(examples trained, held-out logloss) at each evaluation before the end, then the
    end's."""
    end = float(summary["examples_trained"])
    points = [[float(r["examples"]), float(r["test_logloss"])] for r in records]
    return [*(p for p in points if p[0] < end), [end, float(summary["test_logloss"])]]


def judged_runs(
    base: QualityRun, chosen: Mapping[int, float], seeds: Sequence[int]
) -> list[QualityRun]:
    """Every thread count on every seed at its chosen rate."""
    return [
        dataclasses.replace(base, threads=m, seed=seed, dense_lr=chosen[m])
        for seed in seeds
        for m in chosen
    ]


def tune_and_run(
    base: QualityRun,
    threads: Sequence[int],
    seeds: Sequence[int],
    progress: Progress | None,
    grid: settle.Grid = GRID,
) -> dict[str, Any]:
    """Tunes every thread count on `grid` (seed TUNE_SEED's held-out logloss, the lowest
    chosen), then runs every count on `seeds` at its chosen rate: the tuning
    (Tuned.as_dict, with `threads`), the tuning's rows and the claims' rows."""
    assert TUNE_SEED not in seeds, "the tuning seed is one no claim reads"
    tried: Rows = []

    def score(points: list[tuple[Hashable, float]]) -> list[float]:
        runs = [
            dataclasses.replace(base, threads=cast(int, m), seed=TUNE_SEED, dense_lr=lr)
            for m, lr in points
        ]
        rows = run_in_processes(run_quality, runs, progress)
        tried.extend(rows)
        return [float(r["test_logloss"]) for r in rows]

    tuned = settle.tune(list(threads), grid, score, higher_is_better=False)
    chosen = {m: tuned[m].chosen for m in threads}
    rows = run_in_processes(run_quality, judged_runs(base, chosen, seeds), progress)
    return {
        "grid": list(grid.values),
        "tune_seed": TUNE_SEED,
        "tuning": tuning_rows(tuned, threads),
        "lr_tuning": sorted(tried, key=lambda r: (r["threads"], r["dense_lr"])),
        "quality": rows,
    }


def tuning_rows(tuned: Mapping[Hashable, settle.Tuned], threads: Sequence[int]) -> Rows:
    """Each count's tuning (Tuned.as_dict) with its `threads`."""
    return [tuned[m].as_dict() | {"threads": m} for m in threads]


def flattening() -> dict[str, Any]:
    return {
        "rule": RULE.describe(),
        "last_fraction": RULE.last_fraction,
        "tolerance": RULE.tolerance,
    }


def _rule(results: dict[str, Any]) -> settle.Flattening:
    f = results["flattening"]
    return settle.Flattening(f["last_fraction"], f["tolerance"])


def spread(values: list[float], digits: int = 5, percent: bool = False) -> str:
    """`mean (min .. max)` over seeds; `percent`: signed, with a % sign."""
    spec = f"+.{digits}f" if percent else f".{digits}f"
    unit = "%" if percent else ""
    m, lo, hi = (format(x, spec) + unit for x in (mean(values), min(values), max(values)))
    return f"{m} ({lo} .. {hi})"


def tuning_table(results: dict[str, Any]) -> list[str]:
    """Each thread count's tuning: the rates tried with their held-out loss, the chosen
    rate, and whether it sits at an edge of what was tried."""
    lines = [
        f"## Dense learning rate, tuned at every thread count (seed {results['tune_seed']}, "
        "held-out logloss)",
        "",
        "Every thread count tried the same grid ("
        + ", ".join(f"{v:g}" for v in results["grid"])
        + f"), multiplied or divided by {results.get('grid_step', 2):g} past an edge where the "
        "best sat there, up to "
        f"{settle.MAX_EXTENSIONS} times; scored by the held-out logloss of seed "
        f"{results['tune_seed']}'s run, a seed none of the claims reads (the task has no "
        "separate validation split); the lowest chosen.",
        "",
        "| threads | rates tried: held-out logloss | chosen | at an edge? |",
        "| --- | --- | --- | --- |",
    ]
    for t in results["tuning"]:
        tried, edge = settle.tried_text(t), settle.edge_text(t)
        lines.append(f"| {t['threads']} | {tried} | {t['chosen']:g} | {edge} |")
    return lines


def flattening_table(results: dict[str, Any], quality: Rows, threads: Sequence[int]) -> list[str]:
    """Per thread count: the held-out loss's fall over the run's last quarter over seeds,
    and how many runs met the criterion; the runs that did not, said plainly."""
    rule = _rule(results)
    lines = [
        "## Run length: has the held-out loss flattened?",
        "",
        f"Criterion: {rule.describe()} ({results['evaluations']} evaluations a run and the "
        "end). The fall is (held-out loss at the last quarter's start - final) / final, "
        "over seeds: mean (min .. max).",
        "",
        "![held-out loss over the run](curves.png)",
        "",
        "| threads | dense lr | fall over the last quarter | runs flat |",
        "| --- | --- | --- | --- |",
    ]
    falls: list[float] = []
    for m in threads:
        curves = [r["curve"] for r in quality if r["threads"] == m]
        if not curves:
            continue
        change = [100.0 * rule.change(c) for c in curves]
        falls += change
        flat = sum(rule.flat(c) for c in curves)
        lr = ", ".join(sorted({f"{r['dense_lr']:g}" for r in quality if r["threads"] == m}))
        lines.append(
            f"| {m} | {lr} | {spread(change, 3, percent=True)} | {flat} of {len(curves)} |"
        )
    flat_all = sum(rule.flat(r["curve"]) for r in quality)
    lines += ["", f"{flat_all} of {len(quality)} runs met the criterion."]
    rose = sum(rule.change(r["curve"]) < 0 for r in quality)
    if rose:
        lines[-1] += (
            f" In {rose} of them the held-out loss rose over the last quarter (a negative "
            "fall): flat by the rule, but not settled into a minimum."
        )
    if falls and flat_all < len(quality):
        lines[-1] += (
            f" The others did not: the largest fall over a last quarter was {max(falls):.3f}% "
            f"of the final loss (the criterion: below {100 * rule.tolerance:.1f}%). These are "
            "the longest runs affordable here (one pass over a fixed set, the thread counts "
            "splitting it); where a run did not flatten, its loss may still move with more "
            "examples."
        )
    return lines


PLOTTED_FROM = 0.125  # the first evaluation (the first iterations' blow-up) left out


def plot_curves(results: dict[str, Any], quality: Rows, out_dir: Path) -> None:
    """The held-out curves of seed 0's runs at their chosen rates, one line a thread count,
    the criterion's window shaded."""
    seed = min(r["seed"] for r in quality)
    curves = settle.Curves()
    for r in quality:
        if r["seed"] == seed:
            start = r["curve"][-1][0] * PLOTTED_FROM
            curves.curves[f"{r['threads']} threads, lr {r['dense_lr']:g}"] = [
                (p, loss) for p, loss in r["curve"] if p >= start
            ]
    curves.plot(
        out_dir / "curves.png",
        f"S-EASGD held-out logloss, seed {seed}, each thread count at its tuned rate",
        "examples trained",
        _rule(results),
    )
