"""End-to-end runs on real Ray actors (a local 2-CPU Ray cluster), small model and data."""

from __future__ import annotations

import dataclasses
import glob
import time

import pytest
import ray
from small_jobs import ENGINE_MODEL, ENGINE_SYNTHETIC, ENGINE_TRAIN

from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.protocol.address import Address, Role
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.job import run_job
from recsync.strategy.timing import Timing

pytestmark = pytest.mark.usefixtures("local_ray")

SYNTHETIC, MODEL = ENGINE_SYNTHETIC, ENGINE_MODEL
TRAIN = ENGINE_TRAIN


def spec(strategy: str, cluster: ClusterSpec | None = None, **fields) -> JobSpec:
    return JobSpec(
        model=MODEL,
        train=TRAIN,
        cluster=cluster or ClusterSpec(2, 2, 2),
        strategy=strategy_config(strategy, **fields),
        synthetic=SYNTHETIC,
    )


@pytest.mark.parametrize("strategy", ["easgd", "ma", "bmuf"])
def test_shadow_strategies_train_to_reference_quality(strategy, reference_auc):
    summary = run_job(spec(strategy))
    assert summary["strategy"].startswith("S-")
    assert summary["examples_trained"] == SYNTHETIC.num_train
    assert summary["syncs"] > 0 and summary["average_sync_gap"] > 0
    assert summary["test_auc"] >= reference_auc - 0.03, (summary["test_auc"], reference_auc)
    assert summary["bytes_sent"]["trainers"] > 0 and summary["bytes_sent"]["embedding_servers"] > 0


@pytest.mark.parametrize("strategy", ["easgd", "async"])
def test_evaluations_while_training_record_each_mark_once_then_the_end(strategy):
    # 40,000 examples, a mark every 8,000: at 8,000 to 32,000 (40,000 is the end's record);
    # marks one late poll passed (a loaded machine) share one snapshot: one record, counted
    records: list[dict] = []
    jobs: list = []
    summary = run_job(
        spec(strategy),
        eval_every=8_000,
        on_eval=records.append,
        on_start=jobs.append,
        eval_examples=2_000,
    )
    merged = summary.get("evaluation_marks_merged", 0)
    assert len(records) + merged == 4 and len(records) >= 1, [r["examples"] for r in records]
    assert jobs[0].evaluations.records[:-1] == records  # then the end's, once
    assert [r["test_examples"] for r in jobs[0].evaluations.records] == [2_000] * len(records) + [
        SYNTHETIC.num_test
    ]
    examples = [r["examples"] for r in jobs[0].evaluations.records]
    assert examples == sorted(set(examples)) and examples[-1] == SYNTHETIC.num_train
    assert all(0.5 < r["test_auc"] < 1.0 and r["train_loss"] > 0 for r in records)
    assert all(r["train_seconds"] < summary["train_seconds"] for r in records)
    assert records[0]["test_auc"] < summary["test_auc"] + 0.01  # it was still learning


