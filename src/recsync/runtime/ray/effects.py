"""Runs a trainer's loops on real threads, turning each effect into a Ray call or a
collective, and accounting time blocked and bytes sent per effect kind."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import timedelta

import ray
import torch
import torch.distributed as dist

from recsync.runtime.ray import wire
from recsync.runtime.ray.errors import NodeFailure
from recsync.runtime.ray.gradient_calls import GRADIENT_EFFECTS, GradientCalls
from recsync.trainer import effects as fx
from recsync.trainer.node import Loop

MAX_PENDING_PUSHES = 4


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


class SyncRequests:
    """Fixed-rate collective syncs: workers request, the sync thread serves in rounds."""

    def __init__(self):
        self.cond = threading.Condition()
        self.requested = 0
        self.served = 0
        self.covering = 0
        self.failed = False


class TrainerRuntime:
    """Effect handlers of one trainer actor, shared by its worker and sync threads."""

    def __init__(
        self,
        name: str,
        index: int,
        reader,
        embedding_servers,
        sync_servers,
        start,
        slowdown: float = 1.0,
    ):
        self.name = name
        self.slowdown = slowdown
        self.index = index
        self.reader = reader
        self.embedding_servers = embedding_servers
        self.sync_servers = sync_servers
        self.start = start
        self.requests = SyncRequests()
        self.progress = threading.Condition()
        self.workers_finished = lambda: False
        self.iterations_done = lambda: 0
        self.examples_done = lambda: 0
        self.trained_when_dry: int | None = None  # examples trained when the data ran out
        self.blocked = defaultdict(float)
        self.bytes_sent = defaultdict(int)
        self.group = None
        self.gradient = GradientCalls(self)

    def init_collective(self, address: str, world_size: int, timeout_s: float) -> None:
        dist.init_process_group(
            "gloo",
            init_method=address,
            rank=self.index,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        self.group = dist.group.WORLD

    def _get(self, refs, what: str, timeout: float = 120.0):
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise NodeFailure(
                f"{self.name}: no answer from {what} within {timeout:.0f} s"
            ) from None
        except ray.exceptions.RayActorError as error:
            raise NodeFailure(f"{self.name}: {what} is dead or unreachable ({error})") from None

    def drive(self, loop: Loop) -> None:
        """Run one loop to its end on the calling thread."""
        prefetch = None
        pending: list = []
        result = None
        try:
            while True:
                resumed = time.perf_counter()
                try:
                    effect = loop.send(result)
                except StopIteration:
                    break
                started = time.perf_counter()
                kind = type(effect).__name__
                if isinstance(effect, fx.NextBatch) and effect.with_token:
                    # no prefetch: the batch order and the token must be those of the request
                    batch, token = self._get(
                        self.reader.next_batch_with_token.remote(effect.trainer), "reader"
                    )
                    result = wire.batch_back(batch), token
                    if batch is None:
                        self._note_dry()
                elif isinstance(effect, fx.NextBatch):
                    self._notify_progress()  # the previous iteration is counted by now
                    if prefetch is None:
                        prefetch = self.reader.next_batch.remote(effect.trainer)
                    result = wire.batch_back(self._get(prefetch, "reader"))
                    prefetch = self.reader.next_batch.remote(effect.trainer) if result else None
                    if result is None:
                        self._note_dry()
                elif isinstance(effect, fx.Lookup):
                    result = self._lookup(effect)
                elif isinstance(effect, GRADIENT_EFFECTS):
                    result = self.gradient.handle(effect, pending)
                elif isinstance(effect, fx.Compute):
                    if self.slowdown > 1.0:  # an emulated straggler: compute took longer
                        time.sleep((self.slowdown - 1.0) * (started - resumed))
                    result = None
                elif isinstance(effect, fx.PushSparse):
                    pending.extend(self._push(effect))
                    if len(pending) > MAX_PENDING_PUSHES:
                        done, pending = ray.wait(
                            pending, num_returns=len(pending) - MAX_PENDING_PUSHES
                        )
                        self._get(done, "an embedding server (push)")
                    result = None
                elif isinstance(effect, fx.Exchange):
                    self.bytes_sent[kind] += _nbytes(effect.values)
                    server = self.sync_servers[effect.server]
                    center = server.exchange.remote(wire.out(effect.values))
                    result = wire.back(self._get(center, f"sync-server-{effect.server}"))
                elif isinstance(effect, fx.AllReduce):
                    result = self._allreduce(effect)
                elif isinstance(effect, fx.Now):
                    result = time.perf_counter() - self.start
                elif isinstance(effect, fx.AwaitIterations):
                    with self.progress:
                        self.progress.wait_for(
                            lambda total=effect.total: (
                                self.iterations_done() >= total or self.workers_finished()
                            )
                        )
                    result = None
                else:
                    result = self._sync_request(effect)
                self.blocked[kind] += time.perf_counter() - started
        finally:
            self._notify_progress()
            if pending:
                self._get(pending, "an embedding server (push)")

    def _note_dry(self) -> None:
        if self.trained_when_dry is None:
            self.trained_when_dry = self.examples_done()

    def _notify_progress(self) -> None:
        with self.progress:
            self.progress.notify_all()

    def _lookup(self, effect: fx.Lookup):
        refs = []
        for r in effect.requests:
            self.bytes_sent["Lookup"] += _nbytes(r.rows, r.offsets, r.weights)
            server = self.embedding_servers[r.shard]
            args = [wire.out(r.rows), wire.out(r.offsets), wire.out(r.weights)]
            if effect.min_versions is not None:
                args.append(effect.min_versions[r.shard])
            refs.append(server.lookup.remote(*args))
        shards = ", ".join(f"embedding-server-{r.shard}" for r in effect.requests)
        answers = self._get(refs, shards)
        if effect.with_versions:
            return [(wire.back(p), wire.back(v), version) for p, v, version in answers]
        return [wire.back(p) for p in answers]

    def _push(self, effect: fx.PushSparse):
        refs = []
        for shard, rows, grads in effect.updates:
            self.bytes_sent["PushSparse"] += _nbytes(rows, grads)
            server = self.embedding_servers[shard]
            refs.append(server.apply.remote(wire.out(rows), wire.out(grads)))
        return refs

    def _allreduce(self, effect: fx.AllReduce):
        flag = torch.tensor([1.0 if effect.done else 0.0])
        buffer = torch.cat([effect.values, flag])
        self.bytes_sent["AllReduce"] += _nbytes(buffer)
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=self.group)
        world = dist.get_world_size(self.group)
        return buffer[:-1] / world, int(round(float(buffer[-1])))

    def _sync_request(self, effect) -> None:
        req = self.requests
        with req.cond:
            if isinstance(effect, fx.RequestSync):
                req.requested += 1
                mine = req.requested
                req.cond.notify_all()
                while req.served < mine and not req.failed:
                    req.cond.wait(timeout=1.0)
                if req.failed:
                    raise NodeFailure(f"{self.name}: its sync thread failed")
            elif isinstance(effect, fx.AwaitSyncRequest):
                while req.requested == req.served and not self.workers_finished():
                    req.cond.wait(timeout=0.05)
                req.covering = req.requested
            else:
                req.served = req.covering
                req.cond.notify_all()

    def fail_waiters(self) -> None:
        with self.requests.cond:
            self.requests.failed = True
            self.requests.cond.notify_all()
