"""A simulated job that loses nodes and recovers, with the real math, in virtual time.

Each node of the job is lost after an exponential time of mean `faults.trainer_mtbf_s`,
`server_mtbf_s` or `reader_mtbf_s` by its kind (0: never), drawn from the job's seed. The
loss is noticed `detect_s` later and the job restarts `restart_s` after that, as the Ray
engine's rollback does it (coordinator/recovery.py): every node from the job's last cut (or
its start), the batches handed out after the cut handed out again. Its summary is a
simulated run's, with the losses and the seconds they cost (`recovery`), and its virtual
`train_seconds` include the restarts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from recsync.coordinator.checkpoint import JobState
from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.evaluation import Evaluations
from recsync.coordinator.recovery import (
    ONE_NODE,
    Loss,
    Recoveries,
    RecoveryPolicy,
    account,
    restart_spec,
)
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.protocol.address import Address
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

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
        one_node = [r for r in ("trainer", "embedding_server") if getattr(recovery, r) in ONE_NODE]
        if one_node:
            raise ValueError(
                f"recovery.{one_node[0]}: the real-math simulator rolls back or stops; the "
                "recovery of one node alone is modeled by the timeline (runtime/sim/timeline.py"
                ", recsync reproduce failures)"
            )
        self.first, self.cost = spec, cost
        self.checkpoint_every, self.recovery = checkpoint_every, recovery
        self.on_checkpoint = on_checkpoint
        self.sim_options = sim_options
        self.evaluations: Evaluations | None = None  # the first run's, kept by the restarts
        self.rng = random.Random(FAILURE_SEED * 1_000_003 + spec.train.seed)
        self.recoveries = Recoveries()
        self.last_cut: JobState | None = None
        self.cuts, self.cut_seconds = 0, 0.0  # over every run
        self.final_state: JobState | None = None
        self.sim: SimJob | None = None

    def _cut(self, state: JobState) -> None:
        self.last_cut = state
        self.cuts += 1
        if self.on_checkpoint is not None:
            self.on_checkpoint(state)

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
                on_checkpoint=self._cut,
                examples_before=spec.start_example - first.start_example,
                evaluations=self.evaluations,
                **self.sim_options,
            )
            self.evaluations = sim.evaluations
            sim.start()
            nodes = [n.address for n in sim.topology.nodes]
            after, lost = self._next_loss(nodes)
            finished = sim.advance(None if lost is None else after)
            self.cut_seconds += sim.cut_seconds
            if finished:
                break
            assert lost is not None
            at = elapsed + after
            why = self.recovery.refusal(lost.name, len(self.recoveries.losses))
            if why is not None:
                raise NodeLost(lost.name, at, self.last_cut, why)
            back = self.last_cut
            position = spec.start_example + sim.reader.total_examples
            back_to = first.start_example if back is None else back.data_position
            start = first.start_example
            self.recoveries.add(Loss(lost.name, at, position - start, back_to - start))
            elapsed = at + faults.detect_s + faults.restart_s
            spec = restart_spec(first, back)
        summary = sim.finish()
        self.final_state = sim.final_state
        account(summary, first, spec, self.recoveries, elapsed + sim.clock.now)
        summary["cuts"] = {"taken": self.cuts, "paused_seconds": self.cut_seconds}
        return summary
