"""swap-days and auto-switching on three seeds (issue 55, part 3): each verdict is
`verdict.judge` on the per-seed values, paired by seed, and the reports show per-day means
and the seeds' spread (synthetic rows, no simulation)."""

from __future__ import annotations

import statistics

import pytest

from experiments.repro import (
    auto_switching,
    auto_switching_report,
    auto_switching_shape,
    settle,
    swap_days,
    swap_days_report,
    swap_days_setting,
)
from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, TOO_FEW_SEEDS, WITHIN_NOISE, judge
from recsync.optim.dense import DenseOptimizerSpec
from recsync.optim.rowwise import RowOptimizerSpec

SWAP = "Adagrad-SWAP (0.8, T = 1 day)"
SCORED = swap_days.DAYS - 1


def swap_rows(plain_end: dict[int, float], swap_end: dict[int, float]) -> list[dict]:
    """Per seed: Adagrad flat from day 4 at its end value, SWAP rising to its end value."""
    rows = []
    for seed in plain_end:
        plain = [0.70 + 0.01 * min(d, 3) for d in range(SCORED - 1)] + [plain_end[seed]]
        swap = [0.70 + 0.01 * d for d in range(SCORED - 1)] + [swap_end[seed]]
        rows += [
            {"variant": "Adagrad", "seed": seed, "next_day_auc": plain},
            {"variant": SWAP, "seed": seed, "next_day_auc": swap},
        ]
    return rows


def test_swap_days_runs_every_variant_on_the_settling_seeds_at_its_tuned_rate():
    assert swap_days.SEEDS == settle.SEEDS and len(swap_days.SEEDS) >= 5
    assert swap_days_setting.train_spec(None, 2).seed == 2
    spec = swap_days_setting.train_spec(None, 0, 2.0)
    assert spec.dense_optimizer.lr == pytest.approx(2 * DenseOptimizerSpec().lr)
    assert spec.sparse_optimizer.lr == pytest.approx(2 * RowOptimizerSpec().lr)
    chosen = {label: 0.5 * (i + 1) for i, label in enumerate(swap_days.VARIANTS)}
    items = swap_days.final_items(chosen)
    assert len(items) == len(swap_days.VARIANTS) * len(settle.SEEDS)
    assert all(factor == chosen[label] for label, _, factor in items)
    tuning_run = {"variant": "Adagrad", "seed": 0, "factor": 0.5}
    other = {"variant": "Adagrad", "seed": 0, "factor": 1.0}  # not the chosen factor
    known, todo = swap_days.reused(items, [tuning_run, other])
    assert known == {("Adagrad", 0, 0.5): tuning_run} and len(todo) == len(items) - 1
    assert swap_days_setting.by_seed(swap_rows({0: 0.73, 1: 0.74}, {0: 0.8, 1: 0.8}))[
        "Adagrad"
    ] == {
        0: [0.70, 0.71, 0.72, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73][: SCORED - 1]
        + [0.73],
        1: [0.70, 0.71, 0.72, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73, 0.73][: SCORED - 1]
        + [0.74],
    }


def test_swap_days_judges_the_last_day_paired_by_seed():
    plain = {0: 0.730, 1: 0.731, 2: 0.729}
    swap = {0: 0.800, 1: 0.801, 2: 0.799}
    shape = swap_days_report.shape(swap_rows(plain, swap))
    assert shape.seeds == 3
    assert shape.ahead == judge(swap, plain, "higher")
    assert shape.ahead.label == HOLDS and shape.ahead.effect == pytest.approx(0.07)
    assert shape.swap_last == pytest.approx(0.8) and shape.plain_last == pytest.approx(0.73)
    gains = {s: plain[s] - 0.73 for s in plain}
    assert shape.stalls == judge(gains, {s: 0.25 * (swap[s] - 0.73) for s in swap}, "lower")
    ahead, stalls = swap_days_report.claims(swap_rows(plain, swap))
    assert "last day SWAP 0.8000 vs Adagrad 0.7300 (means, 3 seeds)" in ahead.ours
    assert "(stalls: under 0.25x SWAP's gain; means, 3 seeds)" in stalls.ours
    assert ahead.verdict.seeds == stalls.verdict.seeds == 3


def test_swap_days_seeds_that_disagree_are_too_few_and_noise_is_noise():
    disagree = swap_days_report.shape(
        swap_rows({0: 0.73, 1: 0.75, 2: 0.73}, {0: 0.74, 1: 0.74, 2: 0.74})
    )
    assert disagree.ahead.label == TOO_FEW_SEEDS  # 5 seeds where they differ in sign
    noisy = swap_days_report.shape(
        swap_rows({0: 0.730, 1: 0.760, 2: 0.700}, {0: 0.735, 1: 0.765, 2: 0.705})
    )
    assert noisy.ahead.label == WITHIN_NOISE  # +0.005 each seed, the sides' sd 0.03


