"""One reader's share of text files (io/file_shares.py): R readers, each parsing only its
line blocks, hand out every example of one read exactly once, hold out the same rows and
count the same skips; cut anywhere and resumed onto another number of readers, still every
example once; over two epochs every example once an epoch, the second epoch's order the
same on any number of readers. Each libffm line's dense value is its line number, so an
example names its line."""

from __future__ import annotations

import random

import pytest

from recsync.data.line_coin import held_cutoff
from recsync.data.shares import Deal, StreamPosition
from recsync.data.skips import SkipReport
from recsync.io.file_shares import ReaderShare, TextFiles
from recsync.io.formats.libsvm.rows import LibFFMSchema
from recsync.io.line_blocks import line_index
from recsync.io.line_examples import ShareSkips
from recsync.io.readers import open_dataset

SCHEMA = LibFFMSchema(table_rows=(10, 30), dense_fields=(1,))
BAD = ["", "3 0:1:1", "1 0:1", "1 4:1:1", "1 0:1:nan"]
BLOCK = 16


def _write(path, count: int, seed: int, first: int) -> None:
    rng = random.Random(seed)
    lines = [
        rng.choice(BAD) if rng.random() < 0.15 else f"{rng.choice('01')} 0:3:1 1:5:{first + n}"
        for n in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")


def _files(tmp_path, fraction: float) -> tuple[TextFiles, list]:
    paths = [tmp_path / "a.ffm", tmp_path / "b.ffm"]
    _write(paths[0], 203, 0, 0)  # not a multiple of the block: a block spans both files
    _write(paths[1], 150, 1, 1000)
    indexes = tuple(line_index(p, BLOCK) for p in paths)
    cutoff = held_cutoff(7, fraction, 25, [i.num_lines for i in indexes])
    return TextFiles(indexes, SCHEMA, False, 7, fraction, cutoff), paths


def _names(batches) -> list[int]:
    return [int(v) for b in batches for v in b.dense[:, 0].tolist()]


def _run_until(files, deal, budgets, handed, epochs=1) -> list[int]:
    """Each reader of `deal` hands out up to its budget of batches of 7 (their names added
    to `handed`); the slots each consumed (all of its share once it ran out)."""
    counts = []
    for reader, budget in enumerate(budgets):
        share = ReaderShare(files, deal, reader, 7, epochs=epochs)
        count = 0
        for taken, (batch, after) in enumerate(share.batches()):
            if taken == budget:
                break
            handed += _names([batch])
            count = after
        else:
            count = share.share_slots
        counts.append(count)
    return counts


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_readers_hand_out_one_reads_examples_once_and_hold_the_same_rows(tmp_path, readers):
    files, paths = _files(tmp_path, 0.1)
    skips = SkipReport()
    every = _names(open_dataset(paths, "libffm", SCHEMA, batch_size=64, skips=skips))
    deal = Deal(readers, BLOCK)
    shares = [ReaderShare(files, deal, r, 10) for r in range(readers)]
    handed = {r: [b for b, _ in share.batches()] for r, share in enumerate(shares)}
    names = [n for r in handed for n in _names(handed[r])]
    held = [n for share in shares for n in _names(share.held)]
    assert sorted(names + held) == sorted(every) and len(set(names)) == len(names)
    assert 15 <= len(held) <= 25  # the cap, less bad lines among the candidates
    one = ReaderShare(files, Deal(1, BLOCK), 0, 10)
    list(one.batches())
    assert sorted(held) == sorted(_names(one.held))  # the same rows whatever the readers
    merged = shares[0].skips.merged(s.skips for s in shares[1:])
    assert (merged.counts, merged.first) == (skips.counts, skips.first)
    for batches in handed.values():  # whole batches but the last, across blocks and files
        assert all(b.batch_size == 10 for b in batches[:-1]) and batches[-1].batch_size <= 10


@pytest.mark.parametrize("seed", range(5))
def test_cut_and_resumed_onto_other_counts_every_example_once(tmp_path, seed):
    rng = random.Random(seed)
    files, _ = _files(tmp_path, 0.1)
    one = ReaderShare(files, Deal(1, BLOCK), 0, 7)
    every = _names(b for b, _ in one.batches())
    base, handed = StreamPosition(), []
    for run in range(4):
        deal = Deal(rng.randint(1, 3), BLOCK, base)
        budgets = [10**9 if run == 3 else rng.randint(0, 6) for _ in range(deal.num_readers)]
        base = deal.position_after(_run_until(files, deal, budgets, handed))
    assert sorted(handed) == sorted(every) and len(set(handed)) == len(handed)
    assert base.handed == files.slots


def test_a_reader_reports_skips_by_first_line_across_files(tmp_path):
    files, _ = _files(tmp_path, 0.0)
    share = ReaderShare(files, Deal(2, BLOCK), 1, 10)
    list(share.batches())
    assert isinstance(share.skips, ShareSkips) and share.skips.total > 0
    assert all(at[1] > BLOCK for at in share.skips.first_at.values() if at[0] == 0)
    assert share.held == []


def _blocks_of(files: TextFiles, epochs: int, shuffled: bool = True) -> list[list[int]]:
    """The examples of every global block k (slots [kL, (k+1)L)) of `epochs` passes, in
    their slots' order: what any reader of block k hands out of it."""
    share = ReaderShare(files, Deal(1, BLOCK), 0, 7, epochs, shuffled)
    return [
        _names([b]) if (b := share._block_examples(k)) else [] for k in range(epochs * files.blocks)
    ]


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_two_epochs_hand_out_every_example_once_an_epoch_in_the_same_order_on_any_readers(
    tmp_path, readers
):
    files, paths = _files(tmp_path, 0.1)
    skips = SkipReport()
    every = _names(open_dataset(paths, "libffm", SCHEMA, batch_size=64, skips=skips))
    blocks = _blocks_of(files, 2)
    first = [n for block in blocks[: files.blocks] for n in block]
    second = [n for block in blocks[files.blocks :] for n in block]
    assert sorted(first) == sorted(second) and len(set(first)) == len(first)
    assert second != first  # blocks and the examples within them shuffled
    assert [sorted(b) for b in blocks[files.blocks :]] != [
        sorted(b) for b in blocks[: files.blocks]
    ]
    deal = Deal(readers, BLOCK)
    shares = [ReaderShare(files, deal, r, 10, epochs=2) for r in range(readers)]
    for reader, share in enumerate(shares):
        handed = _names(b for b, _ in share.batches())
        # its global blocks k = e B + p (k mod R = reader), each in the order of one reader's
        assert handed == [n for k, b in enumerate(blocks) if k % readers == reader for n in b]
    held = [n for share in shares for n in _names(share.held)]
    assert sorted(first + held) == sorted(every) and not set(held) & set(first)
    merged = shares[0].skips.merged(s.skips for s in shares[1:])
    assert (merged.counts, merged.first) == (skips.counts, skips.first)  # epoch 0's only


def test_later_epochs_repeat_the_first_in_order_when_not_shuffled(tmp_path):
    files, _ = _files(tmp_path, 0.1)
    blocks = _blocks_of(files, 3, shuffled=False)
    assert (
        blocks[: files.blocks]
        == blocks[files.blocks : 2 * files.blocks]
        == blocks[2 * files.blocks :]
    )


@pytest.mark.parametrize("seed", range(5))
def test_two_epochs_cut_and_resumed_onto_other_counts_every_example_once_an_epoch(tmp_path, seed):
    rng = random.Random(seed)
    files, _ = _files(tmp_path, 0.1)
    one = ReaderShare(files, Deal(1, BLOCK), 0, 7)
    every = _names(b for b, _ in one.batches())
    base, handed, cuts_in_epoch_1 = StreamPosition(), [], 0
    while cuts_in_epoch_1 < 3 and base.handed < 2 * files.slots:  # random cuts, 3 in epoch 1
        deal = Deal(rng.randint(1, 3), BLOCK, base)
        budgets = [rng.randint(0, 10) for _ in range(deal.num_readers)]
        base = deal.position_after(_run_until(files, deal, budgets, handed, epochs=2))
        reached = base.beyond[-1][1] if base.beyond else base.prefix
        cuts_in_epoch_1 += files.slots < reached < 2 * files.slots
    assert cuts_in_epoch_1 >= 1
    deal = Deal(rng.randint(1, 3), BLOCK, base)  # the rest, whole
    shares = [ReaderShare(files, deal, r, 7, epochs=2) for r in range(deal.num_readers)]
    handed += [n for share in shares for n in _names(b for b, _ in share.batches())]
    assert sorted(handed) == sorted(every + every)
    assert deal.position_after([s.share_slots for s in shares]) == StreamPosition(2 * files.slots)
