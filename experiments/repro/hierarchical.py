"""Reproduction of hierarchical training (Huang et al., KDD 2021) in the simulator: Fig. 7
and 8 (EASGD with 40 trainers vs HT with 5, 8 and 10 groups of 6 trainers + 6 group PSs:
loss and EPS), Fig. 10a/b (EPS over groups, and over nodes per group), Fig. 11 (the
ablation at 5 groups); and a small job on the real engine beside the simulator.

Each setting beside the paper's (Sec. 5; hierarchical_settings.py holds the values):
- Throughput (Fig. 8, 10, 11). Paper: internal DLRM-like models, dense part "several
  hundreds megabytes", 100 to 200 nodes, 18-core trainers. Ours: `LARGE_MODEL`, a dense
  part of 314.7 MB (78.7M parameters), in priced math (`THROUGHPUT_MATH`: every FC,
  message and sync priced as in real math, no tensor held, so 40 EASGD replicas cost no
  memory); `CORES` = 4 cores a machine; `ITERATIONS_PER_THREAD` (20) batches per worker
  thread, so that the steady window (20% to 80% of the examples) spans 12 of them, at least
  the 10 a steady rate needs (`measures.check_steady` refuses a point with fewer); EPS is
  that steady rate (`eps_steady`, docs/simulator.md, "Examples per second"); 25 Gbit/s
  NICs.
- Fig. 10b. Paper: 8 groups, (2, 2) to (10, 10), Model-A. Ours: 8 groups, the same
  pairs, on `LOW_BANDWIDTH_BYTES_S` (1 Gbit/s) NICs, where the trainer <-> group PS
  traffic takes much of a group PS's time.
- Loss (Fig. 7). Paper: 9 billion examples, one run each (no seeds stated), hyper-
  parameters shared. Ours: `LOSS_MODEL` on `LOSS_TASK` in real math, a cut of the default
  DLRM and task (8 of the 26 tables and features, the dense MLPs 13-128-64-16 and
  52-128-64-1 instead of 13-512-256-64-16 and 367-512-256-1: the default made an HT run
  2x as costly, and 5 seeds of tuned runs of the default at this length would not fit) on
  `LOSS_EXAMPLES` = 2,000,000 examples (twice the 1,000,000 of the default DLRM before,
  whose held-out loss was still falling), seeds `LOSS_SEEDS` (5). Every variant (EASGD
  40t, HT 5g, 8g, 10g) is tuned on the same grid `LOSS_GRID` of factors on both default
  Adagrad rates (`settle.tune`: a best value at an edge gets the next value past it, up to
  3 times), scored by the held-out logloss at the end of its seed-0 run (the claims read
  the train loss); and a control the paper does not need, each HT topology on g/40 of the
  examples, so that each dense replica sees what each of EASGD 40t's sees, tuned on its
  own (its examples per replica differ). Each run scores the held-out loss `LOSS_EVALS`
  times on `LOSS_TEST` held-out examples; the report plots the curves and says whether
  each run flattened by `FLATTENING` (settle.Flattening), and by how much it still fell.
  2,000,000 examples is the longest these runs afford (below), not a length shown to
  flatten: one EASGD 40t run on the cut problem (x0.0625, seed 0, 4,000,000 examples,
  scored every 250,000; 2026-12-07) fell from 0.5800 at 1,420,032 examples to 0.5704 at
  1,920,000 (about 1.6% over the last quarter of a 2,000,000-example run) and from 0.5624
  at 2,919,680 to 0.5590 at 4,000,000 (0.6%: not flat even at twice this length). EASGD
  40t, whose 40 replicas each see the fewest examples, is expected to fall short; the
  report gives each run's number.

Cost: about 225 minutes of one core, 120 on the 2-core machine (`minutes=`). Timed on
2026-12-07 (process CPU seconds, one torch thread, 100,000 examples with 8 held-out
evaluations, on the 2-core machine while about ten other processes loaded it): HT 5g 27.3 s
on the cut model against 56.2 s on the default DLRM, which took 39.2 s on the unloaded
machine on 2026-11-29: so on the cut model, unloaded, about 3 s plus 0.16 ms an example
for HT; EASGD 40t on the cut model 182.4 s for 4,000,000 examples with 16 evaluations
(loaded), about 2 s plus 0.04 ms an example unloaded. A run of 2,000,000 examples: HT
about 323 s, EASGD 40t 82 s; the controls (250,000, 400,000 and 500,000 examples) 43, 67
and 83 s. The tuning (4 factors, and about one more a variant past an edge): 5 x 82 + 15 x
323 + 5 x 193 = 6,220 s; the other 4 seeds: 4 x 82 + 12 x 323 + 4 x 193 = 4,976 s; so the
loss runs about 187 minutes of one core. The 18 throughput points (56,480 priced batches at
20 a worker thread; timed loaded the same day: HT 10g's 4,800 batches 179 s, HT 8g
(10+10)'s 6,400 259 s, EASGD 40t's 3,200 10 s) about 36 minutes, the real-engine check 2.
The loss runs, HT's most of all, are most of it; the throughput points share the last pool
with the seeds' runs, and the rounds past a grid's edge run a few points each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from experiments.repro import settle
from experiments.repro.common import run_in_processes
from experiments.repro.hierarchical_report import write_report
from experiments.repro.hierarchical_settings import (
    BATCH,
    COMPRESSED,
    CORES,
    COST,
    EASGD_TRAINERS,
    FIG8,
    FIG10A,
    FIG10B,
    FIG11,
    ITERATIONS_PER_THREAD,
    LARGE_MODEL,
    LOSS_GRID,
    LOSS_MODEL,
    LOSS_SEEDS,
    LOSS_TASK,
    LOSS_VARIANTS,
    RARE_SYNC,
    THROUGHPUT_MATH,
    LossPoint,
    LossVariant,
    Setting,
    seed_points,
)
from experiments.repro.registry import Progress, reproduction
from experiments.repro.settle import Tuned
from recsync.coordinator.measures import check_steady
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.families.hierarchical.server import GROUP_SERVER
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.job import SimJob


def throughput(setting: Setting, math: str = THROUGHPUT_MATH) -> dict[str, Any]:
    """One throughput run of `LARGE_MODEL` on `setting`'s NICs: its steady examples/s
    (refused where its steady window spans too few batches a worker thread), and
    how busy the group PSs' CPUs and NICs and the trainers' NICs were. `math = "priced"`
    (the default): the same times and traffic without the model's math or memory
    (runtime/sim/math_modes.py)."""
    examples = setting.worker_threads * ITERATIONS_PER_THREAD * BATCH
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=1_000)
    spec = JobSpec(
        LARGE_MODEL, TrainSpec(batch_size=BATCH), setting.cluster(), setting.strategy(), synthetic
    )
    sim = SimJob(spec, plan_for(spec), setting.cost(), server_threads=CORES, math=math)
    summary = sim.run()
    seconds = summary["train_seconds"]
    group_ps = sim.hosts_of(GROUP_SERVER)
    trainers = sim.hosts_of(Role.TRAINER)
    return {
        "label": setting.label,
        "groups": setting.groups,
        "trainers": setting.cluster().num_trainers,
        "group_servers": setting.groups * setting.servers,
        "examples": examples,
        "eps_steady": check_steady(summary, f"hierarchical, {setting.label}"),
        "steady_batches_per_thread": summary["steady_batches_per_thread"],
        "eps_whole_run": float(summary["eps"]),
        "virtual_seconds": seconds,
        "bandwidth_bytes_s": setting.bandwidth_bytes_s,
        "group_ps_cpu": (
            max(h.machine.cpu.busy_s for h in group_ps) / (CORES * seconds) if group_ps else None
        ),
        "group_ps_nic": (
            max(h.machine.nic_busy_s for h in group_ps) / seconds if group_ps else None
        ),
        "trainer_nic": sum(h.machine.nic_busy_s for h in trainers) / (len(trainers) * seconds),
        "traffic_bytes": _trainer_group_bytes(summary),
        **utilization(sim, setting, seconds),
    }


def utilization(sim: SimJob, setting: Setting, seconds: float) -> dict[str, Any]:
    """Fig. 9's bars: the CPU (busy share of its `CORES`) and NIC (busy share, its busier
    direction) of each group PS of the first group, in order, and the trainers' mean
    (their CPU: the work charged to them); None for the group PSs of EASGD."""
    first = sorted(
        (h for h in sim.hosts_of(GROUP_SERVER) if h.address.index < setting.servers),
        key=lambda h: h.address.index,
    )
    trainers = sim.hosts_of(Role.TRAINER)
    return {
        "group0_ps_cpu": [h.machine.cpu.busy_s / (CORES * seconds) for h in first] or None,
        "group0_ps_nic": [h.machine.nic_busy_s / seconds for h in first] or None,
        "trainer_cpu": sum(h.machine.cpu_s for h in trainers) / (len(trainers) * CORES * seconds),
    }


def _trainer_group_bytes(summary: dict[str, Any]) -> int:
    """Bytes trainers sent in stage messages (activations and gradients to group PSs)."""
    sent = summary["traffic"].get("trainers", {})
    return sum(int(v["bytes"]) for k, v in sent.items() if k.startswith("Stage"))


def quality(point: LossPoint) -> dict[str, Any]:
    """One loss run (Fig. 7): the default DLRM (`LOSS_MODEL` on `LOSS_TASK` where
    `point.cut`) on `point.examples` synthetic examples, the
    default learning rates (dense and sparse) times `point.lr_factor`, training seed
    `point.seed` (initial weights, simulated timing); with `point.evals`, the held-out
    logloss that many times over the run (`curve`: (examples trained, logloss) pairs, the
    end's last)."""
    setting = point.setting
    model, task = (LOSS_MODEL, LOSS_TASK) if point.cut else (ModelSpec(), SyntheticSpec())
    synthetic = dataclasses.replace(task, num_train=point.examples)
    if point.test:
        synthetic = dataclasses.replace(synthetic, num_test=point.test)
    train = dataclasses.replace(scaled_train(point.lr_factor), seed=point.seed)
    spec = JobSpec(model, train, setting.cluster(), setting.strategy(), synthetic)
    every = point.examples // point.evals if point.evals else None
    sim = SimJob(spec, plan_for(spec), COST, server_threads=CORES, eval_every=every)
    summary = sim.run()
    row = {
        "label": setting.label,
        "lr_factor": point.lr_factor,
        "seed": point.seed,
        "examples": point.examples,
        "control": point.control,
        "train_loss": summary["train_loss"],
        "test_logloss": summary["test_logloss"],
        "test_ne": summary["test_ne"],
        "test_auc": summary["test_auc"],
        "dense_replicas": setting.groups or EASGD_TRAINERS,
        "model": "a cut DLRM" if point.cut else "the default DLRM",
    }
    if point.evals:
        row["curve"] = [[int(r["examples"]), float(r["test_logloss"])] for r in sim.curve]
    return row


def scaled_train(lr_factor: float) -> TrainSpec:
    train = TrainSpec()
    dense, sparse = train.dense_optimizer, train.sparse_optimizer
    return dataclasses.replace(
        train,
        dense_optimizer=dataclasses.replace(dense, lr=dense.lr * lr_factor),
        sparse_optimizer=dataclasses.replace(sparse, lr=sparse.lr * lr_factor),
    )


def run_point(point: LossPoint | Setting) -> dict[str, Any]:
    """One point of the reproduction: a loss run, or a throughput run of a setting."""
    return quality(point) if isinstance(point, LossPoint) else throughput(point)


def throughput_settings() -> list[Setting]:
    return list(dict.fromkeys((*FIG8, *FIG10A, *FIG10B, *RARE_SYNC, *FIG11)))


def tuned_losses(
    progress: Progress | None,
) -> tuple[dict[LossVariant, Tuned], dict[LossPoint, dict[str, Any]]]:
    """Every loss variant tuned on `LOSS_GRID` (`settle.tune`: the same grid for all, a
    best value at an edge extended past it), each point scored by the held-out logloss at
    the end of its run on the tuning seed (`LOSS_SEEDS[0]`); and every tuning run's row."""
    rows: dict[LossPoint, dict[str, Any]] = {}

    def run(points: list[tuple[Hashable, float]]) -> list[float]:
        todo = [LossVariant.of(v).point(f, LOSS_SEEDS[0]) for v, f in points]
        rows.update(zip(todo, run_in_processes(run_point, todo, progress), strict=True))
        return [float(rows[p]["test_logloss"]) for p in todo]

    tuned = settle.tune(LOSS_VARIANTS, LOSS_GRID, run, higher_is_better=False)
    return {LossVariant.of(v): t for v, t in tuned.items()}, rows


def measured(
    progress: Progress | None,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The loss variants tuned (`tuned_losses`), then each at its chosen factor on the other
    seeds in one pool with every throughput point: the throughput rows by label, the
    tunings (`Tuned.as_dict` and the variant's control flag, in `LOSS_VARIANTS`' order)
    and the loss rows (each variant's tuning-seed run at its chosen factor, then the other
    seeds')."""
    tuned, tuning_rows = tuned_losses(progress)
    chosen = {v: t.chosen for v, t in tuned.items()}
    seeds = list(seed_points(chosen))
    rows = run_in_processes(run_point, [*seeds, *throughput_settings()], progress)
    first = [tuning_rows[v.point(chosen[v], LOSS_SEEDS[0])] for v in LOSS_VARIANTS]
    losses = [*first, *rows[: len(seeds)]]
    tunings = [{**tuned[v].as_dict(), "control": v.control} for v in LOSS_VARIANTS]
    return {r["label"]: r for r in rows[len(seeds) :]}, tunings, losses


# the real engine beside the simulator: 2 groups x 2 trainers (2 threads) x 2 group PSs
ENGINE_MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 100, 8) for i in range(8)),
    bottom_mlp=(32,),
    top_mlp=(64, 16),
)
ENGINE_SYNTHETIC = SyntheticSpec(
    num_train=60_000, num_test=10_000, num_dense=4, table_rows=(100,) * 8
)
TIMED = {"Exchange"}  # how many cross-group syncs run depends on timing
FUSED = {"PushSparse", "PushSparse+Lookup"}  # which push rides on a lookup: timing