def test_swap_days_report_shows_per_day_means_and_spread():
    rows = swap_rows({0: 0.73, 1: 0.74, 2: 0.75}, {0: 0.80, 1: 0.80, 2: 0.80})
    text = swap_days_report.report(rows)
    assert "3 seeds (training seeds 0, 1, 2: initial weights" in text
    assert "Next-day AUC, mean ± sd over training seeds 0, 1, 2:" in text
    assert "| Adagrad | 0.7000 ± 0.0000 | " in text
    assert f"| 0.7400 ± 0.0100 |\n| {SWAP} | 0.7000 ± 0.0000" in text  # the last day
    assert "means over 3 seeds: Adagrad +0.0100 AUC, SWAP +0.0700" in text
    assert "over 3 seeds: holds" in text


def settled_results(plain_end, swap_end):
    """The settled results file: rows with each day's held-out curve and change, and the
    tuning of every variant."""
    rows = swap_rows(plain_end, swap_end)
    for r in rows:
        flat_from = 1 if r["variant"] == "Adagrad" else 0  # day 0 of Adagrad: still falling
        r["factor"] = 1.0
        r["day_change"] = [0.02 if d < flat_from else 0.001 for d in range(SCORED)]
        r["held_out_curve"] = [(d + p, 0.6 - 0.01 * d - 0.01 * p) for d in range(SCORED)
                               for p in (0.0, 0.5, 1.0)]  # fmt: skip
    tuned = settle.Tuned("Adagrad", {0.5: 0.52, 1.0: 0.51, 2.0: 0.53}, 1.0, 0, False)
    return {
        "rows": rows,
        "tuning": {"Adagrad": tuned.as_dict(), SWAP: tuned.as_dict()},
        "setting": {"days": swap_days.DAYS, "per_day": swap_days.PER_DAY},
    }


def test_swap_days_settled_report_shows_tuning_flattening_and_which_way_each_settled(tmp_path):
    results = settled_results(
        {s: 0.75 for s in range(5)}, {0: 0.80, 1: 0.81, 2: 0.80, 3: 0.79, 4: 0.80}
    )
    text = swap_days_report.report(results)
    assert "| Adagrad | 0.5: 0.52000, 1: 0.51000, 2: 0.53000 | 1 | no |" in text
    assert "each variant's Adagrad rates tuned on one grid" in text
    assert swap_days.RULE.describe() in text
    flat = swap_days_report.flattening(results["rows"])
    assert flat["Adagrad"]["days_flat"] == SCORED - 1 and flat[SWAP]["days_flat"] == SCORED
    assert f"| {SCORED - 1} of {SCORED} |" in text
    assert "still fell): Adagrad: day 0." in text
    assert "- SWAP ends ahead of Adagrad: settled with the paper; +0.0500 AUC" in text
    assert "**holds**." in text
    ahead, stalls = swap_days_report.claims(results)  # the dict results and the bare rows agree
    assert ahead == swap_days_report.claims(results["rows"])[0] and ahead.verdict.seeds == 5
    swap_days_report.write_figures(results, tmp_path)
    for name in ("next_day_auc.png", "held_out_loss.png", "held_out_last_day.png"):
        assert (tmp_path / name).stat().st_size > 0
    curves = swap_days_report.mean_curves(results["rows"])
    assert curves["Adagrad"][0] == (0.0, pytest.approx(0.6))


def test_swap_days_report_says_plainly_when_adagrad_does_not_stall():
    rows = swap_rows({s: 0.80 for s in range(5)}, {s: 0.80 for s in range(5)})
    for r in rows:
        if r["variant"] == "Adagrad":  # rises as SWAP does: no stall
            r["next_day_auc"] = [0.70 + 0.01 * d for d in range(SCORED - 1)] + [0.80]
    text = "\n".join(swap_days_report.findings(rows))
    assert "At this size Adagrad does not stall" in text and "against the paper's claim" in text
    assert "- plain Adagrad stalls: settled against the paper" in text
    assert "the paper's claim does not reproduce here" in text


def fixed(variant, seed, seconds, aucs, strategies=None):
    strategies = strategies or [variant.split()[0]] * len(aucs)
    days = [
        {"day": d, "strategy": s, "next_day_auc": a, "train_seconds": seconds / len(aucs),
         "num_trainers": 8, "decisions": [], "adagrad_sums": {"dense": 1.0, "rows": 1.0}}
        for d, (s, a) in enumerate(zip(strategies, aucs, strict=True))
    ]  # fmt: skip
    return {"variant": variant, "seed": seed, "lr_factor": 1.0, "days": days,
            "total_seconds": seconds, "mean_next_day_auc": statistics.fmean(aucs)}  # fmt: skip


SYNC = [0.70, 0.71, 0.72, 0.73, 0.74]
MIXED = ["sync", "sync", "async", "sync", "sync"]


