"""Where data files live: local paths, or URLs of the filesystems pyarrow reaches (`s3://`,
`gs://`, `hdfs://`; `file://` is read as a local path).

A data file is named by a string: an absolute local path or a URL. `expanded` turns what a
config gives (a file, a directory, a glob) into the files, in name order; `open_binary`
opens one for reading (a URL's reads retried on a transient failure, `retrying.py`);
`file_size` and `file_stamp` describe it; `day_partitions` lists a folder's
`day=YYYY-MM-DD` partitions. Credentials never come from a config (io/urls.py).
"""

from __future__ import annotations

import fnmatch
import glob
import io
import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from recsync.errors import ConfigError
from recsync.io.urls import (
    base_name,
    filesystem_of,
    is_url,
    refuse_secrets,
    shown,
    storage_error,
    with_path,
)

_GLOB_CHARS = "*?["
# Spark's and Hive's bookkeeping files beside a partition's data: never data
_NOT_DATA = ("_", ".")


def _listed(url: str) -> list[str]:
    """The data files under a directory URL (recursively), in name order."""
    import pyarrow.fs as pafs

    filesystem, inner = filesystem_of(url)
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(inner.rstrip("/"), recursive=True))
    except OSError as error:
        raise storage_error(error, url, "cannot list") from None
    return sorted(
        with_path(url, info.path)
        for info in infos
        if info.type == pafs.FileType.File and not base_name(info.path).startswith(_NOT_DATA)
    )


def _url_files(url: str, what: str) -> list[str]:
    import pyarrow.fs as pafs

    filesystem, inner = filesystem_of(url)
    if not any(c in inner for c in _GLOB_CHARS):
        try:
            info = filesystem.get_file_info(inner)
        except OSError as error:
            raise storage_error(error, url, f"{what}: cannot look up") from None
        if info.type == pafs.FileType.File:
            return [url]
        if info.type == pafs.FileType.Directory:
            return _listed(url)
        return []
    # a glob: list from the deepest folder without a glob character, match the rest
    fixed = inner[: min(inner.find(c) for c in _GLOB_CHARS if c in inner)].rsplit("/", 1)[0]
    return [
        name
        for name in _listed(with_path(url, fixed))
        if fnmatch.fnmatchcase(filesystem_of(name)[1], inner)
    ]


def _local_files(path: str) -> list[str]:
    if any(c in path for c in _GLOB_CHARS):
        return sorted(p for p in glob.glob(path) if os.path.isfile(p))
    if os.path.isdir(path):
        return sorted(
            str(p)
            for p in Path(path).rglob("*")
            if p.is_file() and not p.name.startswith(_NOT_DATA)
        )
    return [path]  # a file, or none there: said where it is opened


def expanded(value: str, what: str = "data.path") -> list[str]:
    """The files `value` names (a file, a directory's data files, or a glob's matches), in
    name order; a ConfigError if a directory or a glob holds none, or (URLs) if none is
    there. A local file's name is kept as given, made absolute (it is opened later)."""
    refuse_secrets(value, what)
    if value.startswith("file://"):
        value = urlsplit(value).path
    if is_url(value):
        files = _url_files(value, what)
    else:
        files = _local_files(str(Path(value).expanduser().absolute()))
    if not files:
        raise ConfigError(f"{what}: no data file at {shown(value)}")
    return files


def exists(name: str) -> bool:
    """True if a data file is there."""
    if not is_url(name):
        return os.path.isfile(name)
    import pyarrow.fs as pafs

    filesystem, inner = filesystem_of(name)
    try:
        return bool(filesystem.get_file_info(inner).type == pafs.FileType.File)
    except OSError as error:
        raise storage_error(error, name, "cannot look up") from None


def file_stamp(name: str) -> tuple[int, int]:
    """(size, modification time in ns) of a data file: what tells one version from the next."""
    if not is_url(name):
        status = os.stat(name)
        return status.st_size, status.st_mtime_ns
    filesystem, inner = filesystem_of(name)
    try:
        info = filesystem.get_file_info(inner)
    except OSError as error:
        raise storage_error(error, name, "cannot look up") from None
    if info.size is None:
        raise storage_error(FileNotFoundError(inner), name)
    return int(info.size), int(info.mtime_ns or 0)


def file_size(name: str) -> int:
    return file_stamp(name)[0]


def open_binary(name: str | Path) -> io.BufferedReader:
    """A data file opened for reading bytes, buffered (streams: text, gzip, CSV). A URL's
    reads are retried with backoff on a transient failure, resuming at the byte they
    stopped at (retrying.py)."""
    text = str(name)
    if not is_url(text):
        return open(text, "rb")
    from recsync.io.retrying import RetryingFile

    return RetryingFile(text)


def open_ranges(name: str | Path) -> io.RawIOBase:
    """A data file opened for reading ranges of bytes, unbuffered: each read of a URL asks
    the store for exactly its bytes (line blocks, Parquet's column chunks), retried as
    `open_binary`'s are."""
    text = str(name)
    if not is_url(text):
        return open(text, "rb", buffering=0)
    from recsync.io.retrying import RetryingRaw

    return RetryingRaw(text)


_PARTITION = re.compile(r"^(?:day|dt|date)=(\d{4}-\d{2}-\d{2})$")


def day_partitions(root: str) -> list[tuple[str, str]]:
    """(date, folder) of each day partition under `root` (a local folder or a URL holding
    `day=YYYY-MM-DD` folders; `dt=` and `date=` are read alike), in date order; or of each
    folder a glob of them matches (`s3://bucket/clicks/day=2026-12-0*`)."""
    refuse_secrets(root, "--days")
    if root.startswith("file://"):
        root = urlsplit(root).path
    pattern = ""
    if any(c in (urlsplit(root).path if is_url(root) else root) for c in _GLOB_CHARS):
        if is_url(root):
            parts = urlsplit(root)
            folder, _, pattern = parts.path.rstrip("/").rpartition("/")
            root = urlunsplit(parts._replace(path=folder + "/"))
        else:
            root, _, pattern = root.rstrip("/").rpartition("/")
    folders = _folders(root) if is_url(root) else _local_folders(root)
    days = []
    for name, folder in folders:
        found = _PARTITION.match(name)
        if found and (not pattern or fnmatch.fnmatchcase(name, pattern)):
            days.append((found.group(1), folder))
    if not days:
        raise ConfigError(
            f"--days: no day partition (day=YYYY-MM-DD) at {shown(root)}"
            + (f" matching {pattern}" if pattern else "")
        )
    dates = [date for date, _ in days]
    if len(set(dates)) != len(dates):
        raise ConfigError(f"--days: two partitions of one date under {shown(root)}: {dates}")
    return sorted(days)


def _folders(url: str) -> list[tuple[str, str]]:
    import pyarrow.fs as pafs

    filesystem, inner = filesystem_of(url)
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(inner.rstrip("/")))
    except OSError as error:
        raise storage_error(error, url, "--days: cannot list") from None
    return [
        (base_name(info.path), with_path(url, info.path.rstrip("/") + "/"))
        for info in infos
        if info.type == pafs.FileType.Directory
    ]


def _local_folders(root: str) -> list[tuple[str, str]]:
    path = Path(root).expanduser().absolute()
    if not path.is_dir():
        raise ConfigError(f"--days: {root} is not a folder")
    return [(p.name, str(p)) for p in path.iterdir() if p.is_dir()]
