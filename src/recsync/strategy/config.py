"""The base of every strategy config, and the traits the kernel reads of a strategy.

Every strategy belongs to one family, a package under recsync/families/ (replica, gradient,
all-reduce, hierarchical): the family decides which nodes a job runs and which trainer
drives them (strategy/family.py: the interface; recsync/families/__init__.py: the one
list of families).
"""

from __future__ import annotations

from typing import ClassVar


class StrategyConfig:
    """Base of every strategy config (frozen dataclasses): its registry name and the
    paper's name, and a one-line description."""

    name: ClassVar[str]  # registry key, e.g. "easgd"
    label: ClassVar[str]  # the paper's name, e.g. "EASGD"
    # every step waits for every active worker's gradient: no worker runs ahead (sync)
    barrier: ClassVar[bool] = False
    # the dense part lives in the trainers' replicas, synced apart from the workers' steps
    # (in the background or at a rate: ShadowSync's family); a switch to or from such a
    # strategy moves the dense part between servers and replicas
    background_dense: ClassVar[bool] = False
    # its dense part is held on servers, `cluster.num_dense_servers` of them (the gradient
    # family's dense servers, a center strategy's sync servers, each group's group PSs of
    # hierarchical training); False: the trainers hold it (replicas, an all-reduce)
    on_dense_servers: ClassVar[bool] = False
    # the job plan splits its dense part into blocks, one on each of those servers (the
    # gradient family's, a center strategy's); False: none, or its family plans its own
    dense_in_blocks: ClassVar[bool] = False
    # a bound to compare the others with (replicas that never sync), not a strategy to run:
    # `recsync advise` ranks it after every other and never gives it as the advice
    lower_bound: ClassVar[bool] = False

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
