"""The fields of a libffm file (`label field:index:value ...`) as its first lines show them.

A libffm line names each token's field, so the number of fields is read from the data:
one more than the largest field number in the first SAMPLE_LINES lines. A run with no
model.num_tables takes it from there (minus data.libffm.dense_fields) and records it in
its config; a later line with a larger field is skipped as "bad_field" (the message says
to set model.num_tables). Tokens that are not `field:index:value` with a decimal field
are passed over here; the reader judges them.

`data inspect` shows each field: the lines holding it, its distinct indices, and whether
it looks like a measure (one index a line, always the same, with values other than 0 and
1: libffm's way of writing a number), which only data.libffm.dense_fields can declare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from recsync.io.readers import open_text

SAMPLE_LINES = 65_536
INDEX_KINDS_KEPT = 2  # a field of more distinct indices than this is not a measure


@dataclass
class FieldSeen:
    """What the sampled lines hold of one field."""

    lines: int = 0
    tokens: int = 0
    indices: set[str] = field(default_factory=set)
    values_not_binary: bool = False

    def looks_dense(self) -> bool:
        """One index, once a line, with values other than 0 and 1: a measure."""
        return len(self.indices) == 1 and self.tokens == self.lines and self.values_not_binary


@dataclass
class LibFFMFields:
    """The fields found in a libffm file's first `lines` lines."""

    lines: int
    fields: dict[int, FieldSeen]

    @property
    def num_fields(self) -> int:
        return max(self.fields) + 1 if self.fields else 0


def libffm_fields(path: str | Path, max_lines: int | None = None) -> LibFFMFields:
    """The fields of the first `max_lines` (SAMPLE_LINES) lines of a libffm file (plain or
    gzip)."""
    max_lines = SAMPLE_LINES if max_lines is None else max_lines
    fields: dict[int, FieldSeen] = {}
    read = 0
    with open_text(path) as lines:
        for read, line in enumerate(lines, start=1):  # noqa: B007 - read after the loop
            if read > max_lines:
                read -= 1
                break
            in_line: set[int] = set()
            for token in line.split("#", 1)[0].split()[1:]:
                parts = token.split(":")
                if len(parts) != 3 or not parts[0].isdecimal():
                    continue
                number = int(parts[0])
                seen = fields.setdefault(number, FieldSeen())
                seen.tokens += 1
                if len(seen.indices) <= INDEX_KINDS_KEPT:
                    seen.indices.add(parts[1])
                seen.values_not_binary |= parts[2] not in ("0", "1", "0.0", "1.0")
                if number not in in_line:
                    in_line.add(number)
                    seen.lines += 1
    return LibFFMFields(read, fields)
