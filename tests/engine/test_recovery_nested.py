"""Losses while the job starts or recovers, on real Ray actors killed with SIGKILL: a node
killed as the job's actors first answer, or as the actors of a rollback's restart answer
(the job's `on_actors_up` hook; the kill lands in the start's placement check, as a
chaos test's kill did), is recovered from by rolling back again; each loss counts against
`max_restarts`, and past it the run ends with `NotRecovered` (the CLI: one line naming
the node, what the job was doing and the recoveries made, no traceback)."""

from __future__ import annotations

import dataclasses
import os
import signal

import pytest
import ray
from test_cli import config_file, invoke
from test_engine import spec

from recsync.app.runs import distributed
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.protocol.address import READER, Address, Role
from recsync.runtime.ray.errors import NotRecovered
from recsync.runtime.ray.job import RayJob, run_job

pytestmark = pytest.mark.usefixtures("local_ray")

TRAINER_1, SHARD_0 = Address(Role.TRAINER, 1), Address(Role.EMBEDDING_SERVER, 0)
SYNTHETIC = SyntheticSpec(num_train=20_000, num_test=5_000, num_dense=4, table_rows=(100,) * 8)
SMALL = ClusterSpec(2, 1, 1)  # 5 actors: each start costs tens of seconds on 2 CPUs


class Kills:
    """SIGKILLs nodes: `at_start[n]` once the actors of the job's start after `n` losses
    answer (0: its first start), `mid_run` once `at_examples` were handed out and a cut
    was taken before them."""

    def __init__(
        self,
        at_start: dict[int, Address],
        mid_run: Address | None = None,
        at_examples: int = 0,
    ):
        self.at_start, self.mid_run, self.at_examples = dict(at_start), mid_run, at_examples
        self.killed: list[str] = []

    def on_start(self, job: RayJob) -> None:
        job.on_actors_up = self.actors_up

    def actors_up(self, job: RayJob) -> None:
        target = self.at_start.pop(len(job.recoveries.losses), None)
        if target is not None:
            self.kill(job, target)

    def on_progress(self, job: RayJob, done: int) -> None:
        # the driver cuts only as often as it polls: on a fast machine the first poll may
        # already be past `at_examples`, so the kill also waits for a cut behind it
        cut = job.last_cut
        after_a_cut = cut is not None and done > cut.data_position
        if self.mid_run is not None and done >= self.at_examples and after_a_cut:
            self.kill(job, self.mid_run)
            self.mid_run = None

    def kill(self, job: RayJob, target: Address) -> None:
        os.kill(ray.get(job.hosts.actors[target].ping.remote()), signal.SIGKILL)
        self.killed.append(target.name)


def run_with(kills: Kills, policy: RecoveryPolicy, cluster: ClusterSpec = SMALL) -> dict:
    started: list[RayJob] = []

    def on_start(job: RayJob) -> None:
        started.append(job)
        kills.on_start(job)

    return run_job(
        dataclasses.replace(spec("easgd", cluster), synthetic=SYNTHETIC),
        on_start=on_start,
        on_progress=lambda done, total, eps: kills.on_progress(started[0], done),
        checkpoint_every=CheckpointEvery(examples=5_000),
        recovery=policy,
    )


def test_a_node_lost_while_the_job_starts_is_recovered_from():
    kills = Kills({0: TRAINER_1})
    summary = run_with(kills, RecoveryPolicy(max_restarts=1))
    recovery = summary["recovery"]
    (loss,) = recovery["losses"]
    assert kills.killed == ["trainer-1"] and loss["node"] == "trainer-1"
    assert loss["action"] == "rollback" and loss["position"] == loss["back_to"] == 0
    assert recovery["examples_replayed"] == 0
    assert summary["examples_trained"] == SYNTHETIC.num_train


def test_a_node_lost_while_the_job_restarts_after_a_loss_is_recovered_from():
    # trainer 1 lost at 12,000 examples or later, after a cut; the reader then killed as the
    # restart's actors answer, before they are connected: a second rollback to the same cut.
    # The driver polls (and cuts) every 0.5 s; on a quiet machine the unslowed job trains
    # 20,000 examples in about two polls, so the trainers are slowed to leave polls between
    # the cut and the end of the data whatever the machine's speed
    kills = Kills({1: READER}, mid_run=TRAINER_1, at_examples=12_000)
    slowed = dataclasses.replace(SMALL, trainer_slowdown=(6.0, 6.0))
    summary = run_with(kills, RecoveryPolicy(max_restarts=2), slowed)
    recovery = summary["recovery"]
    first, second = recovery["losses"]
    assert kills.killed == ["trainer-1", "reader"]
    assert (first["node"], second["node"]) == ("trainer-1", "reader")
    assert first["back_to"] == second["back_to"] > 0 and first["position"] > first["back_to"]
    assert second["position"] == second["back_to"]  # nothing handed out in the restart
    assert recovery["examples_replayed"] == first["position"] - first["back_to"]
    assert summary["examples_trained"] == SYNTHETIC.num_train  # each once


def test_past_max_restarts_a_loss_in_a_restart_ends_the_run_with_a_named_error(
    tmp_path, monkeypatch
):
    # the CLI's own run: trainer 1 killed in the first start (recovered), embedding server
    # 0 in the restart (not: max_restarts = 1); one line, no traceback
    kills = Kills({0: TRAINER_1, 1: SHARD_0})
    errors: list[BaseException] = []

    def killing(job_spec, *args, on_start=None, **kwargs):
        def start(job):
            on_start(job)
            kills.on_start(job)

        try:
            return run_job(job_spec, *args, on_start=start, **kwargs)
        except BaseException as error:
            errors.append(error)
            raise

    monkeypatch.setattr(distributed, "run_job", killing)
    keys = {
        "data.synthetic.num_train": 20_000,
        "strategy.name": "easgd",
        "cluster.workers_per_trainer": 1,
        "cluster.num_embedding_servers": 1,
        "run.eval_every": 0,
        "recovery.max_restarts": 1,
    }
    sets = [a for key, value in keys.items() for a in ("--set", f"{key}={value}")]
    result = invoke("train", "-c", config_file(tmp_path), "--name", "lost", "--no-progress", *sets)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output and "ActorDiedError" not in result.output
    (error,) = errors
    assert isinstance(error, NotRecovered) and error.recovered == ["trainer-1"]
    assert str(error) == (
        "embedding-server-0 is dead or unreachable while restarting after losing trainer-1; "
        "not recovered: recovery.max_restarts (1) reached after 1 recovery (from losing "
        "trainer-1)"
    )
    text = " ".join(result.output.split())
    assert f"error: {error}" in text and "no checkpoint was taken while training" in text
