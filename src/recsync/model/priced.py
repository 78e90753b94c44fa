"""Priced math: tensors that have a shape and a dtype but no values, for a simulation that
prices the work instead of doing it (`recsync simulate --math priced`).

A `PricedTensor` holds no memory: every operation on it runs on PyTorch's `meta` device
(shapes and dtypes only, no arithmetic), and its result is priced too; an operation that
writes into a real tensor from a priced one leaves the real one as it was (its shape is
all a priced run keeps). Its `nbytes` is the real tensor's (shape x element size), so a
message carrying one costs on the wire what the real one would. Reading a value (`float`,
`item`, a comparison turned into a Python bool) raises `PricedValueRead`: priced math has
no values to decide anything by.

`priced_math()` is where a job is assembled priced: while it is active, every floating
32-bit tensor of more than one element made from nothing (`torch.zeros`, `empty`, `rand`,
...) is made priced, so the pieces that own the model's tensors (dense replicas and their
optimizer state, embedding shards, dense and sync servers) are built as they always are,
with priced tensors; one-element tensors, 64-bit ones (step counters, the trainers'
tallies) and integer ones (ids, row versions) stay real.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

_READS = {torch.ops.aten._local_scalar_dense.default}  # what item(), float(), bool() call


class PricedValueRead(RuntimeError):
    """A value of a priced tensor was read: the code path needs real math."""


class PricedTensor(torch.Tensor):
    """A tensor with a shape and a dtype and no values (see the module's docstring)."""

    @staticmethod
    def __new__(
        cls, shape: tuple[int, ...] | torch.Size, dtype: torch.dtype = torch.float32
    ) -> PricedTensor:
        cpu = torch.device("cpu")
        made: PricedTensor = torch.Tensor._make_wrapper_subclass(
            cls, shape, dtype=dtype, device=cpu
        )
        return made

    def __init__(self, shape: tuple[int, ...] | torch.Size, dtype: torch.dtype = torch.float32):
        pass

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return f"PricedTensor({tuple(self.shape)}, {self.dtype})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def,override]
        if func in _READS:
            raise PricedValueRead(
                f"a value of a priced tensor was read ({func}): priced math keeps shapes "
                'only; this needs `math = "real"`'
            )
        writes = _WRITES.get(func)
        if writes is None:
            writes = _WRITES[func] = _writes_of(func)
        if writes:  # in place: the tensors written to (a real one keeps its values)
            written = _written(writes, args, kwargs or {})
            if written:
                return written[0] if len(written) == 1 else tuple(written)
        if func is _INDEX:  # a real mask picks as many rows as it holds: its positions
            args = (args[0], _positions(args[1]), *args[2:])
        try:
            key = (func, _part(args), _part(tuple(sorted(kwargs.items()))) if kwargs else ())
        except TypeError:
            key = None
        shapes = _SHAPES.get(key) if key is not None else None
        if shapes is None:
            kwargs = kwargs or {}
            out = func(*tree_map(_as_meta, args), **tree_map(_as_meta, kwargs))
            shapes = tree_map(_shape_of, out)
            if key is not None and len(_SHAPES) < _MAX_SHAPES:
                _SHAPES[key] = shapes
        kind = type(shapes)
        if kind is _Shape:  # one tensor out: most operations
            return PricedTensor(shapes[0], shapes[1])
        if kind is tuple or kind is list:  # several (an embedding bag's four)
            return _made(shapes)
        return tree_map(_made, shapes)


_INDEX = torch.ops.aten.index.Tensor


def _positions(indices: list[Any]) -> list[Any]:
    """An index's real boolean masks as the positions they hold (one long index per masked
    dimension): the output's shape then follows from shapes alone."""
    out: list[Any] = []
    for index in indices:
        if (
            isinstance(index, torch.Tensor)
            and not isinstance(index, PricedTensor)
            and (index.dtype == torch.bool)
        ):
            out.extend(index.nonzero(as_tuple=True))
        else:
            out.append(index)
    return out


class _Shape(tuple[Any, ...]):
    """An output's (shape, dtype), remembered for the same operation on the same shapes."""


_SHAPES: dict[Any, Any] = {}  # (operation, its arguments' shapes and values) -> outputs'
_MAX_SHAPES = 100_000
_WRITES: dict[Any, tuple[tuple[int, str], ...]] = {}  # an operation's written arguments


def _writes_of(func: Any) -> tuple[tuple[int, str], ...]:
    """The (position, name) of the arguments an operation writes to (in place, or out=)."""
    return tuple(
        (i, a.name)
        for i, a in enumerate(func._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    )


def _written(
    writes: tuple[tuple[int, str], ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[Any]:
    """The arguments an in-place (or out=) operation writes to."""
    found = []
    for index, name in writes:
        if name in kwargs:
            found.append(kwargs[name])
        elif index < len(args):
            found.append(args[index])
    return found


def _part(value: Any) -> Any:
    """What of an argument an operation's output shapes depend on: a tensor's shape, dtype
    and whether it is priced; a value itself (a TypeError if it cannot be a key's)."""
    kind = type(value)
    if kind is tuple or kind is list:
        return tuple([_part(v) for v in value])
    if kind is PricedTensor:
        return (value.shape, value.dtype, True)
    if isinstance(value, torch.Tensor):
        return (value.shape, value.dtype, False)
    hash(value)
    return value


def _shape_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _Shape((tuple(value.shape), value.dtype))
    return value


def _made(value: Any) -> Any:
    kind = type(value)
    if kind is _Shape:
        return PricedTensor(value[0], value[1])
    if kind is tuple or kind is list:
        return kind([_made(v) for v in value])
    return value


def _as_meta(value: Any) -> Any:
    if isinstance(value, PricedTensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    return value


def writable_alias(flat: torch.Tensor) -> torch.Tensor:
    """An alias of `flat`'s memory with its own autograd version counter, for lock-free
    in-place writes that another thread's backward must not trip over (a priced tensor,
    which has no memory, is its own alias)."""
    if isinstance(flat, PricedTensor):
        return flat
    return torch.empty(0).set_(flat.untyped_storage(), flat.storage_offset(), flat.shape, (1,))


def scalar_value(value: torch.Tensor) -> float:
    """A one-element tensor's value (a loss); NaN for a priced one (priced math has none)."""
    if isinstance(value, PricedTensor):
        return float("nan")
    return float(value.detach())


def is_priced(value: torch.Tensor) -> bool:
    """`value` is a priced tensor (it has no values)."""
    return isinstance(value, PricedTensor)


_SHARED: dict[tuple[int, int, torch.dtype], PricedTensor] = {}
_MAX_SHARED = 4096


def shaped(rows: int, cols: int, dtype: torch.dtype = torch.float32) -> PricedTensor:
    """A rows x cols priced tensor, one object shared by every caller that asks for the same
    shape: it has no values to change (an in-place write to it changes nothing), so a
    lookup's partial pools, a push's row gradients and the like, which are only read,
    need not each make their own."""
    key = (rows, cols, dtype)
    made = _SHARED.get(key)
    if made is None:
        if len(_SHARED) >= _MAX_SHARED:
            _SHARED.clear()
        made = _SHARED[key] = PricedTensor((rows, cols), dtype)
    return made


def pooled_shape(offsets: torch.Tensor, table: torch.Tensor) -> PricedTensor | None:
    """What a sum-pooled lookup of a priced `table` gives (one row a bag of `offsets`, its
    last offset included), made without a dispatch; None for a real table."""
    if type(table) is not PricedTensor:
        return None
    return shaped(offsets.shape[0] - 1, table.shape[1], table.dtype)


def priced_like(value: torch.Tensor) -> PricedTensor:
    """A priced tensor of `value`'s shape and dtype."""
    return PricedTensor(value.shape, value.dtype)


class _PricedFactories(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Makes each float32 tensor of more than one element made from nothing priced."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        leaves, _ = tree_flatten((args, kwargs))
        if any(isinstance(leaf, torch.Tensor) for leaf in leaves):
            return func(*args, **kwargs)
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        if dtype != torch.float32 or "out" in kwargs:
            return func(*args, **kwargs)
        on_meta = {k: None if k == "generator" else v for k, v in kwargs.items()}
        shaped = func(*args, **(on_meta | {"device": "meta", "pin_memory": None}))
        if isinstance(shaped, torch.Tensor) and shaped.numel() > 1:
            return PricedTensor(shaped.shape, shaped.dtype)
        return func(*args, **kwargs)


_active = 0  # priced_math() contexts entered and not left


@contextmanager
def priced_math() -> Iterator[None]:
    """Within it, the model's tensors are made priced (see the module's docstring)."""
    global _active
    _active += 1
    try:
        with _PricedFactories():  # type: ignore[no-untyped-call]
            yield
    finally:
        _active -= 1


def pricing() -> bool:
    """A job is being assembled under `priced_math()`."""
    return _active > 0
