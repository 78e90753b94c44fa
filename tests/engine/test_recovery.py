"""Losing a node: the policy and the reader's re-handing (pure), and real Ray jobs that lose
one mid-run. A process killed with SIGKILL is detected and recovered from as the policy
says: every node back to the last cut (a trainer under S-EASGD, the reader under async;
those after the cut trained twice: replayed, and counted so), the lost embedding shard
alone from the last cut (its updates since lost, and counted), or the lost trainer alone
(what it held handed out again), or the lost reader alone (the stream replayed to where it
stood: nothing handed out twice); every example of the data ends up trained. With recovery
off the job stops within 30 s naming the node, and its last cut's checkpoint resumes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time

import pytest
import ray
from test_cli import config_file, invoke
from test_engine import TRAIN, spec

from recsync.app.runs import distributed
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.recovery import Loss, Recoveries, RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.io.sources import SyntheticData
from recsync.model.hash_spec import HashTables
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import READER, Address, Role
from recsync.protocol.reading import NextBatch, Requeue
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.job import RayJob, run_job

LONG = SyntheticSpec(num_train=120_000, num_test=10_000, num_dense=4, table_rows=(100,) * 8)


def test_the_policy_acts_by_the_lost_nodes_role():
    policy = RecoveryPolicy(embedding_server="stop", max_restarts=1)
    assert policy.action("embedding-server-3") == "stop"
    assert policy.action("trainer-0") == "rollback" and policy.action("reader") == "restart"
    assert policy.refusal("embedding-server-3", 0) == "recovery.embedding_server is stop"
    assert policy.refusal("trainer-0", 1) == "recovery.max_restarts (1) reached"
    assert policy.refusal("trainer-0", 0) is None
    with pytest.raises(ValueError, match="no node role"):
        policy.action("evaluator")
    with pytest.raises(ValueError, match="trainer must be one of"):
        RecoveryPolicy(trainer="partial")
    with pytest.raises(ValueError, match="reader must be one of"):
        RecoveryPolicy(reader="partial")


def test_one_node_recovery_needs_a_strategy_that_can_lose_one_node():
    RecoveryPolicy(embedding_server="partial", trainer="restart").check(strategy_config("easgd"))
    with pytest.raises(ValueError, match="shards run its policy"):
        RecoveryPolicy(embedding_server="partial").check(strategy_config("async"))
    with pytest.raises(ValueError, match="cannot lose one trainer"):
        RecoveryPolicy(trainer="restart").check(strategy_config("ma"))


def test_a_lost_trainers_batches_are_handed_out_again_once():
    reader = ReaderNode(SyntheticData(LONG, TrainSpec(batch_size=100)), 2, num_workers=4)
    take = [reader.handle(NextBatch(t, worker=w)).batch for t, w in ((0, 0), (0, 1), (1, 2))]
    taken = [reader.handle(NextBatch(0, worker=0, pushed=1)).batch]  # worker 0 pushed one
    assert reader.handle(Requeue(0, range(0, 2))).examples == 200  # worker 0's 2nd, 1's
    again = [reader.handle(NextBatch(1, worker=3)).batch for _ in range(3)]
    assert again[0] is taken[0] and again[1] is take[1]
    assert all(again[2] is not b for b in take + taken)
    stale = reader.handle(NextBatch(0, worker=0, incarnation=0))  # the lost incarnation
    assert stale.batch is None and not stale.paused
    report = reader.report()
    assert report.requeued_examples == [200, 0] and report.previous_examples == [100, 0]
    assert report.handed_examples == [300, 400]  # trainer 1: its own, 2 again, a new one


def test_losses_add_up_what_was_replayed():
    recoveries = Recoveries()
    recoveries.add(Loss("trainer-1", 3.0, position=9_000, back_to=6_400))
    recoveries.add(Loss("reader", 9.5, position=20_000, back_to=19_200, exact=False))
    summary = recoveries.summary()
    assert summary["examples_replayed"] == 2_600 + 800 and summary["examples_lost"] == 0
    assert [loss["replayed"] for loss in summary["losses"]] == [2_600, 800]
    with pytest.raises(AssertionError):
        recoveries.add(Loss("reader", 1.0, position=100, back_to=200))


class SigKill:
    """Kills one node's process with SIGKILL once `at` examples were handed out."""

    def __init__(self, target: Address, at: int):
        self.target, self.at = target, at
        self.job = None
        self.killed_at: float | None = None

    def on_start(self, job) -> None:
        self.job = job

    def on_progress(self, done, total, eps) -> None:
        if self.killed_at is None and done >= self.at:
            os.kill(ray.get(self.job.hosts.actors[self.target].ping.remote()), signal.SIGKILL)
            self.killed_at = time.perf_counter()


