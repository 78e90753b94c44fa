"""A reproduction's headline claims, as its report judges them (issue 55, part 5): each
report module with a `claims(results) -> list[Claim]` computes them from its stored results
file with the same functions its report text calls, and the docs' claims table
(docgen/claims_table.py) is rendered from them, so no figure of it is typed by hand."""

from __future__ import annotations

from dataclasses import dataclass

from experiments.repro.verdict import Verdict


@dataclass(frozen=True)
class Claim:
    """One claim of a paper against our measurement of it.

    `claim`: the paper's claim in words; `paper`: the paper's figure or setting in words;
    `ours`: our setting in words with our number(s); `verdict`: `verdict.judge`'s on it;
    `bears_on`: the strategy or choice it informs ("gba", "async", "controller",
    "hash embeddings", ...), a short lowercase key the docs link to.
    """

    claim: str
    paper: str
    ours: str
    verdict: Verdict
    bears_on: str

    def __post_init__(self) -> None:
        if not self.bears_on or self.bears_on != self.bears_on.strip().lower():
            raise ValueError(f"bears_on must be a short lowercase key, not {self.bears_on!r}")
        for name in ("claim", "paper", "ours"):
            if not getattr(self, name).strip():
                raise ValueError(f"a claim's {name} must not be empty")
