"""Data files' URLs: which names are URLs, how they are shown (never with credentials),
where an S3 endpoint travels, and the pyarrow filesystem (one per store and process) that
reads them (io/storage.py uses them; a URL's reads retry in io/retrying.py).

Credentials never come from a config: each library's usual environment and configuration
(for S3, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, `~/.aws/...`)
on every host that reads. A URL that carries them (`s3://key:secret@bucket/...`) is
refused, and every name in a message is `shown`: user info and query cut off. An S3
endpoint named in `[data.storage]` travels in each URL as pyarrow's `endpoint_override`
query parameter (not a secret), so readers on other hosts reach the same store.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from recsync.errors import ConfigError, DataError

URL_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")


def is_url(name: str | Path) -> bool:
    """True for a URL of a remote filesystem (not a local path, not file://)."""
    return urlsplit(str(name)).scheme.lower() in URL_SCHEMES


def shown(name: str | Path) -> str:
    """A data file's name for messages: a URL without user info and query."""
    text = str(name)
    if not is_url(text):
        return text
    parts = urlsplit(text)
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def base_name(name: str | Path) -> str:
    """The last part of a file's name (its suffixes tell its format)."""
    text = str(name)
    path = urlsplit(text).path if is_url(text) else text
    return path.rstrip("/").rsplit("/", 1)[-1]


def with_endpoint(url: str, endpoint: str | None) -> str:
    """An s3:// URL that reaches `endpoint` (pyarrow's endpoint_override), if one is given."""
    parts = urlsplit(url)
    if endpoint is None or parts.scheme.lower() != "s3":
        return url
    query = dict(parse_qsl(parts.query))
    query.setdefault("endpoint_override", endpoint)
    return urlunsplit(parts._replace(query=urlencode(query)))


def refuse_secrets(url: str, what: str) -> None:
    parts = urlsplit(url)
    keys = {key.lower() for key, _ in parse_qsl(parts.query)}
    if parts.password or parts.username or keys & {"access_key", "secret_key", "session_token"}:
        raise ConfigError(
            f"{what}: {shown(url)} carries credentials; a job config never holds them: set "
            "them in the environment or the library's configuration of each host (e.g. "
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        )


@functools.lru_cache(maxsize=32)
def _filesystem(scheme: str, netloc: str, query: str) -> Any:
    import pyarrow.fs as pafs

    if scheme == "s3":
        return _s3(netloc, dict(parse_qsl(query)))
    root = urlunsplit((scheme, netloc, "/", query, ""))
    filesystem, _ = pafs.FileSystem.from_uri(root)
    return filesystem


def _s3(bucket: str, options: dict[str, str]) -> Any:
    """An S3 client that tries each request once: the reads retry themselves, counted and
    logged (retrying.py), instead of the AWS SDK's silent retries. Endpoint and region as
    pyarrow's URLs give them, else from the environment (AWS_ENDPOINT_URL_S3,
    AWS_ENDPOINT_URL, AWS_REGION / AWS_DEFAULT_REGION) or the bucket's own region."""
    import pyarrow.fs as pafs

    endpoint = (
        options.get("endpoint_override")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    region = options.get("region") or os.environ.get("AWS_REGION")
    region = region or os.environ.get("AWS_DEFAULT_REGION")
    if region is None and endpoint is None:
        region = pafs.resolve_s3_region(bucket)
    return pafs.S3FileSystem(
        endpoint_override=endpoint,
        region=region or "us-east-1",
        scheme=options.get("scheme", "https"),
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )


def filesystem_of(url: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path within it) of a URL; one filesystem per store and
    process."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    filesystem = _filesystem(
        scheme, parts.hostname if scheme == "s3" else parts.netloc, parts.query
    )
    bucket = parts.hostname or "" if parts.scheme.lower() in ("s3", "gs", "gcs") else ""
    inner = f"{bucket}{parts.path}" if bucket else parts.path
    return filesystem, inner


def with_path(url: str, inner: str) -> str:
    """`url` naming `inner` (a path within its filesystem, as listings give them)."""
    parts = urlsplit(url)
    if parts.scheme.lower() in ("s3", "gs", "gcs"):
        bucket, _, key = inner.partition("/")
        netloc = parts.netloc.replace(parts.hostname or "", bucket, 1) if parts.hostname else bucket
        return urlunsplit(parts._replace(netloc=netloc, path="/" + key))
    return urlunsplit(parts._replace(path=inner))


def storage_error(error: OSError, name: str, what: str = "cannot read") -> DataError:
    """A storage failure as a DataError naming the file (shown: no credentials)."""
    if isinstance(error, FileNotFoundError):
        kind = "no such file or object"
    elif isinstance(error, PermissionError) or "ACCESS_DENIED" in str(error):
        kind = "permission denied"
    else:
        kind = str(error).splitlines()[0] if str(error) else type(error).__name__
    return DataError(f"{what}: {kind}", source=shown(name))
