"""The trainer of hierarchical training (Huang et al. 2021, Sec. 3.2): m worker threads (the
paper's nets), each driving its own batches through the group PSs of its group.

Worker step: take batch -> pooled lookups on the embedding servers, each call carrying the
previous step's row gradients -> forward, stage by stage: the stage's input (coded as an
activation) to every group PS owning a part of it, their outputs back, joined, the
trainer's own layers after the join; the interaction, FM terms and loss here -> backward,
stage by stage in reverse: each part's output gradient (coded as a gradient) to its group
PS, which updates its parameters and returns the input gradient -> the row gradients wait
for the next step's lookups. When the data runs out: the last row gradients, then every
group PS of the group hears the worker is done. Free of transport: generators of effects.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F_

from recsync.data.batch import Batch
from recsync.families.hierarchical.compress.encoded import Codec, Encoded
from recsync.families.hierarchical.compress.spec import GradientStreams
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.families.hierarchical.group_model import GroupDense, Stage, summed
from recsync.families.hierarchical.messages import StageBackward, StageForward, StageValues
from recsync.model.priced import is_priced, scalar_value
from recsync.optim.checks import all_finite
from recsync.protocol.effects import CallEach, Compute, Effect, Loop, Send, Target
from recsync.protocol.messages import PushRows, WorkerDone
from recsync.protocol.node import LoopSpec
from recsync.protocol.reading import HandedBatch, NextBatch
from recsync.ps.shard import row_gradients
from recsync.trainer.stats import ReceivingTrainer, TrainerReport, TrainerSetup, TrainerStats
from recsync.trainer.steps import pushes_with_lookups, take_batch


@dataclass
class Pending:
    """A worker's step whose row gradients (per shard) have not left yet."""

    pushes: dict[int, PushRows] = field(default_factory=dict)
    examples: int = 0
    loss: float = 0.0


@dataclass
class Ran:
    """A stage as the forward pass ran it: its input and its joined output (a leaf)."""

    stage: Stage
    x: torch.Tensor
    y: torch.Tensor
    widths: list[int]  # each part's output columns (concatenated outputs)