LOSSES = [
    ("easgd", Address(Role.TRAINER, 1), "rollback"),
    ("async", READER, "rollback"),
    ("easgd", Address(Role.EMBEDDING_SERVER, 1), "partial"),
    ("easgd", Address(Role.TRAINER, 0), "restart"),
    ("easgd-hash-tables", Address(Role.EMBEDDING_SERVER, 1), "partial"),
]


@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize(
    ("strategy", "target", "action"), LOSSES, ids=[f"{s}-{t.name}-{a}" for s, t, a in LOSSES]
)
def test_a_killed_node_is_recovered_from_as_the_policy_says(
    strategy,
    target,
    action,
    reference_auc,
):
    hashed = strategy.endswith("-hash-tables")
    job = dataclasses.replace(
        spec(strategy.removesuffix("-hash-tables"), ClusterSpec(2, 2, 2, num_dense_servers=1)),
        synthetic=dataclasses.replace(LONG, keyed=hashed),
    )
    if hashed:  # the lost shard comes back from its cut's rows, keys and sketch
        model = dataclasses.replace(job.model, hash_tables=HashTables())
        job = dataclasses.replace(job, model=model)
    kill = SigKill(target, at=60_000)
    roles = {Role.TRAINER: "trainer", Role.EMBEDDING_SERVER: "embedding_server"}
    role = {**roles, Role.READER: "reader"}.get(target.role)
    summary = run_job(
        job,
        on_progress=kill.on_progress,
        on_start=kill.on_start,
        checkpoint_every=CheckpointEvery(examples=15_000),
        recovery=RecoveryPolicy(**({role: action} if role else {})),
    )
    recovery = summary["recovery"]
    (loss,) = recovery["losses"]
    assert loss["node"] == target.name and loss["action"] == action
    assert loss["at_seconds"] - (kill.killed_at - kill.job.started) < 10  # detected
    assert summary["examples_trained"] == LONG.num_train  # each once (replays counted apart)
    since_cut = loss["position"] - loss["back_to"]
    if action == "rollback":  # everything since the cut again
        assert loss["back_to"] > 0 and loss["back_to"] % 128 == 0 and since_cut > 0
        assert recovery["examples_replayed"] == since_cut and recovery["examples_lost"] == 0
    elif action == "partial":  # the shard's updates since the cut are lost, nothing replayed
        assert since_cut > 0 and recovery["examples_lost"] == since_cut
        assert recovery["examples_replayed"] == 0
    else:  # only what the trainer held: at most its 2 workers' batch, next and prefetched
        assert since_cut == 0 and recovery["examples_lost"] == 0
        assert 0 < recovery["examples_replayed"] <= 2 * 3 * 128
    assert summary["test_auc"] >= reference_auc - 0.03