def engine_spec() -> JobSpec:
    return JobSpec(
        ENGINE_MODEL,
        TrainSpec(batch_size=128),
        ClusterSpec(4, 2, 2, num_dense_servers=2, worker_processes=False),
        strategy_config("hierarchical", groups=2, **COMPRESSED),
        ENGINE_SYNTHETIC,
    )


def traffic_differences(sim: dict[str, Any], real: dict[str, Any]) -> list[str]:
    """Where two runs' bytes per node kind and message kind differ, leaving out what
    timing decides (cross-group exchanges; which row push rides on a lookup, whose sum
    must still agree); empty when they agree."""
    found = []
    if sim["traffic"].keys() != real["traffic"].keys():
        found.append(f"node kinds {sorted(sim['traffic'])} vs {sorted(real['traffic'])}")
    for role, kinds in sim["traffic"].items():
        other = real["traffic"].get(role, {})
        if kinds.keys() != other.keys():
            found.append(f"{role}: message kinds {sorted(kinds)} vs {sorted(other)}")
        for kind, counted in kinds.items():
            if kind not in TIMED | FUSED and counted != other.get(kind):
                found.append(f"{role} {kind}: {counted} vs {other.get(kind)}")
        fused = [sum(int(run.get(k, {}).get("bytes", 0)) for k in FUSED) for run in (kinds, other)]
        if fused[0] != fused[1]:
            found.append(f"{role} row pushes: {fused[0]} vs {fused[1]} bytes")
    return found


