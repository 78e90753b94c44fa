"""GBA Fig. 4's headline claims (the dense gradients' L2 norms, sync vs BSP): the verdicts
its report's findings give, read off synthetic rows shaped as `gba_norms.run_point` writes
them; results it cannot read give none."""

from __future__ import annotations

from experiments.repro import gba_norms, gba_norms_claims, gba_norms_report
from experiments.repro.verdict import HOLDS, TOO_FEW_SEEDS


def row(name: str, batch: int, seed: int, mean: float, sd: float) -> dict:
    return {"strategy": name, "local_batch": batch, "aggregate_examples": 32 * batch,
            "seed": seed, "pushed": [mean - sd, mean + sd], "applied": [mean / 2, mean / 2],
            "pushed_mean": mean, "pushed_sd": sd, "applied_mean": mean / 2,
            "applied_sd": sd / 2, "mean_staleness": 2.0, "test_auc": 0.7}  # fmt: skip


def rows() -> list[dict]:
    """BSP's norms fall with the batch; sync-64 is BSP-64's, up to a seed's wobble."""
    out = []
    for seed in range(3):
        wobble = 0.01 * seed
        for batch, mean, sd in ((16, 4.0, 2.0), (64, 2.0, 1.0), (256, 1.0, 0.5)):
            out.append(row("bsp", batch, seed, mean + wobble, sd + wobble))
        out.append(row("sync", 64, seed, 2.02 + wobble, 1.01 + wobble))
    return out


def test_the_claims_are_the_reports_findings():
    stored = rows()
    made = gba_norms_claims.claims(stored)
    mean, sd, pushed, applied = made
    assert {c.bears_on for c in made} == {"gba"}
    assert mean.ours == "BSP-256's pushed norms mean 1.0100 vs BSP-16's 4.0100 (3 seeds)"
    assert sd.ours == "BSP-256's pushed norms sd 0.5100 vs BSP-16's 2.0100 (3 seeds)"
    assert "the norms pushed by a worker: BSP-64 nearer to sync-64 than any other" in pushed.ours
    assert applied.ours.startswith("the norms applied (the mean of M pushes): BSP-64 nearer")
    assert {c.verdict.label for c in made} == {HOLDS}
    text = gba_norms_report.report(stored, gba_norms.settings())
    for claim in made:  # the report's findings state every verdict the table gives
        assert claim.verdict.describe() in text, claim.claim


def test_the_verdicts_follow_the_numbers():
    stored = rows()
    for r in stored:
        if r["strategy"] == "bsp" and r["local_batch"] == 256 and r["seed"] == 1:
            r["pushed_mean"] = 5.0  # one seed the other way: the seeds disagree
    mean = gba_norms_claims.claims(stored)[0]
    assert mean.verdict.label == TOO_FEW_SEEDS and mean.verdict.seeds == 3


def test_results_it_cannot_read_give_none():
    assert gba_norms_claims.claims({"rows": rows()}) == []
    assert gba_norms_claims.claims([]) == []
    no_sync = [r for r in rows() if r["strategy"] == "bsp"]
    assert gba_norms_claims.claims(no_sync) == []
    not_at_sync = [r for r in rows() if r["local_batch"] != 64 or r["strategy"] == "sync"]
    assert gba_norms_claims.claims(not_at_sync) == []
    assert gba_norms_claims.claims([{"strategy": "sync"}]) == []
