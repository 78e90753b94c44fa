"""The distributed job on Ray: one actor per node of the job's topology, watched until the
loops end; then the same end of job as the simulator's (coordinator/outcome.py)."""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.evaluation import EarlyStopping, Evaluations
from recsync.coordinator.machines import assign_machines
from recsync.coordinator.outcome import JobEnd, NodeMeasures, finish_job
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.topology import TrainerSpec, build_topology
from recsync.protocol.address import READER, Address
from recsync.protocol.messages import ReaderProgress, StopReading
from recsync.ps.placement import JobPlan
from recsync.runtime.ray import wire
from recsync.runtime.ray.actors import NodeActor, Part
from recsync.runtime.ray.errors import NodeFailure, failure
from recsync.runtime.ray.evaluator import EvaluatorActor
from recsync.runtime.ray.shared_memory import release_shared, shared_path

PING_EVERY_S = 2.0
PING_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10.0
START_TIMEOUT_S = 300.0  # actors start their processes and import torch: slow on a busy machine
COLLECTIVE_TIMEOUT_S = 60.0
INLINE_OBJECT_BYTES = 4 << 20  # batches, pooled embeddings and row gradients skip the object store

Progress = Callable[[int, int | None, float], None]
OnEval = Callable[[dict[str, Any]], None]


def connect(address: str | None, num_cpus: int | None) -> bool:
    """Join the cluster at `address`, or start a local one. True if we started it."""
    if ray.is_initialized():
        return False
    if address:
        if address != "auto" and "://" not in address:
            check_reachable(address)
        if "RAY_AUTH_MODE" not in os.environ and auth_token_available():
            use_auth_token()
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError) as error:
            raise ConnectionError(f"cannot join the Ray cluster at {address}: {error}") from None
        return False
    ray.init(
        num_cpus=num_cpus or 2,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"max_direct_call_object_size": INLINE_OBJECT_BYTES},
    )
    return True


def cluster_machines() -> list[str]:
    """The Ray node ids of the cluster's alive machines: the head first, then by id."""
    alive = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
    alive.sort(key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
    return [n["NodeID"] for n in alive]


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connection to `address` (HOST:PORT) opens within `timeout_s`, or a clear
    ConnectionError (Ray itself would retry for a long time)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"cluster address {address!r}: expected HOST:PORT, or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ConnectionError(
            f"no Ray cluster answers at {address} ({error.strerror or error}); start one "
            "with `ray start --head --port=PORT` there, or check the address"
        ) from None


