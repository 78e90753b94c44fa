"""Checkpoint files: a JobState in a run directory, torch.save'd behind a header line that
carries the payload's SHA-256, written to a temporary file, synced, then renamed into place.
Loading refuses, naming the file, one that is not a recsync checkpoint, is truncated or
altered (checksum), or holds NaN or infinite values.

A run that checkpoints while it trains keeps the previous checkpoint beside the latest
(checkpoint.prev.pt): a latest one that cannot be read is refused, and the previous one is
used (`load_run_checkpoint`). The cuts' checkpoints are written by a background thread
(`CheckpointWriter`), one at a time, while training goes on.

Hash tables' checkpoints grow with what changed: with `deltas_per_full` K > 0, a cut after
a full checkpoint writes only what changed since the cut before it
(checkpoint.delta-NNNN.pt: the hash shards' changed rows and evicted keys, the dense part
whole; coordinator/checkpoint.py `state_delta`), K of them, then a full one again. Each
delta names the full checkpoint it builds on (its checksum) and its place in the chain;
loading applies, in order, the deltas of the full checkpoint it loaded, and stops at the
first that is missing or damaged (the state of the cut before it is used)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import torch

from recsync.coordinator.checkpoint import JobState, apply_state_delta, state_delta

CHECKPOINT = "checkpoint.pt"
CHECKPOINT_TMP = "checkpoint.tmp"
PREVIOUS = "checkpoint.prev.pt"
BEST = "best.pt"  # the best evaluated model of a run ([run] keep_best), for export and predict
BEST_TMP = "best.tmp"
HEADER = b"recsync-checkpoint sha256="
DELTA_HEADER = re.compile(rb"recsync-checkpoint-delta base=([0-9a-f]{64}) n=([0-9]+) sha256=")
DELTA_NAME = "checkpoint.delta-{:04d}.pt"
DELTA_GLOB = "checkpoint.delta-*.pt"


def _payload(state: JobState) -> bytes:
    buffer = io.BytesIO()
    torch.save(state.to_dict(), buffer)
    return buffer.getvalue()


def _write(path: Path, header: bytes, payload: bytes, keep_previous: bool = False) -> int:
    """Write header + payload to `path` atomically (a temporary file, synced, renamed);
    returns the bytes written."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(header)
        out.write(payload)
        out.flush()
        os.fsync(out.fileno())
    if keep_previous and path.exists():
        path.replace(path.with_name(PREVIOUS))
    tmp.replace(path)  # a reader never sees half a checkpoint
    return len(header) + len(payload)


def save_checkpoint(
    run_path: Path, state: JobState, name: str = CHECKPOINT, keep_previous: bool = False
) -> Path:
    """Write `state` as `run_path/name` (atomically: a temporary file, synced, renamed);
    `keep_previous`: the file it replaces becomes checkpoint.prev.pt. A new checkpoint.pt
    drops the deltas of the one before."""
    path, _, _ = _save_full(Path(run_path), state, name, keep_previous)
    return path


def _save_full(
    run_path: Path, state: JobState, name: str = CHECKPOINT, keep_previous: bool = False
) -> tuple[Path, str, int]:
    """(path, checksum, bytes) of a full checkpoint written as `name`."""
    path = run_path / name
    payload = _payload(state)
    digest = hashlib.sha256(payload).hexdigest()
    written = _write(path, HEADER + digest.encode() + b"\n", payload, keep_previous)
    if name == CHECKPOINT:
        for delta in run_path.glob(DELTA_GLOB):
            delta.unlink()
    return path, digest, written


def save_delta(run_path: Path, delta: JobState, base_digest: str, number: int) -> int:
    """Write the `number`-th delta (from 1) over the full checkpoint of checksum
    `base_digest`; returns the bytes written."""
    payload = _payload(delta)
    header = (
        f"recsync-checkpoint-delta base={base_digest} n={number} sha256="
        f"{hashlib.sha256(payload).hexdigest()}\n"
    ).encode()
    return _write(Path(run_path) / DELTA_NAME.format(number), header, payload)


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
    """A run's latest usable checkpoint (its full checkpoint and the deltas over it), and
    why the latest one was refused (None: it was used). A checkpoint file (not a run
    directory) is loaded as it is."""
    path = Path(run_path)
    previous = path / PREVIOUS
    if not path.is_dir():
        return load_checkpoint(path), None
    if not previous.exists():
        return _with_deltas(path, load_checkpoint(path))
    try:
        state = load_checkpoint(path)
    except ValueError as error:
        return load_checkpoint(previous), f"{error}; using the previous one, {previous}"
    return _with_deltas(path, state)


def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return file.readline()[len(HEADER) :].strip().decode()


def _with_deltas(run_path: Path, base: JobState) -> tuple[JobState, str | None]:
    """`base` (the run's checkpoint.pt) with its deltas applied in order; the first missing
    or damaged one ends the chain (and is named)."""
    digest = _digest(run_path / CHECKPOINT)
    state, number = base, 1
    for path in sorted(run_path.glob(DELTA_GLOB)):
        data = path.read_bytes()
        header, _, payload = data.partition(b"\n")
        found = DELTA_HEADER.match(header + b"\n")
        if found is None or found.group(1).decode() != digest:
            continue  # a delta of another full checkpoint
        if int(found.group(2)) != number:
            return state, f"{path}: delta {found.group(2).decode()} where {number} was due"
        if hashlib.sha256(payload).hexdigest().encode() != header[found.end() :]:
            return state, f"{path}: corrupted delta checkpoint; using the cut before it"
        delta = JobState.from_dict(torch.load(io.BytesIO(payload), weights_only=True))
        state, number = apply_state_delta(state, delta), number + 1
    return state, None


class CheckpointWriter:
    """Writes a run's checkpoints on a background thread, one at a time and in order (a new
    one waits for the one being written), keeping the previous one; with
    `deltas_per_full` K > 0, hash tables' cuts as K deltas after each full checkpoint.
    `stats()`: count, bytes and seconds of the full and the delta checkpoints written."""

    def __init__(self, run_path: Path, deltas_per_full: int = 0):
        self.run_path = Path(run_path)
        self.deltas_per_full = deltas_per_full
        self.written = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._last: JobState | None = None  # the state of the last checkpoint written
        self._digest = ""
        self._deltas = 0
        self._stats = {kind: {"count": 0, "bytes": 0, "seconds": 0.0} for kind in ("full", "delta")}

    def stats(self) -> dict[str, Any]:
        return {kind: dict(counted) for kind, counted in self._stats.items()}

    def save_final(self, state: JobState) -> Path:
        """Write the job's end state (after any checkpoint being written), whole or as a
        delta as the cuts are."""
        self.wait()
        self._save(state)
        self.wait()
        return self.run_path / CHECKPOINT

    def write(self, state: JobState) -> None:
        """Start writing `state` (after the checkpoint being written, if any)."""
        self.wait()
        self._thread = threading.Thread(target=self._save, args=(state,), daemon=True)
        self._thread.start()

    def _save(self, state: JobState) -> None:
        try:
            start = time.perf_counter()
            delta = None
            if self._last is not None and self._deltas < self.deltas_per_full:
                delta = state_delta(self._last, state)
            if delta is not None:
                self._deltas += 1
                written = save_delta(self.run_path, delta, self._digest, self._deltas)
                kind = "delta"
            else:
                _, self._digest, written = _save_full(self.run_path, state, keep_previous=True)
                self._deltas, kind = 0, "full"
            self._last = state
            self.written += 1
            counted = self._stats[kind]
            counted["count"] += 1
            counted["bytes"] += written
            counted["seconds"] += time.perf_counter() - start
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
