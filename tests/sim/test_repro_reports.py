"""The reproduction reports: their findings are computed from the results they are given."""

from __future__ import annotations

import math

import pytest

from experiments.repro import (
    auto_switching_report,
    gba,
    gba_stragglers_claims,
    gba_stragglers_report,
    gba_switching,
    gba_switching_claims,
    gba_switching_report,
    hierarchical,
    hierarchical_loss,
    hierarchical_report,
    hierarchical_throughput,
    shadowsync,
    shadowsync_quality,
    swap_days,
    swap_days_report,
)
from experiments.repro import hierarchical_settings as ht
from experiments.repro.settled_words import settled
from experiments.repro.steady import MissingSteadyRate
from experiments.repro.verdict import judge

SETTING = {
    "workers": 16,
    "trainers": 4,
    "local_batch": 128,
    "global_steps": 500,
    "seeds": [0, 1, 2],
    "step_ms": 29.9,
    "main_fraction": 0.125,
    "main_slowdown": 8.0,
    "sync_grid": [0.25, 1.0, 4.0],
    "async_grid": [0.0625, 0.25, 1.0],
    "sweep_steps": 60,
    "backup": 2,
    "cost": "C",
}


def gba_point(variant, seed, eps, auc, dropped=None, slowdown=8.0, fraction=0.125, **kw):
    return {
        "variant": variant,
        "seed": seed,
        "slowdown": slowdown,
        "fraction": fraction,
        "lr_factor": kw.get("lr", 1.0),
        "steps": kw.get("steps", 500),
        "math": kw.get("math", "real"),
        "examples": kw.get("steps", 500) * 2048,
        "eps": eps,
        "virtual_seconds": 1.0,
        "global_steps": kw.get("global_steps", kw.get("steps", 500)),
        "mean_staleness": 0.5,
        "max_staleness": 6,
        "mean_row_staleness": 0.5,
        "dropped": dropped or {},
        "blocked_s": kw.get("blocked_s", 0.0),
        "test_auc": auc,
    }


def gba_result():
    main, severity, sweep = [], [], []
    for seed in (0, 1, 2):
        d = 0.0001 * seed
        main += [
            gba_point("sync", seed, 100.0, 0.7200 + d, blocked_s=50.0),
            gba_point("GBA", seed, 700.0, 0.7195 + d, {"stale": 40 + seed}),
            gba_point("BSP", seed, 700.0, 0.7150 + d),
            gba_point("Hop-BW", seed, 300.0, 0.7190 + d, {"late": 900}),
            gba_point("async", seed, 700.0, 0.7000 + d, lr=0.25, global_steps=8000),
            gba_point("Hop-BS", seed, 300.0, 0.6900 + d, lr=0.25, global_steps=8000),
        ]
        for x, drop in ((4.0, 0), (16.0, 300)):
            gba_drop = {"stale": drop} if drop else {}
            severity += [
                gba_point("GBA", seed, 100.0 * x, 0.7190 + d, gba_drop, slowdown=x),
            ]
            if drop:
                severity.append(gba_point("BSP", seed, 100.0 * x, 0.7090 + d, slowdown=x))
        for f in (0.125, 0.25):
            for x in (1.0, 2.0, 4.0, 8.0, 16.0):
                if x == 1.0 and f == 0.25:
                    continue
                ratio = x * (1 - f) + f if x > 1 else 1.0
                drop = {"stale": 5} if x >= 8 else {}
                at = {"slowdown": x, "fraction": f, "steps": 60, "math": "priced"}
                sweep += [
                    gba_point("sync", seed, 100.0, None, **at),
                    gba_point("GBA", seed, 100.0 * ratio, None, drop, **at),
                ]
    severity += [r for r in main if r["variant"] in ("GBA", "BSP")]
    tuning = [
        gba_point("sync", 0, 100.0, a, lr=f) for f, a in ((0.25, 0.71), (1.0, 0.72), (4.0, 0.715))
    ] + [
        gba_point("async", 0, 700.0, a, lr=f) for f, a in ((0.0625, 0.69), (0.25, 0.70), (1.0, 0.5))
    ]
    return {
        "setting": SETTING,
        "lr": {"sync": 1.0, "async": 0.25},
        "tuning": tuning,
        "main": main,
        "severity": severity,
        "sweep": sweep,
    }


def test_straggler_report_judges_every_claim_over_seeds():
    result = gba_result()
    assert gba.best_factors(result["tuning"]) == {"sync": 1.0, "async": 0.25}
    text = gba_stragglers_report.render(result)
    assert "| `sync` test AUC | - | 0.7100 | 0.7200 | 0.7150 |" in text
    assert "| `async` test AUC | 0.6900 | 0.7000 | 0.5000 | - |" in text
    assert "| GBA | x1 | 700 | 7.00x | 500 |" in text
    assert "| Hop-BS | x0.25 | 300 | 3.00x | 8,000 |" in text
    assert "GBA runs at 7.00x the EPS of `sync` (seeds 7.00, 7.00, 7.00)" in text
    assert "s(1 - f) + f = 7.12x" in text
    assert "paper's 2.4x: effect +4.60 against 2 x spread 0.00 over 3 seeds: holds" in text
    assert (
        "GBA's token decay fired: it excluded 41.0 of 8,000 gradients a run (seeds 40, 41, 42)"
        in text
    )
    assert "BSP, which applies whatever arrives, excluded 0.0; Hop-BW 900.0" in text
    # GBA - BSP = +0.0045 on every seed; spread = sd of either side's AUCs, 0.0001
    assert "GBA above BSP: effect +0.0045 against 2 x spread 0.0001 over 3 seeds: holds" in text
    # GBA 0.0005 below sync on every seed: within 0.002 holds, above sync does not
    assert "GBA within 0.002 of `sync`: effect +0.0015" in text
    assert (
        "GBA above `sync`: effect -0.0005 against 2 x spread 0.0001 over 3 seeds: "
        "does not hold" in text
    )
    assert "| 25.0% | 4x | 3.25 +- 0.00 | 3.25 | 0.0 | holds |" in text
    assert "| - | 1x | 1.00 +- 0.00 | 1.00 | 0.0 | does not hold |" not in text  # effect 0
    assert "| - | 1x | 1.00 +- 0.00 | 1.00 | 0.0 | within noise |" in text
    assert "| 16x | 300.0 | -0.0010 +- 0.0000 | -0.0110 +- 0.0000 | effect +0.0100" in text
    assert "| 4x | 0.0 | -0.0010 +- 0.0000 | - | GBA excluded none: BSP's updates |" in text
    assert "of a step that waits for its slowest: 0% apart at most over the sweep" in text
    assert (
        "Ratios of at most the paper's 2.4x come from 12.5% of workers 2x slower, "
        "25.0% of workers 2x slower;" in text
    )
    assert "GBA's decay excludes gradients from a slowdown of 8x on" in text
    assert "## What a reviewer would still ask" in text