@pytest.mark.usefixtures("local_ray")
def test_a_killed_reader_alone_is_replaced_and_every_example_is_trained_once(reference_auc):
    # reader = restart (the default): the trainers wait for their next batch while the
    # replacement replays the stream to where the lost reader stood; a cut under way is
    # abandoned; nothing is rolled back, replayed or lost
    job = dataclasses.replace(spec("easgd", ClusterSpec(2, 2, 2)), synthetic=LONG)
    kill = SigKill(READER, at=60_000)
    lines: list[str] = []
    summary = run_job(
        job,
        on_progress=kill.on_progress,
        on_start=kill.on_start,
        checkpoint_every=CheckpointEvery(examples=15_000),
        recovery=RecoveryPolicy(),
        on_recovery=lines.append,
    )
    recovery = summary["recovery"]
    (loss,) = recovery["losses"]
    assert loss["node"] == "reader" and loss["action"] == "restart"
    assert loss["at_seconds"] - (kill.killed_at - kill.job.started) < 10  # detected
    assert loss["back_to"] == loss["position"] and loss["replayed"] == loss["lost"] == 0
    assert recovery["examples_replayed"] == recovery["examples_lost"] == 0
    assert summary["examples_trained"] == LONG.num_train  # each once, checked per trainer
    assert len(lines) == 2 and lines[0].startswith("lost reader (")
    assert lines[1].startswith("recovered from losing reader in")
    assert summary["test_auc"] >= reference_auc - 0.03


@pytest.mark.usefixtures("local_ray")
def test_a_lost_evaluator_is_started_again_and_scores_every_evaluation(reference_auc):
    """The evaluator is no node: killed twice mid-run, it is started again on the driver's
    machine each time and scores the evaluations that were under way; training goes on,
    nothing is rolled back."""
    job = dataclasses.replace(spec("easgd", ClusterSpec(2, 2, 2)), synthetic=LONG)
    records, lines, kills = [], [], []

    def kill_evaluator(done, total, eps) -> None:
        if len(kills) < 2 and done >= 30_000 * (len(kills) + 1):
            actor = started["job"].scoring.actor
            os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
            kills.append(done)

    started: dict = {}
    summary = run_job(
        job,
        on_progress=kill_evaluator,
        on_start=lambda j: started.update(job=j),
        eval_every=10_000,
        on_eval=records.append,
        recovery=RecoveryPolicy(),
        on_recovery=lines.append,
    )
    assert len(kills) == 2
    recovery = summary["recovery"]
    assert recovery["evaluator_restarts"] == 2 and recovery["losses"] == []
    assert sum("lost the evaluator" in line for line in lines) == 2
    assert summary["examples_trained"] == LONG.num_train
    marks = [r["examples"] for r in records]
    # marks passed at once (polls late on a loaded machine) share one record, counted
    covered = len(marks) + summary.get("evaluation_marks_merged", 0)
    assert marks == sorted(set(marks)) and covered == LONG.num_train // 10_000 - 1, marks
    assert summary["test_auc"] >= reference_auc - 0.03


def kill_in_the_cli(monkeypatch, target: Address, at: int) -> dict:
    """The CLI's next runs kill `target` once `at` examples were handed out (a hook on the
    job's progress); what it returns holds when (`at`)."""
    started: dict = {}

    def killing(spec, *args, on_progress=None, on_start=None, **kwargs):
        def progress(done, total, eps):
            on_progress(done, total, eps)
            if "at" not in started and done >= at:
                node = started["job"].hosts.actors[target]
                os.kill(ray.get(node.ping.remote()), signal.SIGKILL)
                started["at"] = time.perf_counter()

        def start(job):
            started["job"] = job
            on_start(job)

        return run_job(spec, *args, on_progress=progress, on_start=start, **kwargs)

    monkeypatch.setattr(distributed, "run_job", killing)
    return started


