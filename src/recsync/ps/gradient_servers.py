"""Parameter servers run by a gradient policy: the embedding shards here, the gradient
family's dense blocks (families/gradient/dense_server.py) on the same base. They hold
pushed gradients until their policy (strategy/gradient.py) says to apply or drop them.

Each server runs one policy instance (events in, actions out, see strategy/gradient.py) and
executes its actions on real tensors: Apply aggregates ``sum(weight * grad) / divisor`` and
runs the optimizer once; Drop forgets a gradient and counts it by reason; StartTimer is
handed to the driver, which calls ``timer`` later. A pull or lookup waits (``ready``) until
the server reached the version it asks for, a worker's MayStart until the policy lets it
start. Staleness is measured when a gradient is applied: the server's version now minus
the version pulled (per block), and each row's version now minus its version at the pull
(per row). A strategy's ``staleness_norm`` scales each gradient by rho(tau) before
aggregation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from recsync.optim.checks import all_finite
from recsync.optim.state import copy_state
from recsync.protocol.messages import (
    Lookup,
    MayStart,
    Message,
    Pooled,
    PushRowGradients,
    WorkerDone,
)
from recsync.protocol.node import Node, StartTimer
from recsync.ps.dim_groups import GroupedShard
from recsync.ps.embedding_server import ShardReport, checked_lookup
from recsync.ps.shard import RowShard
from recsync.strategy.gradient import Action, Apply, Drop, GradientPolicy, Push
from recsync.strategy.staleness_norm import StalenessNorm

ROW_STALENESS_BATCH = 256  # applied pushes whose row staleness is counted at once


@dataclass
class GradientServerStats:
    """What one server did: gradients pushed, applied and dropped (by reason), updates
    (global steps), staleness histograms (per applied gradient, and per applied row)."""

    pushes: int = 0
    applied: int = 0
    steps: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    staleness: Counter[int] = field(default_factory=Counter)
    row_staleness_counts: torch.Tensor = field(
        default_factory=lambda: torch.zeros(0, dtype=torch.int64)
    )
    pulls: int = 0
    uncounted_row_staleness: list[torch.Tensor] = field(default_factory=list, repr=False)

    def count_row_staleness(self, tau: torch.Tensor) -> None:
        """Add applied rows' staleness values (counted in batches: one bincount per many)."""
        self.uncounted_row_staleness.append(tau)
        if len(self.uncounted_row_staleness) >= ROW_STALENESS_BATCH:
            self._count_pending()

    def _count_pending(self) -> None:
        if not self.uncounted_row_staleness:
            return
        counts = torch.bincount(torch.cat(self.uncounted_row_staleness))
        self.uncounted_row_staleness.clear()
        total = self.row_staleness_counts
        if counts.numel() < total.numel():
            counts, total = total, counts
        counts[: total.numel()] += total
        self.row_staleness_counts = counts

    @property
    def row_staleness(self) -> Counter[int]:
        """Applied rows by staleness (row version at apply minus at pull)."""
        self._count_pending()
        counts = self.row_staleness_counts.tolist()
        return Counter({tau: int(n) for tau, n in enumerate(counts) if n})


