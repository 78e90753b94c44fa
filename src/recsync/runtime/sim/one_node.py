"""Recovering a simulated job from the loss of one node while every other node goes on, as
the Ray engine does it (runtime/ray/recovery.py), with the same rules
(coordinator/recovery.py): an embedding shard restored from the last cut (CPR's partial
recovery), a trainer restarted, its replica from the center or the last cut and the
batches it held handed out again, or a reader replaced, its share of the stream replayed
from what its trainers' workers took (coordinator/reader_replay.py).

The lost node stops at once. It is noticed `detect_s` later and back `restart_s` after
that; messages sent to it meanwhile wait, and are handled by its replacement once it is
back (its callers send again what was in flight). A lost shard or trainer is replaced as
far as the job's rules go at once (`Replaced`); a lost reader once it is back (a loss
meanwhile rolls the job back, and no cut begins).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.node_specs import (
    BuildContext,
    NodeSpec,
    ReaderSpec,
    ShardSpec,
    TrainerSpec,
)
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.reader_replay import ReaderLedger
from recsync.coordinator.recovery import Loss, restarted_trainer, restored_shard
from recsync.coordinator.supervision import Replaced
from recsync.protocol.address import Address, Role
from recsync.protocol.reading import CloseReceipts, Requeue, Requeued
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.job import SimJob

CONTEXT = BuildContext(one_at_a_time=True)


class OneNodeRecovery:
    """Replaces lost nodes of one simulated job, one at a time (`replaced`: the spec each
    replaced node was last built from; `ledger`: what its readers' replacements need)."""

    def __init__(self, sim: SimJob, detect_s: float, restart_s: float):
        self.sim = sim
        self.detect_s, self.restart_s = detect_s, restart_s
        self.replaced: dict[Address, NodeSpec] = {}
        self.ledger = ReaderLedger()

    def node_spec(self, address: Address) -> NodeSpec:
        return self.replaced.get(address) or next(
            n for n in self.sim.topology.nodes if n.address == address
        )

    def recover(self, address: Address, back: JobState | None, loss: Loss) -> None:
        """Replace the node at `address`, lost now, from cut `back` (None: the job's start);
        `loss` is what the job counts of it (a restarted trainer's requeued examples are
        filled in once the loss is noticed)."""
        node = self.node_spec(address)
        sim = self.sim
        if isinstance(node, ReaderSpec):
            sim.hosts[address].down_until = sim.clock.now + self.detect_s + self.restart_s
            sim.clock.at(sim.clock.now + self.detect_s, self._replace_reader, node)
            return
        if isinstance(node, TrainerSpec):
            self._restart_trainer(node, back, loss)
        else:
            assert isinstance(node, ShardSpec), node
            restored = self.replaced[address] = restored_shard(node, back)
            host = sim.hosts[address]
            host.node = restored.build(CONTEXT)
            host.down_until = sim.clock.now + self.detect_s + self.restart_s
        sim.supervisor.handle(Replaced())  # the job goes on meanwhile: nothing waits for it

    def _restart_trainer(self, node: TrainerSpec, back: JobState | None, loss: Loss) -> None:
        sim = self.sim
        sim.kill_loops(node.address)
        noticed = sim.clock.now + self.detect_s
        sim.clock.at(noticed, self._requeue, (node, back, loss))

    def _requeue(self, lost: tuple[TrainerSpec, JobState | None, Loss]) -> None:
        """The loss is noticed: the batches the trainer held go out again, and its next
        incarnation is built; its loops start `restart_s` later."""
        node, back, loss = lost
        sim, address = self.sim, node.address
        reader = sim.reader.of_trainer(address.index)
        requeued = reader.handle(Requeue(address.index, node.workers))
        assert isinstance(requeued, Requeued)
        index = sim.spec.cluster.reader_of(address.index)
        loss.replayed_examples = self.ledger.requeued(index, address.index, requeued)
        sim.transport.changed.fire()
        restarted = restarted_trainer(node, sim.spec, back, self._reports)
        self.replaced[address] = restarted
        old = sim.hosts[address]
        host = SimHost(address, restarted.build(CONTEXT), old.machine)
        host.measures, host.slowdown_at = old.measures, old.slowdown_at
        host.down_until = sim.clock.now + self.restart_s
        sim.hosts[address] = host
        sim.clock.at(host.down_until, self._start, host)

    def _reports(self, role: Role) -> list[Any]:
        return [host.node.report() for host in self.sim.hosts_of(role)]

    def _start(self, host: Any) -> None:
        self.sim.start_loops(host)

    def _replace_reader(self, node: ReaderSpec) -> None:
        """A lost reader's loss is noticed: its trainers say what their workers took, and
        its replacement replays its share up to there; it is back `restart_s` later."""
        sim, index = self.sim, node.address.index
        fence = self.ledger.next_incarnation(index)
        trainers = [
            n
            for n in (self.node_spec(t.address) for t in sim.topology.of_role(Role.TRAINER))
            if isinstance(n, TrainerSpec) and sim.spec.cluster.reader_of(n.address.index) == index
        ]
        receipts = {
            t.address.index: sim.hosts[t.address].node.handle(CloseReceipts(fence))
            for t in trainers
        }
        incarnations = {t.address.index: t.setup.incarnation for t in trainers}
        lost = sim.reader.readers[index]
        stopped = sim.supervisor.stop_sent
        plan = self.ledger.plan(index, receipts, incarnations, stopped, lost.left)
        replacement = dataclasses.replace(node, replay=plan)
        reader = replacement.build(CONTEXT)
        assert isinstance(reader, ReaderNode)
        lost.close()
        host = sim.hosts[node.address]
        host.node = sim.reader.readers[index] = reader
        sim.reader.recount(index)
        sim.clock.at(host.down_until, self._reader_back)

    def _reader_back(self, _: Any = None) -> None:
        self.sim.supervisor.handle(Replaced())
        self.sim.transport.changed.fire()
