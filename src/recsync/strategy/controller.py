"""The automatic strategy controller: which strategy to run next, from what the last stretch
of training measured.

GBA (001, section 6) names it as future work: switch between synchronous training and GBA
as the cluster's state changes, with the same hyper-parameters (GBA keeps sync's global
batch, so its model quality; section 4). This is a pure policy: `Controller.decide` reads a
`StretchMeasures` (what the drivers already report: each worker's mean step time, time
blocked by kind, gradients dropped, staleness) and returns a `Decision` with its reason.
The continual run (app/runs/continual.py) asks it at each checkpoint it stops at and switches
through the checkpoint path, keeping every other hyper-parameter.

Rules (docs/strategies.md, "Automatic switching", explains the thresholds):
1. Stragglers: the slowest worker's mean step (its compute, whatever the strategy: a worker
   of any strategy computes its own steps) at least `spread_on` x a typical worker's (the
   lower quartile) ->
   the `stragglers` strategy (GBA: workers never wait; tokens bound the staleness; quality
   as sync's).
2. Balanced: the spread under `spread_off` -> the `balanced` strategy (sync: the best
   quality, at the others' speed on a balanced cluster) -- or, when the dense part's
   traffic holds the workers for at least `dense_on` of their time and a `dense_bound`
   strategy is named, that one (ShadowSync's replica family: syncs in the background), at
   a day boundary only (a family change moves the dense part from servers into replicas).
   On a balanced cluster the `stragglers` strategy is chosen instead when it was measured
   on a balanced stretch at least (1 + `speed_margin`) x the `balanced` one's speed there
   (examples a second per worker, each strategy's last balanced stretch): GBA pipelines
   its pushes with the next step and can be faster than sync without stragglers too.
   The `balanced` strategy is measured first; once it was and the other was not (`probe`),
   the next stretch runs the `stragglers` strategy once to measure it.
3. Between the two thresholds, stay (hysteresis: no flapping on a spread near one
   threshold). Nothing measured (no step): stay.
Time blocked at a synchronous barrier is reported in the reason but decides nothing: a
balanced synchronous job waits there too (for the servers' apply), stragglers or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from recsync.strategy.registry import STRATEGIES, strategy_class


def synchronous(name: str) -> bool:
    """Strategy `name`'s workers wait for each other at a barrier every step."""
    return strategy_class(name).barrier


def background_dense(name: str) -> bool:
    """Strategy `name` keeps the dense part in replicas synced apart from the workers'
    steps (ShadowSync's family)."""
    return strategy_class(name).background_dense


def _named(trait: str) -> list[str]:
    return sorted(name for name, cls in STRATEGIES.items() if getattr(cls, trait))


@dataclass(frozen=True)
class StretchMeasures:
    """What one stretch of training (a day, or part of one) measured. Shares are of the
    workers' time in their loops (compute, waits and calls)."""

    strategy: str
    step_time_spread: float | None  # slowest worker's mean step / a typical worker's
    barrier_share: float  # blocked waiting to start a synchronous step
    dense_share: float  # blocked on the dense part's pulls and pushes
    dropped_share: float  # gradients dropped / gradients pushed
    staleness_mean: float | None
    examples: int
    seconds: float
    workers: int


@dataclass(frozen=True)
class Decision:
    """The strategy to run next (possibly the current one) and why."""

    strategy: str
    reason: str


