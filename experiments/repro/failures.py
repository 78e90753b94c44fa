"""Checkpoint interval and recovery policy under node losses, simulated.

The question a user asks: at 1,000 workers, with nodes lost every so often, how often to
checkpoint, and does recovering only the lost node (CPR, Maeng et al. MLSys 2021) beat
rolling the whole job back? Three parts:

1. The job at scale, with the real math (runtime/sim): 1,000 async workers (125 trainers x
   8), 16 embedding servers, 8 dense servers, the reproductions' cluster cost model; its
   examples per second, and what a cut (a consistent checkpoint) costs it: the reader
   pauses while the 1,000 workers land their pushes and park.
2. Its timeline over 5 days of training (runtime/sim/timeline.py): losses at the job's
   MTBF of 14, 20 or 30 hours (the range CPR reports for such jobs), a cut costing the
   measured pause plus the time to write the state (not simulated: 10, 60 or 300 s, as a
   model's state of 20 GB, 120 GB or 600 GB would take at 2 GB/s), 10 s to notice a loss
   (recsync's ping timeout) and 120 s to restart; policies: roll everything back (recsync)
   or recover only a lost embedding server or trainer (CPR). The best interval found, next
   to Young's and Daly's formulas.
3. The timeline checked against the real math at small scale: the faulty real-math job
   (runtime/sim/faulty.py, 8 trainers x 2 async workers losing nodes, rolled back) over
   several seeds, and the timeline given its measured work, cut cost, interval and losses;
   then the same for recovering one node alone (runtime/sim/one_node.py, the engine's
   rules: 8 x 2 S-EASGD workers, a lost embedding shard restored from the last cut, a lost
   trainer restarted).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from experiments.repro import reviewer
from experiments.repro.common import CLUSTER_COST
from experiments.repro.failures_claims import checks
from experiments.repro.registry import Progress, reproduction
from experiments.repro.steady import steady
from recsync.app.runs.plots import new_figure, save_figure
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec, default_tables
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.sim.cost import Faults
from recsync.runtime.sim.faulty import FaultySimJob
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.timeline import Timeline, run_timeline, young_daly

MODEL = ModelSpec(tables=default_tables(num_rows=1000, dim=8), bottom_mlp=(64, 32), top_mlp=(64,))
TRAIN = TrainSpec(batch_size=64)
SCALE = {"trainer": 125, "embedding-server": 16, "dense-server": 8, "reader": 1}
WORK_S = 5 * 24 * 3600.0  # five days of training
JOB_MTBF_H = (14.0, 20.0, 30.0)
WRITE_S = (10.0, 60.0, 300.0)  # writing the state: 20, 120, 600 GB at 2 GB/s
DETECT_S, RESTART_S = 10.0, 120.0
INTERVALS_S = [120 * 2 ** (k / 2) for k in range(19)]  # 2 minutes to about 17 hours
SEEDS = 100
CPR = "CPR (Maeng et al., MLSys 2021)"
PARTIAL = {"trainer": "partial", "embedding-server": "partial"}


def scale_job(examples: int) -> JobSpec:
    cluster = ClusterSpec(125, 8, 16, num_dense_servers=8)
    synthetic = SyntheticSpec(num_train=examples, num_test=1_000, table_rows=(1000,) * 26)
    return JobSpec(MODEL, TRAIN, cluster, strategy_config("async"), synthetic)


def measure_scale(examples: int) -> dict[str, Any]:
    """The 1,000-worker job's steady examples/s and the seconds a cut pauses it
    (virtual)."""
    spec = scale_job(examples)
    calm = SimJob(spec, plan_for(spec), CLUSTER_COST).run()
    every = CheckpointEvery(seconds=calm["train_seconds"] / 5)
    cut = SimJob(spec, plan_for(spec), CLUSTER_COST, checkpoint_every=every).run()
    cuts = cut["cuts"]["taken"]
    return {
        "examples": examples,
        "eps_steady": calm["eps_steady"],
        "steady_batches_per_thread": calm["steady_batches_per_thread"],
        "seconds": calm["train_seconds"],
        "seconds_with_cuts": cut["train_seconds"],
        "cuts": cuts,
        "pause_per_cut_s": cut["cuts"]["paused_seconds"] / max(cuts, 1),
        "cost_per_cut_s": (cut["train_seconds"] - calm["train_seconds"]) / max(cuts, 1),
    }


def scale_timeline(job_mtbf_s: float, cut_s: float, interval_s: float, partial: bool) -> Timeline:
    nodes = sum(SCALE.values())
    return Timeline(
        work_s=WORK_S,
        interval_s=interval_s,
        cut_s=cut_s,
        detect_s=DETECT_S,
        restart_s=RESTART_S,
        counts=dict(SCALE),
        mtbf_s={role: job_mtbf_s * nodes for role in SCALE},
        actions={role: PARTIAL.get(role, "rollback") if partial else "rollback" for role in SCALE},
    )


def sweep(pause_s: float) -> list[dict[str, Any]]:
    """Mean overhead over the seeds at every (MTBF, write time, policy, interval)."""
    rows = []
    for mtbf_h in JOB_MTBF_H:
        for write_s in WRITE_S:
            for partial in (False, True):
                for interval in INTERVALS_S:
                    timeline = scale_timeline(mtbf_h * 3600, pause_s + write_s, interval, partial)
                    runs = [run_timeline(timeline, seed) for seed in range(SEEDS)]
                    rows.append(
                        {
                            "job_mtbf_h": mtbf_h,
                            "write_s": write_s,
                            "policy": "partial (CPR)" if partial else "rollback (recsync)",
                            "interval_s": interval,
                            "overhead": statistics.mean(r.overhead(WORK_S) for r in runs),
                            "losses": statistics.mean(r.losses for r in runs),
                            "lost_updates": statistics.mean(r.lost_s / WORK_S for r in runs),
                        }
                    )
    return rows


def best_intervals(rows: list[dict[str, Any]], pause_s: float) -> list[dict[str, Any]]:
    """Per (MTBF, write time, policy): the best interval, its overhead, Young's and Daly's."""
    best = []
    keys = sorted({(r["job_mtbf_h"], r["write_s"], r["policy"]) for r in rows})
    for mtbf_h, write_s, policy in keys:
        group = [r for r in rows if (r["job_mtbf_h"], r["write_s"], r["policy"]) == (
            mtbf_h, write_s, policy)]  # fmt: skip
        top = min(group, key=lambda r: r["overhead"])
        young, daly = young_daly(pause_s + write_s, mtbf_h * 3600, DETECT_S + RESTART_S)
        at_young = min(group, key=lambda r: abs(math.log(r["interval_s"] / young)))
        best.append(
            {
                "job_mtbf_h": mtbf_h,
                "write_s": write_s,
                "policy": policy,
                "best_interval_s": top["interval_s"],
                "best_overhead": top["overhead"],
                "lost_updates": top["lost_updates"],
                "young_s": young,
                "daly_s": daly,
                "overhead_at_young": at_young["overhead"],
            }
        )
    return best


VALIDATION_EXAMPLES = 50_000
VALIDATION_SEEDS = 60


ONE_NODE_POLICY: dict[str, Any] = {"trainer": "restart", "embedding_server": "partial"}
ONE_NODE_SEEDS = 8


VALIDATION_SERVERS = {"async": 2, "easgd": 1}


def validation_job(seed: int, strategy: str = "async") -> JobSpec:
    synthetic = SyntheticSpec(num_train=VALIDATION_EXAMPLES, num_test=2_000, table_rows=(100,) * 26)
    # async's 2 dense servers, or S-EASGD's 1 sync server (cluster.num_dense_servers both)
    cluster = ClusterSpec(8, 2, 4, num_dense_servers=VALIDATION_SERVERS[strategy])
    train = dataclasses.replace(TRAIN, seed=seed)
    return JobSpec(MODEL, train, cluster, strategy_config(strategy), synthetic)


def validate(seeds: int, progress: Progress | None, one_node: bool = False) -> dict[str, Any]:
    """The faulty real-math job against the timeline of its own measures: rolled back
    (async), or (`one_node`) recovering a lost shard or trainer alone (S-EASGD)."""
    strategy = "easgd" if one_node else "async"
    spec = validation_job(0, strategy)
    calm_job = SimJob(spec, plan_for(spec), CLUSTER_COST)
    calm = calm_job.run()
    counts = dict(Counter(n.address.role.value for n in calm_job.topology.nodes))
    work = calm["train_seconds"]
    # examples to seconds as the timeline counts them: its work_s is the calm run's whole time
    whole_run_eps = calm["eps"]
    interval = work / 8
    every = CheckpointEvery(seconds=interval)
    cut = SimJob(spec, plan_for(spec), CLUSTER_COST, checkpoint_every=every).run()
    cut_s = (cut["train_seconds"] - work) / max(cut["cuts"]["taken"], 1)
    nodes = sum(counts.values())
    job_mtbf = work / 2  # about two losses a run
    detect, restart = work / 40, work / 20
    faults = Faults(
        trainer_mtbf_s=job_mtbf * nodes,
        server_mtbf_s=job_mtbf * nodes,
        reader_mtbf_s=job_mtbf * nodes,
        detect_s=detect,
        restart_s=restart,
    )
    cost = dataclasses.replace(CLUSTER_COST, faults=faults)
    # the reader rolls back, as the timeline has it (its default, replaced alone, is not modelled)
    actions = ONE_NODE_POLICY if one_node else {}
    policy = RecoveryPolicy(max_restarts=50, reader="rollback", **actions)
    measured = []
    for seed in range(seeds):
        job = FaultySimJob(validation_job(seed, strategy), cost, every, policy)
        summary = job.run()
        measured.append(
            {
                "seed": seed,
                "seconds": summary["train_seconds"],
                "losses": len(summary["recovery"]["losses"]),
                "replayed": summary["recovery"]["examples_replayed"],
                "updates_lost": summary["recovery"]["examples_lost"],
            }
        )
        if progress is not None:
            progress(measured[-1])
    alone = {"trainer", "embedding-server"} if one_node else set()
    timeline = Timeline(
        work_s=work,
        interval_s=interval,
        cut_s=cut_s,
        detect_s=detect,
        restart_s=restart,
        counts=counts,
        mtbf_s={role: job_mtbf * nodes for role in counts},
        actions={role: "partial" if role in alone else "rollback" for role in counts},
    )
    predicted = [run_timeline(timeline, seed) for seed in range(2_000)]
    return {
        "strategy": strategy,
        "policy": dataclasses.asdict(policy),
        "work_s": work,
        "interval_s": interval,
        "cut_s": cut_s,
        "job_mtbf_s": job_mtbf,
        "runs": measured,
        "simulated_seconds": statistics.mean(m["seconds"] for m in measured),
        "simulated_seconds_se": _standard_error([m["seconds"] for m in measured]),
        "simulated_losses": statistics.mean(m["losses"] for m in measured),
        "simulated_losses_se": _standard_error([m["losses"] for m in measured]),
        "simulated_replayed_s": statistics.mean(m["replayed"] for m in measured) / whole_run_eps,
        "simulated_lost_s": statistics.mean(m["updates_lost"] for m in measured) / whole_run_eps,
        "timeline_seconds": statistics.mean(r.seconds for r in predicted),
        "timeline_losses": statistics.mean(r.losses for r in predicted),
        "timeline_replayed_s": statistics.mean(r.replayed_s for r in predicted),
        "timeline_lost_s": statistics.mean(r.lost_s for r in predicted),
    }


def _standard_error(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values))


def _failure_point(p: dict[str, Any]) -> str:
    if "eps_steady" in p:
        return (
            f"1,000 workers: {p['eps_steady']:,.0f} ex/s (steady), a cut costs "
            f"{p['cost_per_cut_s']:.4f} s"
        )
    return f"real-math run, seed {p['seed']:>2}: {p['losses']} losses, {p['seconds']:.4f} s"


@reproduction(
    "failures",
    paper="Young/Daly checkpoint interval; CPR (Maeng et al., MLSys 2021)",
    claim="best checkpoint interval and recovery policy under node losses at 1,000 workers",
    report_dir="reports/failures",
    minutes=10,
    seeds={
        "timeline draws": SEEDS,
        "real-math runs": VALIDATION_SEEDS,
        "one-node runs": ONE_NODE_SEEDS,
    },
    cost={"cluster": CLUSTER_COST},
    show=_failure_point,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    scale = measure_scale(640_000)
    if progress is not None:
        progress(scale)
    pause_s = scale["cost_per_cut_s"]
    rows = sweep(pause_s)
    best = best_intervals(rows, pause_s)
    validation = validate(VALIDATION_SEEDS, progress)
    validation["one_node"] = validate(ONE_NODE_SEEDS, progress, one_node=True)
    results = {"scale": scale, "sweep": rows, "best": best, "validation": validation}
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _figure(rows, best, out_dir / "overhead_vs_interval.png")
    (out_dir / "report.md").write_text(_report(scale, best, validation), encoding="utf-8")
    return results


def _figure(rows: list[dict[str, Any]], best: list[dict[str, Any]], path: Path) -> None:
    figure, ax = new_figure(8, 4.5)
    for write_s, color in zip(WRITE_S, ("tab:blue", "tab:orange", "tab:green"), strict=True):
        for policy, style in (("rollback (recsync)", "-"), ("partial (CPR)", "--")):
            points = [
                r for r in rows
                if r["job_mtbf_h"] == 20.0 and r["write_s"] == write_s and r["policy"] == policy
            ]  # fmt: skip
            ax.plot(
                [p["interval_s"] / 60 for p in points],
                [100 * p["overhead"] for p in points],
                style,
                color=color,
                label=f"{policy}, write {write_s:.0f} s",
            )
        young = next(
            b["young_s"] for b in best if b["write_s"] == write_s and b["job_mtbf_h"] == 20
        )
        ax.axvline(young / 60, color=color, linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("checkpoint interval (minutes; dotted: Young's)")
    ax.set_ylabel("time lost to failures and checkpoints (%)")
    ax.set_title("1,000 workers, job MTBF 20 h, 5 days of training")
    ax.legend(fontsize=7)
    save_figure(figure, path)


def _report(scale: dict[str, Any], best: list[dict[str, Any]], validation: dict[str, Any]) -> str:
    return render_report(scale, best, validation)


def render_report(scale: dict[str, Any], best: list[dict[str, Any]], v: dict[str, Any]) -> str:
    """report.md of the reproduction (see the module's docstring for the setting)."""
    lines = [
        "# Checkpoint interval and recovery policy under node losses (simulator)",
        "",
        __doc__ or "",
        "## 1. The job at scale (real math)",
        "",
        f"1,000 async workers, {scale['examples']:,} examples: "
        f"{steady(scale, 'reports/failures/results.json', 'scale'):,.0f} examples/s (virtual, "
        f"steady); {scale['cuts']} cuts cost {scale['cost_per_cut_s'] * 1000:.1f} ms of "
        f"training each (the reader paused {scale['pause_per_cut_s'] * 1000:.1f} ms a cut while "
        "the workers parked). Writing the state is not simulated: it is added as 10, 60 or 300 s.",
        "",
        "## 2. Best interval over 5 days of training",
        "",
        "| job MTBF | cut cost | policy | best interval | overhead there | Young | Daly "
        "| overhead at Young's | updates lost |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in best:
        cost = scale["cost_per_cut_s"] + b["write_s"]
        lines.append(
            f"| {b['job_mtbf_h']:.0f} h | {cost:.0f} s | {b['policy']} | "
            f"{b['best_interval_s'] / 60:.0f} min | {100 * b['best_overhead']:.2f}% | "
            f"{b['young_s'] / 60:.0f} min | {b['daly_s'] / 60:.0f} min | "
            f"{100 * b['overhead_at_young']:.2f}% | {100 * b['lost_updates']:.2f}% |"
        )
    lines += [
        "",
        "![overhead vs interval](overhead_vs_interval.png)",
        "",
        "## 3. The timeline against the real math",
        "",
        *_validation_lines(v, "async workers, rolled back"),
        *(
            _validation_lines(v["one_node"], "S-EASGD workers, a lost shard or trainer alone")
            if "one_node" in v
            else []
        ),
        "## Findings",
        "",
        *findings(scale, best, v),
    ]
    return reviewer.appended("\n".join(lines), "failures")


def _validation_lines(v: dict[str, Any], what: str) -> list[str]:
    lines = [
        f"8 x 2 {what}, {VALIDATION_EXAMPLES:,} examples: {v['work_s']:.3f} s of training "
        f"(virtual), a cut every {v['interval_s']:.3f} s costing {v['cut_s'] * 1000:.2f} ms, "
        f"job MTBF {v['job_mtbf_s']:.3f} s; {len(v['runs'])} seeds.",
        "",
        "| | real-math simulator | timeline |",
        "| --- | --- | --- |",
        f"| seconds to finish | {v['simulated_seconds']:.4f} +- {v['simulated_seconds_se']:.4f} "
        f"| {v['timeline_seconds']:.4f} |",
        f"| losses | {v['simulated_losses']:.2f} +- {v['simulated_losses_se']:.2f} | "
        f"{v['timeline_losses']:.2f} |",
        f"| training replayed (s) | {v['simulated_replayed_s']:.4f} | "
        f"{v['timeline_replayed_s']:.4f} |",
    ]
    if "simulated_lost_s" in v:
        lines.append(
            f"| training whose updates were lost (s) | {v['simulated_lost_s']:.4f} | "
            f"{v['timeline_lost_s']:.4f} |"
        )
    return [*lines, ""]


def findings(scale: dict[str, Any], best: list[dict[str, Any]], v: dict[str, Any]) -> list[str]:
    """Each claim: what Young/Daly and CPR say, what the simulation gives, whether it holds."""
    rollback = [b for b in best if b["policy"].startswith("rollback")]
    partial = [b for b in best if b["policy"].startswith("partial")]
    c = checks(best, INTERVALS_S[1] / INTERVALS_S[0])
    ratios, extra, factors = c.ratios, c.extra, c.factors
    at20 = {b["write_s"]: b for b in rollback if b["job_mtbf_h"] == 20.0}
    p20 = {b["write_s"]: b for b in partial if b["job_mtbf_h"] == 20.0}
    lengths = [p["best_interval_s"] / at20[w]["best_interval_s"] for w, p in p20.items()]
    gap = 100 * (v["timeline_seconds"] / v["simulated_seconds"] - 1)
    sigmas = abs(v["timeline_seconds"] - v["simulated_seconds"]) / v["simulated_seconds_se"]
    grid = INTERVALS_S[1] / INTERVALS_S[0]
    costs = ", ".join(f"{scale['cost_per_cut_s'] + w:.0f} s" for w in WRITE_S)
    rolled = ", ".join(f"{100 * at20[w]['best_overhead']:.2f}%" for w in WRITE_S)
    recovered = ", ".join(f"{100 * p20[w]['best_overhead']:.2f}%" for w in WRITE_S)
    return [
        f"- Young (1974) and Daly (2006): the best interval is about sqrt(2 C M). Rolling back, "
        f"the best interval found on the grid (steps of x{grid:.2f}) is {min(ratios):.2f} to "
        f"{max(ratios):.2f} times Young's over the 9 settings, and checkpointing at Young's "
        f"interval costs at most {max(extra):.2f} percentage points more than the best: the "
        "formula describes recsync's rollback (it is the same model: lose the work since the "
        "last checkpoint, pay C a checkpoint). Within one grid step of Young's on every "
        f"setting (the largest |ln(best / Young's)| against ln {grid:.2f}): "
        f"{c.young.describe(3)} (each figure is a mean over failure draws whose spread is not "
        "kept).",
        "- CPR (Maeng et al., MLSys 2021) reports checkpoint-related overhead of 8.2-8.5% with "
        "full recovery against 0.53-0.68% with partial recovery, on a setup emulating a "
        "production cluster's failures. Here, at a job MTBF of 20 h and cut costs of "
        f"{costs}: rolling back costs {rolled} at the best interval, recovering only the lost "
        f"node {recovered}: partial recovery costs {min(factors):.1f} to "
        f"{max(factors):.1f} times less ({c.cpr.describe(2)}; each figure is a mean over "
        "failure draws whose spread is not kept), and the figures are of the same order; "
        "the settings "
        "differ (CPR's failure pattern and checkpoint cost are theirs, ours are stated above).",
        "- What partial recovery gives up: the updates a lost shard received since its last "
        f"checkpoint; at its best interval ({_span(lengths)} times rollback's) that is "
        + ", ".join(f"{100 * p20[w]['lost_updates']:.2f}%" for w in WRITE_S)
        + " of the training time's updates to the lost shards. CPR found model quality on par "
        "with full recovery when this portion stays small, and picks the interval to bound it; "
        "the accuracy cost is not simulated here at this scale.",
        f"- The timeline against the real math (section 3): {gap:+.1f}% on the time to finish "
        f"({sigmas:.1f} standard errors of the {len(v['runs'])} real-math runs), losses "
        f"{v['timeline_losses']:.2f} against {v['simulated_losses']:.2f}. The real-math runs pay "
        "a start-up and a tail at every restart that the timeline leaves out.",
        *_one_node_finding(v),
        "- Not modeled: losses that are not independent (a rack, a network partition), "
        "stragglers before a loss, the time to write the state (assumed, not simulated), and "
        "what the lost updates cost in accuracy at this scale. Recovering one node alone runs "
        "the same rules in the real-math simulator and on recsync's Ray engine "
        "(`recovery.embedding_server = partial`, `recovery.trainer = restart`; "
        "benchmarks/bench_faults.py measures it on 2 x 2 workers).",
    ]


def _one_node_finding(v: dict[str, Any]) -> list[str]:
    one = v.get("one_node")
    if one is None:
        return []
    gap = 100 * (one["timeline_seconds"] / one["simulated_seconds"] - 1)
    sigmas = abs(one["timeline_seconds"] - one["simulated_seconds"]) / one["simulated_seconds_se"]
    return [
        f"- One node alone, against the real math (section 3, S-EASGD): {gap:+.1f}% on the "
        f"time to finish ({sigmas:.1f} standard errors of {len(one['runs'])} runs); training "
        f"whose updates were lost {one['simulated_lost_s']:.4f} s simulated against "
        f"{one['timeline_lost_s']:.4f} s in the timeline. The timeline charges a replaced node "
        "its restart but lets the others go on at full speed; in the real math its callers "
        "wait for it."
    ]


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f}" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f} to {high:.1f}"
