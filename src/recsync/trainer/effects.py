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
    """-> the next Batch handed to this trainer by the reader, or None when data is consumed."""

    trainer: int


@dataclass
class Lookup:
    """-> per request, the shard's num_bags x D partial pools (in request order)."""

    requests: list[ShardRequest]


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
