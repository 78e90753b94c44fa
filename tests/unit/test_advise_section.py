"""The generated section "What `recsync advise` measures on the default job"
(docgen/advise_section.py): rendered from a small synthetic advice.json and stamp.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docgen import advise_runs, advise_section
from recsync.app.advise.cluster import load_cluster


def _row(rank: int, strategy: str, eps: float | None, **more: Any) -> dict[str, Any]:
    row = {
        "rank": rank,
        "group": "quality within noise of the best",
        "strategy": strategy,
        "candidate": f"{strategy} 4x2 e2 d1",
        "trainers": 4,
        "workers_per_trainer": 2,
        "embedding_servers": 2,
        "dense_servers": 1,
        "eps": eps,
        "time_per_pass_s": None if eps is None else 1_000_000 / eps,
        "eps_by_condition": {} if eps is None else {"clean": eps},
        "staleness_kind": "staleness",
        "staleness": 1.25,
        "bottleneck": "trainers",
        "bottleneck_load": 0.874,
        "test_auc": None,
        "seeds": 0,
        "quality_from": None,
    }
    return row | more


ADVICE = {
    "examples_per_pass": 1_000_000,
    "conditions": ["clean", "stragglers"],
    "rows": [  # not in rank order: the section sorts them
        _row(3, "sync", 9_000.4, group="quality not measured", dense_servers=2, readers=2),
        _row(
            1,
            "gba",
            12_345.6,
            eps_by_condition={"clean": 12_345.6, "stragglers": 10_001.2},
            test_auc=[0.70123, 0.00346],
            seeds=2,
        ),
        _row(
            2,
            "gba",
            11_000.0,
            candidate="gba 2x2 e2 d1",
            trainers=2,
            test_auc=[0.70123, 0.00346],
            seeds=2,
            quality_from="gba 4x2 e2 d1",
        ),
        _row(
            4,
            "ma",
            8_000.0,
            dense_servers=None,
            staleness_kind="sync gap",
            staleness=1.78,
            test_auc=[0.61, 0.0],
            seeds=1,
            quality_from="ma 8x2 e2",
            group="quality measurably worse than the best",
        ),
        _row(5, "psp", None, group="speed not measured", bottleneck=None, staleness=None),
    ],
    "not_applicable": [
        {"strategy": "hierarchical", "point": "8x2 e2", "reason": "strategy.groups: too many"}
    ],
    "not_measured": ["psp 4x2 e2 d1 (clean)"],
}
STAMP = {
    "command": "recsync advise --cluster examples/cluster.toml --out reports/advise/x",
    "made_by": "python docgen/advise_runs.py",
    "commit": "0123456789abcdef0123",
    "dirty": False,
    "code": "0.1.0+abc",
    "cluster_file": "examples/cluster.toml",
    "cluster": {
        "machines": {
            "count": 8,
            "cores": 16,
            "nic_gbps": 10.0,
            "latency_us": 50.0,
            "preset": "xeon-16core",
            "profile": None,
        },
        "grid": {"trainers": [2, 4], "embedding_servers": None, "dense_servers": [1]},
        "condition": [
            {"name": "stragglers", "kind": "stragglers", "fraction": 0.25, "slowdown": 3.0},
            {"name": "slow", "kind": "slow_server", "role": "dense", "slowdown": 4.0},
        ],
    },
    "preset_source": "a 16-core machine",
    "options": {
        "slice_examples": 16384,
        "batches_per_thread": 6,
        "quality_examples": 100000,
        "quality_test_examples": 5000,
        "seeds": [0, 1],
    },
    "machine": {"cpus": 2, "cpu": "AMD EPYC"},
    "started_utc": "2026-11-29T18:00:00Z",
    "wall_s": 205.0,
    "points_measured": 158,
    "points_cached": 0,
}


def _write(root: Path, preset: str, stamp: bool = True, figure: bool = True) -> None:
    folder = root / advise_section.FOLDER / preset
    folder.mkdir(parents=True)
    (folder / advise_section.RESULTS).write_text(json.dumps(ADVICE))
    if stamp:
        (folder / advise_section.STAMP).write_text(json.dumps(STAMP))
    if figure:
        (folder / advise_section.FIGURE).write_bytes(b"\x89PNG")


def _table_rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]


def test_one_row_a_strategy_in_rank_order_with_formatted_numbers(tmp_path: Path) -> None:
    _write(tmp_path, "xeon-16core")
    text = advise_section.preset_section("xeon-16core", tmp_path, base="../")
    rows = _table_rows(text)
    assert [(row[0], row[1]) for row in rows] == [
        ("1", "`gba`"),
        ("3", "`sync`"),
        ("4", "`ma`"),
        ("5", "`psp`"),
    ]
    gba, sync, ma, psp = rows
    assert gba[2:] == [
        "4 x 2",
        "2",
        "1",
        "job's",  # readers: the grid left them to the job
        "81.0 s",  # 1,000,000 / 12,345.6 examples/s
        "12,346",
        "10,001",
        "0.7012 ± 0.0035",
        "1.25 (staleness)",
        "trainer 87%",
        "within noise",
    ]
    assert sync[4:6] == ["2", "2"]  # dense servers, readers
    assert sync[8] == "-" and sync[-1] == "not measured"  # stragglers not measured there
    assert ma[4] == "-" and ma[9] == "0.6100*" and ma[-1] == "worse"  # one seed, inherited
    assert psp[6:8] == ["-", "-"] and psp[-1] == "speed not measured"
    assert "\\* quality measured at that strategy's fastest candidate" in text
    assert "**Advice**: `gba 4x2 e2 d1` (4 trainers of 2 worker threads)" in text
    assert "(1,000,000 examples) in 81.0 s predicted" in text
    assert "- `hierarchical` 8x2 e2: strategy.groups: too many" in text
    assert "**Not measured** (budget spent): `psp 4x2 e2 d1 (clean)`." in text
    assert "4 strategies; 5 candidates ranked in all" in text
    assert "![advise on xeon-16core" in text
    assert "(../results/advise/xeon-16core/advice.png)" in text


def test_the_cluster_and_what_made_it_come_from_the_stamp(tmp_path: Path) -> None:
    _write(tmp_path, "xeon-16core")
    text = advise_section.preset_section("xeon-16core", tmp_path)
    assert "8 machines of 16 cores, 10 Gb/s network cards, 50 us latency" in text
    assert "preset `xeon-16core`: a 16-core machine" in text
    assert "trainers [2, 4], dense servers [1]" in text
    assert "stragglers (25% of the worker threads 3x slower)" in text
    assert "slow (the server holding the dense part 4x slower)" in text
    assert "at commit `0123456789ab`, code `0.1.0+abc`" in text
    assert "158 points measured, 0 read back" in text and "3.4 min wall" in text
    assert "seeds 0, 1" in text


def test_absent_results_say_how_to_generate_them(tmp_path: Path) -> None:
    _write(tmp_path, "xeon-16core", stamp=False, figure=False)
    text = advise_section.section(tmp_path)
    assert "### `dev-2core`\n\nNot generated yet: `reports/advise/dev-2core/advice.json`" in text
    assert "`make advise-docs` (or `python docgen/advise_runs.py dev-2core`)" in text
    assert "The cluster is not recorded" in text and "![" not in text
    assert [uri for uri, _ in advise_section.figures(tmp_path)] == []


def test_the_committed_results_render(tmp_path: Path) -> None:
    """The section from reports/advise as the site shows it: every preset rendered (or
    said to be missing), a figure for each results file."""
    text = advise_section.section()
    for preset in advise_section.PRESETS:
        assert f"### `{preset}`" in text
    shown = {uri for uri, _ in advise_section.figures()}
    for preset in advise_section.PRESETS:
        if (advise_section.ROOT / advise_section.FOLDER / preset / "advice.json").is_file():
            assert f"results/advise/{preset}/advice.png" in shown
            assert "**Advice**" in advise_section.preset_section(preset)


def test_each_run_s_cluster_file_reads_and_has_its_folder_s_preset() -> None:
    assert tuple(advise_runs.RUNS) == advise_section.PRESETS
    for preset, cluster_file in advise_runs.RUNS.items():
        cluster = load_cluster(advise_section.ROOT / cluster_file)
        assert cluster.machines.preset == preset, cluster_file
        assert cluster.condition, cluster_file  # the section shows each condition's speed
