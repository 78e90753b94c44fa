"""Reproduction of hierarchical training (Huang et al., KDD 2021) in the simulator: Fig. 7
and 8 (EASGD with 40 trainers vs HT with 5, 8 and 10 groups of 6 trainers + 6 group PSs:
loss and EPS), Fig. 10a/b (EPS over groups, and over nodes per group), Fig. 11 (the
ablation at 5 groups); and a small job on the real engine beside the simulator.

Throughput runs use a model whose dense part is compute-bound (`LARGE_MODEL`); each runs
`ITERATIONS_PER_THREAD` batches per worker thread, enough for EPS (examples over virtual
time) to settle, not to train, so their losses mean nothing. The loss runs (Fig. 7) train
the default DLRM on the embedded synthetic task at the same topologies. Every machine has
`CORES` cores: a trainer runs that many worker threads (its nets), a group PS serves on
that many CPU slots. Hyper-parameters are the defaults, the same for every run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from experiments.repro.common import run_in_processes
from experiments.repro.hierarchical_report import write_report
from experiments.repro.hierarchical_settings import (
    BATCH,
    COMPRESSED,
    CORES,
    COST,
    EASGD,
    EASGD_TRAINERS,
    FIG7,
    FIG8,
    FIG10A,
    FIG10B,
    FIG11,
    ITERATIONS_PER_THREAD,
    LARGE_MODEL,
    LR_FACTORS,
    QUALITY_EXAMPLES,
    RARE_SYNC,
    Setting,
)
from experiments.repro.registry import Progress, reproduction
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.runtime.sim.job import SimJob


def throughput(setting: Setting, math: str = "real") -> dict[str, Any]:
    """One throughput run of `LARGE_MODEL`: EPS over virtual time, and how busy the
    group PSs' CPUs were. `math = "priced"`: the same times and traffic without the model's
    math or memory (runtime/sim/math_modes.py)."""
    examples = setting.worker_threads * ITERATIONS_PER_THREAD * BATCH
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=examples, num_test=1_000)
    spec = JobSpec(
        LARGE_MODEL, TrainSpec(batch_size=BATCH), setting.cluster(), setting.strategy(), synthetic
    )
    sim = SimJob(spec, plan_for(spec), COST, server_threads=CORES, math=math)
    summary = sim.run()
    seconds = summary["train_seconds"]
    group_ps = sim.hosts_of(Role.GROUP_SERVER)
    return {
        "label": setting.label,
        "groups": setting.groups,
        "trainers": setting.cluster().num_trainers,
        "group_servers": setting.groups * setting.servers,
        "examples": examples,
        "eps": float(summary["eps"]),
        "virtual_seconds": seconds,
        "group_ps_cpu": (
            max(h.machine.cpu.busy_s for h in group_ps) / (CORES * seconds) if group_ps else None
        ),
        "traffic_bytes": _trainer_group_bytes(summary),
    }


def _trainer_group_bytes(summary: dict[str, Any]) -> int:
    """Bytes trainers sent in stage messages (activations and gradients to group PSs)."""
    sent = summary["traffic"].get("trainers", {})
    return sum(int(v["bytes"]) for k, v in sent.items() if k.startswith("Stage"))


def quality(run: tuple[Setting, float, int]) -> dict[str, Any]:
    """One loss run (Fig. 7): the default DLRM on `QUALITY_EXAMPLES` synthetic examples,
    the default learning rates (dense and sparse) times `run[1]`, training seed `run[2]`
    (initial weights, simulated timing)."""
    setting, lr_factor, seed = run
    synthetic = dataclasses.replace(SyntheticSpec(), num_train=QUALITY_EXAMPLES)
    train = dataclasses.replace(scaled_train(lr_factor), seed=seed)
    spec = JobSpec(ModelSpec(), train, setting.cluster(), setting.strategy(), synthetic)
    summary = SimJob(spec, plan_for(spec), COST, server_threads=CORES).run()
    return {
        "label": setting.label,
        "lr_factor": lr_factor,
        "seed": seed,
        "train_loss": summary["train_loss"],
        "test_logloss": summary["test_logloss"],
        "test_ne": summary["test_ne"],
        "test_auc": summary["test_auc"],
        "dense_replicas": setting.groups or EASGD_TRAINERS,
    }


def scaled_train(lr_factor: float) -> TrainSpec:
    train = TrainSpec()
    dense, sparse = train.dense_optimizer, train.sparse_optimizer
    return dataclasses.replace(
        train,
        dense_optimizer=dataclasses.replace(dense, lr=dense.lr * lr_factor),
        sparse_optimizer=dataclasses.replace(sparse, lr=sparse.lr * lr_factor),
    )


def tuned_quality(
    progress: Progress | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The learning rates tuned once on the baseline (EASGD 40t's best test logloss over
    `LR_FACTORS`, seed 0), then frozen for every loss run; the tuning runs, the loss runs
    and the baseline again with seed 1 (how far a seed alone moves the loss)."""
    tuning = run_in_processes(quality, [(EASGD, f, 0) for f in LR_FACTORS], progress)
    best = min(tuning, key=lambda r: float(r["test_logloss"]))
    factor = best["lr_factor"]
    others = [(s, factor, 0) for s in FIG7 if s != EASGD]
    *runs, reseeded = run_in_processes(quality, [*others, (EASGD, factor, 1)], progress)
    return tuning, {r["label"]: r for r in (best, *runs)}, reseeded


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
        ClusterSpec(4, 2, 2, worker_processes=False),
        strategy_config("hierarchical", groups=2, group_servers=2, **COMPRESSED),
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
        "real_eps": real["eps"],
        "cross_group_syncs": (sim["cross_group_syncs"], real["cross_group_syncs"]),
    }


def _hierarchical_row(r: dict[str, Any]) -> str:
    if "eps" in r:
        return f"{r['label']:>40}: {r['eps']:>12,.0f} ex/s (virtual), {r['trainers']} trainers"
    if "test_logloss" in r:
        return (
            f"{r['label']:>40} (lr x{r['lr_factor']:g}, seed {r['seed']}): train loss "
            f"{r['train_loss']:.5f}, AUC {r['test_auc']:.4f}"
        )
    return f"real engine, {r['label']}: AUC {r['real_auc']:.4f} (simulator {r['sim_auc']:.4f})"


@reproduction(
    "hierarchical",
    paper="Hierarchical training (Huang et al., KDD 2021)",
    claim="Fig. 7, 8: EASGD 40 trainers vs HT 5/8/10 groups of 6 + 6; Fig. 10a/b: EPS over "
    "groups and nodes per group; Fig. 11: the ablation at 5 groups; a real-engine run",
    report_dir="reports/hierarchical",
    minutes=48.0,
    seeds={"every run": [0], "baseline again": [1]},
    cost={"cluster": COST},
    show=_hierarchical_row,
)
def reproduce(out_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = list(dict.fromkeys((*FIG8, *FIG10A, *FIG10B, RARE_SYNC, *FIG11)))
    speed = {r["label"]: r for r in run_in_processes(throughput, settings, progress)}
    tuning, loss, reseeded = tuned_quality(progress)
    engine = engine_check()
    if progress:
        progress(engine)
    results = {
        "throughput": speed,
        "tuning": tuning,
        "quality": loss,
        "baseline_seed_1": reseeded,
        "engine": engine,
    }
    write_report(out_dir, results)
    return results
