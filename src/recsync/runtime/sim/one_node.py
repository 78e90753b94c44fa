"""Recovering a simulated job from the loss of one node while every other node goes on, as
the Ray engine does it (runtime/ray/recovery.py), with the same rules
(coordinator/recovery.py): an embedding shard restored from the last cut (CPR's partial
recovery) or a trainer restarted, its replica from the center or the last cut and the
batches it held handed out again.

The lost node stops at once. It is noticed `detect_s` later and back `restart_s` after
that; messages sent to it meanwhile wait, and are handled by its replacement once it is
back (its callers send again what was in flight).
"""

from __future__ import annotations

from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.family import TrainerSpec
from recsync.coordinator.node_specs import BuildContext, NodeSpec, ShardSpec
from recsync.coordinator.recovery import Loss, restarted_trainer, restored_shard
from recsync.protocol.address import Address, Role
from recsync.protocol.reading import Requeue
from recsync.runtime.sim.host import SimHost
from recsync.runtime.sim.job import SimJob

CONTEXT = BuildContext(one_at_a_time=True)


class OneNodeRecovery:
    """Replaces lost nodes of one simulated job, one at a time (`replaced`: the spec each
    replaced node was last built from)."""

    def __init__(self, sim: SimJob, detect_s: float, restart_s: float):
        self.sim = sim
        self.detect_s, self.restart_s = detect_s, restart_s
        self.replaced: dict[Address, NodeSpec] = {}

    def node_spec(self, address: Address) -> NodeSpec:
        return self.replaced.get(address) or next(
            n for n in self.sim.topology.nodes if n.address == address
        )

    def recover(self, address: Address, back: JobState | None, loss: Loss) -> None:
        """Replace the node at `address`, lost now, from cut `back` (None: the job's start);
        `loss` is what the job counts of it (a restarted trainer's requeued examples are
        filled in once the loss is noticed)."""
        node = self.node_spec(address)
        if isinstance(node, TrainerSpec):
            self._restart_trainer(node, back, loss)
            return
        assert isinstance(node, ShardSpec), node
        sim = self.sim
        restored = self.replaced[address] = restored_shard(node, back)
        host = sim.hosts[address]
        host.node = restored.build(CONTEXT)
        host.down_until = sim.clock.now + self.detect_s + self.restart_s

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
        loss.replayed_examples = int(reader.handle(Requeue(address.index, node.workers)))
        sim.transport.changed.fire()
        centers = [h.node.report() for h in sim.hosts_of(Role.SYNC_SERVER)]
        restarted = restarted_trainer(node, sim.spec, back, centers)
        self.replaced[address] = restarted
        old = sim.hosts[address]
        host = SimHost(address, restarted.build(CONTEXT), old.machine)
        host.measures, host.slowdown_at = old.measures, old.slowdown_at
        host.down_until = sim.clock.now + self.restart_s
        sim.hosts[address] = host
        sim.clock.at(host.down_until, self._start, host)

    def _start(self, host: Any) -> None:
        self.sim.start_loops(host)
