"""Replacing a lost reader alone on Ray (coordinator/reader_replay.py says how): every live
trainer of the reader (each of its processes) says what its workers took, with a fence
after which a reply of the lost reader is void; the replacement, the lost reader's spec
with that replay, starts on the reader's machine if it is still there (else one left),
replays its share while building, and every node's loops are pointed at it. Meanwhile the
trainers' workers wait for their next batch (their calls to the lost reader are sent again
to its replacement) and the servers go on. Called by the job's `Recovery` (runtime/ray/recovery.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import ray

from recsync.coordinator.node_specs import ReaderSpec, TrainerSpec
from recsync.coordinator.reader_replay import ReaderLedger
from recsync.protocol.reading import CloseReceipts, Receipts
from recsync.runtime.ray.hosts import JobActors
from recsync.runtime.timeouts import START_TIMEOUT_S
from recsync.runtime.transport import wire


def replace_reader(
    hosts: JobActors,
    node: ReaderSpec,
    trainers: Sequence[TrainerSpec],
    ledger: ReaderLedger,
    stopped: bool,
) -> None:
    """Replace lost reader `node` (`trainers`: the current specs of the trainers it
    serves; `stopped`: the job was told to stop reading). A trainer lost meanwhile is a
    NodeFailure naming it (the job then rolls back)."""
    index = node.address.index
    fence = ledger.next_incarnation(index)
    receipts = closed_receipts(hosts, trainers, fence)
    incarnations = {t.address.index: t.setup.incarnation for t in trainers}
    plan = ledger.plan(index, receipts, incarnations, stopped)
    lost = hosts.actors[node.address]
    hosts.pool_keys.pop(lost._actor_id.hex(), None)
    with contextlib.suppress(Exception):  # dead already, or hung: it must not answer again
        ray.kill(lost, no_restart=True)
    hosts.replace(dataclasses.replace(node, replay=plan))


def closed_receipts(
    hosts: JobActors, trainers: Sequence[TrainerSpec], fence: int
) -> dict[int, Receipts]:
    """What each trainer's workers took from their reader, fenced at `fence`: every
    process of the trainer asked (each knows its own workers'), their answers joined."""
    message = wire.encode(CloseReceipts(fence))
    asked: dict[int, list[Any]] = {
        t.address.index: [actor.ask.remote(message) for actor in hosts.actors_of(t.address)]
        for t in trainers
    }
    receipts = {}
    for trainer, refs in asked.items():
        try:
            replies = [wire.decode(r) for r in ray.get(refs, timeout=START_TIMEOUT_S)]
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as error:
            raise hosts.named_loss(error) from None
        joined = replies[0]
        for reply in replies[1:]:
            joined = joined.joined(reply)
        receipts[trainer] = joined
    return receipts
