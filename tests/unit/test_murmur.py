"""The compiled hashes of a string column are mmh3's, bit for bit, on values of every
length (every tail of both block sizes), non-ASCII text, bytes, sliced and large arrays."""

from __future__ import annotations

import random

import mmh3
import pyarrow as pa
import pytest

from recsync.io.formats.tabular.rows import TabularSchema
from recsync.io.murmur import murmur32, murmur64

ALPHABET = "abcXYZ09-_ \u00e9\u6f22\U0001f600"


def _values(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40))) for _ in range(count)
    ]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
@pytest.mark.parametrize("seed", [0, 17, 2**31, 2**32 - 1])
def test_the_compiled_hashes_are_mmh3s(kind, seed):
    values = _values(600, seed % 1000)
    values += ["x" * length for length in range(34)]  # every tail of 4- and 16-byte blocks
    column = pa.array(
        [v.encode() for v in values] if kind in (pa.binary(), pa.large_binary()) else values,
        type=kind,
    )
    for part in (column, column.slice(13, 250)):
        python = part.to_pylist()
        assert murmur32(part, seed).tolist() == [mmh3.hash(v, seed, signed=False) for v in python]
        wide = [mmh3.hash64(v, seed, signed=False)[0] for v in python]
        assert murmur64(part, seed).tolist() == wide


def test_a_seed_mmh3_refuses_is_refused():
    column = pa.array(["a"])
    for seed in (-1, 2**32):
        with pytest.raises(ValueError, match="seed"):
            murmur32(column, seed)
        with pytest.raises(ValueError):
            mmh3.hash("a", seed)
        with pytest.raises(ValueError, match="hash_seed"):
            TabularSchema("y", (), ("c",), (10,), hashed=("c",), hash_seed=seed)


def test_an_empty_column_hashes_to_nothing():
    assert murmur64(pa.array([], type=pa.string())).size == 0
