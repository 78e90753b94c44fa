"""Strategy families: every strategy config is an instance of exactly one family type.

- `ReplicaStrategy` (ShadowSync): the dense part replicated on the trainers, synced in the
  background or at a fixed rate (sync/replica.py: `CenterStrategy` through sync servers,
  `CollectiveStrategy` through an all-reduce, or no sync at all);
- `GradientStrategy`: the dense part on dense servers, workers pull parameters and push
  gradients, a policy on every server decides what to apply (sync/gradient.py);
- `AllReduceStrategy`: the dense part replicated, gradients all-reduced every step
  (sync/allreduce.py).

A family decides which nodes a job runs (coordinator/topology.py has one assembler per
family) and which trainer drives them.
"""

from __future__ import annotations

from typing import ClassVar


class StrategyFamily:
    """Base of every strategy config (frozen dataclasses): its registry name and the
    paper's name, and a one-line description."""

    name: ClassVar[str]  # registry key, e.g. "easgd"
    label: ClassVar[str]  # the paper's name, e.g. "EASGD"

    def _params(self) -> str:
        return ""

    def batches_per_step(self, num_workers: int) -> int:
        """The batches one global step is made of (one from every worker, or M aggregated;
        1 where every batch is its own step): a cut of a running job (a checkpoint) falls
        between two steps, never inside one."""
        return 1

    def cut_refusal(self) -> str | None:
        """Why a running job of this strategy cannot be cut for a checkpoint (None: it can;
        its end is always checkpointed)."""
        return None

    def describe(self) -> str:
        """One line in the paper's naming, with the parameters that differ by run."""
        params = self._params()
        return f"{self.label} {params}" if params else self.label