class GradientServer(Node):
    """The policy-driven part shared by dense and embedding servers."""

    defers: ClassVar[bool] = True
    arms_timers: ClassVar[bool] = True
    versioned: ClassVar[type[Message]]  # the request that waits for a version (`min_version`)

    def __init__(
        self,
        name: str,
        policy: GradientPolicy,
        staleness_norm: StalenessNorm | None = None,
        check_finite: bool = True,
    ):
        self.name = name
        # False for the drivers: a GradientWorker checks its whole gradient once per step
        self.check_finite = check_finite
        self.policy = policy
        self.staleness_norm = staleness_norm
        self.pending: dict[int, Any] = {}
        self.next_id = 0
        self.stats = GradientServerStats()
        self.last_update_abs = 0.0
        self.timers: list[StartTimer] = []

    @property
    def version(self) -> int:
        return self.policy.version

    def ready(self, message: Message) -> bool:
        kind = type(message)
        if kind is self.versioned:
            wanted: int = message.min_version  # type: ignore[attr-defined]
            return self.policy.version >= wanted
        if kind is MayStart:
            worker, last = message.worker, message.last_version  # type: ignore[attr-defined]
            return self.policy.may_start(worker, last)
        return True

    def may_start(self, message: MayStart) -> bool:
        """Answered once `ready`: the policy lets the worker start."""
        return True

    def worker_done(self, message: WorkerDone) -> None:
        self._execute(self.policy.on_worker_done(message.worker))

    def timer(self, timer_id: int) -> None:
        self._execute(self.policy.on_timer(timer_id))

    def take_timers(self) -> list[StartTimer]:
        timers, self.timers = self.timers, []
        return timers

    def _receive(self, worker: int, version: int, token: int | None, item: Any) -> None:
        grad_id = self.next_id
        self.next_id += 1
        self.pending[grad_id] = item
        self.stats.pushes += 1
        self._execute(self.policy.on_push(Push(grad_id, worker, version, token)))

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Apply):
                items = [(self.pending.pop(g), w) for g, w in action.grads]
                self._update(items, action.divisor, action.lr_scale)
                self.stats.applied += len(items)
                self.stats.steps += 1
            elif isinstance(action, Drop):
                self.pending.pop(action.grad_id)
                self.stats.dropped[action.reason] += 1
            else:
                assert isinstance(action, StartTimer), action
                self.timers.append(action)

    def _update(self, items: list[Any], divisor: float, lr_scale: float) -> None:
        raise NotImplementedError


class SparseShardServer(GradientServer):
    """One embedding shard whose row gradients wait for the policy: aggregated gradients are
    summed per row, divided, and applied by the row-wise optimizer in one step."""

    handles: ClassVar[dict[type[Message], str]] = {
        Lookup: "lookup",
        PushRowGradients: "push",
        MayStart: "may_start",
        WorkerDone: "worker_done",
    }
    versioned: ClassVar[type[Message]] = Lookup

    def __init__(
        self,
        index: int,
        shard: RowShard,
        policy: GradientPolicy,
        staleness_norm: StalenessNorm | None = None,
        check_finite: bool = True,
    ):
        super().__init__(f"embedding-server-{index}", policy, staleness_norm, check_finite)
        self.index = index
        self.shard = shard

    def lookup(self, message: Lookup) -> Pooled:
        """Pooled partial bags, each looked-up row's version (for its staleness) and the
        shard's version."""
        pooled = checked_lookup(self.shard, message, self.name)
        self.stats.pulls += 1
        return Pooled(pooled, self.shard.versions_of(message.rows), self.version)

    def push(self, message: PushRowGradients) -> None:
        """Row gradients of a worker's step; `rows` come from this shard's range-checked
        lookup, `row_versions` are their versions at that lookup."""
        if self.check_finite and not all_finite(message.grads):
            raise ValueError(f"{self.name}: NaN or infinite row gradient")
        grads = message.grads
        if isinstance(self.shard, GroupedShard):  # compact: pad them to sum per row
            grads = self.shard.padded(message.rows, grads)
        item = (message.rows, grads, message.row_versions)
        self._receive(message.worker, message.version, message.token, item)

    def _update(self, items: list[Any], divisor: float, lr_scale: float) -> None:
        norm = self.staleness_norm
        all_rows, all_grads = [], []
        for (rows, grads, pulled), weight in items:
            if not rows.numel():
                continue
            tau = self.shard.versions_of(rows) - pulled
            self.stats.count_row_staleness(tau)
            if norm is not None:
                grads = grads * (norm.scale_rows(tau, 0.0) * weight).unsqueeze(1)
            elif weight != 1.0:
                grads = grads * weight
            all_rows.append(rows)
            all_grads.append(grads)
        if not all_rows:
            self.shard.global_step += 1
            return
        if len(all_rows) == 1:
            rows, grads = all_rows[0], all_grads[0]
        else:
            rows, inverse = torch.unique(torch.cat(all_rows), return_inverse=True)
            grads = torch.zeros(rows.numel(), all_grads[0].shape[1])
            grads.index_add_(0, inverse, torch.cat(all_grads))
        # the mean gradient, the learning rate times lr_scale (PSP: w - d lr Updater(mean))
        self.shard.apply_gradients(rows, grads if divisor == 1.0 else grads / divisor, lr_scale)

    def report(self) -> ShardReport:
        self.shard.evict_at_cut()
        return ShardReport(copy_state(self.shard.state_dict()), self.stats)
