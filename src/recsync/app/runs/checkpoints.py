"""Checkpoint files: a JobState in a run directory, torch.save'd behind a header line that
carries the payload's SHA-256, written to a temporary file, synced, then renamed into place.
Loading refuses, naming the file, one that is not a recsync checkpoint, is truncated or
altered (checksum), or holds NaN or infinite values."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import torch

from recsync.coordinator.checkpoint import JobState

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_TMP = "checkpoint.tmp"
BEST = "best.pt"  # the best evaluated model of a run ([run] keep_best), for export and predict
BEST_TMP = "best.tmp"
HEADER = b"recsync-checkpoint sha256="


def save_checkpoint(run_path: Path, state: JobState, name: str = CHECKPOINT) -> Path:
    """Write `state` as `run_path/name` (atomically: a temporary file, synced, renamed)."""
    path = Path(run_path) / name
    buffer = io.BytesIO()
    torch.save(state.to_dict(), buffer)
    payload = buffer.getvalue()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n")
        out.write(payload)
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)  # a reader never sees half a checkpoint
    return path


def load_checkpoint(run_path: Path) -> JobState:
    """The JobState of a run directory's checkpoint (or of a checkpoint file)."""
    path = Path(run_path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}: the run did not finish, or is not a run dir")
    data = path.read_bytes()
    header, _, payload = data.partition(b"\n")
    if not header.startswith(HEADER):
        raise ValueError(f"{path}: not a recsync checkpoint (no recsync header)")
    if hashlib.sha256(payload).hexdigest().encode() != header[len(HEADER) :]:
        raise ValueError(
            f"{path}: corrupted checkpoint: its checksum does not match its contents "
            f"({len(data):,} bytes; truncated or altered after it was written)"
        )
    try:
        state = JobState.from_dict(torch.load(io.BytesIO(payload), weights_only=True))
        state.check_finite()
    except Exception as error:  # noqa: BLE001 - any unreadable content is a user error here
        raise ValueError(f"{path}: not a usable recsync checkpoint ({error})") from None
    return state
