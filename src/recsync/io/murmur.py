"""mmh3's hashes of every value of a string or binary column, compiled: what a hashed id
column costs without a Python call per value.

`murmur32` is `mmh3.hash(value, seed, signed=False)` (MurmurHash3_x86_32) and `murmur64`
is `mmh3.hash64(value, seed, signed=False)[0]` (the first half of MurmurHash3_x64_128), of
each value's bytes (a string's UTF-8 bytes, as mmh3 hashes a str): bit for bit the same
(tested against mmh3). Seeds outside [0, 2^32) are refused, as mmh3 refuses them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from recsync.ps.hash_index import Array, njit

_M32 = np.uint64(0xFFFFFFFF)
_C1_32, _C2_32 = np.uint64(0xCC9E2D51), np.uint64(0x1B873593)
_C1_64, _C2_64 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)


@njit
def _rotl32(x: np.uint64, r: int) -> np.uint64:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit
def _rotl64(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit
def _word(data: Array, at: int, size: int) -> np.uint64:
    """`size` bytes from `at` as a little-endian unsigned integer."""
    value = np.uint64(0)
    for i in range(size - 1, -1, -1):
        value = (value << np.uint64(8)) | np.uint64(data[at + i])
    return value


@njit
def _fmix64(k: np.uint64) -> np.uint64:
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


@njit
def _x86_32(data: Array, start: int, length: int, seed: np.uint64) -> np.uint64:
    h = seed
    blocks = length // 4
    for b in range(blocks):
        k = (_word(data, start + 4 * b, 4) * _C1_32) & _M32
        k = (_rotl32(k, 15) * _C2_32) & _M32
        h = _rotl32(h ^ k, 13)
        h = (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32
    tail = length & 3
    if tail:
        k = (_word(data, start + 4 * blocks, tail) * _C1_32) & _M32
        h ^= (_rotl32(k, 15) * _C2_32) & _M32
    h ^= np.uint64(length)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    return h ^ (h >> np.uint64(16))


@njit
def _x64_128_first(data: Array, start: int, length: int, seed: np.uint64) -> np.uint64:
    h1, h2 = seed, seed
    blocks = length // 16
    for b in range(blocks):
        k1 = _word(data, start + 16 * b, 8)
        k2 = _word(data, start + 16 * b + 8, 8)
        h1 ^= _rotl64(k1 * _C1_64, 31) * _C2_64
        h1 = (_rotl64(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
        h2 ^= _rotl64(k2 * _C2_64, 33) * _C1_64
        h2 = (_rotl64(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
    tail, at = length & 15, start + 16 * blocks
    if tail > 8:
        h2 ^= _rotl64(_word(data, at + 8, tail - 8) * _C2_64, 33) * _C1_64
    if tail:
        h1 ^= _rotl64(_word(data, at, min(tail, 8)) * _C1_64, 31) * _C2_64
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    return h1 + h2


@njit
def _hash_all(offsets: Array, data: Array, seed: int, wide: bool) -> Array:
    n = offsets.size - 1
    out = np.empty(n, dtype=np.uint64)
    s = np.uint64(seed)
    for i in range(n):
        start, length = offsets[i], offsets[i + 1] - offsets[i]
        out[i] = _x64_128_first(data, start, length, s) if wide else _x86_32(data, start, length, s)
    return out


def _hashes(column: pa.Array, seed: int, wide: bool) -> np.ndarray:
    if not 0 <= seed < 2**32:
        raise ValueError(f"hash seed {seed} is out of range [0, 2^32)")
    assert column.null_count == 0, "hash the values of a column with no null"
    large = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    offset_type = np.int64 if large else np.int32
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[
        column.offset : column.offset + len(column) + 1
    ]
    data = np.zeros(0, dtype=np.uint8)
    if data_buffer is not None:
        data = np.frombuffer(data_buffer, dtype=np.uint8)
    hashed: np.ndarray = _hash_all(offsets.astype(np.int64), data, seed, wide)
    return hashed


def murmur32(column: pa.Array, seed: int = 0) -> np.ndarray:
    """mmh3.hash(v, seed, signed=False) of every value of a string or binary column with
    no null, as uint64."""
    return _hashes(column, seed, wide=False)


def murmur64(column: pa.Array, seed: int = 0) -> np.ndarray:
    """mmh3.hash64(v, seed, signed=False)[0] of every value of a string or binary column
    with no null, as uint64."""
    return _hashes(column, seed, wide=True)