class HierarchicalTrainer(ReceivingTrainer):
    """One trainer of a group: its worker threads and their stats. `setup.wiring.dense`:
    the group PSs of its group, in index order."""

    def __init__(self, setup: TrainerSetup, strategy: HierarchicalConfig, dense: GroupDense):
        self.setup, self.strategy, self.dense = setup, strategy, dense
        self.index, self.name = setup.index, setup.name
        self.num_workers, self.layout, self.wiring = setup.num_workers, setup.layout, setup.wiring
        self.group_servers = setup.wiring.dense
        self.stats = TrainerStats(setup.num_workers)
        self.pending: list[Pending | None] = [None] * setup.num_workers
        self.activation_codec: Codec = strategy.compression.activation_codec()
        self.gradients = GradientStreams(strategy.compression)
        parts = sum(
            dense.flops_per_example(s.index, j) for s in dense.stages for j in range(len(s.servers))
        )
        self.own_flops = setup.model.dense_flops_per_example() - parts
        dense.release()  # its FCs live on the group PSs

    def loops(self) -> list[LoopSpec]:
        first = self.setup.first_worker
        return [LoopSpec(self.worker_loop(w), first + w) for w in range(self.num_workers)]

    def worker_loop(self, thread: int) -> Loop:
        while (yield from self._step(thread)):
            pass
        worker = self.setup.first_worker + thread
        yield CallEach([(server, WorkerDone(worker)) for server in self.group_servers])
        self.stats.finish(thread)

    def _step(self, thread: int) -> Generator[Effect, Any, bool]:
        layout, shards = self.layout, self.wiring.shards
        worker = self.setup.first_worker + thread
        request = NextBatch(self.index, worker=worker, pushed=self.stats.pushed(thread))
        handed: HandedBatch = yield from take_batch(
            self.wiring.reader,
            request,
            worker,
            lambda: self._flush(thread),
            self.stats.receipts,
            thread,
        )
        batch = handed.batch
        previous, self.pending[thread] = self.pending[thread], None
        if batch is None:
            if previous is not None:
                self._count(thread, previous)
                yield Send(worker, [(shards[s], p) for s, p in previous.pushes.items()])
            self.stats.note_dry(thread)
            return False
        requests = layout.route(batch)
        calls, alone = pushes_with_lookups(
            shards, requests, {} if previous is None else previous.pushes
        )
        if previous is not None:
            self._count(thread, previous)
        if alone:
            yield Send(worker, alone)
        replies = yield CallEach(calls)
        pooled = layout.combine(batch.batch_size, requests, [reply.pooled for reply in replies])
        loss, grad_pooled, coded = yield from self._train(worker, batch, pooled)
        yield Compute(batch.batch_size, batch.batch_size * self.own_flops + coded)
        step = Pending({}, batch.batch_size, loss)
        for r, grad_bags in zip(
            requests, layout.requests_gradients(grad_pooled, requests), strict=True
        ):
            rows, grads = row_gradients(r.rows, r.offsets, grad_bags, r.weights)
            step.pushes[r.shard] = PushRows(rows, layout.wire_grads(r.shard, rows, grads))
        self.pending[thread] = step
        return True

    def _train(
        self, worker: int, batch: Batch, pooled: torch.Tensor
    ) -> Generator[Effect, Any, tuple[float, torch.Tensor, float]]:
        """Forward and backward of one batch through the group PSs -> (loss, the gradient of
        the pooled embeddings, the FLOPs this trainer spent coding)."""
        dense, arch = self.dense, self.dense.arch
        pooled = pooled.detach().requires_grad_()
        ran: list[Ran] = []
        coded = 0.0
        vectors = pooled
        if dense.embed is not None:  # projected tables: the embed stage's vectors
            flat = pooled.flatten(1)
            y, widths, flops = yield from self._forward(worker, dense.embed, flat)
            coded += flops
            ran.append(Ran(dense.embed, flat, y.requires_grad_(), widths))
            vectors = y.view(batch.batch_size, pooled.shape[1], -1)
        x: torch.Tensor = batch.dense
        for mlp in ("bottom", "top"):
            if mlp == "top":
                x = arch.top_input(x if arch.bottom is not None else None, vectors)
            for stage in (s for s in dense.stages if s.mlp == mlp):
                y, widths, flops = yield from self._forward(worker, stage, x)
                coded += flops
                y = y.requires_grad_()
                ran.append(Ran(stage, x, y, widths))
                x = dense.local(stage, y)
        logits = arch.head(x, vectors)
        loss = F_.binary_cross_entropy_with_logits(logits, batch.labels)
        leaves = [r.y for r in ran]
        grads = _grads(loss, None, [*leaves, pooled])
        for i in reversed(range(len(ran))):
            r, dy = ran[i], grads[i]
            if dy is None:
                dy = torch.zeros_like(r.y)
            dx, flops = yield from self._backward(worker, r, dy)
            coded += flops
            if dx is not None:
                more = _grads(r.x, dx, [*leaves[:i], pooled])
                for j, g in enumerate(more):
                    k = j if j < i else len(leaves)
                    before = grads[k]
                    if g is not None:
                        grads[k] = g if before is None else before + g
        grad_pooled = grads[len(leaves)]
        if grad_pooled is None:
            grad_pooled = torch.zeros_like(pooled)
        value = scalar_value(loss)
        if not ((math.isfinite(value) or is_priced(loss)) and all_finite(grad_pooled)):
            raise ValueError(
                f"worker {worker}: NaN or infinite loss or gradient (loss {value:g}); "
                "the batch holds NaN or training diverged"
            )
        return value, grad_pooled, coded

    def _forward(
        self, worker: int, stage: Stage, x: torch.Tensor
    ) -> Generator[Effect, Any, tuple[torch.Tensor, list[int], float]]:
        """The stage's joined output (detached), each part's output width (concatenated
        outputs), and the FLOPs of coding here."""
        servers, act = sorted(set(stage.servers)), self.activation_codec
        sent = act.encode(x.detach())  # once, for every group PS of the stage
        calls: list[Target] = [
            (
                self.group_servers[s],
                StageForward(
                    worker, stage.index, sent, self._server_flops(stage, s, x.shape[0], x, True)
                ),
            )
            for s in servers
        ]
        replies: list[StageValues] = yield CallEach(calls)
        received = [[act.decode(v) for v in reply.values] for reply in replies]
        coded = act.flops_per_element * (x.numel() + sum(t.numel() for r in received for t in r))
        if not stage.per_part:
            return summed([r[0] for r in received]).detach(), [], coded
        outputs: list[torch.Tensor] = [torch.empty(0)] * len(stage.servers)
        for s, values in zip(servers, received, strict=True):
            for part, value in zip(_parts_on(stage, s), values, strict=True):
                outputs[part] = value
        return torch.cat(outputs, dim=1).detach(), [o.shape[1] for o in outputs], coded

    def _backward(
        self, worker: int, ran: Ran, dy: torch.Tensor
    ) -> Generator[Effect, Any, tuple[torch.Tensor | None, float]]:
        """The gradient of the stage's input (None if it needs none) and the FLOPs of
        coding."""
        streams, stage, wants_input = self.gradients, ran.stage, ran.x.requires_grad
        servers = sorted(set(stage.servers))

        def encode(g: torch.Tensor, part: int) -> Encoded:
            return streams.codec((worker, stage.index, part, g.shape)).encode(g)

        if stage.per_part:
            slices = torch.split(dy, ran.widths, dim=1)
            grads = [
                tuple(encode(slices[part], part) for part in _parts_on(stage, s)) for s in servers
            ]
        else:
            grads = [(encode(dy, -1),)] * len(servers)  # once, for every group PS
        calls: list[Target] = [
            (
                self.group_servers[s],
                StageBackward(
                    worker,
                    stage.index,
                    g,
                    wants_input,
                    self._server_flops(stage, s, dy.shape[0], dy, False),
                ),
            )
            for s, g in zip(servers, grads, strict=True)
        ]
        replies: list[StageValues] = yield CallEach(calls)
        coded = streams.flops_per_element * dy.numel()
        if not wants_input:
            return None, coded
        received = [[streams.decode(v) for v in reply.values] for reply in replies]
        coded += streams.flops_per_element * sum(t.numel() for r in received for t in r)
        if stage.shares_input:
            return summed([r[0] for r in received]), coded
        widened = [
            _widen(value, columns, ran.x.shape)
            for s, values in zip(servers, received, strict=True)
            for value, columns in zip(
                values, (stage.columns[p] for p in _parts_on(stage, s)), strict=True
            )
        ]
        return summed(widened), coded

    def _server_flops(
        self, stage: Stage, server: int, B: int, sent: torch.Tensor, forward: bool
    ) -> float:
        """What a group PS's parts of `stage` cost it for B examples: their math (a third
        of training's forward, two thirds backward) and coding what it got and sends."""
        parts = _parts_on(stage, server)
        math = sum(self.dense.flops_per_example(stage.index, j) for j in parts) * B
        coding = (self.activation_codec if forward else self.gradients).flops_per_element
        return (math / 3 if forward else 2 * math / 3) + coding * 2 * sent.numel()

    def _flush(self, thread: int) -> list[Target]:
        previous, self.pending[thread] = self.pending[thread], None
        if previous is None:
            return []
        self._count(thread, previous)
        return [(self.wiring.shards[s], p) for s, p in previous.pushes.items()]

    def _count(self, thread: int, step: Pending) -> None:
        self.stats.count_step(thread, step.examples, step.loss)

    def report(self) -> TrainerReport:
        return TrainerReport(self.stats.detached())


def _grads(
    output: torch.Tensor, grad_output: torch.Tensor | None, inputs: list[torch.Tensor]
) -> list[torch.Tensor | None]:
    """d output / d inputs (None where an input does not reach it); the graph is kept."""
    wanted = [t for t in inputs if t.requires_grad]
    found = torch.autograd.grad(output, wanted, grad_output, retain_graph=True, allow_unused=True)
    by_id = {id(t): g for t, g in zip(wanted, found, strict=True)}
    return [by_id.get(id(t)) for t in inputs]


def _parts_on(stage: Stage, server: int) -> list[int]:
    return [j for j, owner in enumerate(stage.servers) if owner == server]


def _widen(g: torch.Tensor, columns: tuple[int, int] | None, shape: torch.Size) -> torch.Tensor:
    """A horizontal part's input gradient placed in the columns it read."""
    assert columns is not None
    full = torch.zeros(shape)
    full[:, columns[0] : columns[1]] = g
    return full
