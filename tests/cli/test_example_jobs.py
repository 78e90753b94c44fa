"""The example jobs of examples/ on small files of their shapes (tests/support/
example_data.py): `recsync data inspect` reads each file with its job's schema and skips
nothing, and `recsync simulate` trains each job on it to a test AUC clearly above 0.5,
close to what examples/results.json records (and docs/example-jobs.md shows)."""

from __future__ import annotations

import json
import math
import re

import pytest
from example_data import (
    ROOT,
    SHAPES,
    TABLE_END,
    TABLE_START,
    command,
    results_table,
    run_example,
)
from test_cli import invoke

RESULTS = json.loads((ROOT / "examples" / "results.json").read_text())
RECORDED = {r["shape"]: r for r in RESULTS}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_inspect_reads_the_file_with_the_jobs_schema_skipping_nothing(shape, tmp_path):
    file, write = SHAPES[shape]
    write(tmp_path / file)
    job = ROOT / "examples" / f"{shape}.toml"
    result = invoke("data", "inspect", str(tmp_path / file), "-c", str(job))
    assert result.exit_code == 0, result.output
    assert re.search(r"rows +│ 4,000 ", result.output), result.output
    assert re.search(r"skipped lines +│ none ", result.output), result.output


def test_inspect_with_no_schema_reads_avazus_negative_codes_as_a_run_would(tmp_path):
    """Its C20 holds -1: an integer id column, inferred, whose -1 is a hash table's key
    (file data's tables), not a skipped line."""
    SHAPES["avazu"][1](tmp_path / "avazu.csv")
    result = invoke("data", "inspect", str(tmp_path / "avazu.csv"), "--label", "click")
    assert result.exit_code == 0, result.output
    assert re.search(r"skipped lines +│ none ", result.output), result.output
    assert re.search(r"│ C20 +│ int64 +│ categorical ", result.output), result.output


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_example_job_trains_on_its_shape(shape, tmp_path):
    reached = run_example(shape, tmp_path)
    assert reached["exit_code"] == 0, reached["output"]
    assert reached["skipped"] == 0 and reached["examples_trained"] > 3000
    assert math.isfinite(reached["train_loss"]) and math.isfinite(reached["test_logloss"])
    assert reached["test_auc"] > 0.65, reached  # the file's labels follow its ids
    assert reached["test_ne"] < 1.0  # better than the positive rate alone
    recorded = RECORDED[shape]
    assert recorded["command"] == reached["command"] == " ".join(command(shape))
    # the recorded numbers are this run's, up to what another machine's math may move
    assert abs(reached["test_auc"] - recorded["test_auc"]) < 0.02, (reached, recorded)
    assert reached["teacher_auc"] == recorded["teacher_auc"]


def test_the_docs_table_is_the_recorded_results():
    assert [r["shape"] for r in RESULTS] == list(SHAPES)
    page = (ROOT / "docs" / "example-jobs.md").read_text()
    shown = page[page.index(TABLE_START) : page.index(TABLE_END) + len(TABLE_END)]
    assert shown == results_table(RESULTS), "run python examples/run_examples.py"
    for shape in SHAPES:
        assert f"`examples/{shape}.toml`" in page
