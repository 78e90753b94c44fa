"""The staleness-normalization reproduction: its plan of runs (both baselines tuned on one
grid, every quality point on every seed) and its report, read off the runs it is given."""

from __future__ import annotations

import math

from experiments.repro import staleness_norm as sn
from experiments.repro import staleness_norm_claims
from experiments.repro import staleness_norm_report as snr

JITTER = (-0.002, 0.0, 0.002)  # AUC by seed
OLD = snr.Labels(1_000, 3_000)  # the clusters of the results before the cut
NEW = sn.LABELS


def norm_run(
    label: str,
    workers: int,
    auc: float,
    mean: float = 1000.0,
    std: float = 80.0,
    seed: int | None = None,
    lr_factor: float = 0.25,
):
    run = {
        "label": label,
        "workers": workers,
        "norm": "none",
        "lr_factor": lr_factor,
        "steps_per_worker": 240_000 // workers,
        "final_auc": auc,
        "final_logloss": 0.5,
        "teacher_auc": 0.76,
        "curve": [{"examples": 10, "test_auc": auc}],
        "staleness": {"mean": mean, "variance": std * std, "std": std},
    }
    return run if seed is None else {**run, "seed": seed}


def test_norm_report_of_one_seed_results_reads_each_claim_off_the_runs():
    """Results that predate the seeds: one run a label, the 3K baseline not retuned."""
    runs = [
        norm_run(OLD.base_small, 1000, 0.70),
        norm_run(OLD.base_large, 3000, 0.60, mean=3000.0, std=150.0),
        norm_run(OLD.inverse, 3000, 0.55),
        norm_run(OLD.rho_large, 3000, 0.68),
        norm_run(OLD.rho_small, 1000, 0.69),
        norm_run(OLD.rho_small_data, 1000, 0.70),
        norm_run(OLD.rho_large_data, 3000, 0.66),
    ]
    result = {
        "runs": runs,
        "lr_factor": 0.25,
        "tuning": [{"lr_factor": 0.25, "final_auc": 0.7}, {"lr_factor": 0.5, "final_auc": 0.6}],
        "paper": sn.PAPER,
        "setting": {"total_steps": 240_000, "batch_size": 64, "tables": "8", "cost": "c"},
    }
    text = snr.report(result)
    assert "| 3,000 | 3,000 | 1.00 | 22,500 | 5.0% | 3,000 | 2,090 | 0.70 | 11,300 | 5.1% |" in text
    assert "1K: x0.25 AUC 0.7000, x0.5 AUC 0.6000; x0.25 (at the grid's edge) is frozen" in text
    assert "these results predate its own tuning" in text
    one = "against 2 x spread 0.0000 over 1 seed: too few seeds"
    assert f"rho on tau' 0.6800 (-0.0200). Shape: rho's gap to 1K below 0.005: effect -0.0150 " \
        f"{one} (against the paper); rho's gap below no normalization's (closes 80% of the " \
        f"gap): effect +0.0800 {one}." in text  # fmt: skip
    assert "worst of the 3K runs: 3K, 1/tau (Zhang et al. 2016); 1/tau below the next lowest " \
        f"3K run (3K, no normalization): effect +0.0500 {one}." in text  # fmt: skip
    assert f"3K -0.0200 AUC (paper, at 3K: about +2% (0.74 -> 0.76)), above rho alone: effect " \
        f"-0.0200 {one} (against the paper)." in text  # fmt: skip


def three_seed_result() -> dict:
    aucs = {
        NEW.base_small: (400, [0.70 + j for j in JITTER]),
        NEW.base_large: (1200, [0.60 + j for j in JITTER]),
        NEW.inverse: (1200, [0.55 + j for j in JITTER]),
        NEW.rho_large: (1200, [0.698 + j / 2 for j in JITTER]),
        NEW.rho_small: (400, [0.69 + j for j in JITTER]),
        NEW.rho_small_data: (400, [0.70 + j for j in JITTER]),
        NEW.rho_large_data: (1200, [0.66 + j for j in JITTER]),
    }
    runs = [
        norm_run(
            label,
            workers,
            auc,
            mean=workers * (1.0 + seed / 100),
            std=workers / 20,
            seed=seed,
            lr_factor=0.0625 if label == NEW.base_large else 0.125,
        )
        for label, (workers, values) in aucs.items()
        for seed, auc in enumerate(values)
    ]
    grid = {400: (0.69, 0.70, 0.69, 0.51), 1200: (0.66, 0.64, 0.60, 0.50)}
    tuning = [
        {"workers": w, "lr_factor": f, "final_auc": a, "final_logloss": 0.5}
        for w, values in grid.items()
        for f, a in zip(sn.LR_FACTORS, values, strict=True)
    ]
    return {
        "runs": runs,
        "lr_factor": 0.125,
        "lr_factor_large": 0.0625,
        "seeds": [0, 1, 2],
        "tuning": tuning,
        "paper": sn.PAPER,
        "setting": {"total_steps": 240_000, "batch_size": 64, "tables": "8", "cost": "c"},
    }