def engine_check() -> dict[str, Any]:
    """The small job on real Ray actors (2 local CPUs) and in the simulator."""
    from recsync.runtime.ray.job import run_job

    spec = engine_spec()
    sim = SimJob(spec, plan_for(spec), COST).run()
    real = run_job(spec, num_cpus=2)
    return {
        "label": "2 groups x 2 trainers x 2 group PSs",
        "examples": ENGINE_SYNTHETIC.num_train,
        "sim_auc": sim["test_auc"],
        "real_auc": real["test_auc"],
        "bytes_differences": traffic_differences(sim, real),
        "trainer_bytes": sum(int(v["bytes"]) for v in sim["traffic"]["trainers"].values()),
        "real_eps_steady": real["eps_steady"],
        "cross_group_syncs": (sim["cross_group_syncs"], real["cross_group_syncs"]),
    }


def _hierarchical_row(r: dict[str, Any]) -> str:
    if "eps_steady" in r:
        return (
            f"{r['label']:>40}: {r['eps_steady']:>12,.0f} ex/s (virtual, steady), "
            f"{r['trainers']} trainers"
        )
    if "test_logloss" in r:
        return (
            f"{r['label']:>40} (lr x{r['lr_factor']:g}, seed {r['seed']}, "
            f"{r['examples']:,} examples): train loss "
            f"{r['train_loss']:.5f}, AUC {r['test_auc']:.4f}"
        )
    return f"real engine, {r['label']}: AUC {r['real_auc']:.4f} (simulator {r['sim_auc']:.4f})"


@reproduction(
    "hierarchical",
    paper="Hierarchical training (Huang et al., KDD 2021)",
    claim="Fig. 7, 8: EASGD 40 trainers vs HT 5/8/10 groups of 6 + 6; Fig. 10a/b: EPS over "
    "groups and nodes per group; Fig. 11: the ablation at 5 groups; a real-engine run",
    report_dir="reports/hierarchical",
    minutes=120.0,  # about 225 on one core: see the module docstring
    seeds={
        "loss runs, their controls and tuning": list(LOSS_SEEDS),
        "throughput (deterministic)": [0],
    },
    cost={"cluster": COST},
    show=_hierarchical_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    speed, tuning, losses = measured(progress)
    engine = engine_check()
    if progress:
        progress(engine)
    results = {
        "throughput": speed,
        "tuning": tuning,
        "quality": losses,
        "engine": engine,
    }
    write_report(out_dir, results)
    return results
