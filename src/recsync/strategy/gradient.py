"""The policy a parameter server runs (shared by the gradient and all-reduce families):
workers pull parameters and push gradients, and a policy on every server decides what to
apply when.

One policy instance runs on every parameter server: each dense server (one block of the
dense parameters) and each embedding shard. Every worker pushes one gradient to every server
per step (an empty one where its batch touched no row), tagged with the server version it
pulled (the number of updates the server had applied) and, for GBA, its batch's token. The
server keeps the gradient tensors; the policy sees only their ids and tags, and answers with
actions the server executes in order:

- ``Apply``: aggregate the listed gradients, ``sum(weight * grad) / divisor``, apply it once
  (the learning rate times ``lr_scale``) and count one update: the server's version + 1;
- ``Drop``: forget a gradient, counted under its reason;
- ``StartTimer``: call ``on_timer(timer_id)`` after ``seconds`` (virtual or wall).

``may_start(worker, last_version)`` says whether a worker may begin its next step (take a
batch, pull) given the version it tagged its previous push with here (None before its first
step); a worker of a strategy that `holds_workers` asks every server and waits until all
agree. A worker that has no more data (or failed) is reported with ``on_worker_done``, so
nobody waits for it. How a worker pulls (every block, or a part: PSP) is the strategy's
`PullRule` (families/gradient/strategy.py).

Pure policy: no tensors, clocks, threads or transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from recsync.protocol.node import StartTimer
from recsync.strategy.staleness_norm import StalenessNorm

__all__ = [
    "Action",
    "Apply",
    "Drop",
    "GradientPolicy",
    "Push",
    "ServerPolicies",
    "StartTimer",
    "Tokens",
    "check_positive_int",
]


@dataclass(frozen=True)
class Push:
    """A gradient arriving at one server: its id on that server, who computed it, from which
    server version, and (GBA) its batch's token."""

    grad_id: int
    worker: int
    version: int
    token: int | None = None


@dataclass(frozen=True)
class Apply:
    """Apply ``sum(weight * grad for grad_id, weight in grads) / divisor`` once, with the
    learning rate scaled by ``lr_scale``; the server's version then grows by one. No grads:
    the step ends with nothing to apply (GBA: every gradient of the step was stale)."""

    grads: tuple[tuple[int, float], ...]
    divisor: float
    lr_scale: float = 1.0


@dataclass(frozen=True)
class Drop:
    """Forget gradient ``grad_id``; count it under ``reason``."""

    grad_id: int
    reason: str


Action = Apply | Drop | StartTimer


class GradientPolicy:
    """Base of the server-side policies: the version counter and default no-op events.

    ``version`` is the number of Apply actions emitted so far. Subclasses implement
    ``on_push`` and, where needed, the other events. ``sparse`` tells the policy whether it
    runs on an embedding shard (GBA divides sparse sums by the count, dense by the weights).
    """

    def __init__(self, num_workers: int, sparse: bool = False) -> None:
        check_positive_int("num_workers", num_workers)
        self.num_workers = num_workers
        self.sparse = sparse
        self.version = 0
        self.done: set[int] = set()

    @property
    def active_workers(self) -> int:
        return self.num_workers - len(self.done)

    def on_push(self, push: Push) -> list[Action]:
        raise NotImplementedError

    def on_worker_done(self, worker: int) -> list[Action]:
        assert 0 <= worker < self.num_workers, worker
        self.done.add(worker)
        return []

    def on_timer(self, timer_id: int) -> list[Action]:
        return []

    def may_start(self, worker: int, last_version: int | None) -> bool:
        """Whether `worker` may begin its next step (only strategies that `holds_workers`
        override this)."""
        return True

    def _apply(
        self, grads: list[tuple[int, float]], divisor: float, lr_scale: float = 1.0
    ) -> Apply:
        assert grads and divisor > 0, (grads, divisor)
        self.version += 1
        return Apply(tuple(grads), float(divisor), float(lr_scale))

    def _advance(self) -> Apply:
        """End the current step with nothing to apply."""
        self.version += 1
        return Apply((), 1.0)


class Tokens(Protocol):
    """The token the reader hands with a batch (GBA's token control: families/gradient/)."""

    def token(self, batches_handed: int) -> int: ...


@runtime_checkable
class ServerPolicies(Protocol):
    """A strategy whose servers run a gradient policy: every embedding shard (and dense
    server) of the gradient family, the embedding shards of the all-reduce family."""

    @property
    def staleness_norm(self) -> StalenessNorm | None: ...

    def make_server(self, num_workers: int, sparse: bool) -> GradientPolicy: ...


def check_positive_int(field: str, value: object, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{field} must be an int >= {minimum}, got {value!r}")
