"""A node of each kind lost in the middle of a small real Ray job, and the job recovering.

For a replica strategy (S-EASGD) and a gradient strategy (async), 2 trainers x 2 workers, 2
embedding servers and 1 sync or dense server, the job is checkpointed (cut) every
`--cut-every` examples, and at `--kill-at` of its data one node is lost:

- by SIGKILL to its actor's process (every kind: trainer, embedding server, sync or dense
  server, reader), on a local 2-CPU Ray cluster;
- by `remove_node` of the raylet it runs on, on a 4-node `ray.cluster_utils.Cluster` (the
  server side on machines 0 and 1, trainers on 2 and 3; machine 0, the head, cannot be
  removed: the nodes on machine 1 and the trainers' machines are), which takes every node
  of that machine with it.

Losses while the job starts or recovers (`--when start,recovery`; SIGKILL, local cluster):
a trainer killed as the job's actors first answer (`start`), and the reader killed as the
actors of the rollback after a trainer's loss answer (`recovery`: a second loss during the
first one's recovery); each is recovered from by rolling back again.

Every kind is recovered from by rolling the whole job back to its last cut; for S-EASGD a
lost trainer is also restarted alone (`recovery.trainer = restart`), a lost embedding
server restored alone from the last cut (`recovery.embedding_server = partial`, CPR), and
a lost reader replaced alone (`recovery.reader = restart`, its default).
Each run is compared with the same job uninterrupted. Prints one JSON line per scenario
(Ray prints its own notes of the killed processes on the same stdout: the results are the
lines that start with "{"), then one JSON object: `scenarios`, `recovered` (runs that
ended with the whole data trained after a rollback), `examples_unaccounted` (examples of
the data neither trained, replayed nor reported lost, summed), `max_auc_drop`
(uninterrupted AUC minus recovered AUC, worst scenario; a partial recovery's lost updates
show here) and `max_detect_s` (seconds from
the kill to the rollback, worst).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.recovery import RecoveryPolicy
from recsync.coordinator.spec import ClusterSpec, JobSpec
from recsync.data.synthetic import SyntheticSpec
from recsync.families import strategy_config
from recsync.families.gradient.dense_server import DENSE_SERVER
from recsync.families.synced_replicas.sync_server import SYNC_SERVER
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import READER, Address, Role
from recsync.runtime.ray.job import RayJob, connect, run_job

MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 1000, 8) for i in range(8)),
    bottom_mlp=(64,),
    top_mlp=(64,),
)
SERVER = {"easgd": SYNC_SERVER, "async": DENSE_SERVER}
KINDS = ("trainer", "embedding-server", "server", "reader")


def job_spec(strategy: str, examples: int) -> JobSpec:
    synthetic = SyntheticSpec(
        num_train=examples, num_test=20_000, num_dense=4, table_rows=(1000,) * 8
    )
    cluster = ClusterSpec(2, 2, 2, num_dense_servers=1)
    return JobSpec(MODEL, TrainSpec(batch_size=128), cluster, strategy_config(strategy), synthetic)


def victim(strategy: str, kind: str) -> Address:
    if kind == "trainer":
        return Address(Role.TRAINER, 1)
    if kind == "embedding-server":
        return Address(Role.EMBEDDING_SERVER, 0)
    if kind == "server":
        return Address(SERVER[strategy], 0)
    return READER


class Killer:
    """Loses `target` once `at` examples were handed out (None: never): SIGKILL to its
    process, or `remove_node` of its machine; and SIGKILLs `at_starts[n]` once the actors
    of the job's start after `n` losses answer (0: its first start)."""

    def __init__(
        self,
        target: Address,
        at: int | None,
        cluster: Cluster | None,
        at_starts: dict[int, Address] | None = None,
    ):
        self.target, self.at, self.cluster = target, at, cluster
        self.at_starts = dict(at_starts or {})
        self.job: RayJob | None = None
        self.killed_at: float | None = None

    def on_start(self, job: RayJob) -> None:
        self.job = job
        job.on_actors_up = self.actors_up

    def actors_up(self, job: RayJob) -> None:
        target = self.at_starts.pop(len(job.recoveries.losses), None)
        if target is not None:
            os.kill(ray.get(job.hosts.actors[target].ping.remote()), signal.SIGKILL)

    def on_progress(self, done: int, total: int | None, eps: float) -> None:
        if self.killed_at is not None or self.at is None or done < self.at:
            return
        assert self.job is not None
        hosts = self.job.hosts
        self.killed_at = time.perf_counter()
        if self.cluster is None:
            pid = ray.get(hosts.actors[self.target].ping.remote())
            os.kill(pid, signal.SIGKILL)
        else:
            machine = hosts.machines[hosts.machine_of[self.target]]
            node = next(n for n in self.cluster.worker_nodes if n.node_id == machine)
            self.cluster.remove_node(node)


def run(
    spec: JobSpec, killer: Killer | None, args: argparse.Namespace, policy: RecoveryPolicy
) -> dict[str, Any]:
    return run_job(
        spec,
        on_progress=None if killer is None else killer.on_progress,
        on_start=None if killer is None else killer.on_start,
        checkpoint_every=CheckpointEvery(examples=args.cut_every),
        recovery=policy,
    )


def policy_for(kind: str, action: str) -> RecoveryPolicy:
    """Roll back on every loss, but the lost kind's own action."""
    keys = {"trainer": "trainer", "embedding-server": "embedding_server", "reader": "reader"}
    key = keys.get(kind)
    return RecoveryPolicy(**{"reader": "rollback", **({key: action} if key else {})})


