"""Checkpoint files: a JobState in a run directory, torch.save'd behind a header line that
carries the payload's SHA-256, written to a temporary file, synced, then renamed into place.
Loading refuses, naming the file, one that is not a recsync checkpoint, is truncated or
altered (checksum), or holds NaN or infinite values.

A run that checkpoints while it trains keeps the previous checkpoint beside the latest
(checkpoint.prev.pt): a latest one that cannot be read is refused, and the previous one is
used (`load_run_checkpoint`). The cuts' checkpoints are written by a background thread
(`CheckpointWriter`), one at a time, while training goes on."""

from __future__ import annotations

import hashlib
import io
import os
import threading
from pathlib import Path

import torch

from recsync.coordinator.checkpoint import JobState

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_TMP = "checkpoint.tmp"
PREVIOUS = "checkpoint.prev.pt"
BEST = "best.pt"  # the best evaluated model of a run ([run] keep_best), for export and predict
BEST_TMP = "best.tmp"
HEADER = b"recsync-checkpoint sha256="


def save_checkpoint(
    run_path: Path, state: JobState, name: str = CHECKPOINT, keep_previous: bool = False
) -> Path:
    """Write `state` as `run_path/name` (atomically: a temporary file, synced, renamed);
    `keep_previous`: the file it replaces becomes checkpoint.prev.pt."""
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
    if keep_previous and path.exists():
        path.replace(path.with_name(PREVIOUS))
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


def load_run_checkpoint(run_path: Path) -> tuple[JobState, str | None]:
    """A run's latest usable checkpoint, and why the latest one was refused (None: it was
    used). A checkpoint file (not a run directory) is loaded as it is."""
    path = Path(run_path)
    previous = path / PREVIOUS
    if not path.is_dir() or not previous.exists():
        return load_checkpoint(path), None
    try:
        return load_checkpoint(path), None
    except ValueError as error:
        return load_checkpoint(previous), f"{error}; using the previous one, {previous}"


class CheckpointWriter:
    """Writes a run's checkpoints on a background thread, one at a time and in order (a new
    one waits for the one being written), keeping the previous one."""

    def __init__(self, run_path: Path):
        self.run_path = Path(run_path)
        self.written = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def write(self, state: JobState) -> None:
        """Start writing `state` (after the checkpoint being written, if any)."""
        self.wait()
        self._thread = threading.Thread(target=self._save, args=(state,), daemon=True)
        self._thread.start()

    def _save(self, state: JobState) -> None:
        try:
            save_checkpoint(self.run_path, state, keep_previous=True)
            self.written += 1
        except BaseException as error:  # noqa: BLE001 - raised to the caller by `wait`
            self._error = error

    def wait(self) -> None:
        """Until the checkpoint being written is on disk (raises what writing it raised)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
