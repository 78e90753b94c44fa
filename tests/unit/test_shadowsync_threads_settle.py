"""ShadowSync Fig. 8's settling (shadowsync_threads_settle.py): every thread count tuned on
one grid with a seed no claim reads, the claims' runs at each count's chosen rate, and the
report's tuning and flattening tables and settled wording, from synthetic runs."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.repro import settle, shadowsync_threads, shadowsync_threads_settle
from experiments.repro.settled_words import AGAINST_PAPER, WITH_PAPER

THREADS = shadowsync_threads.THREADS
BEST = {1: 0.008, 12: 0.004, 24: 0.002, 32: 0.002, 64: 0.001}  # each count's best rate


def fake_run(run):
    """A synthetic run: the held-out loss lowest at the count's BEST rate, rising with the
    threads; a curve that falls then flattens."""
    import math

    loss = 0.5 + run.threads / 10_000 + abs(math.log2(run.dense_lr / BEST[run.threads])) / 100
    loss += run.seed / 1_000_000
    return dataclasses.asdict(run) | {
        "variant": "S-EASGD",
        "math": "real",
        "cost": "threads",
        "eps": 1.0,
        "average_sync_gap": 4.0,
        "average_sync_gap_per_thread": 1.0,
        "train_loss": loss + 0.1,
        "test_logloss": loss,
        "curve": [[k * run.examples / 4, loss * f] for k, f in ((1, 1.1), (2, 1.01), (3, 1.001))]
        + [[float(run.examples), loss]],
    }


@pytest.fixture
def fake(monkeypatch):
    def in_processes(run, items, progress):
        assert run is shadowsync_threads_settle.run_quality
        return [fake_run(item) for item in items]

    monkeypatch.setattr(shadowsync_threads_settle, "run_in_processes", in_processes)


def test_every_count_is_tuned_on_one_grid_and_the_claims_read_other_seeds(fake):
    base = shadowsync_threads.quality_base(1 << 16)
    out = shadowsync_threads_settle.tune_and_run(base, THREADS, settle.SEEDS, None)
    tuning = {t["threads"]: t for t in out["tuning"]}
    assert {m: tuning[m]["chosen"] for m in THREADS} == BEST
    assert tuning[1]["extensions"] == 1 and not tuning[1]["at_edge"]  # 0.008 at the edge: 0.032
    assert tuning[12]["extensions"] == 0 and "0.016" not in tuning[12]["scores"]
    assert tuning[64]["extensions"] == 1 and "0.00025" in tuning[64]["scores"]
    assert {r["seed"] for r in out["lr_tuning"]} == {shadowsync_threads_settle.TUNE_SEED}
    quality = out["quality"]
    assert len(quality) == len(THREADS) * len(settle.SEEDS)
    assert {r["seed"] for r in quality} == set(settle.SEEDS)
    assert all(r["dense_lr"] == BEST[r["threads"]] for r in quality)
    with pytest.raises(AssertionError, match="no claim reads"):
        shadowsync_threads_settle.tune_and_run(base, THREADS, (0, 5), None)


def test_the_report_shows_the_tuning_the_curves_and_which_way_each_claim_settled(
    fake, monkeypatch, tmp_path
):
    eps_rows = [
        {
            "variant": "S-EASGD",
            "trainers": n,
            "threads": m,
            "seed": 0,
            "math": "priced",
            "eps": 100.0 * n * min(m, 24),
        }
        for n in shadowsync_threads.SERVERS
        for m in THREADS
    ]
    monkeypatch.setattr(shadowsync_threads, "run_in_processes", lambda run, items, p: eps_rows)
    base = shadowsync_threads.quality_base(1 << 16)
    results = shadowsync_threads.run(tmp_path, base=base)
    assert (tmp_path / "curves.png").exists() and (tmp_path / "threads.png").exists()
    text = (tmp_path / "report.md").read_text()
    assert "| 1 | 0.001: " in text and "| 0.008 | no (grid extended 1x) |" in text
    assert "seed 5's run, a seed none of the claims reads" in text
    assert "multiplied or divided by 4 past an edge" in text
    assert "![held-out loss over the run](curves.png)" in text
    assert "| 64 | 0.001 | +0.100% (+0.100% .. +0.100%) | 5 of 5 |" in text
    assert "25 of 25 runs met the criterion." in text
    assert f"(the paper: rising with the threads, mildly): {WITH_PAPER};" in text
    assert text.count("## What a reviewer would still ask") == 1
    assert "65,536 examples one pass (51 iterations a thread at 1 thread, 0.8 at 64)" in text
    assert "tuned at every thread count on one grid" in text and "0.008, tuned at 4" not in text
    from experiments.repro import shadowsync_threads_claims

    train, test, flat = shadowsync_threads_claims.claims(results)
    assert "each count at its tuned dense rate" in test.ours and test.verdict.effect > 0
    assert "(5 seeds)" in test.ours


def test_the_flattening_table_says_which_runs_still_fell():
    results = {"flattening": shadowsync_threads_settle.flattening(), "evaluations": 4}
    falling = [[1.0, 0.7], [2.0, 0.6], [3.0, 0.55], [4.0, 0.5]]
    quality = [{"threads": 1, "seed": s, "dense_lr": 0.004, "curve": falling} for s in (0, 1)]
    text = "\n".join(shadowsync_threads_settle.flattening_table(results, quality, (1,)))
    assert "| 1 | 0.004 | +10.000% (+10.000% .. +10.000%) | 0 of 2 |" in text
    assert "0 of 2 runs met the criterion. The others did not: the largest fall" in text
    rising = [[1.0, 0.5], [3.0, 0.5], [4.0, 0.6]]
    quality = [{"threads": 1, "seed": 0, "dense_lr": 0.004, "curve": rising}]
    text = "\n".join(shadowsync_threads_settle.flattening_table(results, quality, (1,)))
    assert "1 of 1 runs met the criterion. In 1 of them the held-out loss rose" in text


def test_rows_of_reads_tuned_results_and_plain_rows():
    assert shadowsync_threads.rows_of({"rows": [{"a": 1}]}) == [{"a": 1}]
    assert shadowsync_threads.rows_of([{"a": 1}]) == [{"a": 1}]
    assert shadowsync_threads.rows_of({"other": 1}) == []
    assert AGAINST_PAPER.startswith("settled against")


def test_curve_of_ends_with_the_final_loss():
    records = [{"examples": 10, "test_logloss": 0.7}, {"examples": 20, "test_logloss": 0.6}]
    summary = {"examples_trained": 20, "test_logloss": 0.55}
    assert shadowsync_threads_settle.curve_of(records, summary) == [[10.0, 0.7], [20.0, 0.55]]