def switching_rows(slow: dict[int, float], last_gap: dict[int, float]) -> list[dict]:
    """Per seed: GBA's time `slow[seed]` (the fastest fixed), the controller 1.05x it; async
    switched on day 2 dips 0.01 and ends `last_gap[seed]` from sync."""
    rows = []
    for seed in slow:
        level = 0.001 * seed  # every variant of a seed shares it
        sync = [a + level for a in SYNC]
        back = [*sync[:2], sync[2] - 0.01, sync[3] - 0.002, sync[4] + last_gap[seed]]
        rows += [
            fixed("sync throughout", seed, 2 * slow[seed], sync),
            fixed("gba throughout", seed, slow[seed], [a - 0.0002 for a in sync]),
            fixed("controller", seed, 1.05 * slow[seed], [a - 0.0003 for a in sync]),
            fixed("sync > async > sync", seed, 1.5 * slow[seed], back, MIXED),
        ]
    return rows


def test_auto_switching_runs_every_variant_on_three_run_seeds():
    assert auto_switching.SEEDS == (0, 1, 2)
    assert auto_switching.overrides(1.0, seed=2)["run.seed"] == 2
    text = auto_switching.scenario_text(0.25)
    assert "start_s = 0.25" in text and "START_S" not in text


def test_auto_switching_judges_the_controller_within_each_seed():
    rows = switching_rows({0: 5.0, 1: 9.0, 2: 13.0}, {0: -0.0001, 1: -0.0002, 2: 0.0})
    runs = auto_switching_shape.by_variant(rows)
    fastest, best = auto_switching_shape.fastest_and_best(runs)
    assert (fastest, best) == ("gba throughout", "sync throughout")
    check = auto_switching_shape.controller_check(runs, fastest, best)
    # the fastest's time differs by seed; the ratio within each seed does not: no spread
    assert check.time_ratio == pytest.approx(1.05) and check.time_ok.spread == pytest.approx(0)
    assert check.time_ok.label == HOLDS and check.time_ok.effect == pytest.approx(0.05)
    # each seed's level moves both sides: the rule counts each side's spread (sd 0.001)
    controller = {s: statistics.fmean(SYNC) + 0.001 * s - 0.0003 for s in range(3)}
    target = {s: statistics.fmean(SYNC) + 0.001 * s - 0.001 for s in range(3)}
    assert check.auc_gap == pytest.approx(0.0003)
    assert check.auc_ok == judge(controller, target, "higher")
    assert check.auc_ok.effect == pytest.approx(0.0007) and check.auc_ok.label == WITHIN_NOISE
    claims = auto_switching.claims({"variants": rows})
    time, auc, dips, back = claims
    assert "(means, 3 seeds): 1.050x gba throughout's time" in time.ours
    assert time.verdict == check.time_ok and auc.verdict == check.auc_ok
    assert "lowest -0.0100 vs sync" in dips.ours and dips.verdict.label == HOLDS
    expected = judge({0: -0.0001, 1: -0.0002, 2: 0.0}, -0.001, "higher")
    assert back.verdict.effect == pytest.approx(expected.effect)
    assert back.verdict.spread == pytest.approx(expected.spread)
    assert back.verdict.label == HOLDS and back.verdict.seeds == 3


def test_auto_switching_fig6_verdicts_read_each_seeds_gaps():
    rows = switching_rows({0: 5.0, 1: 5.0, 2: 5.0}, {0: -0.004, 1: -0.005, 2: -0.006})
    (w,) = auto_switching_shape.switched_runs(auto_switching_shape.by_variant(rows))
    assert (w.first, w.last) == (2, 2)
    assert w.mean_diffs[-1] == pytest.approx(-0.005)
    assert auto_switching_shape.fig6_shape(w).holds.label == DOES_NOT_HOLD


def test_auto_switching_report_shows_means_and_spread_over_seeds():
    rows = switching_rows({0: 5.0, 1: 9.0, 2: 13.0}, {0: -0.0001, 1: -0.0002, 2: 0.0})
    for r in rows:
        r["days"][0]["decisions"] = [
            {"after": f"day-0-{r['seed']}", "from": "sync", "to": "gba", "reason": "faster"}
        ]
    results = {"lr_tuning": [rows[0]], "lr_factor": 1.0, "seeds": [0, 1, 2], "variants": rows}
    text = auto_switching_report.report(results, "[[change]]\nday = 2\n")
    assert "3 seeds (run seeds 0, 1, 2:" in text
    assert "| gba throughout | 9.000 ± 4.000 | 1.000x | " in text
    assert "| controller | 9.450 ± 4.200 | 1.050x | 0.7207 ± 0.0010 | -0.0003 | " in text
    assert "| sync throughout | 0.7010 ± 0.0010 | 0.7110 ± 0.0010 |" in text
    assert "over 3 seeds: holds" in text
    assert "- seed 2:\n  - after day-0-2: sync -> gba -- faster" in text