def test_fixed_rate_ma_syncs_every_k_iterations_of_each_worker():
    summary = run_job(spec("ma", timing=Timing("fixed", every_iterations=4)))
    iterations = SYNTHETIC.num_train // TRAIN.batch_size
    assert summary["strategy"].startswith("FR-MA-4")
    # every worker requests every 4th iteration; a round may serve several requests
    assert 1 <= summary["syncs"] <= 2 * (iterations // 4 + 2)


def test_one_pass_accounting_with_unequal_trainers():
    # slowdowns far apart: on a quiet machine a step's overheads outweigh its math, and 3x
    # against 6x of it took 8,128 and 8,960 examples in CI
    slowdowns = (1.0, 5.0, 25.0)
    threads = ClusterSpec(3, 2, 2, trainer_slowdown=slowdowns, worker_processes=False)
    summary = run_job(spec("easgd", threads))
    assert not summary["worker_processes"]
    per_trainer = summary["examples_per_trainer"]
    assert sum(per_trainer) == SYNTHETIC.num_train == summary["examples_trained"]
    assert per_trainer[0] > per_trainer[1] > per_trainer[2] > 0, per_trainer


def test_worker_processes_train_one_shared_replica(reference_auc):
    jobs: list = []
    pids: list[int] = []

    def on_progress(done, total, eps):
        if not pids:
            actors = jobs[0].hosts.actors_of(Address(Role.TRAINER, 0))
            pids.extend(ray.get([actor.ping.remote() for actor in actors]))

    # the trainers' shared state (the unit tests' files, made meanwhile by the other pytest
    # worker, are named by another label)
    shared_files = "/dev/shm/recsync-trainer-*"
    before = set(glob.glob(shared_files))
    cluster = ClusterSpec(1, 2, 1, worker_processes=True)
    summary = run_job(spec("easgd", cluster), on_progress=on_progress, on_start=jobs.append)
    assert summary["worker_processes"] and summary["examples_trained"] == SYNTHETIC.num_train
    assert len(set(pids)) == 3, pids  # the trainer's home and one process per worker
    assert summary["syncs"] > 0
    # the workers' progress wakes the home's shadow sync at once, as with threads (about one
    # iteration a worker a sync; waking only at the home's poll made it ~15)
    assert summary["average_sync_gap_per_thread"] < 2.5, summary["average_sync_gap_per_thread"]
    # the home's replica is what both worker processes trained: untrained it would be ~0.5
    seen = {k: summary.get(k) for k in ("train_loss", "syncs", "train_seconds", "cpu_seconds")}
    assert summary["test_auc"] >= reference_auc - 0.03, (summary["test_auc"], reference_auc, seen)
    calls = summary["calls_per_batch"]["trainers"]
    assert calls["NextBatch"] == pytest.approx(1.0, abs=0.02), calls  # both processes counted
    assert set(glob.glob(shared_files)) <= before  # no shared file left behind
    cpu = summary["cpu_seconds"]  # every role's processes, the trainer's three summed
    assert set(cpu) == {"trainers", "reader", "embedding_servers", "sync_servers"}, cpu
    assert all(seconds > 0 for seconds in cpu.values()), cpu
    threads = summary["thread_cpu_seconds"]  # of that, the node's own threads' by kind
    # the reader's batches are made elsewhere (its producer): handing them out costs its
    # serving threads less than training them costs the workers
    assert threads["reader"]["channel"] < threads["trainers"]["worker_loops"], threads
    assert set(threads["trainers"]) == {"worker_loops", "other_loops"}, threads  # + shadow
    assert set(threads["embedding_servers"]) == {"channel"}, threads
    assert threads["reader"]["helper_processes"] > 0, threads  # its batch producer's
    for role, kinds in threads.items():
        assert 0 < sum(kinds.values()) <= cpu[role] + 0.02, (role, kinds, cpu)
    assert threads["trainers"]["worker_loops"] > 0.5 * cpu["trainers"], threads
    deadline = time.perf_counter() + 10
    while _batch_producers() and time.perf_counter() < deadline:
        time.sleep(0.2)
    assert not _batch_producers()  # the reader's producer ended with it


def _batch_producers() -> list[str]:
    """Processes running recsync's background batch producer (the reader's, while alive)."""
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        if "multiprocessing.spawn" in text and "ray" not in text:
            found.append(cmdline)
    return found


def test_a_killed_worker_process_fails_the_job_naming_its_trainer():
    jobs: list = []
    killed: dict[str, float] = {}

    def on_progress(done, total, eps):
        if done > 5_000 and "at" not in killed:
            ray.kill(jobs[0].hosts.worker_actors[Address(Role.TRAINER, 1)][0], no_restart=True)
            killed["at"] = time.perf_counter()

    long_run = dataclasses.replace(
        spec("easgd", ClusterSpec(2, 2, 1, worker_processes=True)),
        synthetic=SyntheticSpec(num_train=2_000_000, num_dense=4, table_rows=(100,) * 8),
    )
    with pytest.raises(NodeFailure, match="trainer-1"):
        run_job(long_run, on_progress=on_progress, on_start=jobs.append)
    assert time.perf_counter() - killed["at"] < 30


def test_a_killed_embedding_server_fails_the_job_naming_it():
    killed: dict[str, float] = {}

    def on_start(job):
        killed["job"] = job

    def on_progress(done, total, eps):
        if done > 5_000 and "at" not in killed:
            shard = Address(Role.EMBEDDING_SERVER, 1)
            ray.kill(killed["job"].hosts.actors[shard], no_restart=True)
            killed["at"] = time.perf_counter()

    long_run = JobSpec(
        model=MODEL,
        train=TRAIN,
        cluster=ClusterSpec(2, 2, 2),
        strategy=strategy_config("easgd"),
        synthetic=SyntheticSpec(num_train=2_000_000, num_dense=4, table_rows=(100,) * 8),
    )
    with pytest.raises(NodeFailure, match="embedding-server-1"):
        run_job(long_run, on_progress=on_progress, on_start=on_start)
    assert time.perf_counter() - killed["at"] < 30
