"""ShadowSync Figs. 6 and 7's claims (shadowsync_algorithms_claims.py): computed from results
shaped as the runner writes them, the verdicts its report's findings give; results of
another shape give none."""

from __future__ import annotations

from experiments.repro import shadowsync_algorithms_claims, shadowsync_algorithms_report
from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, TOO_FEW_SEEDS, WITHIN_NOISE

SEEDS = (0, 1, 2)
EVAL = {"S-MA": 0.50, "FR-MA": 0.51, "S-BMUF": 0.52, "FR-BMUF": 0.52}
EVAL |= {"S-EASGD": 0.505, "S-BMUF-large": 0.515}
TRAIN = {v: 0.6 for v in EVAL} | {"S-EASGD": 0.58}


def row(variant, trainers, seed, math, **values):
    """A row as `shadowsync_points.run_point` returns it."""
    return {
        "variant": variant,
        "trainers": trainers,
        "threads": 24 if math == "priced" else 4,
        "sync_servers": 2 if variant == "S-EASGD" else 0,
        "embedding_servers": trainers,
        "seed": seed,
        "math": math,
        "examples": 524_288,
        "period_s": 0.0333 if variant.startswith("FR-") else None,
        "cost": "fig5" if math == "priced" else "table3",
        "eps": 1000.0 * trainers,
        "syncs_per_trainer_s": 30.0,
        "average_sync_gap": 4.0,
        "average_sync_gap_per_thread": 1.0,
        "train_loss": 0.5,
        "test_logloss": 0.5,
    } | values


def results():
    rows = []
    for n in (5, 10, 20):  # EPS: one seed, as the runner's
        rows += [row(v, n, 0, "priced") for v in ("S-MA", "S-BMUF", "FR-MA")]
        rows.append(row("FR-BMUF", n, 0, "priced", eps=1000.0 * min(n, 10)))
    for seed in SEEDS:
        for n in (5, 20):
            rows += [
                row(v, n, seed, "real", test_logloss=x + seed / 10_000, train_loss=TRAIN[v])
                for v, x in EVAL.items()
            ]
    return {"period_s": 0.0333, "rows": rows}


def test_claims_give_the_reports_verdicts_at_the_most_trainers():
    result = results()
    ma, bmuf, scaling, alpha, trains = shadowsync_algorithms_claims.claims(result)
    assert ma.ours == (
        "20 trainers: S-MA 0.50010, FR-MA 0.51010 eval logloss; FR every 0.0333 s, real math "
        "(3 seeds)"
    )
    assert ma.verdict.label == HOLDS and bmuf.verdict.label == WITHIN_NOISE
    assert scaling.ours.startswith(
        "EPS from 5 to 20 trainers (linear 4x): the least, FR-BMUF 2.00x, judged against 90% "
        "of linear; S-MA 4.00x, S-BMUF 4.00x, FR-MA 4.00x; priced math (1 seed)"
    )
    assert scaling.verdict.label == TOO_FEW_SEEDS and round(scaling.verdict.effect, 6) == -1.6
    assert alpha.ours == "20 trainers: eval logloss 0.51510 at alpha 0.5, 0.52010 at 0.1 (3 seeds)"
    assert alpha.verdict.label == HOLDS and alpha.bears_on == "bmuf"
    assert trains.ours.startswith("20 trainers: train loss S-EASGD 0.58000, the best other (S-MA)")
    assert trains.verdict.label == HOLDS and trains.bears_on == "easgd"
    assert {ma.bears_on, bmuf.bears_on, scaling.bears_on} == {"shadowsync"}
    text = shadowsync_algorithms_report.report(result)  # the table and the report agree
    for claim, digits in ((ma, 5), (bmuf, 5), (scaling, 2), (alpha, 5), (trains, 5)):
        assert claim.verdict.describe(digits) in text


def test_the_verdict_follows_the_numbers():
    result = results()
    for r in result["rows"]:
        if r["variant"] == "S-MA" and r["math"] == "real":
            r["test_logloss"] += 0.02  # now above FR-MA's
    ma, *_ = shadowsync_algorithms_claims.claims(result)
    assert ma.verdict.label == DOES_NOT_HOLD


def test_results_of_another_shape_give_none():
    assert shadowsync_algorithms_claims.claims([]) == []
    assert shadowsync_algorithms_claims.claims({"rows": []}) == []
    assert shadowsync_algorithms_claims.claims({"period_s": 1.0, "rows": []}) == []
