"""The job's data as its readers share it, planned once when the job is assembled: the files
cut into blocks (text files by line blocks, Parquet files by row group, CSV files and text
files on object storage by byte ranges, gzip files a whole file each: io/shared_text.py
reads a share of them), or the synthetic task's examples; the deal's block and unit; and
the checks a resumed job's position must pass (the same files, counted in the same unit,
within the job's epochs). Everything below it (the placement's sample, each reader's
share, the held-out split) takes this plan; nothing plans the data again.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recsync.data.batch import Batch
from recsync.data.line_coin import held_cutoff
from recsync.data.shares import BLOCK_EXAMPLES, Deal, StreamPosition, block_for
from recsync.data.skips import SkipReport
from recsync.data.synthetic import SyntheticSpec
from recsync.errors import ConfigError
from recsync.io.formats.criteo.rows import CriteoSchema
from recsync.io.formats.libsvm.rows import LibFFMSchema, LibSVMSchema
from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.shared_text import SharedTextData
from recsync.io.sources import FileData, SyntheticData, prepared
from recsync.io.urls import is_url
from recsync.optim.train_spec import TrainSpec

if TYPE_CHECKING:  # the parsers import numba, the readers pyarrow: only where files are read
    from recsync.io.byte_blocks import ByteBlocks
    from recsync.io.file_shares import TextFiles
    from recsync.io.line_blocks import LineIndex
    from recsync.io.shared_text import SharedFiles

SLOT_UNIT = "slots"  # a checkpoint's `data_unit` under line shares: "slots/<block lines>"
BYTE_UNIT = "bytes"  # under byte-range shares: "bytes/<block bytes>"
GZIP_UNIT = "gzfiles"  # under whole-file shares of gzip files: "gzfiles/<slots>"
GROUP_UNIT = "rowgroups"  # under Parquet row-group shares: "rowgroups/<largest group's rows>"


@dataclass(frozen=True)
class DataPlan:
    """A job's data as its readers share it: `files` cut into blocks (`shared`), or (both
    None) the synthetic task's examples dealt in blocks of `block`."""

    files: FileData | None
    shared: SharedFiles | None
    block: int

    @property
    def unit(self) -> str | None:
        """What its positions count (a checkpoint's `data_unit`): None, examples."""
        return None if self.shared is None else self.shared.unit

    def deal(self, num_readers: int, base: StreamPosition) -> Deal:
        """What is left after `base`, dealt to `num_readers` readers."""
        return Deal(num_readers, self.block, base, examples=self.shared is None)


def plan_data(
    files: FileData | None, train: TrainSpec, unit: str | None, start: StreamPosition
) -> DataPlan:
    """The plan of a job over `files` (None: the synthetic task) that starts at `start` of
    its stream, counted in `unit` (a resumed job's checkpoint's; None: examples). A
    ConfigError names what a checkpoint's position cannot resume onto."""
    if files is None:
        return DataPlan(None, None, block_for(train.batch_size))
    if unit is None:
        if start.handed:
            raise ConfigError(
                "checkpoint: its position counts examples of the file stream (it has no "
                "data_unit: written when every reader read the files as one stream); file "
                "jobs count the units of their files' blocks, so this checkpoint cannot be "
                "resumed: start the job afresh"
            )
        shared = shared_files(files, train.seed, BLOCK_EXAMPLES)
        return DataPlan(files, shared, shared.block_lines)
    kind, _, size = unit.partition("/")
    if kind not in (SLOT_UNIT, GROUP_UNIT, BYTE_UNIT, GZIP_UNIT) or not size.isdigit():
        raise ConfigError(
            f"checkpoint: unknown data_unit {unit!r} (expected 'slots/<lines>', "
            "'rowgroups/<rows>', 'bytes/<bytes>' or 'gzfiles/<slots>')"
        )
    where = f"the checkpoint's position counts {unit}"
    shared = shared_files(files, train.seed, int(size), int(size) if kind == BYTE_UNIT else None)
    if shared.unit != unit:
        raise ConfigError(
            f"{where}, but the job's files are dealt in {shared.unit}: not the same files"
        )
    reached = start.beyond[-1][1] if start.beyond else start.prefix
    epochs, slots = train.epochs, shared.slots
    if reached > epochs * slots:
        raise ConfigError(
            f"{where}: it reached slot {reached:,}, past the end of train.epochs = {epochs} "
            f"pass(es) of {slots:,} slots over these files: resume with at least "
            f"{-(-reached // slots)} epochs (as many as the job that wrote it, over the same "
            "files)"
        )
    return DataPlan(files, shared, shared.block_lines)