def use_auth_token() -> None:
    """Send Ray's token to the cluster. Ray (2.60, pinned) does so by itself only for a
    cluster it found itself ("auto"); a cluster named by its address needs token mode set,
    and Ray reads its mode when it is imported: its own helper for "auto" sets the mode
    and reloads its config."""
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def auth_token_available() -> bool:
    """A Ray authentication token is configured (environment) or saved (~/.ray)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()


class RayJob:
    """One training job on Ray actors, one per node of its topology."""

    def __init__(
        self,
        spec: JobSpec,
        plan: JobPlan,
        eval_every: int = 0,
        early_stopping: EarlyStopping | None = None,
        keep_best: bool = False,
    ):
        self.spec = spec
        self.plan = plan
        cpus = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
        self.topology = build_topology(spec, plan, cpus)
        self.machines = cluster_machines()
        self.machine_of = assign_machines(
            [n.address for n in self.topology.nodes], len(self.machines)
        )
        self.actors: dict[Address, Any] = {}  # one per node (a node's home, if split)
        self.worker_actors: dict[Address, list[Any]] = {}  # a split node's worker processes
        self.unreleased: dict[Address, str] = {}  # shared-state files not yet unlinked
        self.final_state: JobState | None = None
        self.stop_reason: str | None = None  # set from a signal handler: stop reading
        self.evaluations = Evaluations(self.topology, eval_every, early_stopping, keep_best)
        self.on_eval: OnEval | None = None
        self._evaluator: Any = None
        self._evaluating: tuple[Any, list[Address], list[Any], float] | None = None
        self._stop_sent = False

    def _start(self) -> list[Address]:
        """Start every node's actor (and its worker processes' actors); returns the nodes
        that run loops (the trainers)."""
        for node in self.topology.nodes:
            part = None
            if node.worker_processes:
                part = Part(shared_path(node.address.name))
                self.unreleased[node.address] = part.path
            actor = NodeActor.options(  # type: ignore[attr-defined]
                max_concurrency=node.max_calls, **self._placed(node.address)
            )
            self.actors[node.address] = actor.remote(node, part)
        self._check_alive(START_TIMEOUT_S)
        self._check_placement()
        if self.evaluations.eval_every:  # started before the clock: it imports torch
            evaluator = EvaluatorActor.remote(self.topology)  # type: ignore[attr-defined]
            ray.get(evaluator.ready.remote(), timeout=START_TIMEOUT_S)
            self._evaluator = evaluator
        self._start_worker_processes()
        looping = [n.address for n in self.topology.nodes if n.has_loops]
        ray.get([actor.connect.remote(self.actors) for a in looping for actor in self.actors_of(a)])
        group = self.topology.collective
        if group:
            first = self.actors[group[0]]
            address = ray.get(first.collective_address.remote())
            ray.get(
                [
                    self.actors[a].init_collective.remote(
                        address, rank, len(group), COLLECTIVE_TIMEOUT_S
                    )
                    for rank, a in enumerate(group)
                ]
            )
        return looping

    def _placed(self, address: Address) -> dict[str, Any]:
        """The actor options that pin a node to its machine (none on one machine)."""
        if len(self.machines) == 1:
            return {}
        machine = self.machines[self.machine_of[address]]
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(machine, soft=False)}

    def _check_placement(self) -> None:
        """Every node's actor runs on the machine it was given."""
        addresses = list(self.actors)
        ran_on = ray.get([self.actors[a].node_id.remote() for a in addresses])
        for address, node_id in zip(addresses, ran_on, strict=True):
            expected = self.machines[self.machine_of[address]]
            assert node_id == expected, f"{address} runs on {node_id}, not {expected}"

    def placement(self) -> dict[str, int]:
        """Machine index of every node (machines: Ray's nodes, the head first)."""
        return {a.name: self.machine_of[a] for a in self.actors}

    def _start_worker_processes(self) -> None:
        """One actor per worker of each node whose workers run in processes of their own,
        on the machine of the node's home actor (they map its shared state); then the
        shared state's file is unlinked."""
        split = [n for n in self.topology.nodes if n.worker_processes]
        if not split:
            return
        homes = ray.get([self.actors[n.address].node_id.remote() for n in split])
        for node, node_id in zip(split, homes, strict=True):
            assert isinstance(node, TrainerSpec)
            path = self.unreleased[node.address]
            options = NodeActor.options(  # type: ignore[attr-defined]
                max_concurrency=node.max_calls,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            )
            self.worker_actors[node.address] = [
                options.remote(node, Part(path, worker)) for worker in node.workers
            ]
        self._check_alive(START_TIMEOUT_S)
        ray.get([self.actors[n.address].release_shared.remote() for n in split])
        self.unreleased.clear()

    def request_stop(self, reason: str) -> None:
        """Stop handing out batches (safe from a signal handler: the watch loop sends it)."""
        self.stop_reason = reason

    def actors_of(self, address: Address) -> list[Any]:
        """The actors of one node: its own and those of its worker processes."""
        return [self.actors[address], *self.worker_actors.get(address, [])]

    def _check_alive(self, timeout_s: float = PING_TIMEOUT_S) -> None:
        """Every actor answers a ping within `timeout_s` (a node that failed to start, died
        or hangs is named)."""
        actors = [(a, actor) for a in self.actors for actor in self.actors_of(a)]
        refs = [actor.ping.remote() for _, actor in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for (address, _), ref in zip(actors, refs, strict=True):
            if ref not in ready:
                raise NodeFailure(f"{address} did not answer within {timeout_s:.0f} s (hung?)")
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as error:
                raise failure(address.name, error) from None

    def _watch(self, looping: list[Address], on_progress: Progress | None, started: float) -> None:
        runs = {actor.run.remote(): a for a in looping for actor in self.actors_of(a)}
        done: set[Any] = set()
        last_ping = time.perf_counter()
        progress = wire.encode(ReaderProgress())
        while len(done) < len(runs):
            if self.stop_reason is not None and not self._stop_sent:
                self._stop_sent = True
                ray.get(self.actors[READER].call.remote(wire.encode(StopReading())))
            ready, _ = ray.wait([r for r in runs if r not in done], num_returns=1, timeout=0.5)
            for ref in ready:
                try:
                    ray.get(ref)
                except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
                    raise failure(runs[ref].name, error) from None
                done.add(ref)
            if time.perf_counter() - last_ping > PING_EVERY_S:
                self._check_alive()
                last_ping = time.perf_counter()
            if on_progress is not None or self.evaluations.eval_every:
                handed, total = ray.get(self.actors[READER].call.remote(progress))
                if on_progress is not None:
                    on_progress(handed, total, handed / max(time.perf_counter() - started, 1e-9))
                if self.evaluations.due(handed, total):
                    self._evaluate(time.perf_counter() - started)
            self._evaluated(wait=False)

    def _evaluate(self, seconds: float) -> None:
        """Start a metrics record of the model as it is now: its nodes' reports (copies)
        are scored by the evaluator actor while training goes on; a mark that comes while
        one is scored is skipped."""
        if self._evaluating is not None:
            return
        assert self._evaluator is not None
        nodes = Evaluations.nodes(self.topology)
        refs = [self.actors[a].report.remote() for a in nodes]
        reader = self.actors[READER].report.remote()
        quality = self._evaluator.quality.remote(reader, nodes, *refs)
        self._evaluating = (quality, nodes, refs, seconds)

    def _evaluated(self, wait: bool) -> None:
        """Record the evaluation under way once it is scored (`wait`: wait for it)."""
        if self._evaluating is None:
            return
        quality, nodes, refs, seconds = self._evaluating
        if not wait and not ray.wait([quality], timeout=0)[0]:
            return
        self._evaluating = None
        try:
            scored = ray.get(quality)
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
            raise failure("evaluator", error) from None
        if scored is None:
            return  # no held-out example yet
        reports = dict(zip(nodes, ray.get(refs), strict=True))
        record = self.evaluations.record(reports, scored, seconds)
        if self.on_eval is not None:
            self.on_eval(record)
        if self.evaluations.stop_now:
            self.request_stop("early stopping")

    def _measures(self, address: Address) -> NodeMeasures:
        """What was measured of a node, summed over its processes."""
        parts: list[NodeMeasures] = ray.get(
            [actor.node_measures.remote() for actor in self.actors_of(address)]
        )
        return functools.reduce(NodeMeasures.merged, parts)

    def run(self, on_progress: Progress | None = None) -> dict[str, Any]:
        """Train one pass; returns the summary (measures and held-out quality)."""
        looping = self._start()
        started = time.perf_counter()
        self._watch(looping, on_progress, started)
        train_seconds = time.perf_counter() - started
        self._evaluated(wait=True)  # a record under way is still written
        addresses = list(self.actors)
        reports = ray.get([self.actors[a].report.remote() for a in addresses])
        end = JobEnd(
            "ray",
            dict(zip(addresses, reports, strict=True)),
            {a: self._measures(a) for a in addresses},
            train_seconds,
        )
        try:
            summary, self.final_state = finish_job(self.topology, end)
        except ValueError as error:
            raise NodeFailure(str(error)) from None
        summary["machines"] = len(self.machines)
        summary["placement"] = self.placement()
        self.evaluations.final(summary, self.final_state)
        return summary

    def shutdown(self) -> None:
        for address, path in self.unreleased.items():  # a start that failed half-way
            try:
                ray.get(self.actors[address].release_shared.remote(), timeout=PING_TIMEOUT_S)
            except (ray.exceptions.RayError, KeyError):
                release_shared(path)  # the home is gone: the file is here, if anywhere
        for address in self.actors:
            for actor in self.actors_of(address):
                ray.kill(actor, no_restart=True)
        if self._evaluator is not None:
            ray.kill(self._evaluator, no_restart=True)
            self._evaluator = None
        self.actors.clear()
        self.worker_actors.clear()
        self.unreleased.clear()


def run_job(
    spec: JobSpec,
    address: str | None = None,
    num_cpus: int | None = None,
    on_progress: Progress | None = None,
    on_start: Callable[[RayJob], None] | None = None,
    eval_every: int = 0,
    on_eval: OnEval | None = None,
    early_stopping: EarlyStopping | None = None,
    keep_best: bool = False,
) -> dict[str, Any]:
    """Plan, start, train (evaluating every `eval_every` examples handed out: each record
    to `on_eval`), evaluate, stop. Starts (and stops) a local Ray if no address."""
    started_ray = connect(address, num_cpus)
    job = RayJob(spec, plan_for(spec), eval_every, early_stopping, keep_best)
    job.on_eval = on_eval
    try:
        if on_start is not None:
            on_start(job)
        return job.run(on_progress)
    finally:
        job.shutdown()
        if started_ray:
            ray.shutdown()