def test_with_recovery_off_a_lost_node_stops_the_run_which_resumes_from_its_last_cut(
    tmp_path, monkeypatch
):
    # the CLI's own run, with [recovery] embedding_server = "stop", loses its shard
    # half-way; the resumed run loses a trainer and recovers: the terminal says so in a
    # line each, Ray's own messages go to the run's ray.log
    started = kill_in_the_cli(monkeypatch, Address(Role.EMBEDDING_SERVER, 0), 60_000)
    keys = {
        "data.synthetic.num_train": LONG.num_train,
        "strategy.name": "easgd",
        "run.eval_every": 0,
        "run.checkpoint.every_examples": 15_000,
        "recovery.embedding_server": '"stop"',
    }
    sets = [a for key, value in keys.items() for a in ("--set", f"{key}={value}")]
    config = config_file(tmp_path)
    result = invoke("train", "-c", config, "--name", "stopped", "--no-progress", *sets)
    assert result.exit_code == 1, result.output
    assert "embedding-server-0 is dead" in result.output and "--resume" in result.output
    assert time.perf_counter() - started["at"] < 30
    run = tmp_path / "runs" / "stopped"
    assert (run / "checkpoint.pt").exists() and not (run / "summary.json").exists()
    kill_in_the_cli(monkeypatch, Address(Role.TRAINER, 1), 20_000)
    result = invoke("train", "--resume", str(run), "--name", "resumed", "--no-progress")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len([line for line in lines if line.startswith("lost trainer-1 (")]) == 1
    assert len([line for line in lines if line.startswith("recovered from losing")]) == 1
    assert "(raylet)" not in result.output and "worker died" not in result.output
    resumed = tmp_path / "runs" / "resumed"
    summary = json.loads((resumed / "summary.json").read_text())
    assert [loss["node"] for loss in summary["recovery"]["losses"]] == ["trainer-1"]
    first_position = LONG.num_train - (summary["examples_trained"])
    assert 15_000 <= first_position <= 60_000 + 15_000


@pytest.mark.usefixtures("local_ray")
def test_a_node_lost_after_its_loops_ended_is_recovered_from_before_the_final_reports(
    monkeypatch,
):
    # the loss falls between the end of training and the nodes' last reports (a machine
    # taken away as a short job ends): the job rolls back as for any loss, not crash. Cuts
    # every 25,000 of the 40,000 examples: at most one, a little after 25,000 (or none, where
    # the stream ended before its workers parked), never one at the very end, which, when a
    # run's timing let it finish first, left nothing to replay
    killed: list[float] = []
    watch = RayJob._watch

    def watch_then_kill(job, *args):
        watch(job, *args)  # the loops ended; the final reports come next
        if not killed:
            trainer = job.hosts.actors[Address(Role.TRAINER, 1)]
            os.kill(ray.get(trainer.ping.remote()), signal.SIGKILL)
            killed.append(time.perf_counter())

    monkeypatch.setattr(RayJob, "_watch", watch_then_kill)
    job = spec("easgd", ClusterSpec(2, 2, 2))
    summary = run_job(
        job, checkpoint_every=CheckpointEvery(examples=25_000), recovery=RecoveryPolicy()
    )
    recovery = summary["recovery"]
    (loss,) = recovery["losses"]
    assert loss["node"] == "trainer-1" and loss["action"] == "rollback"
    assert loss["position"] == job.synthetic.num_train  # everything was handed out
    assert loss["back_to"] == 0 or 25_000 <= loss["back_to"] < loss["position"]
    assert recovery["examples_replayed"] == loss["position"] - loss["back_to"] > 0
    assert summary["examples_trained"] == job.synthetic.num_train


@pytest.mark.usefixtures("local_ray")
@pytest.mark.parametrize("strategy", ["easgd", "async"])
def test_a_diverging_worker_ends_the_job_and_is_not_recovered_from(strategy):
    # a node's own error is not a lost node: a restart would diverge again
    diverging = dataclasses.replace(
        TRAIN, dense_optimizer=DenseOptimizerSpec("sgd", lr=1e12), batch_size=128
    )
    job = dataclasses.replace(spec(strategy, ClusterSpec(2, 2, 2)), train=diverging)
    started = time.perf_counter()
    with pytest.raises(NodeFailure, match="NaN or infinite") as failed:
        run_job(job, checkpoint_every=CheckpointEvery(examples=5_000), recovery=RecoveryPolicy())
    assert failed.value.lost is None and time.perf_counter() - started < 60