@dataclass(frozen=True)
class ControllerConfig:
    """The controller's strategies and thresholds."""

    balanced: str = "sync"
    stragglers: str = "gba"
    dense_bound: str | None = None
    spread_on: float = 1.5
    spread_off: float = 1.25
    dense_on: float = 0.5
    speed_margin: float = 0.1
    probe: bool = True

    def __post_init__(self) -> None:
        if not synchronous(self.balanced):
            raise ValueError(f"controller.balanced must be one of {_named('barrier')}")
        if synchronous(self.stragglers) or background_dense(self.stragglers):
            raise ValueError(
                "controller.stragglers must be a strategy whose workers do not wait for "
                f"each other (gba, async, bounded_staleness, ...), got {self.stragglers!r}"
            )
        if self.dense_bound is not None and not background_dense(self.dense_bound):
            raise ValueError(
                f"controller.dense_bound must be one of {_named('background_dense')} or unset"
            )
        if not 1.0 < self.spread_off <= self.spread_on:
            raise ValueError(
                "controller: need 1 < spread_off <= spread_on, got "
                f"{self.spread_off} and {self.spread_on}"
            )
        if not self.speed_margin >= 0.0:
            raise ValueError(f"controller.speed_margin must be >= 0, got {self.speed_margin}")
        if not 0.0 < self.dense_on <= 1.0:
            raise ValueError(f"controller.dense_on must be in (0, 1], got {self.dense_on}")

    @property
    def strategies(self) -> tuple[str, ...]:
        named = (self.balanced, self.stragglers, self.dense_bound)
        return tuple(name for name in named if name is not None)


class Controller:
    """The controller's state: the speed (examples a second per worker) each strategy was
    last measured at on a balanced cluster. `decide` is called after every stretch, in
    order; replaying the same measures gives the same decisions."""

    def __init__(self, config: ControllerConfig):
        self.config = config
        self.balanced_speed: dict[str, float] = {}

    def decide(self, measured: StretchMeasures, day_boundary: bool) -> Decision:
        """The strategy for the next stretch (rules in the module docstring)."""
        config, current, spread = self.config, measured.strategy, measured.step_time_spread
        if measured.examples == 0 or spread is None or measured.seconds <= 0:
            return Decision(current, "nothing measured: stay")
        seen = f"slowest worker {spread:.2f}x a typical one"
        if synchronous(current):
            seen += f", {measured.barrier_share:.0%} of worker time at the barrier"
        if measured.dropped_share:
            seen += f", {measured.dropped_share:.1%} of gradients dropped"
        if spread >= config.spread_on:
            return _switch(current, config.stragglers, f"stragglers ({seen})", day_boundary)
        if spread >= config.spread_off:
            return Decision(current, f"{seen}, between spread_off and spread_on: stay")
        self.balanced_speed[current] = measured.examples / measured.seconds / measured.workers
        if current == config.dense_bound:  # its dense traffic is in the background
            return Decision(current, f"balanced ({seen}), the dense part synced in the background")
        if config.dense_bound is not None and measured.dense_share >= config.dense_on:
            seen += f", {measured.dense_share:.0%} of worker time on the dense part"
            why = f"balanced, dense-bound ({seen})"
            return _switch(current, config.dense_bound, why, day_boundary)
        fast = self.balanced_speed.get(config.stragglers)
        base = self.balanced_speed.get(config.balanced)
        if config.probe and base is not None and fast is None:
            why = (
                f"balanced ({seen}); {config.stragglers} not measured on a balanced cluster "
                "yet: one stretch to measure it"
            )
            return _switch(current, config.stragglers, why, day_boundary)
        if fast is not None and base is not None and fast >= (1 + config.speed_margin) * base:
            why = (
                f"balanced ({seen}), but {config.stragglers} ran {fast / base:.2f}x "
                f"{config.balanced}'s speed there"
            )
            return _switch(current, config.stragglers, why, day_boundary)
        return _switch(current, config.balanced, f"balanced ({seen})", day_boundary)


def _switch(current: str, target: str, why: str, day_boundary: bool) -> Decision:
    """To `target`, unless it is the current strategy, or a change of family (the dense
    part moves between servers and replicas) within a day."""
    if target == current:
        return Decision(current, f"{why}: stay")
    if background_dense(target) != background_dense(current) and not day_boundary:
        return Decision(current, f"{why}: {target} waits for the day's end")
    return Decision(target, why)
