"""Malformed input: strict mode raises, lenient mode (the default) skips and counts by reason.

A record parser raises `Rejected(reason, field, message)` for a malformed line or row. The
driver (`recsync.data.records.good_examples`) then either raises `DataError` naming the
file, the line (1-based; for Parquet the row number) and the field (strict), or skips the
line and counts it in a `SkipReport` (lenient). A good line is never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from recsync.errors import DataError

# Every reason a reader may skip a line for, with what it means.
REASONS: dict[str, str] = {
    "empty_line": "the line (or every declared column of the row) is empty",
    "missing_label": "the label is empty or absent",
    "bad_label": "the label is not one of the accepted values",
    "too_many_fields": "the line has more fields than the format allows",
    "wrong_field_count": "a CSV row has a different number of columns than the header",
    "bad_integer": "an integer field is not a decimal integer",
    "bad_hex": "a categorical field is not a hexadecimal string",
    "bad_token": "a token is not of the form index:value (libSVM) or field:index:value (libFM)",
    "bad_index": "a feature index is not a non-negative integer",
    "bad_field": "a libFM field number is not an integer in [0, number of fields)",
    "duplicate_index": "the same feature index (or dense field) occurs twice on one line",
    "bad_value": "a value is not a number",
    "nan_value": "a value is NaN or infinite",
    "missing_value": "a dense value is null and the schema gives no fill value",
    "bad_id": "a categorical id is not a non-negative integer (or a string, for hashed columns)",
}


class Rejected(Exception):
    """A record parser's verdict that one line is malformed: why, in which field, details."""

    def __init__(self, reason: str, field: str, message: str):
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.field = field
        self.message = message


@dataclass
class SkipReport:
    """Lines skipped in lenient mode: a count per reason and where each reason first occurred.

    counts: reason -> number of lines skipped for it.
    first:  reason -> "file F, line L, field X: message" of its first occurrence.
    """

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, rejected: Rejected, *, source: str, line: int) -> None:
        """Count one skipped line."""
        reason = rejected.reason
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if reason not in self.first:
            where = DataError(rejected.message, source=source, line=line, field=rejected.field)
            self.first[reason] = str(where)

    @property
    def total(self) -> int:
        """Number of lines skipped, all reasons together."""
        return sum(self.counts.values())

    def summary(self) -> str:
        """One human-readable paragraph: total, counts by reason, first occurrence of each."""
        if not self.counts:
            return "no lines skipped"
        by_reason = ", ".join(f"{r} {n}" for r, n in sorted(self.counts.items()))
        firsts = "; ".join(f"first {r}: {self.first[r]}" for r in sorted(self.first))
        return f"skipped {self.total} lines ({by_reason}); {firsts}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"total": n, "by_reason": {...}, "first": {...}}."""
        return {"total": self.total, "by_reason": dict(self.counts), "first": dict(self.first)}


def settle(rejected: Rejected, *, source: str, line: int, strict: bool, skips: SkipReport) -> None:
    """Strict: raise DataError naming file, line and field. Lenient: count the skip."""
    if strict:
        raise DataError(
            f"{rejected.message} [{rejected.reason}]",
            source=source,
            line=line,
            field=rejected.field,
        ) from None
    skips.add(rejected, source=source, line=line)


@dataclass
class LineSkips(SkipReport):
    """A skip report that also notes the line numbers it counted (`lines`) and why
    (`reasons`)."""

    lines: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, rejected: Rejected, *, source: str, line: int) -> None:
        super().add(rejected, source=source, line=line)
        self.lines.append(line)
        self.reasons.append(rejected.reason)


@dataclass
class ShareSkips(SkipReport):
    """A reader's skips over its pieces; `first_at`: where each reason's first occurrence
    is, (file index, line number), for merging with other readers' reports."""

    first_at: dict[str, tuple[int, int]] = field(default_factory=dict)

    def fold(self, piece: LineSkips, file_index: int) -> None:
        """Count the skips of one piece of file `file_index`."""
        for reason, count in piece.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + count
        for reason, text in piece.first.items():
            line = min(n for n, r in zip(piece.lines, piece.reasons, strict=True) if r == reason)
            self._first(reason, (file_index, line), text)

    def _first(self, reason: str, at: tuple[int, int], text: str) -> None:
        if reason not in self.first_at or at < self.first_at[reason]:
            self.first_at[reason], self.first[reason] = at, text

    def as_dict(self) -> dict[str, Any]:
        """`SkipReport.as_dict` with where each reason first occurred (for merging)."""
        at = {reason: list(where) for reason, where in self.first_at.items()}
        return {**super().as_dict(), "first_at": at}

    @classmethod
    def from_dict(cls, report: dict[str, Any]) -> ShareSkips:
        at = {reason: (int(f), int(n)) for reason, (f, n) in report["first_at"].items()}
        return cls(dict(report["by_reason"]), dict(report["first"]), at)

    def merged(self, others: Iterable[ShareSkips]) -> ShareSkips:
        """This report and `others` as one: counts summed, the earliest first occurrences."""
        out = ShareSkips(dict(self.counts), dict(self.first), dict(self.first_at))
        for other in others:
            for reason, count in other.counts.items():
                out.counts[reason] = out.counts.get(reason, 0) + count
            for reason, at in other.first_at.items():
                out._first(reason, at, other.first[reason])
        return out
