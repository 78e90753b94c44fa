"""advise's terminal lines for candidates that do not apply: one line per reason, with
how many and which strategies, where a line per candidate would bury the table."""

from __future__ import annotations

from pathlib import Path

from recsync.app.advise.candidates import Refusal
from recsync.app.advise.report import refusal_lines

READERS = "cluster.num_readers = 4: more readers than the job's 2 trainers"
CORES = "needs 9 cores, the cluster has 8"


def test_refusals_fold_into_one_line_per_reason_most_common_first():
    refused = [Refusal(name, f"{name} 2x2 e{e} r4", READERS) for name in "abcdef" for e in (2, 4)]
    refused.append(Refusal("a", "a 8x2 e2", CORES))
    lines = refusal_lines(refused, Path("out/advice.json"))
    assert lines == [
        "not applicable: 13 candidate(s), for 2 reason(s) (each in out/advice.json, "
        "not_applicable):",
        f"  12 x {READERS} (a, b, c, d and 2 more)",
        f"  1 x {CORES} (a)",
    ]


def test_no_refusal_no_line():
    assert refusal_lines([], Path("advice.json")) == []
