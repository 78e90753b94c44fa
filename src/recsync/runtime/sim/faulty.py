"""A simulated job that loses nodes and recovers, with the real math, in virtual time.

Each node of the job is lost after an exponential time of mean `faults.trainer_mtbf_s`,
`server_mtbf_s` or `reader_mtbf_s` by its kind (0: never), drawn from the job's seed. The
loss is noticed `detect_s` later and the job recovers `restart_s` after that, as the Ray
engine does it and as the job's `RecoveryPolicy` says for the node's role
(coordinator/recovery.py): a rollback restarts every node from the job's last cut (or its
start), the batches handed out after the cut handed out again; `partial` restores only the
lost embedding shard from the cut and `restart` restarts only the lost trainer, or replaces
only the lost reader (the cut under way abandoned), while the other nodes go on
(runtime/sim/one_node.py). Its summary is a simulated run's, with the
losses and the seconds they cost (`recovery`), and its virtual `train_seconds` include the
restarts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.evaluation import Evaluations
from recsync.coordinator.recovery import Recoveries, RecoveryPolicy, account
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.supervision import AbandonCut, Fail, ReplaceNode, RollBack
from recsync.coordinator.supervision import NodeLost as Lost
from recsync.coordinator.supervisor import Supervisor
from recsync.protocol.address import Address
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.runtime.sim.one_node import OneNodeRecovery

FAILURE_SEED = 7_919  # mixed with the job's seed: losses differ from the math's draws


class NodeLost(RuntimeError):
    """A node was lost and the policy says stop (the last cut, if any, is `last_cut`)."""

    def __init__(self, node: str, at_seconds: float, last_cut: JobState | None, why: str):
        super().__init__(f"{node} was lost at {at_seconds:.1f} s (virtual): {why}")
        self.node, self.at_seconds, self.last_cut = node, at_seconds, last_cut


class FaultySimJob:
    """Runs `spec` in the simulator, losing nodes as `cost.faults` says and recovering as
    `recovery` says (rollback to the last cut taken `checkpoint_every`, or stop)."""

    def __init__(
        self,
        spec: JobSpec,
        cost: CostModel,
        checkpoint_every: CheckpointEvery,
        recovery: RecoveryPolicy,
        on_checkpoint: Callable[[JobState], None] | None = None,
        **sim_options: Any,
    ):
        recovery.check(spec.strategy)
        self.first, self.cost = spec, cost
        self.checkpoint_every, self.recovery = checkpoint_every, recovery
        self.on_checkpoint = on_checkpoint
        self.sim_options = sim_options
        self.supervisor: Supervisor | None = None  # the first run's, kept by the restarts
        self.rng = random.Random(FAILURE_SEED * 1_000_003 + spec.train.seed)
        self.cut_seconds = 0.0  # over every run
        self.final_state: JobState | None = None
        self.sim: SimJob | None = None

    @property
    def evaluations(self) -> Evaluations | None:
        return None if self.supervisor is None else self.supervisor.evaluations

    @property
    def recoveries(self) -> Recoveries:
        assert self.supervisor is not None, "the job did not run"
        return self.supervisor.recoveries

    def _next_loss(self, nodes: list[Address]) -> tuple[float, Address | None]:
        """Seconds until the next node is lost, and which (inf, None: none can be)."""
        faults = self.cost.faults
        rates = [1.0 / faults.mtbf_s(a.role) if faults.mtbf_s(a.role) else 0.0 for a in nodes]
        total = sum(rates)
        if not total:
            return float("inf"), None
        after = self.rng.expovariate(total)
        pick = self.rng.random() * total
        for address, rate in zip(nodes, rates, strict=True):
            pick -= rate
            if pick < 0:
                return after, address
        return after, nodes[-1]

    def run(self) -> dict[str, Any]:
        faults, first = self.cost.faults, self.first
        spec, elapsed = first, 0.0
        while True:
            sim = self.sim = SimJob(
                spec,
                plan_for(spec),
                self.cost,
                checkpoint_every=self.checkpoint_every,
                on_checkpoint=self.on_checkpoint,
                recovery=self.recovery,
                supervisor=self.supervisor,
                **self.sim_options,
            )
            self.supervisor = sim.supervisor
            sim.start()
            rollback = self._until_rollback(sim, elapsed)
            self.cut_seconds += sim.cut_seconds
            if rollback is None:
                break
            elapsed = elapsed + sim.clock.now + faults.detect_s + faults.restart_s
            spec = rollback.spec
        summary = sim.finish()
        self.final_state = sim.final_state
        account(summary, sim.supervisor.before, self.recoveries, elapsed + sim.clock.now)
        cuts = sim.supervisor.cuts.cuts
        summary["cuts"] = {"taken": cuts, "paused_seconds": self.cut_seconds}
        return summary

    def _until_rollback(self, sim: SimJob, elapsed: float) -> RollBack | None:
        """Run `sim` to its end (None), replacing the nodes lost on the way whose role's
        action replaces one node, up to a loss that rolls the job back."""
        faults = self.cost.faults
        one_node = OneNodeRecovery(sim, faults.detect_s, faults.restart_s)
        nodes = [n.address for n in sim.topology.nodes]
        while True:
            after, lost = self._next_loss(nodes)
            if sim.advance(None if lost is None else sim.clock.now + after):
                return None
            assert lost is not None
            position = sim.spec.handed_before + sim.reader.consumed
            at = elapsed + sim.clock.now
            for command in sim.supervisor.handle(Lost(lost.name, position, True, at)):
                match command:
                    case Fail():
                        assert command.why is not None
                        raise NodeLost(lost.name, at, command.last_cut, command.why)
                    case RollBack():
                        return command
                    case ReplaceNode():  # the job goes on meanwhile
                        one_node.recover(lost, command.back, command.loss)
                    case AbandonCut():
                        sim.resume_readers()
