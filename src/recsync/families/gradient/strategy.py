"""The gradient family's base: dense parameters on dense servers, workers pull parameters
and push gradients, a policy (strategy/gradient.py) on every server decides what to apply, and
the workers' pull rule says how they read the servers each step."""

from __future__ import annotations

from typing import ClassVar

from recsync.protocol.effects import Quorum
from recsync.strategy.config import StrategyConfig
from recsync.strategy.gradient import GradientPolicy, Tokens
from recsync.strategy.staleness_norm import StalenessNorm


class PullRule:
    """How a worker reads the servers each step: every dense block, waiting for all of them,
    and embedding rows at whatever version the shards are (PSP's partial pull overrides)."""

    @property
    def keeps_blocks(self) -> bool:
        """Whether a block the worker did not wait for keeps its previous copy."""
        return False

    def min_versions(self, last_pushed: list[int] | None) -> list[int] | None:
        """Per server, the version it must reach before it answers this step's pull or
        lookup, from the versions the worker's previous push carried (None: no wait)."""
        return None

    def quorum(self, count: int) -> Quorum | None:
        """When a pull of `count` blocks may go on without all of them (None: never)."""
        return None

    def push_versions(self, versions: list[int]) -> list[int]:
        """The version each dense block's gradient is tagged with, from the versions of the
        blocks the worker computed it with: each block's own."""
        return list(versions)

    def order(self, count: int, turn: int) -> list[int]:
        """The order in which a worker requests its `count` blocks at its `turn`-th pull
        (counted from its index): block order."""
        return list(range(count))


FULL_PULL = PullRule()


class GradientStrategy(StrategyConfig):
    """The gradient family (frozen dataclasses): a policy on every dense server and every
    embedding shard (`make_server`), the workers' pull rule, and the reader's tokens."""

    holds_workers: ClassVar[bool] = False  # its servers' may_start can say no
    on_dense_servers: ClassVar[bool] = True
    dense_in_blocks: ClassVar[bool] = True
    # a step's pushes wait for the worker's next batch, its row gradients riding on the next
    # lookups (half the calls to the shards; each push one reader round trip later)
    defers_pushes: ClassVar[bool] = False
    staleness_norm: StalenessNorm | None = None  # scale stale gradients (async family)

    def make_server(self, num_workers: int, sparse: bool) -> GradientPolicy:
        raise NotImplementedError

    def pull_rule(self) -> PullRule:
        return FULL_PULL

    def token_list(self, num_workers: int) -> Tokens | None:
        """The reader's tokens (GBA); None: batches carry no token."""
        return None