def killer_for(
    strategy: str, kind: str, when: str, args: argparse.Namespace, cluster: Cluster | None
) -> Killer:
    """`kind` lost `when`: mid-run, as the job starts, or mid-run and then the reader
    during the rollback's restart."""
    target, at = victim(strategy, kind), int(args.kill_at * args.examples)
    if when == "start":
        return Killer(target, None, cluster, at_starts={0: target})
    if when == "recovery":
        return Killer(target, at, cluster, at_starts={1: READER})
    return Killer(target, at, cluster)


LOSSES_WHEN = {"mid-run": 1, "start": 1, "recovery": 2}


def scenario(
    strategy: str, kind: str, method: str, action: str, args: argparse.Namespace,
    baseline: dict[str, Any], cluster: Cluster | None, when: str = "mid-run",
) -> dict[str, Any]:  # fmt: skip
    spec = job_spec(strategy, args.examples)
    killer = killer_for(strategy, kind, when, args, cluster)
    started = time.perf_counter()
    try:
        summary = run(spec, killer, args, policy_for(kind, action))
        error = None
    except Exception as failure:  # noqa: BLE001 - a scenario that did not recover is reported
        summary, error = None, f"{type(failure).__name__}: {failure}"
    result: dict[str, Any] = {"strategy": strategy, "kind": kind, "method": method}
    result |= {"action": action, "when": when}
    result["wall_s"] = round(time.perf_counter() - started, 1)
    if summary is None:
        return result | {"recovered": False, "error": error, "unaccounted": args.examples}
    recovery = summary["recovery"]
    losses = recovery["losses"]
    trained, lost = summary["examples_trained"], recovery["examples_lost"]
    detect = None
    if losses and killer.killed_at is not None and killer.job is not None:
        detect = killer.job.started + losses[0]["at_seconds"] - killer.killed_at
    return result | {
        "detect_s": None if detect is None else round(detect, 2),
        "recovered": len(losses) == LOSSES_WHEN[when] and trained == args.examples,
        "lost_nodes": [loss["node"] for loss in losses],
        "examples_trained": trained,
        "examples_replayed": recovery["examples_replayed"],
        "examples_lost": lost,  # trained, but their updates of the lost shard were lost
        "unaccounted": args.examples - trained,
        "auc": round(summary["test_auc"], 4),
        "auc_uninterrupted": round(baseline["test_auc"], 4),
        "auc_drop": round(baseline["test_auc"] - summary["test_auc"], 4),
        "losses": losses,
        "eps": round(summary["eps"]),
        "eps_uninterrupted": round(baseline["eps"]),
    }


ONE_NODE = {"trainer": "restart", "embedding-server": "partial", "reader": "restart"}


def sigkills(strategies: list[str]) -> list[tuple[str, str, str]]:
    """(strategy, kind, action): every kind rolled back; a replica strategy's trainer,
    embedding server and reader also recovered alone."""
    found = [(s, kind, "rollback") for s in strategies for kind in KINDS]
    found += [(s, kind, ONE_NODE[kind]) for s in strategies if s == "easgd" for kind in ONE_NODE]
    return found


def removals(strategies: list[str]) -> list[tuple[str, str, str]]:
    """The nodes on machines that can be removed: trainers and embedding server 0 (with the
    sync or dense server beside it); a replica strategy's trainer also restarted alone."""
    found = [(s, kind, "rollback") for s in strategies for kind in ("trainer", "embedding-server")]
    found += [(s, "trainer", "restart") for s in strategies if s == "easgd"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=200_000)
    parser.add_argument("--cut-every", type=int, default=25_000)
    parser.add_argument("--kill-at", type=float, default=0.4, help="fraction of the data")
    parser.add_argument("--strategies", default="easgd,async")
    parser.add_argument(
        "--when", default="mid-run,start,recovery", help="when losses come (comma-separated)"
    )
    args = parser.parse_args()
    strategies, when = args.strategies.split(","), args.when.split(",")
    results = []
    connect(None, 2)
    calm = RecoveryPolicy()
    baselines = {s: run(job_spec(s, args.examples), None, args, calm) for s in strategies}
    local = [(s, k, a, "mid-run") for s, k, a in sigkills(strategies) if "mid-run" in when]
    local += [
        (s, "trainer", "rollback", w)
        for w in ("start", "recovery")
        if w in when
        for s in strategies
    ]
    for strategy, kind, action, at in local:
        found = scenario(strategy, kind, "sigkill", action, args, baselines[strategy], None, at)
        print(json.dumps(found), flush=True)
        results.append(found)
    ray.shutdown()
    for strategy, kind, action in removals(strategies) if "mid-run" in when else []:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        for _ in range(3):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            found = scenario(
                strategy, kind, "remove_node", action, args, baselines[strategy], cluster
            )
        finally:
            ray.shutdown()
            cluster.shutdown()
        print(json.dumps(found), flush=True)
        results.append(found)
    recovered = [r for r in results if r["recovered"]]
    print(
        json.dumps(
            {
                "scenarios": len(results),
                "recovered": len(recovered),
                "examples_unaccounted": sum(r["unaccounted"] for r in results),
                "max_auc_drop": max((r["auc_drop"] for r in recovered), default=None),
                "max_detect_s": max((r["detect_s"] or 0 for r in recovered), default=None),
                "examples": args.examples,
                "cut_every": args.cut_every,
            }
        )
    )


if __name__ == "__main__":
    main()
