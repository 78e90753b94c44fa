"""A group parameter server of hierarchical training (Huang et al. 2021, Sec. 3.2): owns
some FC parts of its group's dense replica, runs their forward and backward for every
worker thread of the group (many batches in flight at once, one per worker), applies
their updates lock-free, and syncs the parameters it owns across groups in a background
loop (Sec. 3.3): EASGD with its global sync server, or MA / BMUF in an all-reduce with the
group PSs of the other groups that own the same parts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch

from recsync.families.hierarchical.compress.encoded import Codec
from recsync.families.hierarchical.compress.spec import GradientStreams
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.group_model import GroupDense, summed
from recsync.families.hierarchical.messages import StageBackward, StageForward, StageValues
from recsync.families.synced_replicas.strategy import CollectiveStrategy
from recsync.model.priced import writable_alias
from recsync.optim.checks import all_finite
from recsync.optim.dense import DenseOptimizerSpec, FlatOptimizer
from recsync.optim.state import copy_state
from recsync.protocol.address import Address, Role
from recsync.protocol.effects import Await, Loop
from recsync.protocol.messages import Message, WorkerDone
from recsync.protocol.node import LoopSpec, Node

TRAINED = "trained"  # the channel its sync loop waits on (woken by the backward messages)


GROUP_SERVER = Role.declare("group-server")


@dataclass
class GroupServerReport:
    """A group PS at the end (or a copy while training): the flat vector of the parameters
    it owns, its optimizer state, the batches it trained, its cross-group syncs and its
    sync's own state (BMUF's global model and velocity; empty for EASGD and MA)."""

    values: torch.Tensor
    optimizer: dict[str, Any]
    backward_steps: int
    syncs: int
    sync: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupServerStart:
    """Where a resumed group PS starts: its parameters, their optimizer state (the step
    count included) and its sync's state (None: fresh, from its parameters)."""

    values: torch.Tensor
    optimizer: dict[str, Any]
    sync: dict[str, torch.Tensor] | None = None


@runtime_checkable
class SyncState(Protocol):
    """A cross-group sync that keeps state of its own (BMUF)."""

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor], /) -> None: ...


