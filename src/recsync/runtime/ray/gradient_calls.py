"""A trainer's calls to the parameter servers of a gradient strategy (real Ray calls)."""

from __future__ import annotations

import math
import time

import ray

from recsync.runtime.ray import wire
from recsync.runtime.ray.errors import NodeFailure
from recsync.trainer import effects as fx

GRADIENT_EFFECTS = (fx.AwaitStart, fx.PullDense, fx.PushGradients, fx.WorkerDone)
START_WAIT_S = 900.0


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


class GradientCalls:
    """Effect handlers for AwaitStart, PullDense, PushGradients and WorkerDone."""

    def __init__(self, runtime):
        self.runtime = runtime

    @property
    def dense(self):
        return self.runtime.sync_servers

    @property
    def sparse(self):
        return self.runtime.embedding_servers

    def handle(self, effect, pending: list):
        if isinstance(effect, fx.AwaitStart):
            return self._await_start(effect)
        if isinstance(effect, fx.PullDense):
            return self._pull(effect)
        if isinstance(effect, fx.PushGradients):
            pending.extend(self._push(effect))
            bound = 2 * (len(self.dense) + len(self.sparse))
            if len(pending) > bound:  # at most about two steps of pushes in flight
                done, rest = ray.wait(list(pending), num_returns=len(pending) - bound)
                self.runtime._get(done, "a parameter server (push)")
                pending[:] = rest
            return None
        assert isinstance(effect, fx.WorkerDone), effect
        if pending:
            self.runtime._get(list(pending), "a parameter server (push)")
            pending.clear()
        refs = [s.worker_done.remote(effect.worker) for s in [*self.dense, *self.sparse]]
        self.runtime._get(refs, "the parameter servers (worker done)")
        return None

    def _await_start(self, effect: fx.AwaitStart) -> None:
        dense = effect.dense_versions or [None] * len(self.dense)
        sparse = effect.sparse_versions or [None] * len(self.sparse)
        refs = [
            s.await_start.remote(effect.worker, v) for s, v in zip(self.dense, dense, strict=True)
        ]
        refs += [
            s.await_start.remote(effect.worker, v) for s, v in zip(self.sparse, sparse, strict=True)
        ]
        if not all(self.runtime._get(refs, "the parameter servers (start)", START_WAIT_S)):
            raise NodeFailure(f"{self.runtime.name}: a server never let the worker start")

    def _pull(self, effect: fx.PullDense):
        wanted = effect.min_versions or [0] * len(self.dense)
        refs = [s.pull.remote(v) for s, v in zip(self.dense, wanted, strict=True)]
        self.runtime.bytes_sent["PullDense"] += 64 * len(refs)
        if effect.fraction < 1.0:
            started = time.perf_counter()
            need = max(1, math.ceil(effect.fraction * len(refs)))
            ray.wait(refs, num_returns=need)
            left = started + effect.wait_s - time.perf_counter()
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(left, 0.0))
            ready = set(ready)
        else:
            ready = set(refs)
        answers = []
        for i, ref in enumerate(refs):
            if ref in ready:
                values, version = self.runtime._get(ref, f"dense-server-{i}")
                answers.append((wire.back(values), version))
            else:
                answers.append(None)
        return answers

    def _push(self, effect: fx.PushGradients) -> list:
        refs = []
        for block, version, grad in effect.dense:
            self.runtime.bytes_sent["PushDense"] += _nbytes(grad)
            refs.append(
                self.dense[block].push_dense.remote(
                    effect.worker, version, wire.out(grad.contiguous()), effect.token
                )
            )
        for shard, version, rows, grads, pulled in effect.sparse:
            self.runtime.bytes_sent["PushSparse"] += _nbytes(rows, grads, pulled)
            refs.append(
                self.sparse[shard].push_sparse.remote(
                    effect.worker,
                    version,
                    wire.out(rows),
                    wire.out(grads),
                    wire.out(pulled),
                    effect.token,
                )
            )
        return refs
