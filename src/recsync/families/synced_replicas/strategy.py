"""Shared types of the replica strategies (ShadowSync, Zheng et al. 2020, arXiv 2003.03477).

A replica strategy keeps the dense part replicated on the trainers (worker threads update
their trainer's replica Hogwild-style) and syncs the replicas now and then. Every policy here
works on FLAT dense parameter vectors: a trainer's whole dense replica is one 1-D float
tensor; a sync server holds a contiguous slice of the center variable. A slice of a replica
(``replica[lo:hi]``, a view) is a flat vector too, so the same policies serve sharded sync
servers.

Rules every policy follows:

- updates are in place on the tensors given;
- the trainer-side update is applied to the CURRENT replica (worker threads kept training
  while the sync was in flight); a replica is never overwritten with a snapshot;
- no clocks, threads or transport: the driver sends snapshots, runs the all-reduce, and
  passes the results in.

The family's types say what a sync requires: `CenterStrategy` (a center variable on sync
servers: EASGD) or `CollectiveStrategy` (an all-reduce average across trainers: MA, BMUF);
`independent` is a plain `ReplicaStrategy` that never syncs. Each writes its sync round
here, as a generator of effects the trainer's loops yield.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import ClassVar, Protocol

import torch

from recsync.families.synced_replicas.messages import Center as CenterReply
from recsync.protocol.address import Address
from recsync.protocol.effects import AllReduce, Call
from recsync.strategy.config import StrategyConfig
from recsync.strategy.timing import FixedTrigger, Timing, average_sync_gap

__all__ = [
    "CenterStrategy",
    "CollectiveStrategy",
    "FixedTrigger",
    "ReplicaPolicy",
    "ReplicaStrategy",
    "Timing",
    "average_sync_gap",
    "check_flat_pair",
    "check_fraction",
    "snapshot",
]


class HasAlpha(Protocol):
    """A replica strategy config with an elastic parameter."""

    @property
    def alpha(self) -> float: ...


class Center(Protocol):
    """The server side of a center strategy's sync: one slice of the center variable."""

    center: torch.Tensor

    def exchange(self, replica_slice: torch.Tensor, /) -> torch.Tensor: ...


class ReplicaPolicy(Protocol):
    """The trainer side of a sync: fold what came back (center, average) into the replica."""

    def apply(self, replica: torch.Tensor, received: torch.Tensor, /) -> None: ...


class ReplicaStrategy(StrategyConfig):
    """The replica family (frozen dataclasses with a ``timing`` field). A plain instance of
    this type never syncs (`independent`); its subtypes say how a sync is done."""

    timing: Timing
    background_dense: ClassVar[bool] = True

    def _check_timing(self) -> None:
        if not isinstance(self.timing, Timing):
            raise ValueError(f"timing must be a Timing, got {type(self.timing).__name__}")

    def describe(self) -> str:
        """One line in the paper's naming: ``S-EASGD alpha=0.1``, ``FR-MA-5 alpha=0.1``,
        ``FR-BMUF-60s alpha=0.1 block_lr=1 block_momentum=0``."""
        params = self._params()
        head = self.timing.label(self.label)
        return f"{head} {params}" if params else head

    def combine_replicas(self, replicas: Sequence[torch.Tensor]) -> torch.Tensor:
        """The dense model a job ends with: the average of the synced replicas (ShadowSync
        section 3.3 allows the average, the best or any replica)."""
        return torch.stack(list(replicas)).mean(0)


class CenterStrategy(ReplicaStrategy):
    """Replicas synced through a center variable sharded over sync servers (EASGD)."""

    on_dense_servers: ClassVar[bool] = True
    dense_in_blocks: ClassVar[bool] = True

    def make_replica(self, initial: torch.Tensor | None = None) -> ReplicaPolicy:
        raise NotImplementedError

    def make_center(self, center_slice: torch.Tensor) -> Center:
        raise NotImplementedError

    def round(
        self,
        policy: ReplicaPolicy,
        replica: torch.Tensor,
        writer: torch.Tensor,
        centers: Sequence[Address],
        ranges: Sequence[tuple[int, int]],
    ) -> Generator[Call, CenterReply, None]:
        """One sync of a trainer with every center slice (effects to yield)."""
        raise NotImplementedError


class CollectiveStrategy(ReplicaStrategy):
    """Replicas synced through an all-reduce among the trainers (MA, BMUF)."""

    def cut_refusal(self) -> str | None:
        if self.timing.is_shadow:
            return None
        return (
            f"{self.describe()}: its foreground rounds all-reduce among every trainer's "
            "workers, so some cannot park while others wait in a round; checkpoints during "
            "the run need timing = shadow (the end is checkpointed anyway)"
        )

    def make_replica(self, initial: torch.Tensor) -> ReplicaPolicy:
        raise NotImplementedError

    def round(
        self, policy: ReplicaPolicy, replica: torch.Tensor, writer: torch.Tensor, done: bool
    ) -> Generator[AllReduce, tuple[torch.Tensor, int], int]:
        """One sync (ShadowSync Alg. 3/4): all-reduce a snapshot of the replica, fold the
        average into the current replica (written through `writer`); `done` tells the
        others this trainer's workers finished. Returns how many trainers are done."""
        average, num_done = yield AllReduce(snapshot(replica), done)
        policy.apply(writer, average)
        return num_done


def check_fraction(field: str, value: object, *, low_open: bool = True) -> None:
    """``value`` must be a real number in (0, 1] (or [0, 1] with ``low_open=False``)."""
    ok = False
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        ok = (0 < value <= 1) if low_open else (0 <= value <= 1)
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(f"{field} must be a number in {interval}, got {value!r}")


def check_flat_pair(replica: torch.Tensor, other: torch.Tensor, other_name: str) -> None:
    """Both must be 1-D floating tensors of the same length and dtype."""
    if replica.dim() != 1 or not replica.is_floating_point():
        raise ValueError(
            f"replica must be a flat (1-D) floating tensor, got shape {tuple(replica.shape)} "
            f"dtype {replica.dtype}"
        )
    if other.shape != replica.shape or other.dtype != replica.dtype:
        raise ValueError(
            f"{other_name} must match the replica: shape {tuple(replica.shape)} dtype "
            f"{replica.dtype}, got shape {tuple(other.shape)} dtype {other.dtype}"
        )


def snapshot(replica: torch.Tensor) -> torch.Tensor:
    """A detached copy of (a slice of) a replica: what a trainer sends to a sync server or
    into an all-reduce (ShadowSync Alg. 3 line 5, Alg. 4 line 5)."""
    return replica.detach().clone()


class ElasticPull:
    """Trainer side of EASGD (Alg. 2 line 5) and MA (Alg. 3 line 7): ``w_i <- (1-a) w_i + a x``
    in place on the CURRENT replica (or a slice view of it), where x is the center returned
    by a sync server (EASGD) or the all-reduced average of the snapshots (MA)."""

    def __init__(self, config: HasAlpha) -> None:
        self.config = config

    def apply(self, replica: torch.Tensor, received: torch.Tensor) -> None:
        check_flat_pair(replica, received, "received")
        replica.lerp_(received, self.config.alpha)