def one_reader_data(
    synthetic: SyntheticSpec | None,
    files: FileData | None,
    train: TrainSpec,
    background: bool = False,
) -> SyntheticData | SharedTextData:
    """The whole training stream of a fresh job, as its only reader reads it (files opened
    now: a missing file fails early): the synthetic task's, or the files' by their blocks
    (the held-out set read now)."""
    if synthetic is not None:
        return SyntheticData(synthetic, train, background=background)
    assert files is not None
    plan = plan_data(files, train, None, StreamPosition())
    assert plan.shared is not None
    deal = plan.deal(1, StreamPosition())
    return SharedTextData(files, plan.shared, train, deal, 0, background)


def first_batches(
    plan: DataPlan, synthetic: SyntheticSpec | None, train: TrainSpec, count: int
) -> list[Batch]:
    """The first `count` batches of the data as they come (the placement's sample): the
    plan's files read from their start as one stream, no further than those batches (no
    share's read-ahead, no held-out set: a sample of ids, not a reader's share)."""
    if plan.files is None:
        assert synthetic is not None
        batches: Iterator[Batch] = SyntheticData(synthetic, train).train_batches()
        return list(itertools.islice(batches, count))
    from recsync.io.readers import open_dataset  # pyarrow, numba: only where files are read

    files = plan.files
    with open_dataset(
        files.paths, files.fmt, files.schema, batch_size=train.batch_size, strict=files.strict,
        skips=SkipReport(),
    ) as reader:  # fmt: skip
        return [prepared(b, files) for b in itertools.islice(reader, count)]


def _parquet(files: FileData, infer_format: Callable[[str, Any], str]) -> bool:
    if files.fmt != "auto":
        return files.fmt == "parquet"
    return all(infer_format(path, files.schema) == "parquet" for path in files.paths)


def shared_files(
    files: FileData, seed: int, block_lines: int, block_bytes: int | None = None
) -> SharedFiles:
    """The job's files as the readers share them: Parquet files by row group (from their
    footers), text files by line blocks of `block_lines` (indexed by a bulk newline scan
    of each, done once by whoever assembles the job); with the held-out cap's cutoff."""
    from recsync.io.parquet_groups import parquet_groups
    from recsync.io.readers import infer_format, is_gzip

    if any(is_gzip(path) for path in files.paths):
        from recsync.io.gzip_shares import gzip_files

        return gzip_files(
            files.paths,
            files.schema,
            files.strict,
            seed,
            files.test_fraction,
            files.test_max_examples,
        )
    if isinstance(files.schema, TabularSchema) and _parquet(files, infer_format):
        return parquet_groups(
            files.paths,
            files.schema,
            files.strict,
            seed,
            files.test_fraction,
            files.test_max_examples,
        )
    if isinstance(files.schema, TabularSchema) or any(is_url(p) for p in files.paths):
        return _byte_blocks(files, seed, block_bytes)
    return text_files(files, seed, block_lines)


def _byte_blocks(files: FileData, seed: int, block_bytes: int | None) -> ByteBlocks:
    """Text files on object storage, and CSV files, by byte blocks (io/byte_blocks.py): no
    node reads a whole file to find its lines (a CSV file's header is read apart)."""
    from recsync.io.byte_blocks import BLOCK_BYTES, byte_blocks

    return byte_blocks(
        files.paths,
        files.schema,
        files.strict,
        seed,
        files.test_fraction,
        files.test_max_examples,
        block_bytes or BLOCK_BYTES,
    )


def text_files(files: FileData, seed: int, block_lines: int) -> TextFiles:
    """The job's text files indexed and the held-out cap's cutoff line."""
    from recsync.io.file_shares import TextFiles

    assert isinstance(files.schema, CriteoSchema | LibSVMSchema | LibFFMSchema)
    from recsync.io.storage import file_stamp

    indexes = tuple(_indexed(path, block_lines, file_stamp(path)) for path in files.paths)
    counts = [index.num_lines for index in indexes]
    cutoff = held_cutoff(seed, files.test_fraction, files.test_max_examples, counts)
    return TextFiles(indexes, files.schema, files.strict, seed, files.test_fraction, cutoff)


@functools.lru_cache(maxsize=64)
def _indexed(path: str, block_lines: int, stamp: tuple[int, int]) -> LineIndex:
    """A file's line index, scanned once per (path, size, modification time) in a process:
    a job is assembled again on every restart and rollback."""
    from recsync.io.line_blocks import line_index

    return line_index(path, block_lines)
