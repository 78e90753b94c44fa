"""From numbered records to batches: the driver every reader shares.

A record parser turns one record (a text line, or a tuple of column values) into an
`Example` = (dense values, one bag of ids per categorical feature, label), or raises
`Rejected`. `good_examples` applies the strict/lenient policy and yields every good example
exactly once, in order; `batch_examples` cuts them into `Batch`es of `batch_size` (the last
one may be smaller).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from recsync.data.batch import Batch, collate
from recsync.data.skips import Rejected, SkipReport, settle

# (dense values, bags[f] = ids of categorical feature f, label in {0., 1.})
Example = tuple[list[float], list[list[int]], float]
R = TypeVar("R")


def good_examples(
    numbered_records: Iterable[tuple[int, R | Rejected]],
    parse: Callable[[R], Example],
    *,
    source: str,
    strict: bool,
    skips: SkipReport,
) -> Iterator[Example]:
    """Parse (line number, record) pairs; yield the good examples in order.

    A record may already be a `Rejected` (a lower reader found the line malformed, e.g. a
    CSV row with too many columns): it is settled like a parser's rejection.
    """
    for line, record in numbered_records:
        if isinstance(record, Rejected):
            settle(record, source=source, line=line, strict=strict, skips=skips)
            continue
        try:
            example = parse(record)
        except Rejected as rejected:
            settle(rejected, source=source, line=line, strict=strict, skips=skips)
            continue
        yield example


def batch_examples(examples: Iterable[Example], batch_size: int) -> Iterator[Batch]:
    """Collate examples into batches of `batch_size`; the last batch may be smaller."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    dense_rows: list[list[float]] = []
    bags: list[list[list[int]]] = []
    labels: list[float] = []
    for dense, example_bags, label in examples:
        dense_rows.append(dense)
        bags.append(example_bags)
        labels.append(label)
        if len(labels) == batch_size:
            yield collate(dense_rows, bags, labels)
            dense_rows, bags, labels = [], [], []
    if labels:
        yield collate(dense_rows, bags, labels)


def collated(examples: Iterable[Example]) -> Batch | None:
    """The examples as one batch of their number (None: there are none)."""
    found = list(examples)
    if not found:
        return None
    dense_rows, bags, labels = zip(*found, strict=True)
    return collate(list(dense_rows), list(bags), list(labels))


def parse_lines(
    lines: Iterable[str],
    parse: Callable[[str], Example],
    *,
    source: str,
    batch_size: int,
    strict: bool = False,
    skips: SkipReport | None = None,
    first_line: int = 1,
) -> Iterator[Batch]:
    """Batches of the good lines of a text stream; skips go to `skips` (pass one to read it)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    skips = SkipReport() if skips is None else skips
    numbered = enumerate(lines, start=first_line)
    examples = good_examples(numbered, parse, source=source, strict=strict, skips=skips)
    return batch_examples(examples, batch_size)
