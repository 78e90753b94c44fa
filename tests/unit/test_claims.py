"""The reproductions' headline claims: each module's `claims()` computes them from its
results, each says its evidence kind and its effect's size, spread and direction, no "holds"
stands against its point estimate, the docs' claims table is rendered from them, and the
strategy page's advice links to rows that exist and quotes no verdict its rows do not give."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from docgen import claims_table, results
from docgen.markdown import cell
from experiments.repro import (
    async_at_scale,
    auto_switching,
    failures_claims,
    swap_days,
    swap_days_report,
)
from experiments.repro import embeddings_setting as setting
from experiments.repro.claims import (
    AGAINST,
    BUILT_IN,
    DIRECTIONS,
    MEASURED,
    NONE,
    WITH,
    Claim,
    Effect,
    direction_of,
)
from experiments.repro.verdict import HOLDS, LABELS, TOO_FEW_SEEDS, WITHIN_NOISE, Verdict, judge

CHOOSING = Path(results.ROOT) / "docs" / "choosing-a-strategy.md"


def claim(name: str, verdict: Verdict, bears_on: str, effect: Effect, **kw: Any) -> Claim:
    kw.setdefault("evidence", MEASURED)
    return Claim(name, "p", "o", verdict, bears_on, effect=effect, **kw)


def fake_report(title: str, directory: str) -> results.Report:
    return results.Report(title, directory, "results.json", lambda r, _: "# x\n", None)


def test_the_table_is_rendered_from_the_claims_computed_off_a_results_dict():
    synthetic = {"gain": [0.31, 0.33, 0.32, 0.30], "base": [0.1, 0.11, 0.09, 0.1]}

    def claims(r):
        mean = sum(r["gain"]) / len(r["gain"])
        effect = Effect.difference(r["gain"], r["base"], "units", "higher")
        verdict = judge(r["gain"], r["base"], "higher")
        return [Claim("x is higher", "Fig. 9", f"x {mean:.3f}", verdict, "gba", effect=effect,
                      evidence=MEASURED)]  # fmt: skip

    report = fake_report("Fake one", "fake")
    table = claims_table.render(
        [(report, claims(synthetic))], [fake_report("Other", "other")], base="../"
    )
    lines = table.splitlines()
    assert lines[:2] == list(claims_table.HEADER)
    assert lines[2].startswith('| <span id="claims-gba"></span>`gba` | [Fake one](../results/fake/')
    assert (
        "| x is higher | Fig. 9 | x 0.315 | measured | with the paper | +0.2150 units (the "
        "claim: > 0) | sd 0.0129; +0.2000 to +0.2300; 4 of 4 seeds with the paper | **holds** "
        "(effect +0.2150 against 2 x spread "
    ) in lines[2]
    assert "4 seeds) |" in lines[2]
    assert lines[-1] == "Claims not yet generated: [Other](../results/other/index.md)."
    synthetic["gain"] = [0.11, 0.12, 0.10, 0.111]  # the verdict follows the numbers
    assert f"**{WITHIN_NOISE}**" in claims_table.render([(report, claims(synthetic))])


def test_rows_are_grouped_by_what_they_bear_on_with_one_anchor_a_group():
    v, e = judge([1.0], 0.0, "higher"), Effect.of(1.0, "x", "higher")
    a = [claim("a1", v, "psp", e), claim("a2", v, "easgd", e)]
    b = [claim("b1", v, "psp | x", e)]
    table = claims_table.render([(fake_report("A", "a"), a), (fake_report("B", "b"), b)])
    rows = table.splitlines()[2:]
    assert [r.split(" | ")[2] for r in rows] == ["a2", "a1", "b1"]
    assert table.count('id="claims-psp"') == 1 and 'id="claims-psp-x"' in table
    assert "`psp \\| x`" in table  # a pipe in a cell is escaped
    with pytest.raises(ValueError):
        claim("c", v, "Not A Key", e)


def test_the_site_table_has_a_row_or_a_gap_line_for_every_reproduction():
    text = claims_table.section()
    for report in claims_table.reproductions():
        assert f"]({report.page})" in text, report.directory
    claimed = [r for r in claims_table.reproductions() if r.claims is not None]
    assert {r.directory for r in claimed} >= {
        "async_staleness", "auto_switching", "embeddings", "failures", "swap_days",
        "hierarchical", "gba_scaling", "gba_norms",
    }  # fmt: skip
    for report in claimed:
        for claim in results.claims_of(report):
            assert cell(claim.ours) in text and claim.verdict.label in LABELS
    assert "readers" not in text  # a benchmark's report is not a reproduction's


def _bullets() -> list[str]:
    page = CHOOSING.read_text(encoding="utf-8")
    section = page.split("## When to pick which", 1)[1].split("\n## ", 1)[0]
    return ["- " + b for b in re.split(r"\n- ", section)[1:]]


def test_the_advice_links_rows_that_exist_and_quotes_only_their_verdicts():
    assert claims_table.MARKER in CHOOSING.read_text(encoding="utf-8")
    by_key: dict[str, set[str]] = {}
    for report in claims_table.reproductions():
        for claim in results.claims_of(report):
            by_key.setdefault(claims_table.anchor(claim.bears_on), set()).add(claim.verdict.label)
    bullets = _bullets()
    assert len(bullets) >= 8
    for bullet in bullets:
        linked = re.findall(r"\(#(claims-[a-z0-9-]+)\)", bullet)
        assert all(key in by_key for key in linked), (linked, sorted(by_key))
        given = set().union(*(by_key[key] for key in linked)) if linked else set()
        flat = " ".join(bullet.split())
        quoted = {label for label in LABELS if re.search(rf"\b{label}\b", flat)}
        assert quoted <= given, (flat[:60], quoted - given)
        assert not re.search(r"\d\.\d", flat), flat[:60]  # no hand-typed figure


def test_swap_days_claims_read_the_late_gains():
    days = swap_days.DAYS - 1
    plain = [0.70 + 0.01 * min(d, 3) for d in range(days)]  # flat from day 4
    swap = [0.70 + 0.01 * d for d in range(days)]
    rows = [
        {"variant": "Adagrad", "next_day_auc": plain},
        {"variant": "Adagrad-SWAP (0.8, T = 1 day)", "next_day_auc": swap},
    ]
    ahead, stalls = swap_days_report.claims(rows)
    assert "last day SWAP 0.8000 vs Adagrad 0.7300 (means, one seed)" in ahead.ours
    assert f"day 4 to day {days}: Adagrad +0.0000 AUC, SWAP +0.0700" in stalls.ours
    assert ahead.verdict == swap_days_report.shape(rows).ahead and ahead.bears_on == "swap"
    assert stalls.verdict.label == TOO_FEW_SEEDS and stalls.verdict.effect == pytest.approx(0.0175)


def switching_row(variant, seconds, aucs, strategies=None):
    strategies = strategies or [variant.split()[0]] * len(aucs)
    days = [
        {"day": d, "strategy": s, "next_day_auc": a, "train_seconds": seconds / len(aucs),
         "adagrad_sums": {"dense": 1.0, "rows": 1.0}, "decisions": []}
        for d, (s, a) in enumerate(zip(strategies, aucs, strict=True))
    ]  # fmt: skip
    return {"variant": variant, "days": days, "total_seconds": seconds,
            "mean_next_day_auc": sum(aucs) / len(aucs)}  # fmt: skip


def test_auto_switching_claims_read_the_controller_and_fig_6():
    sync = [0.70, 0.71, 0.72, 0.73, 0.74]
    mixed = ["sync", "sync", "async", "sync", "sync"]
    rows = [
        switching_row("sync throughout", 10.0, sync),
        switching_row("gba throughout", 6.0, [a - 0.0002 for a in sync]),
        switching_row("controller", 6.3, [a - 0.0005 for a in sync]),
        switching_row("sync > gba > sync", 9.0, [0.70, 0.71, 0.7185, 0.73, 0.74],
                      ["sync", "sync", "gba", "sync", "sync"]),
        switching_row("sync > async > sync", 9.0, [0.70, 0.71, 0.71, 0.7285, 0.7395], mixed),
    ]  # fmt: skip
    claims = auto_switching.claims({"variants": rows})
    assert [c.bears_on for c in claims] == ["controller", "controller", "gba", "async", "async"]
    time, auc, gba, dips, back = claims
    assert "1.050x gba throughout's time" in time.ours
    assert time.verdict.effect == pytest.approx(0.05)
    assert "sync throughout minus the controller +0.0005" in auc.ours
    assert "largest gap to sync -0.0015" in gba.ours and "days 2-2 of 5" in gba.ours
    assert "lowest -0.0100 vs sync" in dips.ours and dips.verdict.effect == pytest.approx(0.008)
    assert "last day -0.0005 vs sync" in back.ours
    assert {c.verdict.label for c in claims} == {TOO_FEW_SEEDS}  # one seed a run


def test_async_staleness_claim_reads_the_fit():
    points = [{"workers": n, "mean_staleness": n - 1.0} for n in (10, 20, 50)]
    (claim,) = async_at_scale.claims({"points": points, "fit": {"slope": 1.0, "intercept": -1.0,
                                                                "r2": 0.99}})  # fmt: skip
    assert "10 to 50 workers (3 counts): mean staleness = 1.000 n -1.00, R^2 0.9900" in claim.ours
    assert claim.verdict.effect == 1.0 and claim.verdict.label == TOO_FEW_SEEDS


def best_row(mtbf, write, policy, interval, overhead, young):
    return {"job_mtbf_h": mtbf, "write_s": write, "policy": policy,
            "best_interval_s": interval, "best_overhead": overhead, "lost_updates": 0.0,
            "young_s": young, "daly_s": young, "overhead_at_young": overhead + 0.001}  # fmt: skip


def test_failures_claims_read_the_best_intervals():
    best = []
    for write, young in ((10.0, 1000.0), (60.0, 2000.0)):
        best.append(best_row(20.0, write, "rollback (recsync)", young * 1.2, 0.04, young))
        best.append(best_row(20.0, write, "partial (CPR)", young * 4, 0.01, young))
    sweep = [{"interval_s": 120.0 * 2**k} for k in range(4)]
    young, cpr = failures_claims.claims({"best": best, "sweep": sweep})
    assert "1 job MTBFs x 2 checkpoint costs: best interval 1.20 to 1.20x Young's" in young.ours
    assert "at Young's at most 0.10 points of overhead more" in young.ours
    assert young.verdict.effect == pytest.approx(0.6931 - 0.1823, abs=1e-4)
    assert "partial recovery 4.0 to 4.0x cheaper" in cpr.ours
    assert cpr.verdict.effect == pytest.approx(3.0) and cpr.bears_on == "recovery policy"


def quality_run(variant, seed, auc, budget):
    return {"variant": variant, "seed": seed, "test_auc": auc, "test_ne": 1 - auc,
            "rows_budget": budget}  # fmt: skip


def test_embeddings_claims_pair_the_seeds_at_each_budget():
    quality = []
    for seed, noise in enumerate((0.0, 0.001, -0.001)):
        quality += [
            quality_run("fixed, 10 rows a table", seed, 0.70 + noise, 260),
            quality_run("hash LRS, 10 rows a table", seed, 0.71 + noise, 260),
            quality_run("fixed, 4 rows a table", seed, 0.69 + noise, 104),
            quality_run("hash LRS, 4 rows a table", seed, 0.69 + 2 * noise, 104),
        ]
    days = [{"day": d, "next_day_auc": 0.7, "rows_live": 100 * (d + 1)} for d in range(3)]
    evicting = [{**d, "next_day_auc": 0.701, "rows_live": 50} for d in days]
    results_dict = {
        "setting": {"seeds": [0, 1, 2], "fixed_caps": [10, 4]},
        "quality": quality,
        "continual": [
            {"variant": "no eviction", "days": days},
            {"variant": "ttl eviction", "days": evicting},
        ],
    }
    large, small, ttl = setting.claims(results_dict)
    assert "260 rows (10 a table), 3 seeds: test AUC, hash LRS minus fixed, +0.0100" in large.ours
    assert large.verdict.label == HOLDS
    assert small.verdict.label == TOO_FEW_SEEDS  # its seeds disagree in sign: 5 needed
    assert "3 continual days: next-day AUC, ttl minus no eviction, +0.0010" in ttl.ours
    assert "last day 50 rows vs 300 (one seed)" in ttl.ours
    assert ttl.verdict.label == TOO_FEW_SEEDS


def test_direction_is_where_the_point_estimate_lies_against_the_claim():
    assert direction_of(-0.01, "lower") == WITH and direction_of(0.01, "lower") == AGAINST
    assert direction_of(2.5, "higher", 2.4) == WITH and direction_of(2.0, "higher", 2.4) == AGAINST
    assert direction_of(0.0, "higher") == NONE and direction_of(float("nan"), "lower") == NONE
    assert direction_of(-0.15, "within", 0.0, 0.2) == WITH
    assert direction_of(-2.17, "within", 0.0, 0.2) == AGAINST  # better, but not neutral
    with pytest.raises(ValueError):
        direction_of(1.0, "within", 0.0, 0.0)
    # paired by seed as judge pairs them; the spread and the seeds with the paper
    e = Effect.difference({0: 0.51, 1: 0.52, 2: 0.50}, {0: 0.50, 1: 0.51, 2: 0.51}, "loss", "lower")
    assert e.size == pytest.approx(0.01 / 3) and e.direction == AGAINST and e.with_paper == 1
    assert e.describe_spread() == "sd 0.0115; -0.0100 to +0.0100; 1 of 3 seeds with the paper"
    assert Effect.of(6.65, "x", "higher", 2.4, digits=2).describe_size() == "6.65x"
    assert Effect.of([1.0], "x", "higher").describe_spread() == "one seed"


def test_a_holds_against_the_point_estimate_is_refused_and_against_is_marked():
    holds = judge([0.3, 0.31, 0.32], 0.0, "higher")
    against = Effect.of([-0.3, -0.31, -0.32], "units", "higher")
    with pytest.raises(ValueError, match="against the paper"):
        claim("c", holds, "gba", against)
    fails = judge([-0.3, -0.31, -0.32], 0.0, "higher")
    with pytest.raises(ValueError, match="with the paper"):  # nor the other way round
        claim("c", fails, "gba", Effect.of([0.3, 0.31, 0.32], "units", "higher"))
    noise = judge([-0.001, -0.002, -0.0005], 0.0, "higher")
    c = claim("c", noise, "gba", Effect.of([-0.001, -0.002, -0.0005], "units", "higher"))
    assert c.direction == AGAINST and c.label() == f"{WITHIN_NOISE} (against the paper)"
    row = claims_table.render([(fake_report("A", "a"), [c])]).splitlines()[2]
    assert "| **against the paper** |" in row and "(against the paper; effect" in row


def test_evidence_is_stated_and_a_built_in_one_says_what_builds_it_in():
    v, e = judge([1.0], 0.0, "higher"), Effect.of(1.0, "x", "higher")
    with pytest.raises(ValueError, match="mechanism"):
        claim("c", v, "gba", e, evidence=BUILT_IN)
    with pytest.raises(ValueError, match="evidence"):
        claim("c", v, "gba", e, evidence="assumed")
    with pytest.raises(ValueError, match="one line"):
        claim("c", v, "gba", e, evidence=BUILT_IN, mechanism="a\nb")
    c = claim("c", v, "gba", e, evidence=BUILT_IN, mechanism="the injected stragglers")
    assert "| built-in: the injected stragglers |" in claims_table.render(
        [(fake_report("A", "a"), [c])]
    )


def test_every_claim_from_the_committed_results_states_its_evidence_and_direction():
    made = {r.directory: results.claims_of(r) for r in claims_table.reproductions()}
    every = [c for claims in made.values() for c in claims]
    assert len(every) >= 40
    for c in every:
        assert c.evidence in (MEASURED, BUILT_IN) and c.direction in DIRECTIONS, c.claim
        assert c.effect.seeds >= 1 and c.effect.unit.strip()
        assert not (c.verdict.label == HOLDS and c.direction == AGAINST), c.claim
    built_in = {
        (d, c.claim) for d, claims in made.items() for c in claims if c.evidence == BUILT_IN
    }
    for directory, words in (
        ("shadowsync_fig5", "at 2 sync servers FR-EASGD-5's EPS grows less"),
        ("gba_stragglers", "as fast as sync under stragglers"),
        ("psp", "partial pushing (c=28 of 32) takes less time"),
        ("shadowsync_threads", "EPS stops growing at 24"),
    ):
        assert any(d == directory and words in name for d, name in built_in), words
    # the point estimates against the paper that "within noise" or "too few seeds" hid
    by_claim = {c.claim: c for c in every}
    for name in (
        "S-EASGD's eval loss is below the best FR-EASGD's",
        "GBA's staleness decay does better than BSP's same buffer without it",
        "rho closes the gap that no normalization leaves",
        "HT with 10 groups keeps EASGD's loss (within 0.2%)",
    ):
        assert by_claim[name].direction == AGAINST, name
    text = claims_table.section()
    assert text.count("**against the paper**") == sum(c.direction == AGAINST for c in every)
