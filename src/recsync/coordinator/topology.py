"""A job assembled once, for both drivers: which nodes it runs, how each is built, and who
talks to whom.

`build_topology(spec, plan)` gives the node specs in start order (the reader, the embedding
shards, the servers of the dense part, the trainers) and its collectives. The
family of the job's strategy decides the servers and the trainer class (strategy/family.py:
the interface; recsync/families/: the families; no driver changes with one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from recsync.coordinator.node_specs import (
    SERVER_MARGIN,
    Collectives,
    NodeSpec,
    ReaderSpec,
    ShardSpec,
    TrainerSpec,
)
from recsync.coordinator.spec import ClusterSpec, JobSpec, initial_dense
from recsync.errors import ConfigError
from recsync.protocol.address import READER, Address, Role
from recsync.ps.layout import TableLayout
from recsync.ps.placement import JobPlan
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import family_of
from recsync.strategy.gradient import Tokens
from recsync.trainer.stats import TrainerSetup, Wiring


@dataclass(frozen=True)
class Topology:
    """A job's nodes in start order, its plan, and its collectives: each the nodes that
    all-reduce together, in rank order (none when the strategy uses no all-reduce; a node
    is in one at most)."""

    spec: JobSpec
    plan: JobPlan
    nodes: tuple[NodeSpec, ...]
    collectives: Collectives

    def __post_init__(self) -> None:
        members = [a for group in self.collectives for a in group]
        assert len(members) == len(set(members)), "a node in two collectives"

    def of_role(self, role: Role) -> list[NodeSpec]:
        return [n for n in self.nodes if n.address.role is role]

    def num_processes(self) -> int:
        """Processes the engine runs the job in: one a node, and one more a worker of a
        trainer whose workers run in processes of their own."""
        return sum(
            1 + (len(n.workers) if isinstance(n, TrainerSpec) and n.worker_processes else 0)
            for n in self.nodes
        )

    @property
    def layout(self) -> TableLayout:
        return self.plan.embeddings.layout


def split_workers(cluster: ClusterSpec, strategy: StrategyConfig, cpus: int | None = None) -> bool:
    """Whether each trainer's workers run in processes of their own: as
    `cluster.worker_processes` says, or (unset) wherever the strategy allows it and the
    `cpus` the job runs on (None: enough) give every worker one. A trainer of one worker
    has nothing to split. On too few cores, a process per worker costs more (context
    switches, each process's runtime threads) than an interpreter lock shared by threads
    that could not run at once anyway (measured: 4 x 2 on 2 cores, async 21% and S-EASGD
    7% slower as processes; 1 x 2, S-EASGD 14% faster)."""
    if cluster.workers_per_trainer == 1 or cluster.worker_processes is False:
        return False
    refusal = family_of(strategy).process_refusal(strategy)
    if refusal is not None and cluster.worker_processes:
        raise ValueError(
            f"cluster.worker_processes: not with {strategy.describe()}: {refusal} (use "
            "threads: worker_processes = false, or shadow timing, or every_iterations)"
        )
    if cluster.worker_processes is None and cpus is not None:
        return refusal is None and cluster.hogwild_threads <= cpus
    return refusal is None


def build_topology(spec: JobSpec, plan: JobPlan, cpus: int | None = None) -> Topology:
    """The node specs of a job (validated against a checkpoint it resumes from); `cpus`:
    the cores it runs on, if known (they decide `split_workers` when the config does
    not)."""
    family, cluster, train = family_of(spec.strategy), spec.cluster, spec.train
    layout = plan.embeddings.layout
    resume = spec.resume
    if resume is not None:
        resume.check_layout(layout)
    workers = cluster.hogwild_threads
    readers = reader_specs(spec, family.tokens(spec.strategy, workers))
    policy = family.shard_policy(spec.strategy)
    calls = (1 if policy is None else 2) * workers + SERVER_MARGIN
    shards = [
        ShardSpec(
            Address(Role.EMBEDDING_SERVER, i),
            threads=None,
            max_calls=calls,
            serialized=policy is not None or not layout.lock_free,
            layout=layout,
            optimizer=train.sparse_optimizer,
            seed=train.seed,
            state=None if resume is None else resume.shards[i],
            strategy=policy,
            num_workers=workers,
        )
        for i in range(layout.num_shards)
    ]
    dense = family.dense_servers(spec, plan, initial_dense(spec))
    wiring = Wiring(
        READER,  # each trainer's own reader below
        tuple(s.address for s in shards),
        tuple(s.address for s in dense),
        tuple(plan.dense.ranges) if plan.dense is not None else (),
    )
    initial = None if resume is None else (resume.dense, resume.dense_optimizer)
    m = cluster.workers_per_trainer
    trainers = [
        TrainerSpec(
            Address(Role.TRAINER, t),
            threads=m,
            max_calls=m + SERVER_MARGIN,
            serialized=False,
            setup=TrainerSetup(
                t,
                cluster.num_trainers,
                m,
                spec.model,
                train,
                layout,
                family.trainer_wiring(
                    spec,
                    t,
                    dataclasses.replace(wiring, reader=readers[cluster.reader_of(t)].address),
                ),
                initial,
            ),
            strategy=spec.strategy,
            slowdown=cluster.slowdown(t),
            slowdown_window=cluster.slowdown_window,
            processes=split_workers(cluster, spec.strategy, cpus),
        )
        for t in range(cluster.num_trainers)
    ]
    collectives = family.collectives(spec, dense, trainers)
    servers = [_slowed(cluster, node) for node in (*readers, *shards, *dense)]
    unknown = sorted(set(dict(cluster.server_slowdown)) - {s.address.name for s in servers})
    if unknown:
        raise ConfigError(
            f"cluster.server_slowdown: no server named {unknown} in this job; its servers: "
            f"{[s.address.name for s in servers]}"
        )
    return Topology(spec, plan, (*servers, *trainers), collectives)


def reader_specs(spec: JobSpec, tokens: Tokens | None) -> list[ReaderSpec]:
    """The job's readers: `cluster.readers` of them, each handing out its share of what is
    left of the stream (data/shares.py) to the workers of the trainers it serves
    (`ClusterSpec.reader_of`)."""
    cluster, train = spec.cluster, spec.train
    count = cluster.readers
    if count > cluster.num_trainers:
        raise ConfigError(
            f"cluster.num_readers = {count}: more readers than the job's "
            f"{cluster.num_trainers} trainers (each trainer takes its batches from one)"
        )
    workers = cluster.hogwild_threads
    steps = spec.strategy.batches_per_step(workers)
    lines = spec.data.shared
    deal = spec.data.deal(count, spec.start_position)
    specs = []
    for index in range(count):
        served = list(range(index, cluster.num_trainers, count))  # `reader_of`: t % count
        limit = spec.stop_after_examples
        specs.append(
            ReaderSpec(
                Address(Role.READER, index),
                threads=1,
                max_calls=workers + SERVER_MARGIN,  # workers parked for a cut wait in it
                serialized=True,
                synthetic=spec.synthetic,
                files=spec.files,
                train=train,
                start_example=spec.start_example,
                num_trainers=cluster.num_trainers,
                tokens=tokens,
                limit=None if limit is None else deal.limit_share(index, limit),
                num_workers=len(served) * cluster.workers_per_trainer,
                batches_per_step=steps,
                deal=deal,
                step_share=step_share(steps, len(served) * cluster.workers_per_trainer, workers),
                lines=lines,
            )
        )
    return specs


def step_share(batches_per_step: int, served: int, workers: int) -> int | None:
    """Of a global step's batches, those a reader serving `served` of the job's `workers`
    hands out (None: the step does not split evenly among the readers)."""
    share, rest = divmod(batches_per_step * served, workers)
    return share if not rest and share else None


def _slowed(cluster: ClusterSpec, node: NodeSpec) -> NodeSpec:
    factor = cluster.server_factor(node.address.name)
    if factor == 1.0:
        return node
    return dataclasses.replace(node, slowdown=factor, slowdown_window=cluster.slowdown_window)
