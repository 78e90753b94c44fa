"""Feature-prefixed 64-bit keys: what readers emit for expandable hash embedding tables.

In keyed mode (`keyed=True` on a schema) a reader does not reduce a categorical value to a
row of a fixed table; it emits key = (feature << 56) | id56, stored as a signed int64 (two's
complement: features >= 128 give negative keys). Feature f of a batch holds only keys whose
top 8 bits are f, so two features never share a key and the same raw id in two features
is two different keys (two rows). At most MAX_TABLES = 256 categorical features.

The id56 of a value:
- an integer in [0, 2^56) is kept exactly: Criteo's hex ids (int(x, 16)), libSVM/libffm
  indices, CSV/Parquet integer ids;
- any other integer (negative, >= 2^56, or beyond 64 bits, e.g. a 30-digit decimal) is
  hashed: the first half of mmh3's 64-bit hash, `mmh3.hash64(str(value), 0,
  signed=False)[0]`, of its canonical decimal text, masked to its low 56 bits. A hex value
  follows the same rule on int(x, 16) (the same integer written in hex or decimal gets
  the same id56);
- a string or bytes (a `hashed` column) is hashed the same way with the schema's
  hash_seed: `mmh3.hash64(value, hash_seed, signed=False)[0] & ID_MASK` (a str hashes its
  UTF-8 bytes, so "abc" and b"abc" agree; an int in a hashed column is hashed from its
  decimal text, as in fixed mode).
"""

from __future__ import annotations

import mmh3
import numpy as np
import torch

KEY_BITS = 56
MAX_TABLES = 256
ID_MASK = (1 << KEY_BITS) - 1  # 2**56 - 1
INTEGER_SEED = 0  # the mmh3 seed of integers outside [0, 2^56)
_U64 = 2**64
_I64_MAX = 2**63 - 1


def check_features(count: int, what: str) -> None:
    """ValueError if `count` categorical features do not fit the key's 8-bit prefix."""
    if count > MAX_TABLES:
        raise ValueError(f"{what}: keyed mode allows at most {MAX_TABLES} features, got {count}")


def hashed_id(value: str | bytes, seed: int = 0) -> int:
    """The id56 of a string or bytes: mmh3's 64-bit hash (first half) masked to 56 bits."""
    return mmh3.hash64(value, seed, signed=False)[0] & ID_MASK


def integer_id(value: int) -> int:
    """The id56 of an integer: itself in [0, 2^56), else its decimal text hashed."""
    if 0 <= value <= ID_MASK:
        return value
    return hashed_id(str(value), INTEGER_SEED)


def prefix(feature: int) -> int:
    """feature << 56 as a signed int64 (negative for features >= 128)."""
    if not 0 <= feature < MAX_TABLES:
        raise ValueError(f"feature {feature} is not in [0, {MAX_TABLES})")
    shifted = feature << KEY_BITS
    return shifted - _U64 if shifted > _I64_MAX else shifted


def key(feature: int, id56: int) -> int:
    """The signed int64 key of an id56 (in [0, 2^56)) of `feature`."""
    return prefix(feature) | id56


def integer_ids(values: np.ndarray) -> np.ndarray:
    """The id56 (uint64) of every integer of an int64/uint64 array; only the values
    outside [0, 2^56) are hashed, one by one."""
    if values.dtype == np.uint64:
        out = values.copy()
        outside = out > np.uint64(ID_MASK)
    else:
        signed = values.astype(np.int64)
        outside = (signed < 0) | (signed > ID_MASK)
        out = signed.astype(np.uint64)  # wraps negatives; they are hashed below
    if outside.any():
        out[outside] = [integer_id(int(v)) for v in values[outside].tolist()]
    return out


def make_keys(feature: int, ids: np.ndarray) -> np.ndarray:
    """The int64 keys of `feature` for ids already in [0, 2^56) (any integer dtype);
    ValueError for an id outside it (a negative one included)."""
    top = np.uint64(prefix(feature) % _U64)
    unsigned = ids.astype(np.uint64)
    if (unsigned >> np.uint64(KEY_BITS)).any():
        raise ValueError(f"make_keys: ids of feature {feature} must be in [0, 2^{KEY_BITS})")
    return (unsigned | top).view(np.int64)


def prefixes(num_features: int) -> torch.Tensor:
    """The prefixes of features 0 .. num_features-1 as an int64 tensor."""
    check_features(num_features, "prefixes")
    return torch.tensor([prefix(f) for f in range(num_features)], dtype=torch.int64)


def table_of(keys: torch.Tensor) -> torch.Tensor:
    """The feature (table) of every key: its top 8 bits, in [0, 256)."""
    return (keys >> KEY_BITS) & 0xFF


def id_of(keys: torch.Tensor) -> torch.Tensor:
    """The id56 of every key: its low 56 bits."""
    return keys & ID_MASK


def fixed_keys(keys: torch.Tensor, fixed: tuple[tuple[int, int], ...]) -> torch.Tensor:
    """`keys` with the ids of each fixed table among hash tables, (feature, rows) of
    `fixed`, taken modulo its rows (its key: the feature's prefix | id % rows); the other
    keys as they are."""
    if not fixed or not keys.numel():
        return keys
    rows = torch.zeros(MAX_TABLES, dtype=torch.int64)
    for feature, count in fixed:
        rows[feature] = count
    per_key = rows.index_select(0, table_of(keys))
    ids = id_of(keys)
    return torch.where(per_key > 0, keys - ids + ids % per_key.clamp(min=1), keys)