class GroupServerNode(Node):
    """Group PS `server` (0..p-1) of group `group`; its `num_workers`: the group's worker
    threads (it stops syncing once all of them are done, or with an all-reduce once every
    group's are); `sync_server`: its EASGD center (None with MA / BMUF); `start`: where a
    resumed one starts (None: the plan's initial parts)."""

    handles: ClassVar[dict[type[Message], str]] = {
        StageForward: "forward",
        StageBackward: "backward",
        WorkerDone: "worker_done",
    }

    def __init__(
        self,
        group: int,
        server: int,
        dense: GroupDense,
        optimizer: DenseOptimizerSpec,
        strategy: HierarchicalConfig,
        sync_server: Address | None,
        num_workers: int,
        start: GroupServerStart | None = None,
    ):
        self.group, self.server = group, server
        self.name = f"group-server-{group}.{server}"
        self.dense, self.strategy, self.sync_server = dense, strategy, sync_server
        self.num_workers = num_workers
        self.owned = dense.owned(server)
        assert self.owned, f"{self.name} owns no part"
        dense.release(keep=server)
        params = dense.parameters_of(server)
        self.flat = torch.cat([p.detach().reshape(-1) for p in params])
        if start is not None:
            assert start.values.shape == self.flat.shape, (self.name, start.values.shape)
            self.flat.copy_(start.values)
        self.ranges: dict[tuple[int, int], tuple[int, int]] = {}
        offset = 0
        for stage, part in self.owned:
            first = offset
            for p in dense.parts(stage)[part].parameters():
                p.data = self.flat[offset : offset + p.numel()].view_as(p)
                offset += p.numel()
            self.ranges[(stage, part)] = (first, offset)
        # writes go through an alias with its own version counter: Hogwild races intended
        self.writer = writable_alias(self.flat)
        self.optimizer = optimizer.build(self.flat.numel())  # its state, reported
        self.stage_optimizers = {
            stage: self._stage_optimizer(optimizer, stage) for stage, _ in self.owned
        }
        self.activation_codec: Codec = strategy.compression.activation_codec()
        self.gradients = GradientStreams(strategy.compression)
        self.in_flight: dict[tuple[int, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.done: set[int] = set()
        self.backward_steps = 0
        self.syncs = 0
        self.cross = strategy.cross_sync
        self.sync_policy = self.cross.make_replica(self.flat.clone())
        if start is not None:
            self._load(start)

    def _load(self, start: GroupServerStart) -> None:
        """Its optimizer state (each stage's step count: the batches it trained) and its
        sync's state from where it resumes."""
        self.optimizer.load_state_dict(start.optimizer)
        for optimizer in self.stage_optimizers.values():
            optimizer.counter.fill_(int(start.optimizer["steps"]))
        if start.sync and isinstance(self.sync_policy, SyncState):
            self.sync_policy.load_state_dict(start.sync)

    def mine(self, stage: int) -> list[int]:
        """The parts of `stage` it owns, in part order."""
        return [part for s, part in self.owned if s == stage]

    def forward(self, message: StageForward) -> StageValues:
        x = self.activation_codec.decode(message.x)
        stage = self.dense.stages[message.stage]
        kept, outputs = [], []
        for part in self.mine(message.stage):
            columns = stage.columns[part]
            x_part = x if columns is None else x[:, columns[0] : columns[1]]
            leaf = x_part.detach().requires_grad_()
            with torch.enable_grad():
                out = self.dense.parts(message.stage)[part](leaf)
            kept.append((leaf, out))
            outputs.append(out.detach())
        self.in_flight[(message.worker, message.stage)] = kept
        if not stage.per_part:
            outputs = [summed(outputs)]
        return StageValues(tuple(self.activation_codec.encode(o) for o in outputs))

    def backward(self, message: StageBackward) -> StageValues:
        kept = self.in_flight.pop((message.worker, message.stage))
        stage, mine, streams = (
            self.dense.stages[message.stage],
            self.mine(message.stage),
            self.gradients,
        )
        dys = [streams.decode(g) for g in message.grads]
        if not stage.per_part:  # one gradient of the summed output, the same for every part
            dys = dys * len(mine)
        first, last = self._stage_range(message.stage)
        grad = self.flat.new_empty(last - first)
        inputs: list[torch.Tensor] = []
        for part, (leaf, out), dy in zip(mine, kept, dys, strict=True):
            params = list(self.dense.parts(message.stage)[part].parameters())
            wrt = [leaf, *params] if message.wants_input else params
            grads = torch.autograd.grad(out, wrt, dy)
            start, stop = self.ranges[(message.stage, part)]
            grad[start - first : stop - first] = torch.cat(
                [g.reshape(-1) for g in grads[-len(params) :]]
            )
            if message.wants_input:
                inputs.append(grads[0])
        if not all_finite(grad):
            raise ValueError(
                f"{self.name}: NaN or infinite gradient from worker {message.worker}'s batch "
                f"at stage {message.stage}; the batch holds NaN or training diverged"
            )
        self.stage_optimizers[message.stage].step(self.writer[first:last], grad)
        self.backward_steps += 1
        if inputs and stage.shares_input:
            inputs = [summed(inputs)]
        return StageValues(
            tuple(
                streams.codec((message.worker, message.stage, i, g.shape)).encode(g)
                for i, g in enumerate(inputs)
            )
        )

    def _stage_range(self, stage: int) -> tuple[int, int]:
        """Where the parameters of its parts of `stage` sit in its flat vector (one run:
        parts are owned in stage order)."""
        ranges = [self.ranges[(stage, part)] for part in self.mine(stage)]
        return ranges[0][0], ranges[-1][1]

    def _stage_optimizer(self, spec: DenseOptimizerSpec, stage: int) -> FlatOptimizer:
        """The optimizer of one stage's parameters: its state a view into the group PS's,
        its step count its own (one step per batch, as the unsplit model's optimizer)."""
        first, last = self._stage_range(stage)
        optimizer = spec.build(0)
        state = {name: value[first:last] for name, value in self.optimizer.state.items()}
        optimizer.rebind({"steps": torch.zeros(1, dtype=torch.float64), **state})
        return optimizer

    def worker_done(self, message: WorkerDone) -> None:
        self.done.add(message.worker)

    @property
    def finished(self) -> bool:
        return len(self.done) >= self.num_workers

    def loops(self) -> list[LoopSpec]:
        return [LoopSpec(self._shadow(), None, background=True)]

    def _shadow(self) -> Loop:
        """Cross-group sync rounds, each after `shadow_min_gap` new batches per worker of
        the group went through its parts: EASGD until its group's workers are done; an
        all-reduce until every group's are (a collective needs every rank in each round)."""
        cross, groups = self.cross, self.strategy.groups
        stages = len({stage for stage, _ in self.owned})
        pace = math.ceil(self.strategy.shadow_min_gap * self.num_workers * stages)
        while True:
            target = self.backward_steps + pace
            if isinstance(cross, CollectiveStrategy):
                done = self.finished
                num_done = yield from cross.round(self.sync_policy, self.flat, self.writer, done)
                self.syncs += 1
                if num_done == groups:
                    return
            else:
                if self.finished:
                    return
                assert self.sync_server is not None
                center = (self.sync_server,), ((0, self.flat.numel()),)
                yield from cross.round(self.sync_policy, self.flat, self.writer, *center)
                self.syncs += 1
            if not self.finished:
                yield Await(TRAINED, self._trained(target), "AwaitIterations")

    def _trained(self, target: int) -> Callable[[], bool]:
        return lambda: self.backward_steps >= target or self.finished

    def _steps(self) -> int:
        """Batches its first stage trained (every stage takes one step per batch)."""
        return self.stage_optimizers[self.owned[0][0]].steps

    def report(self) -> GroupServerReport:
        policy = self.sync_policy
        return GroupServerReport(
            self.flat.clone(),
            copy_state({**self.optimizer.state_dict(), "steps": self._steps()}),
            self.backward_steps,
            self.syncs,
            policy.state_dict() if isinstance(policy, SyncState) else {},
        )
