"""Parameter servers of the gradient strategies as Ray actors: one per dense block and one
per embedding shard, each serializing its policy under a lock and waking blocked workers."""

from __future__ import annotations

import threading

import ray
import torch

from recsync.coordinator.checkpoint import copy_state
from recsync.ps.gradient_servers import DenseBlockServer, SparseShardServer
from recsync.ps.shard import EmbeddingShard
from recsync.runtime.ray import wire

START_TIMEOUT_S = 600.0


@ray.remote(num_cpus=0)
class GradientServerActor:
    """A DenseBlockServer (``values`` given) or a SparseShardServer (``weight`` given)."""

    def __init__(
        self,
        index: int,
        strategy,
        num_workers: int,
        optimizer_spec,
        values=None,
        weight=None,
        state=None,
    ):
        """`state`: to resume from: a shard's state dict, or a dense block's optimizer state."""
        torch.set_num_threads(1)
        norm = getattr(strategy, "staleness_norm", None)
        checked = False  # each worker checks its gradient once per step, not every push
        if values is not None:
            policy = strategy.make_server(num_workers, False)
            self.node = DenseBlockServer(index, values, optimizer_spec, policy, norm, checked)
            if state is not None:
                self.node.optimizer.load_state_dict(state)
        else:
            shard = EmbeddingShard(weight, optimizer_spec.build(weight.shape[0], weight.shape[1]))
            if state is not None:
                shard.load_state_dict(state)
            policy = strategy.make_server(num_workers, True)
            self.node = SparseShardServer(index, shard, policy, norm, checked)
        self.cond = threading.Condition()

    def ping(self) -> bool:
        return True

    def _run(self, timers) -> None:
        """Under the lock: wake the waiters, arm the policy's timers."""
        self.cond.notify_all()
        for timer in timers:
            thread = threading.Timer(timer.seconds, self._fire, args=(timer.timer_id,))
            thread.daemon = True
            thread.start()

    def _fire(self, timer_id: int) -> None:
        with self.cond:
            self._run(self.node.timer(timer_id))

    def await_start(self, worker: int, last_version: int | None) -> bool:
        """Blocks until the policy lets `worker` start its next step."""
        with self.cond:
            return self.cond.wait_for(
                lambda: self.node.may_start(worker, last_version), timeout=START_TIMEOUT_S
            )

    def pull(self, min_version: int = 0):
        """The block and its version, once the version reached `min_version` (PSP)."""
        with self.cond:
            self.cond.wait_for(lambda: self.node.version >= min_version, timeout=START_TIMEOUT_S)
            values, version = self.node.pull()
        return wire.out(values), version

    def lookup(self, rows, offsets, weights, min_version: int = 0):
        """Pooled partial bags, the rows' versions and the shard's version, once the
        version reached `min_version` (PSP)."""
        with self.cond:
            self.cond.wait_for(lambda: self.node.version >= min_version, timeout=START_TIMEOUT_S)
            version = self.node.version
            pooled, versions = self.node.lookup(
                wire.back(rows), wire.back(offsets), wire.back(weights)
            )
        return wire.out(pooled), wire.out(versions.clone()), version

    def push_dense(self, worker: int, version: int, grad, token) -> None:
        with self.cond:
            self._run(self.node.push(worker, version, wire.back(grad).clone(), token))

    def push_sparse(self, worker: int, version: int, rows, grads, pulled, token) -> None:
        with self.cond:
            self._run(
                self.node.push(
                    worker,
                    version,
                    wire.back(rows).clone(),
                    wire.back(grads).clone(),
                    wire.back(pulled).clone(),
                    token,
                )
            )

    def worker_done(self, worker: int) -> None:
        with self.cond:
            self._run(self.node.worker_done(worker))

    def values(self) -> torch.Tensor:
        with self.cond:
            return self.node.values.clone()

    def weight(self) -> torch.Tensor:
        with self.cond:
            return self.node.shard.weight.clone()

    def shard_state(self) -> dict:
        with self.cond:
            return copy_state(self.node.shard.state_dict())

    def optimizer_state(self) -> dict:
        with self.cond:
            return copy_state(self.node.optimizer.state_dict())

    def stats(self):
        with self.cond:
            return self.node.stats