def test_straggler_claims_are_the_findings_verdicts_and_legacy_results_give_none():
    result = gba_result()
    close, faster, over_bsp = gba_stragglers_claims.claims(result)
    text = gba_stragglers_report.render(result)
    assert close.verdict.describe() in text and over_bsp.verdict.describe() in text
    assert faster.verdict.describe(2) in text and "7.00x" in faster.ours
    assert over_bsp.verdict.label == "holds" and close.verdict.label == "holds"
    assert {c.bears_on for c in (close, faster, over_bsp)} == {"gba"}
    assert gba_stragglers_claims.claims([gba_point("sync", 0, 100.0, 0.73)]) == []


def test_straggler_legacy_results_render_a_table():
    rows = [gba_point("sync", 0, 100.0, 0.73), gba_point("GBA", 0, 700.0, 0.72, {"stale": 3})]
    text = gba_stragglers_report.legacy(rows)
    assert text.startswith("# ") and "| GBA | 700 | 500 | 3 | 0.7200 |" in text


def switching_run(seed, branch, auc, eps, dropped=(0, 0, 0)):
    return {
        "seed": seed,
        "branch": branch,
        "auc": auc,
        "eps_steady": [eps] * 3,
        "dropped": list(dropped),
        "global_steps": [64] * 3,
    }


def test_switching_report_checks_the_claims_against_all_reduce():
    days = gba_switching.DAYS
    runs = []
    for seed in (0, 1, 2):
        base = [0.70 + 0.01 * d + 0.0001 * seed for d in range(days)]
        runs += [
            switching_run(seed, "allreduce", base, 100.0),
            switching_run(
                seed, "gba", base[:2] + [a - 0.001 for a in base[2:]], 600.0, (10, 20, 30 + seed)
            ),
            switching_run(seed, "bsp", base[:2] + [a - 0.004 for a in base[2:]], 600.0),
            switching_run(seed, "async", base[:2] + [a - 0.03 for a in base[2:]], 600.0),
        ]
    result = {
        "runs": runs,
        "days": days,
        "sync_days": 2,
        "per_day": 131_072,
        "workers": 16,
        "local_batch": 128,
        "drift": 0.1,
        "test_per_day": 20_000,
        "stragglers": "S",
    }
    text = gba_switching_report.render(result)
    assert "worst gap to continuing all-reduce over the switched days is 0.0010" in text
    assert "Within 0.002: effect +0.0010 against 2 x spread 0.0000 over 3 seeds: holds" in text
    assert (
        "GBA is not BSP here: its token decay excluded 61.0 gradients a run over the "
        "switched days (seeds 60, 61, 62)" in text
    )
    assert "GBA above BSP: effect +0.0030 against 2 x spread 0.0001 over 3 seeds: holds" in text
    assert "GBA at 6.00x all-reduce's EPS" in text
    assert "`async` 0.0300, `bsp` 0.0040, `gba` 0.0010" in text
    assert "| gba | 0.7001 | 0.7101 | 0.7191 |" in text and "| 600 | 61.0 |" in text
    assert "same AUC as `gba`" not in text
    within, faster = gba_switching_claims.claims(result)
    assert within.verdict.describe() in text and within.verdict.label == "holds"
    assert faster.verdict.describe(2) in text and "6.00x" in faster.ours
    assert gba_switching_claims.claims({"segment": {}}) == []  # older results: none
    whole = [  # bsp seed 1 with the whole run's rate only
        {"eps": r["eps_steady"], **{k: v for k, v in r.items() if k != "eps_steady"}}
        if (r["branch"], r["seed"]) == ("bsp", 1)
        else r
        for r in runs
    ]
    with pytest.raises(MissingSteadyRate, match=r"gba_switching/results.json, point bsp, seed 1"):
        gba_switching_report.render(result | {"runs": whole})
    same = [
        r | {"auc": runs[1]["auc"]} if r["branch"] == "bsp" and r["seed"] == 0 else r for r in runs
    ]
    assert "for seeds [0]: the decay never fired" in gba_switching_report.render(
        result | {"runs": same}
    )


