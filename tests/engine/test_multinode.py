"""A job across machines: a 3-node Ray cluster on this machine (one raylet per node, 1 CPU
each, `ray.cluster_utils.Cluster`), the server side on the first, trainers on the others;
and a machine removed mid-run (`remove_node`), the job rolled back onto the two left."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster
from test_engine import MODEL, SYNTHETIC, TRAIN

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.families import strategy_config
from recsync.protocol.address import Address, Role
from recsync.runtime.ray.cluster import cluster_machines, machines_answering
from recsync.runtime.ray.job import run_job


@pytest.fixture(scope="module")
def three_nodes(no_local_ray: None) -> Iterator[Cluster]:
    assert not ray.is_initialized(), "another module left Ray running"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.parametrize("strategy", ["easgd", "async"])
def test_a_job_runs_across_three_nodes_each_node_where_the_plan_put_it(three_nodes, strategy):
    synthetic = dataclasses.replace(SYNTHETIC, num_train=8_000, num_test=2_000)
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config(strategy), synthetic)
    summary = run_job(spec, address=three_nodes.address)
    placement = summary["placement"]
    assert summary["machines"] == 3 and summary["examples_trained"] == 8_000
    servers = {m for name, m in placement.items() if not name.startswith("trainer")}
    assert servers == {0}
    assert placement["trainer-0"] == 1 and placement["trainer-1"] == 2
    assert summary["test_auc"] > 0.6


def test_the_machines_that_run_a_task_in_time_are_named(three_nodes):
    machines = cluster_machines()
    assert len(machines) == 3 and machines_answering(machines) == set(machines)
    assert machines_answering([machines[1], "ab" * 28], timeout_s=3.0) == {machines[1]}


def test_a_removed_machine_rolls_the_job_back_onto_the_machines_left(three_nodes):
    # runs last: it takes one of the module's machines away
    synthetic = dataclasses.replace(SYNTHETIC, num_train=60_000, num_test=2_000)
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    spec = JobSpec(MODEL, TRAIN, cluster, strategy_config("easgd"), synthetic)
    jobs: list = []
    cuts: list = []
    cut_before_loss: list[int] = []

    def on_progress(done, total, eps):
        # after a cut: on a loaded machine the driver's polls can be far enough apart that
        # none fell between 8,000 and 25,000 examples
        if cuts and done >= 25_000 and len(three_nodes.worker_nodes) == 2:
            cut_before_loss.append(cuts[-1].data_position)
            hosts = jobs[0].hosts
            machine = hosts.machines[hosts.machine_of[Address(Role.TRAINER, 1)]]
            three_nodes.remove_node(
                next(n for n in three_nodes.worker_nodes if n.node_id == machine)
            )

    summary = run_job(
        spec,
        address=three_nodes.address,
        on_progress=on_progress,
        on_start=jobs.append,
        checkpoint_every=CheckpointEvery(examples=8_000),
        on_checkpoint=cuts.append,
        recovery=RecoveryPolicy(),
    )
    (loss,) = summary["recovery"]["losses"]
    assert loss["node"] == "trainer-1" and 0 < loss["back_to"] <= loss["position"]
    assert [loss["back_to"]] == cut_before_loss
    assert summary["machines"] == 2 and summary["examples_trained"] == 60_000
    assert {m for name, m in summary["placement"].items() if name.startswith("trainer")} == {1}
    assert summary["test_auc"] > 0.6
