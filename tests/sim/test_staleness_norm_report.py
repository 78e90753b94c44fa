"""The staleness-normalization reproduction: its plan of runs (every variant tuned on one
grid on the tuning seed, every variant on every seed at its own rate) and its report, read
off the runs it is given (results before and after the tuning)."""

from __future__ import annotations

import pytest

from experiments.repro import staleness_norm as sn
from experiments.repro import staleness_norm_claims
from experiments.repro import staleness_norm_report as snr
from experiments.repro import staleness_norm_settled as sset
from experiments.repro import staleness_norm_shape as sns

JITTER = (-0.002, 0.0, 0.002)  # AUC by seed
OLD = sns.Labels(1_000, 3_000)  # the clusters of the results before the cut
NEW = sns.Labels(400, 1_200)  # the clusters of the three-seed results
LR_FACTORS = (0.0625, 0.125, 0.25, 0.5)  # the grid of the three-seed results


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
        for f, a in zip(LR_FACTORS, values, strict=True)
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


def test_every_variant_is_tuned_on_one_grid_and_every_seed_gets_its_runs(monkeypatch):
    """The tuning runner runs each (variant, factor) point on the tuning seed at full length
    (rho on that seed's moments) and scores it on the validation AUC; the other seeds run
    every variant at its own chosen factor, rho on their own moments."""
    labels = sn.LABELS
    assert set(sn.VARIANTS) == {
        labels.base_small,
        labels.base_large,
        labels.inverse,
        labels.rho_large,
        labels.rho_large_data,
        labels.rho_small,
        labels.rho_small_data,
    }
    assert sn.SEEDS == (0, 1, 2, 3, 4) and sn.LARGE == 3 * sn.SMALL
    ran: list[sn.NormRun] = []

    def fake(run, items, progress):
        ran.extend(items)
        return [
            {"label": r.label, "workers": r.workers, "lr_factor": r.lr_factor, "seed": r.seed,
             "valid_auc": 0.7 - abs(r.lr_factor - 0.5), "valid_logloss": 0.5, "final_auc": 0.7}
            for r in items
        ]  # fmt: skip

    monkeypatch.setattr(sn, "run_in_processes", fake)
    made: sn.Made = {}
    tuned = sn.settle.tune(
        [v.label for v in sn.BASELINES], sn.GRID, sn.tuning_runner(made, None, None), True
    )
    assert {t.chosen for t in tuned.values()} == {0.5} and not any(
        t.at_edge for t in tuned.values()
    )
    assert {(r.seed, r.steps, r.norm) for r in ran} == {(sn.TUNING_SEED, sn.TOTAL_STEPS, None)}
    assert len(made) == 2 * len(sn.GRID.values)
    small = norm_run(labels.base_small, sn.SMALL, 0.7, mean=200.0, std=10.0, seed=0)
    large = norm_run(labels.base_large, sn.LARGE, 0.6, mean=600.0, std=30.0, seed=0)
    ran.clear()
    runner = sn.tuning_runner(made, {sn.SMALL: small, sn.LARGE: large}, None)
    scores = runner([(labels.rho_large, 0.25), (labels.inverse, 1.0)])
    assert scores == pytest.approx([0.45, 0.2])
    rho = ran[0].norm
    assert rho is not None and (rho.mu_prime, rho.source_mean, rho.source_std) == (200, 600, 30)
    assert ran[1].norm is not None and ran[1].norm.rule == "inverse"
    assert [r["lr_factor"] for r in sn.tuning_rows(made)][-2:] == [0.25, 1.0]
    chosen = {label: 0.25 for label in sn.VARIANTS} | {labels.base_large: 0.125}
    bases = sn.seed_runs(chosen, sn.BASELINES, {})
    assert sorted(r.seed for r in bases) == sorted(2 * [1, 2, 3, 4])
    assert {(r.label, r.lr_factor) for r in bases} == {
        (labels.base_small, 0.25),
        (labels.base_large, 0.125),
    }
    moments = {
        (w, seed): norm_run("x", w, 0.7, mean=w + seed, std=w / 20, seed=seed)
        for w in (sn.SMALL, sn.LARGE)
        for seed in sn.SEEDS
    }
    normalized = sn.seed_runs(chosen, sn.NORMALIZED, moments)
    assert len(normalized) == 4 * len(sn.NORMALIZED)
    seed3 = next(r for r in normalized if r.label == labels.rho_large and r.seed == 3)
    assert seed3.norm is not None and (seed3.norm.mu_prime, seed3.norm.source_mean) == (
        sn.SMALL + 3,
        sn.LARGE + 3,
    )
    every = [*bases, *normalized]
    assert len({repr(r) for r in every}) == len(every)  # each a point of its own