def test_fig5_report_gives_both_panels_growth_and_eq_2_gaps():
    def eps(variant, servers, trainers, seed):
        plateau = variant == "FR-EASGD-5" and servers == 2
        return 1000.0 * (min(trainers, 10) if plateau else trainers) * (1 + seed / 100)

    points = [
        {
            "variant": variant,
            "sync_servers": servers,
            "trainers": trainers,
            "seed": seed,
            "examples": 1,
            "eps": eps(variant, servers, trainers, seed),
            "average_sync_gap": 4.0 + trainers / 10,
            "average_sync_gap_per_thread": 1.0 + trainers / 40,
            "sync_server_nic_utilization": 0.5,
            "test_auc": None,  # priced math
        }
        for seed in (0, 1, 2)
        for variant, trainers, servers, _ in shadowsync.points_to_run()
    ]
    assert {(p["sync_servers"], p["variant"]) for p in points} == {
        (2, "S-EASGD"),
        (2, "FR-EASGD-5"),
        (2, "FR-EASGD-30"),
        (4, "FR-EASGD-5"),
    }
    text = shadowsync._report(points)
    assert "| worker threads per trainer | 24 | 24 |" in text
    assert "| iterations per worker thread a point | 300 (batch 256) |" in text
    assert "seeds 0, 1, 2 |" in text and "sigma 0.05 and 0.05" in text
    assert "- 2 sync servers: S-EASGD 4.00x, FR-EASGD-5 2.00x, FR-EASGD-30 4.00x." in text
    assert "- 4 sync servers: FR-EASGD-5 4.00x." in text
    assert "| 4 | FR-EASGD-5 | 20 | 20,200 | 6.00 | 1.50 | 50% |" in text
    assert "trainers: 4.50, 5.00, 5.50, 6.00" in text
    assert (
        "growth below S-EASGD's at 2 sync servers (the paper: it plateaus, S-EASGD grows "
        "linearly): effect +2.00 against 2 x spread 0.00 over 3 seeds: holds." in text
    )
    assert "above its growth at 2 (the paper: 4 sync servers solve the problem): effect " \
        "+2.00 against 2 x spread 0.00 over 3 seeds: holds." in text  # fmt: skip
    one_seed = shadowsync._report([p for p in points if p["seed"] == 0])
    assert "over 1 seed: too few seeds" in one_seed
    # Table 1 (ELP) is a count of configurations, said where the Fig. 5 report is read
    assert "## Table 1 (ELP): a count of the configuration, not reproduced" in text
    assert "batch 256 x 24 threads x 20 trainers = 122,880 (the paper's row: 200 x 24 x 20 = " \
        "96,000)" in text  # fmt: skip
    assert "(shadowsync-quality, shadowsync-table2b: 4 threads a trainer) at 20 trainers: " \
        "20,480." in text  # fmt: skip