def test_norm_report_judges_every_claim_over_three_seeds():
    text = snr.report(three_seed_result())
    assert "# Staleness and data normalization at 0.4K and 1.2K workers" in text
    assert "on 400 and 1,200 workers (the paper's 1K and 3K: the same ratio)" in text
    assert "1.2K, on the same grid: x0.0625 AUC 0.6600, x0.125 AUC 0.6400" in text
    assert "the 1.2K un-normalized baseline runs at its best, x0.0625 (at the grid's edge)." in text
    assert "x0.125 is frozen for every run below but the 1.2K un-normalized baseline." in text
    assert "| 1.2K, no normalization | `none` | x0.0625 | 3 | 0.6000 (0.5980-0.6020) |" in text
    # the staleness moments: means over the seeds' runs (1,200 x 1.00, 1.01, 1.02)
    assert "| 1,200 | 1,212 | 1.01 | 3,600 | 5.0% | 3,000 | 2,090 | 0.70 | 11,300 | 5.1% |" in text
    three = "over 3 seeds"
    # rho's gaps to the small cluster: 0.001, 0.002, 0.003 (sd 0.001) against 0.005 and 0.1
    assert f"rho's gap to 0.4K below 0.005: effect +0.0030 against 2 x spread 0.0010 {three}: " \
        "holds; rho's gap below no normalization's (closes 98% of the gap): effect +0.0980 " \
        f"against 2 x spread 0.0010 {three}: holds." in text  # fmt: skip
    assert f"(1.2K, no normalization): effect +0.0500 against 2 x spread 0.0020 {three}: " \
        "holds." in text  # fmt: skip
    assert "0.4K +0.0100 AUC (paper, at 1K: about +1% (0.75 -> 0.76)), above rho alone: " \
        f"effect +0.0100 against 2 x spread 0.0020 {three}: holds" in text  # fmt: skip
    assert "1.2K -0.0380 AUC (paper, at 3K: about +2% (0.74 -> 0.76)), above rho alone: " \
        f"effect -0.0380 against 2 x spread 0.0020 {three}: does not hold (against the " \
        "paper)." in text  # fmt: skip


def test_norm_report_without_the_small_data_norm_pair_says_so():
    result = three_seed_result()
    result["runs"] = [
        r for r in result["runs"] if r["label"] not in (NEW.rho_small, NEW.rho_small_data)
    ]
    assert "0.4K not run (see the module's docstring)" in snr.report(result)


def test_each_baseline_gets_its_own_best_rate_and_every_seed_its_runs():
    tuning = [
        {"workers": 1000, "lr_factor": 0.125, "final_auc": 0.70},
        {"workers": 1000, "lr_factor": 0.5, "final_auc": math.nan},
        {"workers": 3000, "lr_factor": 0.0625, "final_auc": 0.66},
        {"workers": 3000, "lr_factor": 0.125, "final_auc": 0.64},
    ]
    assert sn.best_factor(tuning, 1000) == 0.125 and sn.best_factor(tuning, 3000) == 0.0625
    grid = sn.tuning_runs()
    assert [(r.workers, r.lr_factor) for r in grid] == [
        (w, f) for w in (sn.SMALL, sn.LARGE) for f in sn.LR_FACTORS
    ]
    assert {r.steps for r in grid} == {sn.TOTAL_STEPS // sn.TUNING_FRACTION}
    bases = sn.baseline_runs(0.125, 0.0625)
    assert {(r.label, r.lr_factor) for r in bases} == {
        (NEW.base_small, 0.125),
        (NEW.base_large, 0.0625),
    }
    assert sorted(r.seed for r in bases) == sorted(2 * list(sn.SEEDS))
    small = norm_run(NEW.base_small, 400, 0.7, mean=400.0, seed=2)
    large = norm_run(NEW.base_large, 1200, 0.6, mean=1200.0, std=60.0, seed=2)
    normalized = sn.normalized_runs(0.125, small, large)
    assert {r.seed for r in normalized} == {2} and {r.lr_factor for r in normalized} == {0.125}
    rho = next(r for r in normalized if r.label == NEW.rho_large).norm
    assert rho is not None and (rho.source_mean, rho.source_std) == (1200.0, 60.0)
    every = [*grid, *bases, *normalized]
    assert len({repr(r) for r in every}) == len(every)  # each a point of its own


def test_norm_claims_are_the_findings_verdicts():
    result = three_seed_result()
    near, closer, worst = staleness_norm_claims.claims(result)
    assert [c.verdict.label for c in (near, closer, worst)] == ["holds"] * 3
    assert near.verdict.describe() == (
        "effect +0.0030 against 2 x spread 0.0010 over 3 seeds: holds"
    )  # the figures the report's findings give (above)
    assert "1.2K with rho" in near.ours and "(3 seeds)" in near.ours
    assert worst.verdict.describe() in snr.report(result)
    assert {c.bears_on for c in (near, closer, worst)} == {"staleness_norm"}


def test_fig_2_is_said_to_be_a_formula_and_tabulated_from_the_rules_code():
    text = snr.report(three_seed_result())
    assert "## Fig. 2 (the normalized decay factor): a formula, not a run" in text
    assert "mean 400 and sd 20 at 0.4K, 1,200 and 60 at 1.2K" in text
    # 1/tau; eq. 7 (mu' 400, kappa 2) on tau; tau' = 20 (tau - 1200) / 60 + 400 and eq. 7 on it
    assert "| 300 | 0.25 | 0.00333 | 1 | 100 | 1 |" in text
    assert "| 1,200 | 1 | 0.000833 | 6.94e-07 | 400 | 1 |" in text
    assert "| 1,800 | 1.5 | 0.000556 | 3.09e-07 | 600 | 2.78e-06 |" in text
    assert text.index("## Fig. 2") < text.index("## What a reviewer would still ask")
