"""Criteo lines into batches a block of lines at a time: the reader's hot path for the
format DLRM is measured on.

A block (BLOCK_LINES lines) is scanned by compiled code over its bytes (scan.py),
which keeps the plain lines: a label "0" or "1", integers and hexadecimal ids that fit a
machine word, empty fields as the row parser reads them. Their integers become dense values
by the row parser's own rule (`count_feature`, computed once per distinct count), their
ids table rows (int(x, 16) % table_rows[f]) or keys in keyed mode (data/keys.py). Every
other line of the block (an empty line, a bad value, a longer number, ...) goes through
`CriteoLineParser` and the skip policy (`good_examples`), in line order, so both paths give
the same examples, skips, messages and line numbers (tested), in fixed and in keyed mode.
A strict run stops at the same line with the same error, only without training the good
lines of that block before it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np
import torch

from recsync.data.batch import Batch
from recsync.data.keys import integer_ids, prefix
from recsync.data.records import collated, good_examples
from recsync.data.skips import SkipReport
from recsync.io.formats.criteo.rows import CriteoLineParser, CriteoSchema, count_feature
from recsync.io.formats.criteo.scan import scan_block
from recsync.io.line_bytes import block_bytes

BLOCK_LINES = 8192
COUNT_TABLE = 1 << 16  # the dense values of the counts below it, computed once


@functools.cache
def _count_table() -> np.ndarray:
    return np.array([count_feature(count) for count in range(COUNT_TABLE)], dtype=np.float64)


def dense_values(counts: np.ndarray) -> np.ndarray:
    """count_feature of every count (uint64), as float64."""
    table = _count_table()
    small = counts < np.uint64(COUNT_TABLE)
    values: np.ndarray = table[np.where(small, counts, np.uint64(0)).astype(np.intp)]
    if not small.all():
        distinct, inverse = np.unique(counts[~small], return_inverse=True)
        found = np.array([count_feature(c) for c in distinct.tolist()], dtype=np.float64)
        values[~small] = found[inverse]
    return values


class CriteoBlockParser:
    """Turns blocks of numbered Criteo lines of one schema into batches (see the module)."""

    def __init__(self, schema: CriteoSchema):
        self.schema = schema
        self.parser = CriteoLineParser(schema)
        self.rows = np.array(schema.table_rows, dtype=np.uint64)
        self.prefixes = np.array(
            [prefix(f) % 2**64 for f in range(len(schema.table_rows))], dtype=np.uint64
        )

    def _ids(self, values: np.ndarray) -> np.ndarray:
        """Lines x features unsigned ids as table rows, or keys in keyed mode (int64)."""
        if self.schema.keyed:
            id56 = integer_ids(values.reshape(-1)).reshape(values.shape)
            keys: np.ndarray = (id56 | self.prefixes).view(np.int64)
            return keys
        return (values % self.rows).astype(np.int64)

    def block(
        self, numbered: list[tuple[int, str]], *, source: str, strict: bool, skips: SkipReport
    ) -> Batch | None:
        """The good examples of a block of (line number, line) pairs, or None: there are none."""
        schema = self.schema
        buf, ends = block_bytes([line for _, line in numbered])
        plain, labels, counts, values, present = scan_block(
            buf, ends, schema.num_integer, len(schema.table_rows)
        )
        dense = dense_values(counts)
        ids = self._ids(values)
        keep = plain.copy()
        for i in np.flatnonzero(~plain).tolist():
            found = list(
                good_examples([numbered[i]], self.parser, source=source, strict=strict, skips=skips)
            )
            if found:
                row_dense, bags, label = found[0]
                keep[i], dense[i], labels[i] = True, row_dense, label
                present[i] = [bool(bag) for bag in bags]
                ids[i] = [bag[0] if bag else 0 for bag in bags]
        m = int(keep.sum())
        if m == 0:
            return None
        if m < keep.size:
            dense, labels, ids, present = dense[keep], labels[keep], ids[keep], present[keep]
        by_feature = present.T  # ids feature-major, each feature's in line order
        offsets = torch.zeros(by_feature.size + 1, dtype=torch.int64)
        torch.cumsum(torch.from_numpy(by_feature.reshape(-1).astype(np.int64)), 0, out=offsets[1:])
        return Batch(
            dense=torch.from_numpy(dense.astype(np.float32)),
            ids=torch.from_numpy(ids.T[by_feature]),
            offsets=offsets,
            labels=torch.from_numpy(labels),
        )


def criteo_blocks(
    numbered_lines: Iterable[tuple[int, str]],
    schema: CriteoSchema,
    *,
    source: str,
    strict: bool,
    skips: SkipReport,
    columnar: bool = True,
) -> Iterator[Batch]:
    """The good examples of (line number, line) pairs, BLOCK_LINES lines at a time, as
    batches of any size; `columnar` False: every line through the row parser."""
    parser = CriteoBlockParser(schema)
    numbered = iter(numbered_lines)
    while block := list(islice(numbered, BLOCK_LINES)):
        if columnar:
            batch = parser.block(block, source=source, strict=strict, skips=skips)
        else:
            examples = good_examples(
                block, parser.parser, source=source, strict=strict, skips=skips
            )
            batch = collated(examples)
        if batch is not None and batch.batch_size:
            yield batch