def test_quality_report_reads_both_tables_claims_off_the_rows():
    q = shadowsync_quality

    def row(table, variant, trainers, seed, loss):
        return {
            "table": table,
            "variant": variant,
            "trainers": trainers,
            "sync_servers": 1,
            "seed": seed,
            "dense_lr": 0.004,
            "train_loss": loss + 0.01,
            "train_loss_last": loss + 0.005,
            "test_logloss": loss,
            "test_auc": 0.7,
            "eps": 1.0,
            "average_sync_gap": 5.0,
            "average_sync_gap_per_thread": 1.25,
            "curve": [[0.0, 0.7], [750.0, loss * 1.01], [1000.0, loss]],
        }

    gap_losses = {"S-EASGD": 0.500, "FR-EASGD-5": 0.501, "FR-EASGD-10": 0.502}
    gap_losses |= {"FR-EASGD-30": 0.503, "FR-EASGD-100": 0.504}
    rows = [
        row("gap", v, q.GAP_TRAINERS, seed, loss + seed * 0.0001)
        for seed in (0, 1, 2)
        for v, loss in gap_losses.items()
    ]
    growth = {"S-EASGD": 0.001, "FR-EASGD-5": 0.004, "FR-EASGD-30": 0.002}
    for seed in (0, 1, 2):
        for n, step in zip(q.SCALE_TRAINERS, (0, 1, 2), strict=True):
            rows += [
                row("scale", v, n, seed, 0.5 + step * g * (1 + seed)) for v, g in growth.items()
            ]
    scores = {"0.002": 0.509, "0.004": 0.508, "0.008": 0.5085}
    tuning = [
        {"table": t, "variant": v, "trainers": n, "sync_servers": m}
        | {"scores": scores, "chosen": 0.004, "extensions": 0, "at_edge": False}
        for t, v, n, m in q.Setting().compared()
    ]
    tuning[0] |= {"scores": scores | {"0.001": 0.507}, "chosen": 0.001, "extensions": 3}
    tuning[0] |= {"at_edge": True}
    per_thread = {"5": 204.8, "10": 102.4, "20": 51.2}
    results = {
        "examples": 1 << 20,
        "model": {"bottom_mlp": [512, 256, 64], "top_mlp": [512, 256]},
        "evaluations": 4,
        "grid": [0.002, 0.004, 0.008],
        "tune_seed": 0,
        "tuning": tuning,
        "flattening": {"rule": "", "last_fraction": 0.25, "tolerance": 0.005},
        "iterations_per_thread": per_thread,
    }
    for r in rows:  # fell 1% of the final loss over the last quarter, or 0.2% for S-EASGD
        fall = 0.002 if r["variant"] == "S-EASGD" else 0.01
        r["curve"] = [[0.0, 0.7], [750.0, r["test_logloss"] * (1 + fall)]]
        r["curve"].append([1000.0, r["test_logloss"]])
    text = q.report(results | {"rows": rows})
    assert "runs 205, 102, 51 iterations at 5, 10, 20 trainers" in text
    assert "| 2(a) | S-EASGD | 10 | 0.002: 0.50900, 0.004: 0.50800, 0.008: 0.50850, 0.001: " \
        "0.50700 | 0.001 | yes (grid extended 3x) |" in text  # fmt: skip
    assert "| 3 | FR-EASGD-30 | 20 | 0.002: 0.50900, 0.004: 0.50800, 0.008: 0.50850 | 0.004 " \
        "| no |" in text  # fmt: skip
    assert "| 2(a) | S-EASGD | 10 | +0.200% (+0.200% .. +0.200%) | 3 of 3 |" in text
    assert "| 3 | FR-EASGD-5 | 20 | +1.000% (+1.000% .. +1.000%) | 0 of 3 |" in text
    assert "12 of 42 runs met the criterion; the largest fall over a last quarter was " \
        "1.000% of the final loss (the criterion: below 0.5%)." in text  # fmt: skip
    assert q.SEEDS == (0, 1, 2, 3, 4) and q.EXAMPLES == 2_097_152
    assert q.GRID.values[0] < 0.004 < q.GRID.values[-1]  # the first tuning's best inside
    assert "0.50110, 0.50210, 0.50310, 0.50410 (the paper: rising with the gap; FR-EASGD-100 " \
        "above FR-EASGD-5: effect +0.00300 against 2 x spread 0.00010 over 3 seeds: holds)" \
        in text  # fmt: skip
    assert "Best FR: FR-EASGD-5; S-EASGD 0.50010 (the paper: below every FR; below " \
        "FR-EASGD-5: effect +0.00100 against 2 x spread 0.00010 over 3 seeds: holds)" \
        in text  # fmt: skip
    # S-EASGD: +0.4%, +0.8%, +1.2% by seed; FR-EASGD-30: +0.8%, +1.6%, +2.4%: the paired
    # differences (0.4, 0.8, 1.2) are within 2 x FR-EASGD-30's spread (0.8)
    assert (
        "mildest mean eval increase at 20 trainers is S-EASGD's (+0.800% (+0.400% .. +1.200%)"
        in text
    )
    assert "S-EASGD's below FR-EASGD-30's (the closest), in points of percent: effect +0.800 " \
        "against 2 x spread 0.800 over 3 seeds: within noise." in text  # fmt: skip
    assert "at each scale: 10 trainers: S-EASGD, 20 trainers: S-EASGD." in text
    assert "FR-EASGD-5 keeps 5.00 at 20 trainers" in text and "1.00x S-EASGD's" in text
    assert "| 20 | FR-EASGD-5 | 0.004 | 0.51600 (0.50800 .. 0.52400) | +3.137% (+1.569% .. " \
        "+4.706%)" in text  # fmt: skip
    growth["FR-EASGD-30"] = 0.0045  # now every seed's S-EASGD increase is below the others'
    rows = [r for r in rows if r["table"] != "scale"]
    for seed in (0, 1, 2):
        for n, step in zip(q.SCALE_TRAINERS, (0, 1, 2), strict=True):
            rows += [
                row("scale", v, n, seed, 0.5 + step * g * (1 + seed)) for v, g in growth.items()
            ]
    text = q.report(results | {"rows": rows})
    # the differences grow with the seed as FR-EASGD-30's own spread does: still within noise
    assert "S-EASGD's below FR-EASGD-5's (the closest), in points of percent: effect +2.400 " \
        "against 2 x spread 1.600 over 3 seeds: within noise." in text  # fmt: skip
    for r in rows:  # one offset a seed: the spread is the same for every variant, and small
        if r["table"] == "scale" and r["trainers"] == q.SCALE_TRAINERS[-1]:
            r["test_logloss"] = 0.5 + 0.001 * r["seed"] + growth[r["variant"]]
        elif r["table"] == "scale":
            r["test_logloss"] = 0.5 + 0.001 * r["seed"]
    text = q.report(results | {"rows": rows})
    assert "S-EASGD's below FR-EASGD-5's (the closest), in points of percent: effect +0.599 " \
        "against 2 x spread 0.002 over 3 seeds: holds." in text  # fmt: skip
    gaps = {"S-EASGD": 7.0, "FR-EASGD-5": 5.0, "FR-EASGD-10": 10.0}
    for r in rows:
        if r["table"] == "gap":
            r["average_sync_gap"] = gaps.get(r["variant"], 30.0)
    text = q.report(results | {"rows": rows})
    assert "S-EASGD's gap 7.00 lies between FR-EASGD-5's (5.00) and FR-EASGD-10's (10.00)" in text
    assert "does not lie between theirs (0.50110, 0.50210): here the gap alone does not " in text
    assert "S-EASGD's loss is below both." in text
    for r in rows:
        if r["table"] == "gap" and r["variant"] == "S-EASGD":
            r["test_logloss"] += 0.0015
    text = q.report(results | {"rows": rows})
    assert "0.50160 lies between theirs (0.50110, 0.50210): here the loss follows the gap" in text


def test_swap_days_report_compares_late_gains():
    days = swap_days.DAYS - 1
    plain = [0.70 + 0.01 * min(d, 3) for d in range(days)]  # flat from day 4
    swap = [0.70 + 0.01 * d for d in range(days)]
    rows = [
        {"variant": "Adagrad", "next_day_auc": plain},
        {"variant": "Adagrad-SWAP (0.8, T = 1 day)", "next_day_auc": swap},
    ]
    text = swap_days_report.report(rows)
    assert f"From day 4 to day {days}, means over one seed: Adagrad +0.0000 AUC, SWAP +0.0700" \
        in text  # fmt: skip
    one = "against 2 x spread 0.0000 over 1 seed: too few seeds"
    assert f"Shape (each seed's values, paired by seed) SWAP ends ahead of Adagrad: effect " \
        f"+0.0700 {one}; Adagrad's late gain below 0.25x SWAP's (stalls): effect +0.0175 " \
        f"{one}." in text  # fmt: skip
    rows[0]["next_day_auc"] = [a - 0.001 for a in swap]  # improves as much, a bit lower
    text = swap_days_report.report(rows)
    assert f"SWAP ends ahead of Adagrad: effect +0.0010 {one}" in text
    assert f"(stalls): effect -0.0525 {one} (against the paper)." in text


