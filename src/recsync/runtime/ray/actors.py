"""The job's nodes as Ray actors. Each wraps a transport-free node from the lower layers."""

from __future__ import annotations

import os
import socket
import threading
import time

import ray
import torch

from recsync.coordinator.checkpoint import copy_state
from recsync.coordinator.reader import ReaderNode
from recsync.io.sources import open_training_data
from recsync.ps.servers import EmbeddingServerNode, SyncServerNode
from recsync.ps.shard import EmbeddingShard
from recsync.runtime.ray import wire
from recsync.runtime.ray.effects import NodeFailure, TrainerRuntime
from recsync.trainer.node import TrainerNode

SHADOW_NICE = 10


class _Pingable:
    def ping(self) -> bool:
        return True


@ray.remote(num_cpus=0)
class ReaderActor(_Pingable):
    """Owns the data source; hands each batch out once."""

    def __init__(
        self,
        synthetic,
        files,
        batch_size: int,
        seed: int,
        num_trainers: int,
        tokens_per_step: int | None = None,
        start_example: int = 0,
        limit: int | None = None,
    ):
        torch.set_num_threads(1)
        self.source = open_training_data(synthetic, files, batch_size, seed, start_example)
        self.node = ReaderNode(
            iter(self.source.train_batches()), num_trainers, tokens_per_step, limit
        )
        self.handed_at_stop: int | None = None

    def _note_stop(self, batch) -> None:
        if batch is None and self.handed_at_stop is None:
            self.handed_at_stop = self.node.total_examples

    def handed_when_stopped(self) -> int | None:
        return self.handed_at_stop

    def next_batch(self, trainer: int):
        batch = self.node.next_batch(trainer)
        self._note_stop(batch)
        return wire.batch_out(batch)

    def next_batch_with_token(self, trainer: int):
        batch, token = self.node.next_batch_with_token(trainer)
        self._note_stop(batch)
        return wire.batch_out(batch), token

    def progress(self) -> tuple[int, int | None]:
        return self.node.total_examples, self.source.total_examples

    def handed_examples(self) -> list[int]:
        return list(self.node.handed_examples)

    def test_set(self):
        test = wire.batch_out(self.source.test_set())
        return test, self.source.teacher_auc, self.source.skips.as_dict()


@ray.remote(num_cpus=0)
class EmbeddingServerActor(_Pingable):
    """One embedding shard, served from a thread pool (lock-free Hogwild updates)."""

    def __init__(self, index: int, weight: torch.Tensor, optimizer_spec, state=None):
        torch.set_num_threads(1)
        shard = EmbeddingShard(weight, optimizer_spec.build(weight.shape[0], weight.shape[1]))
        if state is not None:
            shard.load_state_dict(state)
        self.node = EmbeddingServerNode(index, shard)

    def shard_state(self) -> dict:
        return copy_state(self.node.shard.state_dict())

    def lookup(self, rows, offsets, weights):
        pooled = self.node.lookup(wire.back(rows), wire.back(offsets), wire.back(weights))
        return wire.out(pooled)

    def apply(self, rows, grads) -> None:
        self.node.apply(wire.back(rows), wire.back(grads))

    def weight(self) -> torch.Tensor:
        return self.node.shard.weight

    def stats(self):
        return self.node.stats


@ray.remote(num_cpus=0)
class SyncServerActor(_Pingable):
    """One slice of the EASGD center variable."""

    def __init__(self, index: int, center_policy):
        torch.set_num_threads(1)
        self.node = SyncServerNode(index, center_policy)

    def exchange(self, values):
        return wire.out(self.node.exchange(wire.back(values)))

    def stats(self):
        return self.node.stats


@ray.remote(num_cpus=0)
class TrainerActor(_Pingable):
    """m worker threads and one sync thread over one dense replica."""

    def __init__(
        self, name: str, node_args: dict, reader, embedding_servers, sync_servers, slowdown=1.0
    ):
        torch.set_num_threads(1)
        self.name = name
        self.node = TrainerNode(**node_args)
        self.runtime = TrainerRuntime(
            name,
            self.node.index,
            reader,
            embedding_servers,
            sync_servers,
            time.perf_counter(),
            slowdown,
        )
        self.runtime.workers_finished = lambda: self.node.workers_finished
        self.runtime.iterations_done = lambda: self.node.stats.total_iterations
        self.runtime.examples_done = lambda: self.node.stats.total_examples

    def collective_address(self) -> str:
        with socket.socket() as sock:
            sock.bind(("", 0))
            port = sock.getsockname()[1]
        return f"tcp://{ray.util.get_node_ip_address()}:{port}"

    def init_collective(self, address: str, world_size: int, timeout_s: float) -> None:
        self.runtime.init_collective(address, world_size, timeout_s)

    def run(self):
        """Train until the reader runs dry; returns (stats, blocked seconds, bytes sent)."""
        self.runtime.start = time.perf_counter()
        errors: list[BaseException] = []

        def guarded(loop, background=False):
            if background:  # the shadow thread only takes CPU the workers leave idle
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), SHADOW_NICE)
            try:
                self.runtime.drive(loop)
            except BaseException as error:  # noqa: BLE001 - reported to the coordinator
                errors.append(error)
                self.runtime.fail_waiters()

        threads = [
            threading.Thread(target=guarded, args=(self.node.worker_loop(i),), daemon=True)
            for i in range(self.node.num_workers)
        ]
        threads.append(
            threading.Thread(target=guarded, args=(self.node.sync_loop(), True), daemon=True)
        )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            first = errors[0]
            if isinstance(first, NodeFailure):
                raise first
            raise NodeFailure(f"{self.name} failed: {type(first).__name__}: {first}") from first
        return self.node.stats, dict(self.runtime.blocked), dict(self.runtime.bytes_sent)

    def optimizer_state(self) -> dict | None:
        replica = self.node.replica
        return None if replica is None else copy_state(replica.optimizer.state_dict())

    def trained_when_dry(self) -> int | None:
        return self.runtime.trained_when_dry

    def replica(self) -> torch.Tensor | None:
        return self.node.state()
