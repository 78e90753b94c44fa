"""ShadowSync's quality claims (shadowsync_quality_claims.py): computed from results shaped
as the runner writes them, the verdicts its report's findings give; results older than
issue 55's setting give none."""

from __future__ import annotations

from experiments.repro import shadowsync_quality, shadowsync_quality_claims
from experiments.repro.verdict import HOLDS, WITHIN_NOISE

SEEDS = (0, 1, 2)
GAP = {"S-EASGD": 0.500, "FR-EASGD-5": 0.501, "FR-EASGD-10": 0.502}
GAP |= {"FR-EASGD-30": 0.503, "FR-EASGD-100": 0.504}
GROWTH = {"S-EASGD": 0.001, "FR-EASGD-5": 0.004, "FR-EASGD-30": 0.002}


def row(table, variant, trainers, seed, loss, lr=0.008):
    return {
        "table": table,
        "variant": variant,
        "trainers": trainers,
        "sync_servers": 1 if table == "gap" else 2,
        "seed": seed,
        "dense_lr": lr,
        "train_loss": loss + 0.01,
        "train_loss_last": loss + 0.005,
        "test_logloss": loss,
        "test_auc": 0.7,
        "eps": 1.0,
        "average_sync_gap": 5.0,
        "average_sync_gap_per_thread": 1.25,
    }


def results(growth=GROWTH, examples=True):
    q = shadowsync_quality
    rows = [
        row("gap", v, q.GAP_TRAINERS, seed, loss + seed * 0.0001)
        for seed in SEEDS
        for v, loss in GAP.items()
    ]
    for seed in SEEDS:
        for n, step in zip(q.SCALE_TRAINERS, (0, 1, 2), strict=True):
            rows += [
                row("scale", v, n, seed, 0.5 + step * g * (1 + seed)) for v, g in growth.items()
            ]
    tuning = [row("tune", "S-EASGD", 5, 0, 0.51 - lr, lr) for lr in q.LR_GRID]
    made = {
        "lr_tuning": tuning,
        "dense_lr": 0.008,
        "iterations_per_thread": {"5": 409.6, "10": 204.8, "20": 102.4},
        "rows": rows,
    }
    return made | {"examples": q.EXAMPLES} if examples else made


def test_claims_give_the_reports_verdicts_on_both_tables():
    result = results()
    rising, below, milder = shadowsync_quality_claims.claims(result)
    assert rising.ours == (
        "eval logloss 0.50110 (FR-EASGD-5), 0.50410 (FR-EASGD-100); 10 trainers, 1 sync "
        "server, 2,097,152 examples (3 seeds)"
    )
    assert rising.paper.startswith("Table 2(a): eval loss 0.78483 (FR-EASGD-5) to 0.78531")
    assert rising.verdict.label == HOLDS and round(rising.verdict.effect, 6) == 0.003
    assert below.ours.startswith("S-EASGD 0.50010, best FR FR-EASGD-5 0.50110;")
    assert below.verdict.label == HOLDS and round(below.verdict.effect, 6) == 0.001
    # S-EASGD +0.4%, +0.8%, +1.2% by seed against FR-EASGD-30's +0.8%, +1.6%, +2.4%
    assert milder.ours == (
        "S-EASGD +0.800%, the closest other (FR-EASGD-30) +1.600%, 5 to 20 trainers, 2 sync "
        "servers (3 seeds)"
    )
    assert "+0.177% for S-EASGD against +0.333% (FR-EASGD-5) and +0.250%" in milder.paper
    assert milder.verdict.label == WITHIN_NOISE
    text = shadowsync_quality.report(result)  # the table and the report cannot disagree
    for claim, digits in ((rising, 5), (below, 5), (milder, 3)):
        assert claim.verdict.describe(digits) in text
        assert claim.bears_on == "shadowsync"


def test_results_older_than_the_setting_give_none():
    assert shadowsync_quality_claims.claims(results(examples=False)) == []
    assert shadowsync_quality_claims.claims([]) == []
