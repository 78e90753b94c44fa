"""Criteo lines into batches a block of lines at a time: the reader's hot path for the
format DLRM is measured on.

A block (BLOCK_LINES lines) whose lines are all plain converts a column at a time with
pyarrow compute: 40 tab-separated fields, a label "0" or "1", integers matching the row
parser's pattern (each distinct one turned into its dense value once, by the row parser's
own rule), hexadecimal ids (each distinct one converted once); empty integers and empty
categoricals as the row parser reads them. Any other block (an empty line, stripped
trailing fields, a bad value) goes line by line through `CriteoLineParser`: both paths
give the same examples, skips and messages (tested), in fixed and in keyed mode. A strict
run stops at the same line with the same error, only without training the good lines of
that block before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from recsync.data.batch import Batch
from recsync.data.criteo import HEX, INTEGER, CriteoLineParser, CriteoSchema, count_feature
from recsync.data.keys import integer_id, integer_ids, key, make_keys
from recsync.data.records import collated, good_examples
from recsync.data.skips import SkipReport
from recsync.io.table_blocks import all_true

BLOCK_LINES = 8192
_INTEGER = f"^{INTEGER.pattern}$"  # the row parser's patterns, anchored
_HEX = f"^{HEX.pattern}$"


def _distinct_mapped(
    column: pa.Array, convert: Callable[[str], float], dtype: type = np.float64
) -> np.ndarray:
    """`convert` applied once to each distinct value of `column`, spread back to its rows."""
    encoded = pc.dictionary_encode(column)
    table: np.ndarray = np.array([convert(v) for v in encoded.dictionary.to_pylist()], dtype=dtype)
    indices: np.ndarray = encoded.indices.to_numpy(zero_copy_only=False)
    return table[indices] if table.size else np.zeros(0, dtype=dtype)


_NIBBLE = np.zeros(256, dtype=np.uint64)
for _digit, _char in enumerate("0123456789abcdef"):
    _NIBBLE[ord(_char)] = _NIBBLE[ord(_char.upper())] = _digit
HEX_DIGITS = 16  # hex ids of at most 16 digits convert in numpy (uint64), longer ones in Python


def _hex_ids(present: pa.Array, rows: int, keyed_feature: int | None = None) -> np.ndarray:
    """int(v, 16) % rows of every (validated) hex string; with `keyed_feature`, the key of
    int(v, 16) for that feature instead (data/keys.py)."""
    if (pc.max(pc.utf8_length(present)).as_py() or 0) > HEX_DIGITS:
        if keyed_feature is not None:
            f = keyed_feature
            return _distinct_mapped(present, lambda v: key(f, integer_id(int(v, 16))), np.int64)
        return _distinct_mapped(present, lambda v: int(v, 16) % rows).astype(np.int64)
    padded = pc.utf8_lpad(present, HEX_DIGITS, "0")  # every value HEX_DIGITS bytes long
    n = len(padded)
    offsets = np.frombuffer(padded.buffers()[1], dtype=np.int32, count=padded.offset + n + 1)
    start = int(offsets[padded.offset])
    digits = np.frombuffer(padded.buffers()[2], dtype=np.uint8, count=n * HEX_DIGITS, offset=start)
    value = np.zeros(n, dtype=np.uint64)
    for position in range(HEX_DIGITS):
        value = (value << np.uint64(4)) | _NIBBLE[digits[position::HEX_DIGITS]]
    if keyed_feature is not None:
        return make_keys(keyed_feature, integer_ids(value))
    return (value % np.uint64(rows)).astype(np.int64)


def columnar_block(lines: list[str], schema: CriteoSchema) -> Batch | None:
    """The block's examples, or None where a line needs the row parser."""
    n, fields, first_cat = len(lines), schema.num_fields, 1 + schema.num_integer
    text = pc.utf8_rtrim(pa.array(lines, type=pa.string()), characters="\r\n")
    split = pc.split_pattern(text, "\t")
    if not all_true(pc.equal(pc.list_value_length(split), fields)):
        return None  # an empty line, stripped trailing fields, or too many
    flat = pc.list_flatten(split)
    columns = [pc.take(flat, pa.array(np.arange(j, n * fields, fields))) for j in range(fields)]
    if not all_true(pc.is_in(columns[0], value_set=pa.array(["0", "1"]))):
        return None
    labels = pc.equal(columns[0], "1").to_numpy(zero_copy_only=False).astype(np.float32)
    dense = np.zeros((n, schema.num_integer), dtype=np.float64)
    for j in range(schema.num_integer):
        column = columns[1 + j]
        given = pc.not_equal(column, "")
        if not all_true(pc.or_(pc.invert(given), pc.match_substring_regex(column, _INTEGER))):
            return None
        padded = pc.if_else(given, column, "0")
        dense[:, j] = _distinct_mapped(padded, lambda v: count_feature(int(v)))
    ids, lengths = [], []
    for f, rows in enumerate(schema.table_rows):
        column = columns[first_cat + f]
        given_mask = pc.not_equal(column, "")
        given = given_mask.to_numpy(zero_copy_only=False)
        present = pc.filter(column, given_mask)
        if not all_true(pc.match_substring_regex(present, _HEX)):
            return None
        ids.append(_hex_ids(present, rows, f if schema.keyed else None))
        lengths.append(given.astype(np.int64))
    offsets = torch.zeros(len(schema.table_rows) * n + 1, dtype=torch.int64)
    if lengths:
        torch.cumsum(torch.from_numpy(np.concatenate(lengths)), 0, out=offsets[1:])
    flat_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return Batch(
        dense=torch.from_numpy(dense.astype(np.float32)),
        ids=torch.from_numpy(flat_ids),
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
    batches of any size; `columnar` False: every block line by line."""
    parser = CriteoLineParser(schema)
    numbered = iter(numbered_lines)
    while block := list(islice(numbered, BLOCK_LINES)):
        batch = columnar_block([line for _, line in block], schema) if columnar else None
        if batch is None:
            batch = collated(
                good_examples(block, parser, source=source, strict=strict, skips=skips)
            )
        if batch is not None and batch.batch_size:
            yield batch
