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

``needs`` on each config tells the driver what a sync requires: ``"none"`` (independent),
``"center"`` (a center variable on sync servers: EASGD) or ``"allreduce"`` (an all-reduce
average across trainers: MA, BMUF).
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal, Protocol

import torch

from recsync.sync.timing import FixedTrigger, Timing, average_sync_gap

__all__ = [
    "FixedTrigger",
    "Needs",
    "ReplicaPolicy",
    "ReplicaStrategyMixin",
    "Timing",
    "average_sync_gap",
    "check_flat_pair",
    "check_fraction",
    "snapshot",
]

Needs = Literal["none", "center", "allreduce"]


class ReplicaPolicy(Protocol):
    """The trainer side of a sync: fold what came back (center, average) into the replica."""

    def apply(self, replica: torch.Tensor, received: torch.Tensor, /) -> None: ...


class ReplicaStrategyMixin:
    """Shared by the replica strategy configs (frozen dataclasses with a ``timing`` field)."""

    name: ClassVar[str]  # registry key, e.g. "easgd"
    label: ClassVar[str]  # the paper's name, e.g. "EASGD"
    needs: ClassVar[Needs]
    sparse_policy: ClassVar[bool] = False  # embedding shards apply rows on arrival (Hogwild)
    gradient_allreduce: ClassVar[bool] = False  # only the gradient strategy `allreduce`
    timing: Timing

    def _check_timing(self) -> None:
        if not isinstance(self.timing, Timing):
            raise ValueError(f"timing must be a Timing, got {type(self.timing).__name__}")

    def _params(self) -> str:
        return ""

    def describe(self) -> str:
        """One line in the paper's naming: ``S-EASGD alpha=0.1``, ``FR-MA-5 alpha=0.1``,
        ``FR-BMUF-60s alpha=0.1 block_lr=1 block_momentum=0``."""
        params = self._params()
        head = self.timing.label(self.label)
        return f"{head} {params}" if params else head


def check_fraction(field: str, value: object, *, low_open: bool = True) -> None:
    """``value`` must be a real number in (0, 1] (or [0, 1] with ``low_open=False``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
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

    def __init__(self, config) -> None:
        self.config = config

    def apply(self, replica: torch.Tensor, received: torch.Tensor) -> None:
        check_flat_pair(replica, received, "received")
        replica.lerp_(received, self.config.alpha)
