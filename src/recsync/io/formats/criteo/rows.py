"""Criteo TSV lines: label, 13 integer features, 26 hexadecimal categorical features.

A line is `label \\t I1 .. I13 \\t C1 .. C26` (tab-separated, 40 fields). Empty fields are
real: an empty integer is 0, an empty categorical is an empty bag (no id; it pools to zero).
A line whose trailing empty fields were stripped (fewer than 40 fields) is valid: the missing
fields count as empty. The line terminator (\\n or \\r\\n) is removed, nothing else.

- label: exactly "0" or "1" ("missing_label" if empty, else "bad_label").
- integer I_j: a decimal integer ("bad_integer" otherwise); negatives are clipped to 0; the
  dense feature is log(1 + x) as float32.
- categorical C_f: a hexadecimal string ("bad_hex" otherwise); id = int(x, 16) % table_rows[f],
  or with `keyed` the key of int(x, 16) for feature f (data/keys.py).
- more than 40 fields: "too_many_fields". An empty line: "empty_line".

Field names in messages follow the Criteo convention: "label", "I1".."I13", "C1".."C26".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from recsync.data.batch import Batch
from recsync.data.keys import check_features, integer_id, key
from recsync.data.records import Example, parse_lines
from recsync.data.skips import Rejected, SkipReport

INTEGER = re.compile(r"-?[0-9]+")  # what an integer field holds (fullmatch)
HEX = re.compile(r"[0-9a-fA-F]+")  # what a categorical field holds (fullmatch)
_EXACT_FLOAT = 2**53


def count_feature(count: int) -> float:
    """An integer feature's dense value: log(1 + count), negatives clipped to 0 (log1p is
    exact for floats; math.log takes ints of any size)."""
    if count <= 0:
        return 0.0
    return math.log1p(count) if count < _EXACT_FLOAT else math.log(count + 1)


@dataclass(frozen=True)
class CriteoSchema:
    """Table sizes of the categorical features (one per feature) and the integer count.

    keyed: emit feature-prefixed keys (data/keys.py) instead of int(x, 16) % table_rows[f];
    table_rows then only gives the number of categorical features.
    """

    table_rows: tuple[int, ...]
    num_integer: int = 13
    keyed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "table_rows", tuple(int(r) for r in self.table_rows))
        if not self.table_rows or any(r < 1 for r in self.table_rows):
            raise ValueError(f"criteo table_rows must be non-empty and >= 1: {self.table_rows}")
        if self.num_integer < 0:
            raise ValueError(f"criteo num_integer must be >= 0, got {self.num_integer}")
        if self.keyed:
            check_features(len(self.table_rows), "criteo schema")

    @property
    def num_fields(self) -> int:
        """Fields on a full line: label + integers + categoricals (40 for Criteo)."""
        return 1 + self.num_integer + len(self.table_rows)


class CriteoLineParser:
    """Parses one Criteo line into an Example, or raises Rejected."""

    def __init__(self, schema: CriteoSchema):
        self.schema = schema
        self._first_categorical = 1 + schema.num_integer

    def __call__(self, text: str) -> Example:
        text = text.rstrip("\r\n")
        if not text:
            raise Rejected("empty_line", "", "the line is empty")
        fields = text.split("\t")
        schema = self.schema
        if len(fields) > schema.num_fields:
            raise Rejected(
                "too_many_fields",
                "",
                f"{len(fields)} tab-separated fields, at most {schema.num_fields} allowed",
            )
        label_text = fields[0]
        if label_text == "1" or label_text == "0":
            label = float(label_text)
        elif not label_text:
            raise Rejected("missing_label", "label", "the label is empty")
        else:
            raise Rejected("bad_label", "label", f"label {label_text!r} is not 0 or 1")
        first_cat = self._first_categorical
        dense = [0.0] * schema.num_integer
        for j, value in enumerate(fields[1:first_cat]):
            if not value:
                continue
            if not INTEGER.fullmatch(value):
                raise Rejected("bad_integer", f"I{j + 1}", f"{value!r} is not an integer")
            dense[j] = count_feature(int(value))
        bags: list[list[int]] = [[] for _ in schema.table_rows]
        for f, value in enumerate(fields[first_cat:]):
            if not value:
                continue
            if not HEX.fullmatch(value):
                raise Rejected("bad_hex", f"C{f + 1}", f"{value!r} is not hexadecimal")
            if schema.keyed:
                bags[f].append(key(f, integer_id(int(value, 16))))
            else:
                bags[f].append(int(value, 16) % schema.table_rows[f])
        return dense, bags, label


def criteo_batches(
    lines: Iterable[str],
    schema: CriteoSchema,
    *,
    source: str = "<criteo>",
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
    first_line: int = 1,
) -> Iterator[Batch]:
    """Batches of the good Criteo lines, in order; skipped lines are counted in `skips`."""
    return parse_lines(
        lines,
        CriteoLineParser(schema),
        source=source,
        batch_size=batch_size,
        strict=strict,
        skips=skips,
        first_line=first_line,
    )
