"""The failures reproduction's headline claims (Young/Daly, CPR), read off its best
intervals; its report's findings (`failures.findings`) quote the same checks. Both are built
in: the timeline (runtime/sim/timeline.py) loses nodes at a fixed MTBF and pays a fixed cost a
checkpoint, the model Young's formula optimizes; its partial recovery redoes the lost node's
work where rollback redoes every node's."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from experiments.repro.claims import BUILT_IN, Claim, Effect
from experiments.repro.verdict import Verdict, judge

MTBF_H = 20.0  # the job MTBF at which partial recovery is set against rollback


@dataclasses.dataclass(frozen=True)
class Checks:
    """Young's formula against the best interval found (rolling back), and partial recovery
    (CPR) against rollback at a job MTBF of MTBF_H. Each figure is a mean over failure draws
    whose spread is not kept, so each verdict is `judge`'s on one value: too few seeds, with
    its margin shown."""

    ratios: list[float]  # best interval / Young's, rolling back, every setting
    extra: list[float]  # percentage points lost checkpointing at Young's, every setting
    factors: list[float]  # rollback's best overhead / partial's at MTBF_H, by write time
    step: float  # ln of the grid's step: "within one step of Young's"
    young: Verdict  # the best interval within one grid step of Young's (|ln ratio| < ln step)
    cpr: Verdict  # partial recovery cheaper than rollback (the smallest factor above 1)


def checks(best: list[dict[str, Any]], grid_step: float) -> Checks:
    """`best`: the best interval of every (MTBF, write time, policy); `grid_step`: the ratio
    of consecutive intervals swept."""
    rollback = [b for b in best if b["policy"].startswith("rollback")]
    partial = [b for b in best if b["policy"].startswith("partial")]
    ratios = [b["best_interval_s"] / b["young_s"] for b in rollback]
    extra = [100 * (b["overhead_at_young"] - b["best_overhead"]) for b in rollback]
    rolled = {b["write_s"]: b for b in rollback if b["job_mtbf_h"] == MTBF_H}
    recovered = {b["write_s"]: b for b in partial if b["job_mtbf_h"] == MTBF_H}
    factors = [
        rolled[w]["best_overhead"] / recovered[w]["best_overhead"] for w in sorted(recovered)
    ]
    young = judge([max(abs(math.log(r)) for r in ratios)], math.log(grid_step), "lower")
    return Checks(
        ratios, extra, factors, math.log(grid_step), young, judge([min(factors)], 1.0, "higher")
    )


def claims(results: dict[str, Any]) -> list[Claim]:
    """The report's headline claims, from its results file (`best`, and the intervals of
    `sweep` for the grid's step)."""
    intervals = sorted({row["interval_s"] for row in results["sweep"]})
    c = checks(results["best"], intervals[1] / intervals[0])
    mtbfs = {b["job_mtbf_h"] for b in results["best"]}
    writes = {b["write_s"] for b in results["best"]}
    return [
        Claim(
            "the best checkpoint interval is about Young's sqrt(2 C M)",
            "Young (1974), Daly (2006): the first-order optimum",
            f"rolling back, 1,000 workers, {len(mtbfs)} job MTBFs x {len(writes)} checkpoint "
            f"costs: best interval {min(c.ratios):.2f} to {max(c.ratios):.2f}x Young's; at "
            f"Young's at most {max(c.extra):.2f} points of overhead more (means over failure "
            "draws)",
            c.young,
            "checkpoint interval",
            effect=Effect.of(
                max(abs(math.log(r)) for r in c.ratios),
                "|ln(best / Young's)|, the farthest setting",
                "lower",
                c.step,
                digits=3,
            ),
            evidence=BUILT_IN,
            mechanism="the timeline loses nodes at a fixed MTBF and pays a fixed cost a "
            "checkpoint: the model Young's formula optimizes",
        ),
        Claim(
            "recovering only the lost node costs less than rolling the job back",
            "CPR (Maeng et al. 2021): overhead 8.2-8.5% full vs 0.53-0.68% partial",
            f"job MTBF {MTBF_H:g} h, {len(writes)} checkpoint costs: partial recovery "
            f"{min(c.factors):.1f} to {max(c.factors):.1f}x cheaper (means over failure draws)",
            c.cpr,
            "recovery policy",
            effect=Effect.of(min(c.factors), "x, the least factor", "higher", 1.0, digits=2),
            evidence=BUILT_IN,
            mechanism="the timeline's partial recovery redoes the lost node's work, rollback "
            "every node's",
        ),
    ]