def five_seed_result() -> dict:
    """A result as the tuned reproduction writes it: five seeds, each variant's tuning,
    held-out loss curves (the large no-normalization run still falling)."""
    labels = sns.Labels(200, 600)
    means = {
        labels.base_small: (200, 0.70),
        labels.base_large: (600, 0.69),
        labels.inverse: (600, 0.68),
        labels.rho_large: (600, 0.695),
        labels.rho_small: (200, 0.70),
        labels.rho_small_data: (200, 0.7005),
        labels.rho_large_data: (600, 0.70),
    }
    runs = []
    for label, (workers, auc) in means.items():
        for seed in range(5):
            run = norm_run(label, workers, auc + 0.001 * (seed - 2) * (seed % 2), mean=workers,
                           std=workers / 20, seed=seed)  # fmt: skip
            final = 0.55 if label != labels.base_large else 0.56
            fall = 0.001 if label != labels.base_large else 0.01
            run["curve"] = [
                {"examples": 100 * i, "test_auc": auc, "test_logloss": final + fall * (4 - i)}
                for i in range(1, 5)
            ]
            runs.append(run)
    tuned = [
        {"variant": labels.base_small, "scores": {"0.125": 0.69, "0.25": 0.70, "0.5": 0.68},
         "chosen": 0.25, "extensions": 0, "at_edge": False},
        {"variant": labels.inverse, "scores": {"0.125": 0.6, "0.25": 0.62, "0.5": 0.64, "1": 0.65,
         "2": 0.66, "4": 0.67}, "chosen": 4.0, "extensions": 3, "at_edge": True},
    ]  # fmt: skip
    return {
        "runs": runs,
        "lr_factor": 0.25,
        "lr_factor_large": 0.25,
        "seeds": [0, 1, 2, 3, 4],
        "tuning_seed": 0,
        "tuning_score": "validation AUC",
        "valid_examples": 20_000,
        "grid": {"values": [0.125, 0.25, 0.5], "step": 2.0},
        "tuned": tuned,
        "tuning": [],
        "flattening": {"last_fraction": 0.25, "tolerance": 0.005},
        "paper": sn.PAPER,
        "setting": {"total_steps": 48_000, "batch_size": 256, "tables": "8", "cost": "c"},
    }


def test_tuned_report_shows_the_tuning_the_flattening_and_how_each_claim_settled():
    text = snr.report(five_seed_result())
    assert "tuned on the same grid of factors of the default dense (0.01) and sparse (0.05) " \
        "Adagrad rates (x0.125, x0.25, x0.5; a best at an edge gets the next factor past it, " \
        "x2 further, up to 3 times), each point a full-length run of seed 0" in text  # fmt: skip
    assert "scored on the validation AUC: the AUC on a validation split of 20,000 examples" in text
    assert (
        "| 0.2K, no normalization | x0.125 0.6900, x0.25 0.7000, x0.5 0.6800 | x0.25 | no |" in text
    )
    assert "x4 0.6700 | x4 | yes (grid extended 3x) |" in text
    # the rule on the curves: the window starts at 300 (3/4 of 400); 0.551 -> 0.550 is 0.18%
    assert (
        "over the last 25% of the run (the test split's logloss, evaluated 4 times a run)" in text
    )
    assert "| 0.2K, no normalization | 5 of 5 | 0.18%, 0.18%, 0.18%, 0.18%, 0.18% |" in text
    assert "| 0.6K, no normalization | 0 of 5 | 1.79%, 1.79%, 1.79%, 1.79%, 1.79% |" in text
    assert "runs of 0.6K, no normalization (up to 1.79%) still fell by more than 0.5%" in text
    assert "![held-out loss](heldout_loss.png)" in text
    assert "## How each claim settled (5 seeds, every variant at its own tuned rate)" in text
    # rho's gap 0.005 against none's 0.01 (the same on every seed): holds
    assert "- rho's gap to 0.2K below no normalization's at 0.6K (Fig. 5): settled with the " \
        "paper; effect +0.0050 against 2 x spread 0.0000 over 5 seeds: holds." in text  # fmt: skip
    assert "- 1/tau the worst 0.6K run, below 0.6K, no normalization (Fig. 5): settled with " \
        "the paper; effect +0.0100" in text  # fmt: skip
    assert "- data normalization over rho at 0.2K (Fig. 6): not settled either way: within " \
        "the seeds' noise (the point estimate with the paper); effect +0.0005" in text  # fmt: skip


def test_tuned_report_writes_the_loss_curves(tmp_path):
    snr.write_report(five_seed_result(), tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {
        "report.md",
        "fig5_staleness_norm.png",
        "fig6_data_norm.png",
        sset.LOSS_PLOT,
    }


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


def test_tuned_results_add_fig_6_claims_at_each_size():
    result = five_seed_result()
    claims = staleness_norm_claims.claims(result)
    assert len(claims) == 5 and len(staleness_norm_claims.claims(three_seed_result())) == 3
    small, large = claims[3:]
    assert small.claim == "data normalization over rho raises the AUC at 0.2K workers"
    assert small.verdict.label == "within noise" and "+0.0005 AUC above rho alone" in small.ours
    assert large.verdict.describe() in snr.report(result)
    assert large.paper == "Fig. 6: about +2% (0.74 -> 0.76) at 3K"
