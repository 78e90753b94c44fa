"""Checkpoint files: a JobState in a run directory, written with torch.save."""

from __future__ import annotations

from pathlib import Path

import torch

from recsync.coordinator.checkpoint import JobState

CHECKPOINT = "checkpoint.pt"


def save_checkpoint(run_path: Path, state: JobState) -> Path:
    path = Path(run_path) / CHECKPOINT
    tmp = path.with_suffix(".tmp")
    torch.save(state.to_dict(), tmp)
    tmp.replace(path)  # a reader never sees half a checkpoint
    return path


def load_checkpoint(run_path: Path) -> JobState:
    path = Path(run_path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}: the run did not finish, or is not a run dir")
    try:
        raw = torch.load(path, weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is a user error here
        raise ValueError(f"{path}: not a recsync checkpoint ({error})") from None
    return JobState.from_dict(raw)
