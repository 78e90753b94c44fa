"""How to build each server node of a job (the reader, embedding shards, sync and dense
servers) and the trainers of every family: small picklable specs; a driver builds the node
where it runs, in its own process (the simulator) or inside a Ray actor (the engine). A
trainer is built by its strategy's family (strategy/family.py); a family's own servers:
its package (recsync/families/)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.reader_replay import ReplayPlan, replay
from recsync.data.shares import Deal
from recsync.data.synthetic import SyntheticSpec
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import FileData, SyntheticData
from recsync.model.spec import ModelSpec
from recsync.optim.rowwise import RowOptimizerSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Address
from recsync.protocol.node import Node
from recsync.ps.embedding_server import EmbeddingServerNode
from recsync.ps.gradient_servers import SparseShardServer
from recsync.ps.layout import TableLayout
from recsync.strategy.config import StrategyConfig
from recsync.strategy.family import family_of
from recsync.strategy.gradient import ServerPolicies, Tokens
from recsync.trainer.replica import DenseReplica, new_replica
from recsync.trainer.stats import TrainerSetup

if TYPE_CHECKING:
    from recsync.io.shared_text import SharedFiles

Collectives = tuple[tuple[Address, ...], ...]  # the nodes of each all-reduce, in rank order
SERVER_MARGIN = 4  # requests a server takes beyond its workers' (pings, polls)


class BuildContext:
    """What the process building the nodes offers them. `one_at_a_time`: the driver runs
    the loops of all its nodes one at a time (the simulator), so workers may share one
    dense workspace; otherwise every worker gets its own. `background_reading`: the reader
    may make its training stream in a process of its own (a real engine, whose one reader
    serves every worker). `labelled` False: a synthetic training stream's labels are left
    out (priced math, whose events depend on the ids only)."""

    def __init__(
        self, one_at_a_time: bool, background_reading: bool = False, labelled: bool = True
    ):
        self.one_at_a_time = one_at_a_time
        self.background_reading = background_reading
        self.labelled = labelled
        self._workspaces: dict[tuple[ModelSpec, TrainSpec], DenseReplica] = {}

    def workspace(self, model: ModelSpec, train: TrainSpec) -> Callable[[], DenseReplica]:
        """A factory of the dense modules a job's workers compute on."""

        def make() -> DenseReplica:
            if not self.one_at_a_time:
                return new_replica(model, train.seed, train.dense_optimizer)
            key = (model, train)
            if key not in self._workspaces:
                self._workspaces[key] = new_replica(model, train.seed, train.dense_optimizer)
            return self._workspaces[key]

        return make


@dataclass(frozen=True)
class NodeSpec:
    """Base of the node specs: the node's address; `threads` CPU slots it computes on (None:
    the driver's default for a server); `max_calls` requests it may be in at once (a Ray
    actor's concurrency); `serialized`: its requests are handled one at a time under one
    lock, and may wait for `ready` (else concurrently, lock-free). `slowdown` > 1: the node
    computes that many times slower than its machine allows (an emulated straggler trainer
    or slow server: `cluster.trainer_slowdown`, `cluster.server_slowdown`), during
    `slowdown_window` (seconds from the job's start)."""

    address: Address
    threads: int | None
    max_calls: int
    serialized: bool
    slowdown: float = field(default=1.0, kw_only=True)
    slowdown_window: tuple[float, float] = field(default=(0.0, float("inf")), kw_only=True)
    has_loops: ClassVar[bool] = False  # the node runs loops (a trainer)

    def slowdown_at(self, seconds: float) -> float:
        """The node's slowdown `seconds` after the job's start."""
        start, stop = self.slowdown_window
        return self.slowdown if start <= seconds < stop else 1.0

    def build(self, context: BuildContext) -> Node:
        raise NotImplementedError

    @property
    def worker_processes(self) -> bool:
        """Its worker loops run in processes of their own, over the state the node shares
        (`Node.shared_tensors`); else all its loops run in one process."""
        return False


@dataclass(frozen=True)
class ReaderSpec(NodeSpec):
    synthetic: SyntheticSpec | None
    files: FileData | None
    train: TrainSpec
    start_example: int
    num_trainers: int
    tokens: Tokens | None
    limit: int | None
    num_workers: int
    batches_per_step: int
    # how the readers share what is left of the stream (data/shares.py): its examples, or
    # the blocks of `lines` (io/shared_text.py)
    deal: Deal
    step_share: int | None = None  # of each global step, the batches it hands out
    lines: SharedFiles | None = None  # the files as the readers share them (or None)
    replay: ReplayPlan | None = None  # a lost reader's replacement (reader_replay.py)

    def build(self, context: BuildContext) -> ReaderNode:
        deal, index = self.deal, self.address.index
        source: SyntheticData | SharedTextData
        if self.lines is not None:
            assert self.files is not None
            background = context.background_reading
            source = SharedTextData(self.files, self.lines, self.train, deal, index, background)
        else:
            assert self.synthetic is not None
            whole = deal.num_readers == 1 and not deal.base.beyond
            source = SyntheticData(
                self.synthetic,
                self.train,
                self.start_example,
                context.background_reading,
                None if whole else functools.partial(deal.owned, index),
                context.labelled,
            )
        reader = ReaderNode(
            source,
            self.num_trainers,
            self.tokens,
            self.limit,
            self.num_workers,
            self.batches_per_step,
            deal,
            index,
            self.step_share,
        )
        if self.replay is not None:
            replay(reader, self.replay)
        return reader


@dataclass(frozen=True)
class ShardSpec(NodeSpec):
    """An embedding shard: Hogwild (`strategy` None) or run by the strategy's policy."""

    layout: TableLayout
    optimizer: RowOptimizerSpec
    seed: int
    state: dict[str, Any] | None
    strategy: ServerPolicies | None
    num_workers: int

    def build(self, context: BuildContext) -> EmbeddingServerNode | SparseShardServer:
        index = self.address.index
        shard = self.layout.new_shard(index, self.optimizer, self.seed)
        if self.state is not None:
            shard.load_state_dict(self.state)
        if self.strategy is None:
            return EmbeddingServerNode(index, shard)
        policy = self.strategy.make_server(self.num_workers, True)
        # each worker checks its gradient once per step: the servers need not check each push
        norm = self.strategy.staleness_norm
        return SparseShardServer(index, shard, policy, norm, check_finite=False)


@dataclass(frozen=True)
class TrainerSpec(NodeSpec):
    """A trainer of any family (`setup`: what every trainer is built from)."""

    setup: TrainerSetup
    strategy: StrategyConfig
    processes: bool = False
    has_loops: ClassVar[bool] = True

    def build(self, context: BuildContext) -> Node:
        return family_of(self.strategy).trainer(self, context)

    @property
    def worker_processes(self) -> bool:
        return self.processes

    @property
    def workers(self) -> range:
        """The job-wide indices of its workers (the `worker` of its worker loops)."""
        first = self.setup.first_worker
        return range(first, first + self.setup.num_workers)
