"""Tensors in one memory-mapped file that several processes of a machine map: the state a
trainer's worker processes share (its dense replica, optimizer state and stats). The file
lives in /dev/shm where there is one (memory, never written to disk); the creator copies
the values in, the others attach to the same layout, and once all have mapped it the file
is unlinked: the memory lives on with the mappings, and nothing is left behind by a job
that is killed."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid

import torch

ALIGN = 64  # bytes: each tensor starts on its own cache line


def shared_path(label: str) -> str:
    """A fresh file name for one node's shared state."""
    folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    return os.path.join(folder, f"recsync-{label}-{uuid.uuid4().hex[:12]}")


def _layout(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, int], int]:
    """Byte offset of each tensor in the file, and the file's size."""
    offsets, end = {}, 0
    for name, tensor in tensors.items():
        assert tensor.is_contiguous(), f"{name} is not contiguous"
        offsets[name] = end
        end += -(-tensor.numel() * tensor.element_size() // ALIGN) * ALIGN
    return offsets, max(end, ALIGN)


def _map(path: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    offsets, size = _layout(tensors)
    storage: torch.UntypedStorage = torch.UntypedStorage.from_file(  # type: ignore[assignment]
        path, shared=True, nbytes=size
    )
    mapped = {}
    for name, like in tensors.items():
        start = offsets[name] // like.element_size()
        view = torch.empty(0, dtype=like.dtype).set_(storage, start, like.shape, like.stride())
        mapped[name] = view
    return mapped


def create_shared(path: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Tensors like `tensors`, holding their values, in a new file at `path`."""
    _, size = _layout(tensors)
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)  # the node's user's
    with os.fdopen(descriptor, "wb") as file:
        file.truncate(size)
    mapped = _map(path, tensors)
    for name, tensor in tensors.items():
        mapped[name].copy_(tensor)
    return mapped


def attach_shared(path: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors `create_shared` put at `path` (`tensors`: the same names, shapes and
    dtypes; their values are not used)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"shared state {path} is gone (its creator died?)")
    _, size = _layout(tensors)
    if os.path.getsize(path) != size:
        raise ValueError(f"shared state {path} holds {os.path.getsize(path)} bytes, not {size}")
    return _map(path, tensors)


def release_shared(path: str) -> None:
    """Unlink the file (the mappings stay valid)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
