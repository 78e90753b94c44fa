"""libSVM and libFM/libffm lines: parsing (io/formats/libsvm/rows.py) and files (recsync.io)."""

from __future__ import annotations

import gzip

import pytest
import torch

from recsync.data.skips import SkipReport
from recsync.errors import DataError
from recsync.io.formats.libsvm.rows import (
    LibFFMSchema,
    LibSVMSchema,
    libffm_batches,
    libsvm_batches,
)
from recsync.io.readers import open_dataset

SVM = LibSVMSchema(table_rows=100, dense_indices=(3, 1))  # index 3 -> dense 0, 1 -> dense 1
# fields 0..3: field 1 is dense; categorical features are fields 0, 2, 3
FFM = LibFFMSchema(table_rows=(10, 20, 30), dense_fields=(1,))


def svm(lines, batch_size=8, strict=False, skips=None):
    return list(
        libsvm_batches(
            lines, SVM, source="a.svm", batch_size=batch_size, strict=strict, skips=skips
        )
    )


def ffm(lines, batch_size=8, strict=False, skips=None):
    return list(
        libffm_batches(
            lines, FFM, source="a.ffm", batch_size=batch_size, strict=strict, skips=skips
        )
    )


def test_libsvm_good_lines():
    lines = [
        "+1 1:0.5 3:2.25 7:1 250:1\n",
        "-1 5:1 9:0 # comment: index 9 has value 0 so is absent\n",
        "0\n",
        "1.0 3:-4 105:3.5\n",
    ]
    (batch,) = svm(lines)
    assert batch.labels.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert batch.dense.tolist() == [[2.25, 0.5], [0.0, 0.0], [0.0, 0.0], [-4.0, 0.0]]
    assert batch.num_features == 1
    assert batch.offsets.tolist() == [0, 2, 3, 3, 4]
    assert batch.ids.tolist() == [7, 50, 5, 5]  # 250 % 100, 105 % 100


def test_libsvm_batches_keep_order():
    lines = [f"{i % 2} 3:{i}\n" for i in range(5)]
    batches = svm(lines, batch_size=2)
    assert [b.batch_size for b in batches] == [2, 2, 1]
    assert torch.cat([b.dense[:, 0] for b in batches]).tolist() == [0, 1, 2, 3, 4]


def test_libffm_good_lines():
    lines = ["1 0:12:1 1:99:0.75 2:5:1 2:27:1 3:31:1\n", "-1 3:4:1 0:3:0\n"]
    (batch,) = ffm(lines)
    assert batch.labels.tolist() == [1.0, 0.0]
    assert batch.dense.tolist() == [[0.75], [0.0]]
    assert batch.num_features == 3
    # feature-major bags: (f0,b0) (f0,b1) (f1,b0) (f1,b1) (f2,b0) (f2,b1)
    assert batch.bag_lengths().tolist() == [1, 0, 2, 0, 1, 1]
    assert batch.ids.tolist() == [12 % 10, 5, 27 % 20, 31 % 30, 4]
    batch.validate([10, 20, 30])


SVM_BAD = {
    "empty_line": ("   \n", ""),
    "missing_label": ("3:1 4:1\n", "label"),
    "bad_label": ("2 3:1\n", "label"),
    "bad_token": ("1 3:1 7\n", "token 2 '7'"),
    "bad_index": ("1 x:1\n", "token 1 'x:1'"),
    "bad_value": ("1 3:abc\n", "token 1 '3:abc'"),
    "nan_value": ("1 3:nan\n", "token 1 '3:nan'"),
    "duplicate_index": ("1 8:1 8:1\n", "token 2 '8:1'"),
}

FFM_BAD = {
    "bad_token": ("1 0:1\n", "token 1 '0:1'"),
    "bad_field": ("1 4:1:1\n", "token 1 '4:1:1'"),
    "bad_index": ("1 0:-1:1\n", "token 1 '0:-1:1'"),
    "nan_value": ("1 1:0:inf\n", "token 1 '1:0:inf'"),
    "duplicate_index": ("1 1:0:1 1:2:1\n", "token 2 '1:2:1'"),
    "bad_label": ("yes 0:1:1\n", "label"),
}


@pytest.mark.parametrize("reason", sorted(SVM_BAD))
def test_libsvm_malformed_lenient(reason):
    skips = SkipReport()
    (batch,) = svm(["1 3:1\n", SVM_BAD[reason][0], "0 3:2\n"], skips=skips)
    assert batch.dense[:, 0].tolist() == [1.0, 2.0]
    assert skips.counts == {reason: 1}


@pytest.mark.parametrize("reason", sorted(SVM_BAD))
def test_libsvm_malformed_strict(reason):
    bad, field = SVM_BAD[reason]
    with pytest.raises(DataError) as info:
        svm(["1 3:1\n", bad], strict=True)
    assert (info.value.source, info.value.line, info.value.field) == ("a.svm", 2, field)
    assert "file a.svm, line 2" in str(info.value) and reason in str(info.value)


@pytest.mark.parametrize("reason", sorted(FFM_BAD))
def test_libffm_malformed_lenient(reason):
    skips = SkipReport()
    (batch,) = ffm(["1 0:1:1\n", FFM_BAD[reason][0], "0 1:0:3\n"], skips=skips)
    assert batch.labels.tolist() == [1.0, 0.0] and batch.dense[:, 0].tolist() == [0.0, 3.0]
    assert skips.counts == {reason: 1}


@pytest.mark.parametrize("reason", sorted(FFM_BAD))
def test_libffm_malformed_strict(reason):
    bad, field = FFM_BAD[reason]
    with pytest.raises(DataError) as info:
        ffm([bad], strict=True)
    assert (info.value.source, info.value.line, info.value.field) == ("a.ffm", 1, field)
    assert f"field {field}" in str(info.value)


def test_schema_validation():
    with pytest.raises(ValueError):
        LibSVMSchema(table_rows=0)
    with pytest.raises(ValueError):
        LibSVMSchema(table_rows=5, dense_indices=(1, 1))
    with pytest.raises(ValueError):
        LibFFMSchema(table_rows=(5,), dense_fields=(2,))  # only fields 0 and 1 exist


def test_open_dataset_gzip_libsvm_and_plain_libffm(tmp_path):
    svm_path = tmp_path / "train.svm.gz"
    with gzip.open(svm_path, "wt") as f:
        f.write("1 3:1 42:1\nbroken\n-1 1:2\n")
    reader = open_dataset(svm_path, "libsvm", SVM, batch_size=10)
    (batch,) = list(reader)
    assert batch.dense.tolist() == [[1.0, 0.0], [0.0, 2.0]] and batch.ids.tolist() == [42]
    assert reader.skips.counts == {"bad_label": 1}

    ffm_path = tmp_path / "train.ffm"
    ffm_path.write_text("1 0:3:1\n0 2:1:1\n")
    (batch,) = list(open_dataset(ffm_path, "auto", FFM, batch_size=10))
    assert batch.ids.tolist() == [3, 1]
    with pytest.raises(DataError, match=r"train\.svm\.gz, line 2, field label"):
        list(open_dataset(svm_path, "libsvm", SVM, batch_size=10, strict=True))
