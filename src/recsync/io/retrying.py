"""A remote data file read through transient failures: each read goes to the byte it should
(one ranged request), and a read that fails for a reason that may pass (a dropped
connection, a store restarting, a throttle) is tried again after a growing pause, from the
same byte: nothing read twice, nothing skipped. A missing object or a refused permission
is no transient failure: it is a DataError at once, naming the file (without credentials).

Retries are counted per process (`retries_so_far`) and each one is logged on the
"recsync.storage" logger.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from typing import Any

from recsync.io.urls import filesystem_of, shown, storage_error

BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # about a minute in all
_LOG = logging.getLogger("recsync.storage")
_retries = 0


def retries_so_far() -> int:
    """Reads of remote data files retried in this process."""
    return _retries


def _lasting(error: OSError) -> bool:
    text = str(error)
    return isinstance(error, FileNotFoundError | PermissionError) or any(
        mark in text for mark in ("ACCESS_DENIED", "NO_SUCH_BUCKET", "NO_SUCH_KEY", "403")
    )


class SizedRaw(io.RawIOBase):
    """A raw, seekable file of `_size` bytes read at `_position` (a subclass reads)."""

    _size: int
    _position: int = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def tell(self) -> int:
        return self._position


class RetryingRaw(SizedRaw):
    """The raw, seekable bytes of a remote file (see the module)."""

    def __init__(self, url: str, pause: Any = time.sleep, size: int | None = None):
        """`size`: the file's, known before (it is opened at its first read)."""
        self.url = url
        self._pause = pause
        self._file: Any = None
        self._position = 0
        self._size = size if size is not None else self._retried(lambda: self._opened().size())

    def _opened(self) -> Any:
        if self._file is None:
            filesystem, inner = filesystem_of(self.url)
            self._file = filesystem.open_input_file(inner)
        return self._file

    def _retried(self, call: Any) -> Any:
        global _retries
        for attempt, pause_s in enumerate((*BACKOFF_S, None)):
            try:
                return call()
            except OSError as error:
                if _lasting(error) or pause_s is None:
                    raise storage_error(error, self.url) from None
                self._drop()
                _retries += 1
                first = str(error).splitlines()[0] if str(error) else type(error).__name__
                _LOG.warning(
                    "%s: read failed (%s); retrying in %.1f s (try %d of %d)",
                    shown(self.url),
                    first,
                    pause_s,
                    attempt + 2,
                    len(BACKOFF_S) + 1,
                )
                self._pause(pause_s)
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), max(0, self._size - self._position))
        if want == 0:
            return 0

        def read() -> int:
            file = self._opened()
            file.seek(self._position)
            return int(file.readinto(memoryview(buffer)[:want]))

        got: int = self._retried(read)
        if got < want:  # the object ended before the size it had when opened
            raise storage_error(
                OSError(f"ended at byte {self._position + got} of {self._size} (truncated?)"),
                self.url,
            )
        self._position += got
        return got

    def close(self) -> None:
        self._drop()
        super().close()


READ_BUFFER_BYTES = 1 << 20


def RetryingFile(url: str) -> io.BufferedReader:  # noqa: N802 - reads as a type
    """A buffered, seekable reader of a remote file (RetryingRaw)."""
    return io.BufferedReader(RetryingRaw(url), buffer_size=READ_BUFFER_BYTES)