def switching_row(variant, seconds, aucs, strategies=None):
    strategies = strategies or [variant.split()[0]] * len(aucs)
    days = [
        {"day": d, "strategy": s, "next_day_auc": a, "train_seconds": seconds / len(aucs),
         "num_trainers": 8, "decisions": [],
         "adagrad_sums": {"dense": 2.0 if s == "async" else 1.0, "rows": 1.0}}
        for d, (s, a) in enumerate(zip(strategies, aucs, strict=True))
    ]  # fmt: skip
    return {
        "variant": variant,
        "lr_factor": 1.0,
        "days": days,
        "total_seconds": seconds,
        "mean_next_day_auc": sum(aucs) / len(aucs),
    }


def test_auto_switching_report_checks_both_targets_and_fig_6():
    sync = [0.70, 0.71, 0.72, 0.73, 0.74]
    mixed = ["sync", "sync", "async", "sync", "sync"]
    rows = [
        switching_row("sync throughout", 10.0, sync),
        switching_row("gba throughout", 6.0, [a - 0.0002 for a in sync]),
        switching_row("async throughout", 5.0, [a - 0.01 for a in sync]),
        switching_row("hindsight schedule", 8.0, sync),
        switching_row("controller", 5.4, [a - 0.0005 for a in sync]),
        switching_row("sync > gba > sync", 9.0, [0.70, 0.71, 0.7185, 0.73, 0.74],
                      ["sync", "sync", "gba", "sync", "sync"]),
        switching_row("sync > async > sync", 9.0, [0.70, 0.71, 0.71, 0.7285, 0.7395], mixed),
    ]  # fmt: skip
    runs = {r["variant"]: {0: r} for r in rows}  # rows without a seed: seed 0
    lines = auto_switching_report.findings(runs, "async throughout", "sync throughout")
    assert lines[2] == (
        "- Controller: total time 1.080x the fastest fixed strategy's (async throughout; "
        "target <= 1.10x: effect +0.020 against 2 x spread 0.000 over 1 seed: too few seeds); "
        "mean next-day AUC 0.7195, +0.0005 below the best fixed strategy's (sync throughout, "
        "0.7200; target <= 0.001: effect +0.0005 against 2 x spread 0.0000 over 1 seed: too "
        "few seeds)."
    )
    assert "controller against the hindsight schedule (sync calm, GBA with stragglers): " \
        "time 0.675x, AUC -0.0005." in lines[3]  # fmt: skip
    assert lines[4] == (
        "- Fig. 6 shape for GBA: within 0.002 of sync on every day from the switch on "
        "(largest mean gap -0.0015): effect +0.0005 against 2 x spread 0.0000 over 1 seed: too "
        "few seeds."
    )
    assert lines[6] == (
        "- Fig. 6 shape for sync > async > sync: dips while switched (below sync by > 0.002; "
        "lowest mean -0.0100): effect +0.0080 against 2 x spread 0.0000 over 1 seed: too few "
        "seeds; back within 0.001 of sync after the switch back (on day 4; lowest after -0.0015, "
        "last day -0.0005): effect +0.0005 against 2 x spread 0.0000 over 1 seed: too few seeds."
    )
    assert lines[7].endswith("Adagrad accumulators after them 2.0x sync's (dense), 1.0x (rows).")


BASE_LOSS = {0: 0.500, 1: 0.502, 2: 0.498}  # EASGD 40t's train loss and logloss by seed


