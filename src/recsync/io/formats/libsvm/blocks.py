"""libSVM / libFM and libffm lines into batches a block of lines at a time: the reader's hot
path for these formats.

A block (BLOCK_LINES lines) is tokenized by a compiled scanner over its bytes
(scan.py), which keeps the plain lines: a plain label, plain tokens, no duplicate.
Their values become floats in one pyarrow cast (which rounds as Python's float() does; a
value that overflows sends its line to the row parser), their indices ids with numpy
(index % table_rows, or keys in keyed mode: data/keys.py). Every other line of the block
goes through the row parser (`LibSVMLineParser`, `LibFFMLineParser`) and the skip policy
(`good_examples`), in line order, so both paths give the same examples, skips, messages
and line numbers (tested). A strict run stops at the same line with the same error, only
without training the good lines of that block before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from recsync.data.batch import Batch
from recsync.data.keys import integer_ids, prefix
from recsync.data.records import Example, collated, good_examples
from recsync.data.skips import SkipReport
from recsync.io.formats.libsvm.rows import (
    LibFFMLineParser,
    LibFFMSchema,
    LibSVMLineParser,
    LibSVMSchema,
)
from recsync.io.formats.libsvm.scan import scan_block
from recsync.io.line_bytes import block_bytes

BLOCK_LINES = 8192
Schema = LibSVMSchema | LibFFMSchema


class BlockParser:
    """Turns blocks of numbered lines of one schema into batches (see the module)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.parser: LibSVMLineParser | LibFFMLineParser
        if isinstance(schema, LibFFMSchema):
            self.parser = LibFFMLineParser(schema)
            self.num_fields, self.num_features = schema.num_fields, len(schema.table_rows)
            self.dense_slot = np.full(self.num_fields, -1, dtype=np.int64)
            self.dense_slot[list(schema.dense_fields)] = np.arange(len(schema.dense_fields))
            self.feature = np.full(self.num_fields, -1, dtype=np.int64)
            self.feature[self.dense_slot < 0] = np.arange(self.num_features)
            self.rows = np.array(schema.table_rows, dtype=np.int64)
            self.num_dense = len(schema.dense_fields)
        else:
            self.parser = LibSVMLineParser(schema)
            self.num_fields, self.num_features = 0, 1
            self.dense_order = np.argsort(schema.dense_indices).astype(np.int64)
            self.dense_sorted = np.array(schema.dense_indices, dtype=np.int64)[self.dense_order]
            self.rows = np.array([schema.table_rows], dtype=np.int64)
            self.num_dense = len(schema.dense_indices)
        self.is_dense_field = np.zeros(max(self.num_fields, 1), dtype=np.bool_)
        if self.num_fields:
            self.is_dense_field[: self.num_fields] = self.dense_slot >= 0
        self.prefixes = np.array(
            [prefix(f) % 2**64 for f in range(self.num_features)], dtype=np.uint64
        )

    def _places(self, fields: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each token's dense slot and categorical feature (-1: not that kind)."""
        if self.num_fields:
            return self.dense_slot[fields], self.feature[fields]
        slot = np.full(indices.size, -1, dtype=np.int64)
        if self.dense_sorted.size:
            at = np.searchsorted(self.dense_sorted, indices).clip(max=self.dense_sorted.size - 1)
            hit = self.dense_sorted[at] == indices
            slot[hit] = self.dense_order[at[hit]]
        return slot, np.where(slot < 0, 0, -1)

    def _ids(self, indices: np.ndarray, features: np.ndarray) -> np.ndarray:
        if self.schema.keyed:
            keys: np.ndarray = (integer_ids(indices) | self.prefixes[features]).view(np.int64)
            return keys
        ids: np.ndarray = indices % self.rows[features]
        return ids

    def block(
        self, numbered: list[tuple[int, str]], *, source: str, strict: bool, skips: SkipReport
    ) -> Batch | None:
        """The good examples of a block of (line number, line) pairs, or None: there are none."""
        lines = [line for _, line in numbered]
        buf, ends = block_bytes(lines)
        scanned = scan_block(buf, ends, self.num_fields, self.is_dense_field)
        plain, labels, line_of, fields, indices, value_offsets, value_bytes, count = scanned
        line_of, fields, indices = line_of[:count], fields[:count], indices[:count]
        strings = pa.StringArray.from_buffers(
            count, pa.py_buffer(value_offsets[: count + 1]), pa.py_buffer(value_bytes)
        )
        values = pc.cast(strings, pa.float64()).to_numpy(zero_copy_only=False)
        finite = np.isfinite(values)
        if not finite.all():  # 1e999: the row parser says "nan_value"
            plain[line_of[~finite]] = False
            kept = plain[line_of]
            line_of, fields, indices, values = (a[kept] for a in (line_of, fields, indices, values))
        dense = np.zeros((len(lines), self.num_dense), dtype=np.float64)
        slot, feature = self._places(fields, indices)
        given = slot >= 0
        dense[line_of[given], slot[given]] = values[given]
        present = (feature >= 0) & (values != 0.0)
        line_of, feature = line_of[present], feature[present]
        ids = self._ids(indices[present], feature)
        keep = plain.copy()
        odd = np.flatnonzero(~plain).tolist()
        if odd:
            extra_lines, extra_features, extra_ids = [], [], []
            for i in odd:
                found: list[Example] = list(
                    good_examples(
                        [numbered[i]], self.parser, source=source, strict=strict, skips=skips
                    )
                )
                if not found:
                    continue
                row_dense, bags, label = found[0]
                keep[i], dense[i], labels[i] = True, row_dense, label
                for f, bag in enumerate(bags):
                    extra_lines += [i] * len(bag)
                    extra_features += [f] * len(bag)
                    extra_ids += bag
            line_of = np.concatenate([line_of, np.array(extra_lines, dtype=np.int64)])
            feature = np.concatenate([feature, np.array(extra_features, dtype=np.int64)])
            ids = np.concatenate([ids, np.array(extra_ids, dtype=np.int64)])
        return self._batch(keep, dense, labels, line_of, feature, ids)

    def _batch(
        self,
        keep: np.ndarray,
        dense: np.ndarray,
        labels: np.ndarray,
        line_of: np.ndarray,
        feature: np.ndarray,
        ids: np.ndarray,
    ) -> Batch | None:
        """The kept lines as a batch: ids feature-major, each bag in its line's token order."""
        m = int(keep.sum())
        if m == 0:
            return None
        if m < keep.size:
            row = np.cumsum(keep) - 1
            dense, labels, line_of = dense[keep], labels[keep], row[line_of]
        group = feature * m + line_of
        if group.size and (group[1:] < group[:-1]).any():
            order = np.argsort(group, kind="stable")
            group, ids = group[order], ids[order]
        offsets = torch.zeros(self.num_features * m + 1, dtype=torch.int64)
        lengths = np.bincount(group, minlength=self.num_features * m)
        torch.cumsum(torch.from_numpy(lengths), 0, out=offsets[1:])
        return Batch(
            dense=torch.from_numpy(dense).to(torch.float32),
            ids=torch.from_numpy(ids.astype(np.int64)),
            offsets=offsets,
            labels=torch.from_numpy(labels),
        )


def libsvm_blocks(
    numbered_lines: Iterable[tuple[int, str]],
    schema: Schema,
    *,
    source: str,
    strict: bool,
    skips: SkipReport,
    bulk: bool = True,
) -> Iterator[Batch]:
    """The good examples of (line number, line) pairs of a libSVM or libffm file (by the
    schema's type), BLOCK_LINES lines at a time, as batches of any size; `bulk` False:
    every line through the row parser."""
    parser = BlockParser(schema)
    numbered = iter(numbered_lines)
    while block := list(islice(numbered, BLOCK_LINES)):
        if bulk:
            batch = parser.block(block, source=source, strict=strict, skips=skips)
        else:
            examples = good_examples(
                block, parser.parser, source=source, strict=strict, skips=skips
            )
            batch = collated(examples)
        if batch is not None and batch.batch_size:
            yield batch
