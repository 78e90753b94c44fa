"""Pieces of a worker's step shared by the trainers: pooled lookups on the embedding shards
and row gradients pushed back, as effects."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import torch

from recsync.data.batch import Batch
from recsync.protocol.address import Address
from recsync.protocol.effects import Call, CallEach, Drain, Effect, Send, Target
from recsync.protocol.messages import Fused, Lookup, Message, Pooled, PushRowGradients, PushRows
from recsync.protocol.reading import HandedBatch, NextBatch, Park
from recsync.ps.layout import ShardRequest, TableLayout
from recsync.ps.shard import row_gradients_with_inverse
from recsync.trainer.receipts import ReceiptLog

EMPTY_ROWS = torch.empty(0, dtype=torch.int64)


def take_batch(
    reader: Address,
    request: NextBatch,
    worker: int,
    flush: Callable[[], list[Target]],
    receipts: ReceiptLog,
    thread: int,
) -> Generator[Effect, Any, HandedBatch]:
    """The reader's answer to `request` from job-wide `worker` (its trainer's worker
    `thread`, logged in `receipts`). While a cut (a checkpoint) is under way the answer is
    a pause: then send what `flush` gives (pushes of batches this worker was handed that
    have not left), wait until every push it sent landed, park, and ask again (answered
    once the cut ended). A void answer (of a lost reader, after its replacement was
    planned: trainer/receipts.py) is dropped: ask again."""
    asked = request
    handed: HandedBatch = yield Call(reader, asked)
    while True:
        if not receipts.take(thread, handed):
            handed = yield Call(reader, asked)
            continue
        if not handed.paused:
            return handed
        pending = flush()
        if pending:
            yield Send(worker, pending)
        yield Drain(worker)
        yield Call(reader, Park(worker))
        asked = dataclasses.replace(request, parked=worker)
        handed = yield Call(reader, asked)


def nothing_to_flush() -> list[Target]:
    """A worker whose pushes all left with its step (only landing them is left)."""
    return []


def empty_request(shard: int) -> ShardRequest:
    return ShardRequest(shard, EMPTY_ROWS, torch.zeros(1, dtype=torch.int64), None, EMPTY_ROWS)


def lookups(
    shards: tuple[Address, ...],
    requests: list[ShardRequest],
    min_versions: list[int] | None = None,
    pushes: list[PushRowGradients] | None = None,
) -> list[Target]:
    """One Lookup per request, to the request's shard; with `min_versions`, shard s answers
    once its version reached min_versions[s]; with `pushes` (one per shard), each carries
    the push to its shard (applied first)."""
    return [
        fused(
            shards[r.shard],
            None if pushes is None else pushes[r.shard],
            Lookup(
                r.rows, r.offsets, r.weights, 0 if min_versions is None else min_versions[r.shard]
            ),
        )
        for r in requests
    ]


def fused(target: Address, push: Message | None, request: Message) -> Target:
    """`request` to `target`, carrying `push` (applied first) if there is one."""
    return (target, request if push is None else Fused(push, request))


def pushes_with_lookups(
    shards: tuple[Address, ...], requests: list[ShardRequest], pushes: dict[int, PushRows]
) -> tuple[list[Target], list[Target]]:
    """One call per request of this step (in order), carrying the previous step's push to
    that shard (applied first, then the pooled lookup answered); and the pushes to shards
    this step looks nothing up on, to send alone."""
    calls = [
        fused(shards[r.shard], pushes.get(r.shard), Lookup(r.rows, r.offsets, r.weights))
        for r in requests
    ]
    looked_up = {r.shard for r in requests}
    alone: list[Target] = [(shards[s], p) for s, p in pushes.items() if s not in looked_up]
    return calls, alone


def unique_row_versions(versions: torch.Tensor, inverse: torch.Tensor, count: int) -> torch.Tensor:
    """Each of `count` unique rows' version at the pull, from the N per-id versions and each
    id's index among the unique rows (an id's duplicates were read at once: same version)."""
    return torch.empty(count, dtype=torch.int64).scatter_(0, inverse, versions)


def versioned_lookup(
    layout: TableLayout,
    shards: tuple[Address, ...],
    batch: Batch,
    min_versions: list[int] | None = None,
    pushes: list[PushRowGradients] | None = None,
) -> Generator[CallEach, list[Pooled], tuple[list[ShardRequest], list[Pooled], torch.Tensor]]:
    """A lookup on every shard of a gradient policy (an empty request where the batch has no
    row there: every shard counts one push per step), answered with the rows' versions;
    with `min_versions`, shard s answers once its version reached min_versions[s]; with
    `pushes` (the previous step's, one per shard), each lookup carries its shard's push,
    applied first. Returns (requests, replies, B x F x D pooled embeddings)."""
    routed = {r.shard: r for r in layout.route(batch)}
    requests = [routed.get(s) or empty_request(s) for s in range(layout.num_shards)]
    replies = yield CallEach(lookups(shards, requests, min_versions, pushes))
    used = [i for i, r in enumerate(requests) if r.bag_index.numel()]
    pooled = layout.combine(
        batch.batch_size, [requests[i] for i in used], [replies[i].pooled for i in used]
    )
    return requests, replies, pooled


def row_gradient_pushes(
    layout: TableLayout,
    shards: tuple[Address, ...],
    requests: list[ShardRequest],
    replies: list[Pooled],
    grad_pooled: torch.Tensor,
    worker: int,
    token: int | None,
) -> list[Target]:
    """Per shard, a push of the step's row gradients (row_gradient_messages), addressed."""
    messages = row_gradient_messages(layout, requests, replies, grad_pooled, worker, token)
    return [(shards[r.shard], m) for r, m in zip(requests, messages, strict=True)]


def row_gradient_messages(
    layout: TableLayout,
    requests: list[ShardRequest],
    replies: list[Pooled],
    grad_pooled: torch.Tensor,
    worker: int,
    token: int | None,
) -> list[PushRowGradients]:
    """Per shard, a push of the step's unique rows, their gradients and their versions at
    the lookup, tagged with the shard's version at the lookup (empty where the batch had
    no row there)."""
    pushes: list[PushRowGradients] = []
    used = [r for r in requests if r.bag_index.numel()]
    grad_bags = iter(layout.requests_gradients(grad_pooled, used))
    for r, reply in zip(requests, replies, strict=True):
        if r.bag_index.numel():
            rows, grads, inverse = row_gradients_with_inverse(
                r.rows, r.offsets, next(grad_bags), r.weights, r.one_per_bag
            )
            assert reply.row_versions is not None
            pulled = unique_row_versions(reply.row_versions, inverse, rows.numel())
        else:
            rows, grads = EMPTY_ROWS, torch.empty(0, layout.width)
            pulled = EMPTY_ROWS
        grads = layout.wire_grads(r.shard, rows, grads)
        pushes.append(PushRowGradients(worker, reply.version, rows, grads, pulled, token))
    return pushes
