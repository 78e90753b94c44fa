"""ShadowSync Fig. 5's claims (shadowsync_fig5_claims.py): computed from points shaped as the
runner writes them, the verdicts its report's findings give; older points give none."""

from __future__ import annotations

from experiments.repro import shadowsync, shadowsync_fig5_claims
from experiments.repro.verdict import DOES_NOT_HOLD, HOLDS, TOO_FEW_SEEDS

GROWTH = {("S-EASGD", 2): 4.0, ("FR-EASGD-5", 2): 2.0, ("FR-EASGD-30", 2): 4.0}
GROWTH[("FR-EASGD-5", 4)] = 3.8


def points(growth=GROWTH, seeds=(0, 1, 2)):
    """One point per item of `points_to_run`, EPS linear in the trainers at `growth`'s rate
    from 5 to 20 trainers, a little seed noise."""

    def eps(variant, servers, trainers, seed):
        rate = (growth[(variant, servers)] - 1) / 15
        return 1000.0 * (1 + rate * (trainers - 5)) * (1 + seed / 1000)

    return [
        {
            "variant": variant,
            "sync_servers": servers,
            "trainers": trainers,
            "seed": seed,
            "examples": 1,
            "eps": eps(variant, servers, trainers, seed),
            "average_sync_gap": 4.0,
            "average_sync_gap_per_thread": 1.0,
            "sync_server_nic_utilization": 0.5,
            "test_auc": None,
        }
        for seed in seeds
        for variant, trainers, servers, _ in shadowsync.points_to_run()
    ]


def test_claims_give_the_reports_verdicts_on_the_growth():
    rows = points()
    plateau, lifted = shadowsync_fig5_claims.claims(rows)
    assert plateau.ours.startswith(
        "EPS from 5 to 20 trainers, 2 sync servers: FR-EASGD-5 2.00x, S-EASGD 4.00x (linear "
        "4.0x); 24 threads a trainer, priced math (3 seeds)"
    )
    assert plateau.verdict.label == HOLDS and round(plateau.verdict.effect, 6) == 2.0
    assert lifted.ours == (
        "FR-EASGD-5's EPS from 5 to 20 trainers: 3.80x with 4 sync servers, 2.00x with 2 (3 seeds)"
    )
    assert lifted.verdict.label == HOLDS and round(lifted.verdict.effect, 6) == 1.8
    assert {c.bears_on for c in (plateau, lifted)} == {"shadowsync"}
    report = shadowsync._report(rows)  # the table and the report cannot disagree
    for claim in (plateau, lifted):
        assert claim.verdict.describe(2) in report


def test_the_verdict_follows_the_numbers_and_one_seed_is_too_few():
    flat = GROWTH | {("FR-EASGD-5", 2): 4.5}  # FR-EASGD-5 grows faster than S-EASGD
    plateau, _ = shadowsync_fig5_claims.claims(points(flat))
    assert plateau.verdict.label == DOES_NOT_HOLD
    one = shadowsync_fig5_claims.claims(points(seeds=(0,)))
    assert [c.verdict.label for c in one] == [TOO_FEW_SEEDS] * 2
    assert "(1 seed)" in one[0].ours


def test_points_older_than_the_setting_give_none():
    legacy = [{k: v for k, v in p.items() if k != "seed"} for p in points()]
    assert shadowsync_fig5_claims.claims(legacy) == []
    assert shadowsync_fig5_claims.claims([]) == []
    assert shadowsync_fig5_claims.claims({"rows": []}) == []
