"""Effects: what a node's loop asks its driver to do, and what it gets back.

A node's loop (a worker thread's step, a shadow thread's sync) is a generator that yields
effects and receives their results. The simulator turns an effect into timed events in
virtual time; the Ray driver into a real call on a real thread. Neither re-implements a loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recsync.ps.layout import ShardRequest


@dataclass
class NextBatch:
    """-> the next Batch handed to this trainer by the reader, or None when data is consumed;
    with ``with_token``, the pair (batch or None, its GBA token)."""

    trainer: int
    with_token: bool = False


@dataclass
class Lookup:
    """-> per request, the shard's num_bags x D partial pools (in request order); with
    ``with_versions``, triples (partial pools, the looked-up rows' versions, the shard's
    version). With `min_versions`, shard s answers only once its version reached
    min_versions[s] (PSP: the step after the worker's last push there)."""

    requests: list[ShardRequest]
    with_versions: bool = False
    min_versions: list[int] | None = None


@dataclass
class AwaitStart:
    """-> None once every server lets worker `worker` start its next step, given the
    versions its previous push carried (dense blocks, then embedding shards; None at first)."""

    worker: int
    dense_versions: list[int] | None
    sparse_versions: list[int] | None


@dataclass
class PullDense:
    """-> per dense server, (block values, version), or None for a block that had not arrived
    when the worker proceeded: once `fraction` of the blocks arrived and `wait_s` passed.
    With `min_versions`, block b answers only once its version reached min_versions[b]."""

    fraction: float = 1.0
    wait_s: float = 0.0
    min_versions: list[int] | None = None


@dataclass
class PushGradients:
    """-> None (fire and forget). Dense: (server, version pulled, gradient block); sparse:
    (shard, version pulled, rows, row gradients, rows' versions at the pull)."""

    worker: int
    token: int | None
    dense: list[tuple[int, int, torch.Tensor]]
    sparse: list[tuple[int, int, torch.Tensor, torch.Tensor, torch.Tensor]]


@dataclass
class WorkerDone:
    """-> None once every server knows worker `worker` pushes no more (after its pushes)."""

    worker: int


@dataclass
class Compute:
    """-> None. Dense forward/backward of `examples` examples took place (costs time)."""

    examples: int


@dataclass
class PushSparse:
    """-> None. Apply coalesced row gradients on embedding shards: (shard, rows, grads)."""

    updates: list[tuple[int, torch.Tensor, torch.Tensor]]


@dataclass
class Exchange:
    """-> the sync server's new center slice. EASGD exchange of one slice of the replica."""

    server: int
    values: torch.Tensor


@dataclass
class AllReduce:
    """-> (mean of `values` over trainers, number of trainers whose workers are done)."""

    values: torch.Tensor
    done: bool


@dataclass
class Now:
    """-> seconds since the job started (virtual or wall clock)."""


@dataclass
class AwaitIterations:
    """-> None once the trainer's workers completed `total` iterations in all, or finished."""

    total: int


@dataclass
class RequestSync:
    """-> None once the trainer's sync loop has completed a round after this request."""


@dataclass
class AwaitSyncRequest:
    """-> None when some worker requested a sync, or every worker of the trainer is done."""


@dataclass
class SyncRoundDone:
    """-> None. Releases the workers waiting in RequestSync."""


Effect = (
    NextBatch
    | Lookup
    | AwaitStart
    | PullDense
    | PushGradients
    | WorkerDone
    | Compute
    | PushSparse
    | Exchange
    | AllReduce
    | Now
    | AwaitIterations
    | RequestSync
    | AwaitSyncRequest
    | SyncRoundDone
)
