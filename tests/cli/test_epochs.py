"""Several passes over the data: the first in order, later ones shuffled (seeded) within
blocks; a held-out row never trains in any pass; accounting counts every pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_cli import config_file, invoke

from recsync.data.batch import collate
from recsync.data.epochs import epochs_of, shuffled_blocks
from recsync.data.synthetic import SyntheticSpec
from recsync.io.data_plan import one_reader_data
from recsync.io.formats.libsvm.rows import LibSVMSchema
from recsync.io.sources import FileData, SyntheticData
from recsync.optim.train_spec import TrainSpec


def numbered(count: int, size: int = 4):
    """Batches whose example i has dense value i and bags [i % 7] and [i % 5, i % 3]."""
    for start in range(0, count, size):
        rows = range(start, min(start + size, count))
        yield collate(
            [[float(i)] for i in rows], [[[i % 7], [i % 5, i % 3]] for i in rows], [1.0] * len(rows)
        )


def examples(batches) -> list[tuple]:
    """(dense value, bag of each feature...) of every example of the batches, in order."""
    seen = []
    for b in batches:
        B, F = b.batch_size, b.num_features
        for i in range(B):
            bags = [
                b.ids[b.offsets[f * B + i] : b.offsets[f * B + i + 1]].tolist() for f in range(F)
            ]
            seen.append((float(b.dense[i, 0]), *bags))
    return seen


def test_take_reorders_examples_with_their_bags():
    batch = next(numbered(6, size=6))
    order = torch.tensor([5, 0, 3, 3])
    assert examples([batch.take(order)]) == [examples([batch])[i] for i in order.tolist()]


def test_shuffled_blocks_keep_every_example_once_and_shuffle_only_within_a_block():
    out = examples(shuffled_blocks(numbered(23), 8, torch.Generator().manual_seed(1)))
    assert sorted(out) == examples(numbered(23)) and out != examples(numbered(23))
    blocks = [sorted(e[0] for e in out[a : a + 8]) for a in (0, 8, 16)]
    assert blocks == [[float(i) for i in range(a, min(a + 8, 23))] for a in (0, 8, 16)]
    again = examples(shuffled_blocks(numbered(23), 8, torch.Generator().manual_seed(1)))
    assert out == again


def test_the_first_epoch_is_in_order_later_ones_differ_from_each_other():
    passes = examples(epochs_of(lambda _: numbered(12), 3, 100, seed=0))
    first, second, third = passes[:12], passes[12:24], passes[24:]
    assert first == examples(numbered(12))
    assert sorted(second) == sorted(third) == first and second != third
    assert examples(epochs_of(lambda _: numbered(12), 2, 0, seed=0))[12:] == first


def test_synthetic_epochs_repeat_the_stream_and_resume_mid_epoch():
    spec = SyntheticSpec(num_train=600, num_test=100, table_rows=(20,) * 4)
    train = TrainSpec(batch_size=64, epochs=3, shuffle_buffer=250)
    source = SyntheticData(spec, train)
    full = list(source.train_batches())
    assert source.total_examples == 1800 == sum(b.batch_size for b in full)
    resumed = SyntheticData(spec, train, start_example=700)
    assert examples(resumed.train_batches()) == examples(full)[700:]


def test_a_held_out_row_never_trains_in_any_epoch(tmp_path: Path):
    data = tmp_path / "rows.libsvm"
    data.write_text("".join(f"{i % 2} 1:{i} 2:{i % 9}\n" for i in range(400)) + "x 1:1\n")
    files = FileData(
        paths=(data,),
        fmt="libsvm",
        schema=LibSVMSchema(table_rows=50, dense_indices=(1,)),
        strict=False,
        test_paths=(),
        test_fraction=0.2,
        test_max_examples=1_000,
        dense_log1p=False,
    )
    source = one_reader_data(None, files, TrainSpec(batch_size=32, epochs=3, shuffle_buffer=64))
    trained = [e[0] for e in examples(source.train_batches())]
    test = source.test_set()
    assert test is not None
    held = set(test.dense[:, 0].tolist())
    assert 40 < len(held) < 120 and not held & set(trained)
    assert source.skips.total == 1  # the bad last line, counted once over three passes
    kept = 400 - len(held)
    assert len(trained) == 3 * kept
    assert sorted(trained[:kept]) == sorted(trained[kept : 2 * kept]) == sorted(trained[2 * kept :])


def test_simulated_epochs_are_accounted_and_resume_with_more_epochs(tmp_path):
    path = config_file(tmp_path)  # 2,000 examples
    first = invoke(
        "simulate", "-c", path, "--name", "two", "--no-progress", "--strategy", "async",
        "--epochs", "2",
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    summary = json.loads((tmp_path / "runs" / "two" / "summary.json").read_text())
    assert summary["examples_trained"] == 4000 and summary["checkpoint"]["data_position"] == 4000
    used_up = invoke("simulate", "--resume", str(tmp_path / "runs" / "two"), "--no-progress")
    assert used_up.exit_code == 1 and "--epochs" in used_up.output
    more = invoke(
        "simulate", "--resume", str(tmp_path / "runs" / "two"), "--no-progress", "--epochs", "3"
    )
    assert more.exit_code == 0, more.output
    third = json.loads((tmp_path / "runs" / "two-then-same" / "summary.json").read_text())
    assert third["examples_trained"] == 2000 and third["checkpoint"]["data_position"] == 6000


@pytest.mark.parametrize("key", ["train.epochs=0", "train.shuffle_buffer=-1"])
def test_bad_epoch_settings_are_config_errors(tmp_path, key):
    result = invoke("simulate", "-c", config_file(tmp_path), "--no-progress", "--set", key)
    assert result.exit_code == 1 and key.split("=")[0] in result.output