def flat_curve(examples: int, final: float) -> list[list[float]]:
    """A held-out curve that falls, then improves by 0.1% over its last quarter: flat."""
    return [[0, 2 * final], [examples // 2, 1.01 * final], [3 * examples // 4, 1.001 * final],
            [examples, final]]  # fmt: skip


def loss_rows(relative: dict[tuple[int, bool], tuple[float, ...]]) -> list[dict]:
    """Loss rows: EASGD 40t by seed, and each (groups, control) at `relative` % of it."""
    rows = [
        {"label": ht.EASGD.label, "seed": s, "control": False, "train_loss": v,
         "test_logloss": v, "test_auc": 0.7, "examples": 1000, "dense_replicas": 40,
         "lr_factor": 0.0625, "curve": flat_curve(1000, v)}
        for s, v in BASE_LOSS.items()
    ]  # fmt: skip
    for (groups, control), by_seed in relative.items():
        for seed, rel in enumerate(by_seed):
            loss = BASE_LOSS[seed] * (1 + rel / 100)
            rows.append(
                {"label": ht.ht(groups).label, "seed": seed, "control": control,
                 "train_loss": loss, "test_logloss": loss, "test_auc": 0.71,
                 "examples": 25 * groups if control else 1000, "dense_replicas": groups,
                 "lr_factor": 0.125, "curve": flat_curve(25 * groups if control else 1000, loss)}
            )  # fmt: skip
    return rows


FIG7_ROWS = {
    (5, False): (-0.45, -0.55, -0.35),
    (8, False): (-0.20, -0.30, -0.10),
    (10, False): (0.10, 0.0, -0.10),
    (5, True): (0.10, 0.20, 0.0),
    (8, True): (0.30, 0.30, 0.30),
    (10, True): (0.20, 0.20, 0.20),
}


def test_hierarchical_report_reads_each_figure_off_the_runs(tmp_path):
    settings = dict.fromkeys((*ht.FIG8, *ht.FIG10A, *ht.FIG10B, *ht.RARE_SYNC, *ht.FIG11))
    eps = {ht.EASGD.label: 100.0, **{s.label: 30.0 * s.groups for s in settings if s.groups}}
    eps.update({s.label: 80.0 * s.trainers for s in ht.FIG10B})  # 8 groups: linear
    eps[ht.RARE_SYNC[0].label] = 800.0  # 50 a trainer (16 trainers) against 10
    eps[ht.RARE_SYNC[1].label] = 3200.0  # 40 a trainer (80 trainers): 0.80x of (2, 2)
    eps.update(zip([s.label for s in ht.FIG11[1:]], [140.0, 50.0, 120.0, 160.0], strict=True))
    speed = {
        s.label: {
            "eps_steady": eps[s.label],
            "eps_whole_run": eps[s.label] / 2,  # read by no figure
            "steady_batches_per_thread": 12.0,
            "trainers": s.cluster().num_trainers,
            "group_servers": s.groups * s.servers,
            "examples": 1000,
            "group_ps_cpu": 0.5 if s.groups else None,
            "group_ps_nic": 0.25 if s.groups else None,
            "traffic_bytes": 2_000_000,
        }
        for s in settings
    }
    assert ht.FIG10B_GROUPS == 8 and ht.FIG10B[2].label == "HT 8g (6+6), 1 Gbit/s"
    speed[ht.FIG10B[2].label]["eps_steady"] = 600.0  # (6, 6): the best per node
    speed[ht.FIG10B[-1].label]["traffic_bytes"] = 9_000_000
    engine = {
        "label": "2 groups",
        "examples": 100,
        "real_auc": 0.71,
        "sim_auc": 0.705,
        "bytes_differences": [],
        "cross_group_syncs": (3, 4),
    }
    tuning = [
        {"variant": v.label, "scores": {"0.0625": 0.51, "0.125": 0.5, "0.25": 0.52},
         "chosen": 0.125, "extensions": 0, "at_edge": False, "control": v.control}
        for v in ht.LOSS_VARIANTS
    ]  # fmt: skip
    tuning[0] = {**tuning[0], "scores": {"0.03125": 0.49, "0.0625": 0.5, "0.125": 0.6},
                 "chosen": 0.03125, "extensions": 3, "at_edge": True}  # fmt: skip
    hierarchical_report.write_report(
        tmp_path,
        {
            "throughput": speed,
            "tuning": tuning,
            "quality": loss_rows(FIG7_ROWS),
            "engine": engine,
        },
    )
    text = (tmp_path / "report.md").read_text()
    assert {p.name for p in tmp_path.iterdir()} == {
        "report.md",
        "results.json",
        "fig7_8_loss_and_eps.png",
        "fig10_scaling.png",
        "fig11_ablation.png",
        "fig7_curves.png",
        "fig7_control_curves.png",
    }
    one = "against 2 x spread 0.00 over 1 seed: too few seeds"
    assert "Ours: 3.00x; the shape (within 1.4-2.2x, i.e. at most 0.4 from 1.8x: effect " \
        f"-0.80 {one} (against the paper); the simulator" in text  # HT 10g: 300 vs 100 # fmt: skip
    assert "| HT 5g (6+6) | 150 | 1.50x | 50% |" in text
    assert "| EASGD 40t | 100 | 1.00x | - |" in text
    assert "EPS = the steady rate (`eps_steady`" in text and "Too short" not in text
    # Fig. 7 over 3 seeds: -0.45, -0.55, -0.35 against the paper's -0.2
    assert "Ours (train loss, mean ± sd over seeds): -0.45% ± 0.10; at least 0.2% better: " \
        "effect +0.25 against 2 x spread 0.10 over 3 seeds: holds: settled with the paper." \
        in text  # fmt: skip
    assert "| HT 5g (6+6) | 5 | 1,000 | 200 | x0.125 | 3 | -0.45% ± 0.10 | -0.45% ± 0.10 | " \
        "0.7100 |" in text  # fmt: skip
    assert "| HT 8g (6+6), control | 8 | 200 | 25 | x0.125 | 3 | +0.30% ± 0.00 |" in text
    assert "5g +0.10% ± 0.10, 8g +0.30% ± 0.00, 10g +0.20% ± 0.00; HT 5g still better " \
        "than EASGD 40t: effect -0.10 against 2 x spread 0.10 over 3 seeds: within noise " \
        "(against the paper): not settled either way: within the seeds' noise (the point " \
        "estimate against the paper). So the main run's gain comes " \
        "with each replica's extra data" in text  # fmt: skip
    assert "5g better than 8g: effect +0.25 against 2 x spread 0.00 over 3 seeds: holds; " \
        "8g better than 10g: effect +0.20 against 2 x spread 0.17 over 3 seeds: within " \
        "noise." in text  # fmt: skip
    assert "HT 10g neutral (within 0.2%). Ours: +0.00% ± 0.10 (its size at most 0.2%: " \
        "effect +0.13 against 2 x spread 0.06 over 3 seeds: holds): settled with the paper; " \
        "HT 8g -0.20% ± 0.10." in text  # fmt: skip
    assert "Ours: 5.00x at 10 groups over 2 (linear 5.0x); the shape (at least 0.85x " \
        f"linear: effect +0.75 {one})." in text  # fmt: skip
    assert "Ours (8 groups, 1 Gbit/s NICs): 5.00x at (10, 10) (linear 5x); EPS per node " \
        f"best at (6, 6); sublinear (below 0.9x linear: effect -0.50 {one} (against the paper))." \
        in text  # fmt: skip
    assert "EPS per trainer from (2, 2) to (10, 10): 10, 10, 12, 10, 10. Trainer" in text
    assert "per example: 2,000 -> 9,000; the busiest group PS's NIC busy 25%, 25%, 25%, " \
        "25%, 25% of the run. With cross-group syncs 10x rarer, EPS per trainer at (2, 2) " \
        "50 and at (10, 10) 40: 0.80x, the trainer <-> group PS traffic alone; sublinear " \
        f"there (per trainer below 0.9x: effect +0.10 {one})." in text  # fmt: skip
    assert "at p = 2 takes its NIC" in text and "EPS per node does not fall" not in text
    assert "| HT 8g (6+6), 1 Gbit/s | 48 | 48 | 600 | 3.75x | 50% | 25% | 2,000 |" in text
    assert "Ours without it: 0.93x (refinement helps here, as for Model-A)." in text
    assert f"Ours: 67% lower; the shape (at most 0.6x: effect +0.27 {one})." in text
    assert f"Ours without them: 0.80x; below 1x: effect +0.20 {one}." in text
    assert "Ours without it: 1.07x: compression costs more CPU than it saves" in text
    assert "314.7 MB" in text and "in priced math" in text
    assert "bytes per node kind and message kind identical" in text
    assert "| EASGD 40t | x0.03125: 0.4900, x0.0625: 0.5000, x0.125: 0.6000 (3 past the " \
        "grid) | x0.03125 | yes |" in text  # fmt: skip
    assert "| HT 10g (6+6), control | x0.0625: 0.5100, x0.125: 0.5000, x0.25: 0.5200 | " \
        "x0.125 | no |" in text  # fmt: skip
    assert "over the last 25% of the run (the held-out logloss on" in text
    assert "| HT 5g (6+6), control | 125 | 3 of 3 | 0.10%; 0.10% | 0.5005 |" in text
    assert "holds: settled with the paper." in text
    assert "(against the paper): settled against the paper: the paper's claim does not " \
        "reproduce here" not in text  # fmt: skip


def test_hierarchical_report_reads_the_steady_rate_and_flags_short_windows():
    settings = dict.fromkeys((*ht.FIG8, *ht.FIG10A, *ht.FIG10B, *ht.RARE_SYNC, *ht.FIG11))
    speed = {
        s.label: {
            "eps": 10.0,  # the whole run's rate, which no figure reads
            "eps_steady": 100.0 * (s.groups or 1),
            "trainers": s.cluster().num_trainers,
            "examples": s.worker_threads * 6 * ht.BATCH,
        }
        for s in settings
    }
    assert hierarchical_throughput.ratios(speed, ht.FIG8) == [1.0, 5.0, 8.0, 10.0]
    short = hierarchical_throughput.short_windows(speed)
    assert len(short) == len(settings)
    assert short[ht.EASGD.label] == "6 batches a worker thread, window not recorded"
    note = "\n".join(hierarchical_throughput.short_note(speed))
    assert note.startswith("**Too short for a steady rate:**")
    assert "again: every throughput point (6 batches a worker thread, window not" in note
    for r in speed.values():
        r["steady_batches_per_thread"] = 12.0
    assert hierarchical_throughput.short_note(speed) == []
    speed[ht.EASGD.label]["steady_batches_per_thread"] = 3.6
    note = "\n".join(hierarchical_throughput.short_note(speed))
    assert "again: EASGD 40t (6 batches a worker thread, window 3.6)." in note
    del speed[ht.FIG8[2].label]["eps_steady"]
    with pytest.raises(MissingSteadyRate, match=r"hierarchical/results.json, point HT 8g"):
        hierarchical_throughput.ratios(speed, ht.FIG8)


def test_hierarchical_report_of_results_from_older_settings_says_what_they_lack():
    old = {"throughput": {ht.EASGD.label: {"eps": 1.0}}, "quality": {}, "engine": {}}
    text = hierarchical_report._report(old)
    assert "| HT 5g (6+6) |\n" in text and "| HT 8g (2+2), 1 Gbit/s |\n" in text
    assert "| EASGD 40t |" not in text and "| the loss runs by seed (quality rows) |" in text
    assert "What a reviewer would still ask" in text


def test_hierarchical_control_that_keeps_the_gain_says_fewer_replicas_help():
    rows = loss_rows({**FIG7_ROWS, (5, True): (-0.5, -0.5, -0.5)})
    text = "\n".join(hierarchical_loss.claims(rows))
    assert "HT 5g still better than EASGD 40t: effect +0.50 against 2 x spread 0.00 over " \
        "3 seeds: holds: settled with the paper. So the gain is not only each replica's extra " \
        "data" in text  # fmt: skip
    few = loss_rows({(g, c): v[:2] for (g, c), v in FIG7_ROWS.items()})
    assert "over 2 seeds: too few seeds." in "\n".join(hierarchical_loss.claims(few))


def test_hierarchical_loss_variants_run_every_seed_at_their_own_factor():
    assert ht.LOSS_SEEDS == (0, 1, 2, 3, 4) and len(ht.LOSS_VARIANTS) == 7
    chosen = {v: 0.0625 * (i + 1) for i, v in enumerate(ht.LOSS_VARIANTS)}
    points = ht.seed_points(chosen)
    assert len(points) == 7 * 4  # seed 0 is the tuning's run at the chosen factor
    assert {p.seed for p in points} == {1, 2, 3, 4}
    for v in ht.LOSS_VARIANTS:
        mine = [p for p in points if (p.setting, p.control) == (v.setting, v.control)]
        assert {p.lr_factor for p in mine} == {chosen[v]} and len(mine) == 4
        assert {(p.evals, p.test) for p in mine} == {(ht.LOSS_EVALS, ht.LOSS_TEST)}
    controls = {p.setting.groups: p.examples for p in points if p.control}
    per_replica = ht.LOSS_EXAMPLES // ht.EASGD_TRAINERS
    assert controls == {g: g * per_replica for g in (5, 8, 10)}  # EASGD 40t's per replica
    assert {p.examples for p in points if not p.control} == {ht.LOSS_EXAMPLES}
    assert len({repr(p) for p in points}) == len(points)
    assert str(ht.LOSS_VARIANTS[-1]) == "HT 10g (6+6), control"


def test_hierarchical_tuning_scores_every_variant_on_the_held_out_loss(monkeypatch):
    """`tuned_losses` hands settle.tune every variant on the one grid, runs each point on
    the tuning seed, scores it by its held-out logloss and keeps every row."""
    from experiments.repro import hierarchical

    wanted = (0.015625, 0.0625, 0.125, 0.25, 0.0625, 0.03125, 2.0)
    best = dict(zip(ht.LOSS_VARIANTS, wanted, strict=True))

    def fake(run, items, progress):
        assert {p.seed for p in items} == {ht.LOSS_SEEDS[0]}
        return [
            {
                "test_logloss": abs(
                    math.log2(p.lr_factor / best[ht.LossVariant(p.setting, p.control)])
                )
            }
            for p in items
        ]

    monkeypatch.setattr(hierarchical, "run_in_processes", fake)
    tuned, rows = hierarchical.tuned_losses(None)
    assert ht.LOSS_GRID.values == (0.015625, 0.03125, 0.0625, 0.125)
    got = [(t.chosen, t.extensions, t.at_edge) for t in tuned.values()]
    assert got == [
        (0.015625, 1, False),  # at the low edge: x0.0078125 tried, worse
        (0.0625, 0, False),
        (0.125, 1, False),
        (0.25, 2, False),
        (0.0625, 0, False),
        (0.03125, 0, False),
        (1.0, 3, True),  # still at the edge after 3 extensions
    ]
    assert len(rows) == sum(len(t.scores) for t in tuned.values()) == 7 * 4 + 7


def test_hierarchical_flattening_and_settling_read_the_curves():
    rows = loss_rows(FIG7_ROWS)
    rows[0]["curve"] = [[0, 1.0], [750, 0.6], [1000, 0.5]]  # still falling: 20% over the end
    table = "\n".join(hierarchical_loss.flattening(rows))
    assert "| EASGD 40t | " in table and "| 2 of 3 | 6.73%; 20.00% |" in table
    assert hierarchical_loss.mean_curve([[(0, 1.0), (2, 3.0)], [(0, 3.0), (4, 5.0)]], 0.5) \
        == [(0.0, 2.0), (1.5, 4.0)]  # fmt: skip
    assert settled(judge([1.0, 1.1, 0.9], 0.0, "higher")) == "settled with the paper"
    assert settled(judge([-1.0, -1.1, -0.9], 0.0, "higher")).startswith("settled against the paper")
    assert settled(judge([1.0, -1.1, 0.9], 0.0, "higher")) == (
        "not settled: too few seeds (the point estimate with the paper)"
    )


def test_traffic_differences_leave_out_only_what_timing_decides():
    def run(lookup: int, exchange: int, push: int, fused: int) -> dict:
        sent = {"Lookup": {"bytes": lookup}, "Exchange": {"bytes": exchange}}
        sent |= {"PushSparse": {"bytes": push}, "PushSparse+Lookup": {"bytes": fused}}
        return {"traffic": {"trainers": sent}}

    assert not hierarchical.traffic_differences(run(10, 5, 3, 4), run(10, 9, 1, 6))
    assert hierarchical.traffic_differences(run(10, 5, 3, 4), run(11, 5, 3, 4)) == [
        "trainers Lookup: {'bytes': 10} vs {'bytes': 11}"
    ]
    assert hierarchical.traffic_differences(run(10, 5, 3, 4), run(10, 5, 3, 5)) == [
        "trainers row pushes: 7 vs 8 bytes"
    ]


def test_gba_reports_write_their_figures_without_bsp_below_the_decay(tmp_path):
    gba_stragglers_report.write(gba_result(), tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {"report.md", "severity.png", "throughput.png"}


def test_failures_report_reads_the_scale_runs_steady_rate():
    from experiments.repro import failures

    scale = {"examples": 640_000, "eps": 6e6, "cuts": 3, "cost_per_cut_s": 2e-4}
    scale["pause_per_cut_s"] = 0.01
    with pytest.raises(MissingSteadyRate, match=r"failures/results.json, point scale: no"):
        failures.render_report(scale, [], {})
    assert "(steady)" in failures._failure_point({**scale, "eps_steady": 5e6})


def test_a_hierarchical_throughput_point_too_short_for_a_steady_rate_is_refused(monkeypatch):
    from recsync.coordinator.measures import MIN_STEADY_BATCHES, ShortSteadyWindow
    from recsync.model.spec import ModelSpec

    monkeypatch.setattr(hierarchical, "LARGE_MODEL", ModelSpec())  # small: a quick run
    setting = ht.ht(2, 2)
    monkeypatch.setattr(hierarchical, "ITERATIONS_PER_THREAD", 6)
    with pytest.raises(ShortSteadyWindow, match=r"hierarchical, HT 2g \(2\+2\): .* spans 3"):
        hierarchical.throughput(setting)
    monkeypatch.setattr(hierarchical, "ITERATIONS_PER_THREAD", ht.ITERATIONS_PER_THREAD)
    row = hierarchical.throughput(setting)
    assert row["steady_batches_per_thread"] >= MIN_STEADY_BATCHES
    assert row["eps_steady"] > 0 and "eps" not in row
