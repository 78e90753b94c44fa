"""The claims table: one row per headline claim of every reproduction whose report computes
its claims (`Report.claims`), rendered when the site is built from the results files under
reports/, so no figure in it is typed by hand. Each row says what kind of evidence the claim
is (measured, or built in by the simulator or an injected fault, with the mechanism), our
effect (its size, its spread over the seeds, its direction against the paper's claim) and
the verdict, marked "(against the paper)" where the point estimate lies against it. A page
includes it where it holds MARKER (docs/choosing-a-strategy.md); the hook (docgen/hooks.py)
puts it there. The reproductions whose reports compute no claims yet are named under the table."""

from __future__ import annotations

import re
from collections.abc import Sequence

from docgen import results
from docgen.markdown import cell
from experiments.repro import REPRODUCTIONS
from experiments.repro.claims import AGAINST, BUILT_IN, Claim
from experiments.repro.verdict import NOISE

MARKER = "<!-- claims table (docgen/claims_table.py) -->"
HEADER = (
    "| bears on | reproduction | claim | paper | ours | evidence | direction | size | spread "
    "| verdict |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
)


def anchor(bears_on: str) -> str:
    """The id of the first row on `bears_on` ("hash embeddings" -> "claims-hash-embeddings"):
    a page links a statement about a strategy to `#claims-<key>`."""
    return "claims-" + re.sub(r"[^a-z0-9]+", "-", bears_on.lower()).strip("-")


def _verdict(claim: Claim) -> str:
    """`**within noise** (against the paper; effect -0.0015 against 2 x spread 0.0010,
    5 seeds)`: the label in bold, the direction where it is against, `judge`'s figures."""
    v = claim.verdict
    seeds = f"{v.seeds} seed{'s' if v.seeds != 1 else ''}"
    against = f"{AGAINST}; " if claim.direction == AGAINST else ""
    return (
        f"**{v.label}** ({against}effect {v.effect:+.4f} against {NOISE:g} x spread "
        f"{v.spread:.4f}, {seeds})"
    )


def _evidence(claim: Claim) -> str:
    if claim.evidence == BUILT_IN:
        return f"built-in: {claim.mechanism}"
    return claim.evidence


def _direction(claim: Claim) -> str:
    """The direction, in bold where the point estimate is against the paper."""
    return f"**{AGAINST}**" if claim.direction == AGAINST else claim.direction


def _size(claim: Claim) -> str:
    """Our number and what the paper's claim asks of it: `+0.0458 eval logloss (paper: < 0)`."""
    return f"{claim.effect.describe_size()} (the claim: {claim.effect.describe_expect()})"


def cells(claim: Claim) -> list[str]:
    """A claim's cells after its report's: claim, paper, ours, evidence, direction, size,
    spread, verdict (escaped for a table)."""
    text = (claim.claim, claim.paper, claim.ours, _evidence(claim))
    return [
        *(cell(c) for c in text),
        _direction(claim),
        cell(_size(claim)),
        cell(claim.effect.describe_spread()),
        _verdict(claim),
    ]


def render(
    claimed: Sequence[tuple[results.Report, Sequence[Claim]]],
    unclaimed: Sequence[results.Report] = (),
    base: str = "",
) -> str:
    """The table: rows grouped by what they bear on (in order of the key), each linking to
    its report's page (`base` + the page's path: the including page's way to the site's
    root); then a line naming the reports `unclaimed`."""
    rows = [(claim, report) for report, claims in claimed for claim in claims]
    rows.sort(key=lambda row: row[0].bears_on)  # stable: a report's claims keep their order
    lines = list(HEADER)
    seen: set[str] = set()
    for claim, report in rows:
        key = claim.bears_on
        mark = f'<span id="{anchor(key)}"></span>' if key not in seen else ""
        seen.add(key)
        link = f"[{cell(report.title)}]({base}{report.page})"
        lines.append(f"| {mark}`{cell(key)}` | {link} | " + " | ".join(cells(claim)) + " |")
    if not rows:
        lines = ["No reproduction computes its claims yet."]
    if unclaimed:
        named = ", ".join(f"[{cell(r.title)}]({base}{r.page})" for r in unclaimed)
        lines += ["", f"Claims not yet generated: {named}."]
    return "\n".join(lines) + "\n"


def reproductions() -> list[results.Report]:
    """The rendered reports that are a reproduction's (the benchmarks' are not)."""
    dirs = {r.report_dir.rstrip("/").removeprefix("reports/") for r in REPRODUCTIONS.values()}
    return [report for report in results.REPORTS_RENDERED if report.directory in dirs]


def section(base: str = "") -> str:
    """The table as the site shows it, from the results files under reports/."""
    claimed, unclaimed = [], []
    for report in reproductions():
        made = results.claims_of(report)
        if made:
            claimed.append((report, made))
        else:  # no claims() yet, results older than it (they give none), or none yet
            unclaimed.append(report)
    return render(claimed, unclaimed, base)
