"""The GBA Fig. 8 and Fig. 4 reports: their findings are computed from the rows given."""

from __future__ import annotations

from pathlib import Path

from experiments.repro import gba_norms, gba_norms_report, gba_scaling, gba_scaling_report

SEEDS = (0, 1, 2)


def scaling_rows(auc_800: tuple[float, ...]) -> list[dict]:
    rows = []
    for n, eps in ((100, 1000.0), (200, 1900.0), (800, 6000.0)):
        for seed in SEEDS:
            rows.append(scaling_row("eps", n, seed, eps + 10 * seed, None))
    for seed in SEEDS:
        rows.append(scaling_row("auc", 100, seed, 1000.0, 0.7000 + 0.001 * seed))
        rows.append(scaling_row("auc", 800, seed, 6000.0, auc_800[seed]))
    return rows


def scaling_row(kind: str, n: int, seed: int, eps: float, auc: float | None) -> dict:
    return {
        "kind": kind,
        "workers": n,
        "seed": seed,
        "local_batch": 25_600 // n,
        "eps": eps,
        "global_steps": 6,
        "mean_staleness": 0.5,
        "dropped": 2,
        "test_auc": auc,
    }


def test_scaling_report_judges_growth_and_a_steady_auc(tmp_path: Path):
    rows = scaling_rows((0.7002, 0.7008, 0.7022))  # gaps +0.0002, -0.0002, +0.0002
    gba_scaling_report.plot(rows, tmp_path / "scaling.png")
    assert (tmp_path / "scaling.png").stat().st_size > 0
    text = gba_scaling_report.report(rows, gba_scaling.settings())
    assert "| 100 | 256 | 1,010 (1,000 .. 1,020) | 1.00x |" in text
    assert (
        "| 800 | 32 | 6,010 (6,000 .. 6,020) | 5.95x | 0.50 | 2 | 0.7011 (0.7002 .. 0.7022) |"
        in text
    )
    assert (
        "EPS at 800 over EPS at 100 effect +5000 against 2 x spread 10 over 3 seeds: holds" in text
    )
    assert "rises at every step (1.89x, 3.15x)" in text
    assert "per seed: +0.0002, -0.0002, +0.0002; tolerance 0.002" in text
    assert (
        "not more than 0.002 below, effect +0.0021 against 2 x spread 0.0002 over 3 seeds: holds"
        in text
    )
    assert (
        "not more than 0.002 above, effect +0.0019 against 2 x spread 0.0002 over 3 seeds: holds"
        in text
    )
    assert "## What a reviewer would still ask" in text


def test_scaling_report_says_when_the_auc_falls():
    rows = scaling_rows((0.6900, 0.6910, 0.6920))  # 0.01 lower at every seed
    text = gba_scaling_report.report(rows, gba_scaling.settings())
    assert (
        "not more than 0.002 below, effect -0.0080 against 2 x spread 0.0000 over 3 seeds: "
        "does not hold" in text
    )
    rows = [r for r in rows if r["seed"] != 2]
    text = gba_scaling_report.report(rows, gba_scaling.settings())
    assert "over 2 seeds: too few seeds" in text


def norms_row(name: str, batch: int, seed: int, mean: float, sd: float) -> dict:
    return {
        "strategy": name,
        "local_batch": batch,
        "aggregate_examples": batch * 32,
        "seed": seed,
        "pushed": [mean - sd, mean, mean + sd],
        "applied": [mean / 4, mean / 3],
        "pushed_mean": mean,
        "pushed_sd": sd,
        "applied_mean": mean / 3,
        "applied_sd": sd / 3,
        "mean_staleness": 1.0 if name == "bsp" else 0.0,
        "test_auc": 0.7,
    }


def norms_rows() -> list[dict]:
    rows = []
    for seed in SEEDS:
        jitter = 0.001 * seed
        rows.append(norms_row("bsp", 16, seed, 0.4 + jitter, 0.2))
        rows.append(norms_row("bsp", 64, seed, 0.2 + jitter, 0.1))
        rows.append(norms_row("bsp", 256, seed, 0.1 + jitter, 0.05))
        rows.append(norms_row("sync", 64, seed, 0.19 + jitter, 0.1))
    return rows


def test_norms_report_reads_the_papers_observations_off_the_rows(tmp_path: Path):
    rows = norms_rows()
    text = gba_norms_report.report(rows, gba_norms.settings())
    assert "| bsp-16 | 16 | 512 | 0.4010 (0.2000) |" in text
    assert "| sync-64 | 64 | 2,048 | 0.1910 (0.1000) | 0.0637 (0.0333) | 0.00 | 0.7000 |" in text
    assert "its mean is lower at BSP-256 than at BSP-16, effect +0.3000 against" in text
    assert "its sd is lower, effect +0.1500 against 2 x spread 0.0000 over 3 seeds: holds" in text
    # BSP-64 is ~0.05 from sync-64 (means 0.20 vs 0.19), BSP-256 ~0.6+0.7 away: holds
    assert text.count("is nearer to sync-64 than any other BSP") == 2
    assert "BSP-64 (sync's local batch and aggregation size)" in text
    assert "over 3 seeds: holds." in text
    gba_norms_report.plot(rows, tmp_path / "norms.png")
    assert (tmp_path / "norms.png").stat().st_size > 0


def test_norms_report_says_when_bsp_is_nearer_elsewhere():
    rows = [r for r in norms_rows() if r["strategy"] != "sync"]
    for seed in SEEDS:
        rows.append(norms_row("sync", 64, seed, 0.1 + 0.001 * seed, 0.05))  # like BSP-256
    verdict = gba_norms_report.resembles(rows, "pushed", 64)
    assert verdict.label == "does not hold"
