"""GBA Fig. 8's headline claims (workers at a fixed global batch): the verdicts its report's
findings give, read off synthetic rows shaped as `gba_scaling.run_point` writes them;
results it cannot read give none."""

from __future__ import annotations

import pytest

from experiments.repro import gba_scaling, gba_scaling_claims, gba_scaling_report
from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, WITHIN_NOISE


def row(kind: str, workers: int, seed: int, eps: float, auc: float | None) -> dict:
    return {"kind": kind, "workers": workers, "seed": seed, "local_batch": 25_600 // workers,
            "eps": eps, "global_steps": 10, "mean_staleness": 1.5, "dropped": 0,
            "test_auc": auc}  # fmt: skip


def rows(auc_800: tuple[float, ...] = (0.7005, 0.7010, 0.7000)) -> list[dict]:
    out = []
    for seed in range(3):
        out += [row("eps", n, seed, n * (10.0 + seed), None) for n in (100, 400, 800)]
        out += [
            row("auc", 100, seed, 1.0, 0.7000 + 0.001 * seed),
            row("auc", 400, seed, 1.0, 0.7002 + 0.001 * seed),
            row("auc", 800, seed, 1.0, auc_800[seed] + 0.001 * seed),
        ]
    return out


def test_the_claims_are_the_reports_findings_at_the_largest_count():
    stored = rows()
    faster, below, above = gba_scaling_claims.claims(stored)
    assert {c.bears_on for c in (faster, below, above)} == {"gba"}
    assert faster.ours == "EPS at 800 workers 8.00x the EPS at 100 (priced math, under " \
        "stragglers; 3 seeds)"  # fmt: skip
    assert faster.verdict.label == HOLDS and faster.verdict.effect == pytest.approx(7700.0)
    assert below.ours.startswith("AUC(800) - AUC(100) +0.0005, 100 to 800 workers")
    assert "tolerance 0.002 is ours (3 seeds)" in below.ours
    assert below.verdict.effect == pytest.approx(0.0025) and below.verdict.label == HOLDS
    assert above.verdict.effect == pytest.approx(0.0015) and above.verdict.label == HOLDS
    text = gba_scaling_report.report(stored, gba_scaling.settings())
    assert f"EPS at 800 over EPS at 100 {faster.verdict.describe(0)}." in text
    assert f"not more than 0.002 below, {below.verdict.describe()}; not more than 0.002 " \
        f"above, {above.verdict.describe()}." in text  # fmt: skip


def test_an_auc_that_falls_beyond_the_tolerance_does_not_hold():
    _, below, above = gba_scaling_claims.claims(rows((0.6950, 0.6955, 0.6945)))
    assert "AUC(800) - AUC(100) -0.0050" in below.ours
    assert below.verdict.label == DOES_NOT_HOLD and above.verdict.label == HOLDS
    _, noisy, _ = gba_scaling_claims.claims(rows((0.6985, 0.7020, 0.6981)))
    assert noisy.verdict.label == WITHIN_NOISE


def test_results_it_cannot_read_give_none():
    assert gba_scaling_claims.claims({"rows": rows()}) == []
    assert gba_scaling_claims.claims([]) == []
    assert gba_scaling_claims.claims([r for r in rows() if r["kind"] == "eps"]) == []
    assert gba_scaling_claims.claims([{"workers": 100}]) == []
