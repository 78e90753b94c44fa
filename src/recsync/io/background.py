"""A training stream made in a process of its own, as a DataLoader worker makes it: the
reader's process then only hands batches out. One reader serves every worker of a job, so
its own CPU caps the job's examples/s (measured on 16 cores: a reader making synthetic
batches saturated one core at about 86K examples/s, two thirds of it making them).

The stream is the same, in the same order: the producer runs the very iterator the reader
would have run, and a pipe (1 MiB: it holds the batches made ahead) carries them back in
order, as numpy arrays copied once. A producer that fails raises its error in the reader;
one whose reader died (killed with its actor) finds the pipe broken and exits."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from recsync.data.batch import Batch
from recsync.errors import DataError

PIPE_BYTES = 1 << 20  # the pipe holds this much made ahead (8 batches of the default task)
F_SETPIPE_SZ = 1031  # Linux's fcntl to resize a pipe (default 64 KiB: half a batch)
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
POLL_S = 1.0  # how often a blocked read checks the producer is alive
START_WAIT_S = 300.0  # a producer starts a Python with torch: slow on a busy machine


@dataclasses.dataclass(frozen=True)
class _Ended:
    cpu_seconds: float  # the producer's, since its first item (its last word: once it
    # exits, the fork server reaps it and /proc no longer tells)
    storage_retries: int = 0  # its reads of remote files retried (io/retrying.py)


@dataclasses.dataclass(frozen=True)
class _Failed:
    error: str
    data_error: bool  # a DataError (a bad line in strict mode): raised as one


def encoded(batch: Batch) -> tuple[np.ndarray, ...]:
    """A batch as numpy arrays (what crosses the pipe)."""
    return tuple(getattr(batch, f.name).numpy() for f in dataclasses.fields(Batch))


def decoded(arrays: tuple[np.ndarray, ...]) -> Batch:
    return Batch(*(torch.from_numpy(array) for array in arrays))


def _produce(make: Callable[[], Iterable[Any]], out: Connection) -> None:
    """The producer: every item of `make()` in order (a batch as numpy arrays, anything
    else, a side item, as it is), then what it spent (or the error). It blocks while the pipe is
    full, and ends once the reader is gone (a broken pipe)."""
    from recsync.io.retrying import retries_so_far

    torch.set_num_threads(1)
    first: float | None = None
    retried = retries_so_far()
    try:
        try:
            for item in make():
                first = time.process_time() if first is None else first
                out.send(encoded(item) if isinstance(item, Batch) else item)
        except Exception as error:  # noqa: BLE001 - handed to the reader, which raises it
            message = (
                str(error) if isinstance(error, DataError) else f"{type(error).__name__}: {error}"
            )
            out.send(_Failed(message, isinstance(error, DataError)))
            return
        spent = 0.0 if first is None else time.process_time() - first
        out.send(_Ended(spent, retries_so_far() - retried))
    except (BrokenPipeError, ConnectionResetError):
        return


@contextlib.contextmanager
def _main_script_not_rerun() -> Iterator[None]:
    """While a child is spawned: it does not run the parent's main script again. A spawned
    child runs the script its parent started from (as `__mp_main__`), for what the target
    might need of it; in a Ray actor that is Ray's worker script, a second of CPU importing
    Ray on the reader's start. The producer's target and factory live in modules."""
    main = sys.modules["__main__"]
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None:  # `-m`: not rerun anyway
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


class BackgroundBatches(Iterator[Batch]):
    """The batches of `make()` (a picklable factory: it runs in the producer process),
    made ahead in a background process and read from a pipe; any other item `make()`
    yields (what the stream learned on the way: rows it held out, lines it skipped) goes to
    `on_side` when the batches before it have been taken. Built once the first item
    arrived: a job starts with its data flowing (the producer's start, a Python importing
    torch, is not charged to training)."""

    def __init__(
        self,
        make: Callable[[], Iterable[Any]],
        on_side: Callable[[Any], None] | None = None,
    ):
        self._on_side = on_side
        # the reader runs Ray's threads: never fork it; a fork server (a clean process that
        # imported torch once) forks each producer, so a process hosting readers of one job
        # after another (runtime/ray/pool.py) pays a producer's start once
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["torch", __name__])
        self._pipe, writer = context.Pipe(duplex=False)
        with contextlib.suppress(OSError):  # not Linux, or a lower limit: a smaller pipe
            fcntl.fcntl(self._pipe.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
        self._process = context.Process(target=_produce, args=(make, writer), daemon=True)
        with _main_script_not_rerun():
            self._process.start()
        writer.close()  # the producer holds the only writer: its end is the pipe's end
        self._done = False
        self._first: Any = self._get(START_WAIT_S)
        self._cpu_at_first = self._cpu_now()
        self._cpu_at_close: float | None = None
        self._cpu_spent: float | None = None  # the producer's own word, once it ended
        self._retries = 0  # its reads of remote files retried, once it ended

    def storage_retries(self) -> int:
        """The producer's reads of remote files retried (known once it ended)."""
        return self._retries

    def cpu_seconds(self) -> float:
        """CPU seconds the producer spent since it made its first item (its start, a Python
        importing torch, left out): what making the stream costs. 0.0 where the system
        does not tell another process's CPU (Linux's /proc does)."""
        if self._cpu_spent is not None:
            return self._cpu_spent
        now = self._cpu_at_close if self._cpu_at_close is not None else self._cpu_now()
        return max(now - self._cpu_at_first, 0.0)

    def _cpu_now(self) -> float:
        """The producer's CPU seconds so far (user and system), from /proc (a producer
        that ended and was not yet reaped still tells; 0.0 where nothing does)."""
        try:
            with open(f"/proc/{self._process.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def __next__(self) -> Batch:
        while not self._done:
            if self._first is not None:
                item, self._first = self._first, None
            else:
                item = self._get(None)
            if isinstance(item, (_Ended, _Failed)):
                self._close()
                if isinstance(item, _Ended):
                    self._cpu_spent, self._retries = item.cpu_seconds, item.storage_retries
                    break
                if item.data_error:
                    raise DataError(item.error)
                raise RuntimeError(f"the background batch producer failed: {item.error}")
            if isinstance(item, tuple):
                return decoded(item)
            assert self._on_side is not None, f"a side item nobody takes: {item!r}"
            self._on_side(item)
        raise StopIteration

    def _get(self, wait_s: float | None) -> Any:
        """The next item; a producer that died, or made nothing in `wait_s`, is an error."""
        waited = 0.0
        while not self._pipe.poll(POLL_S):
            waited += POLL_S
            if wait_s is not None and waited >= wait_s:
                self._close()
                raise RuntimeError(f"the background batch producer made nothing in {wait_s:.0f} s")
        try:
            return self._pipe.recv()
        except EOFError:
            self._close()
            raise RuntimeError(
                "the background batch producer died (exit code "
                f"{self._process.exitcode}) before its stream ended"
            ) from None

    def _close(self) -> None:
        self._done = True
        self._cpu_at_close = self._cpu_now()  # before it is reaped: its CPU is gone then
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(timeout=POLL_S)
        self._pipe.close()

    def close(self) -> None:
        """Stop the producer (the stream need not have ended)."""
        if not self._done:
            self._close()
