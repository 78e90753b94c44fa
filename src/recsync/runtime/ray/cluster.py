"""The Ray cluster a job runs on: joining one (or starting a local one), and its machines."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import ray
from ray._private import ray_constants
from ray._private import utils as ray_utils

from recsync.runtime.timeouts import RAY_CONNECT_TIMEOUT_S

INLINE_OBJECT_BYTES = 4 << 20  # batches, pooled embeddings and row gradients skip the object store


def connect(address: str | None, num_cpus: int | None) -> bool:
    """Join the cluster at `address`, or start a local one. True if we started it. The
    caller's SIGTERM handler stays in force throughout, so a SIGTERM while Ray starts is the
    caller's to handle (a run stops as soon as its job starts, with a checkpoint)."""
    if ray.is_initialized():
        return False
    if threading.current_thread() is not threading.main_thread():
        return _connect(address, num_cpus)
    with _caller_keeps_sigterm():
        return _connect(address, num_cpus)


@contextlib.contextmanager
def _caller_keeps_sigterm() -> Iterator[None]:
    """While Ray starts: its driver would take SIGTERM twice, with a handler that exits from
    wherever the signal lands (a half-connected core worker then crashes at exit) and with
    abseil's crash handler (which aborts). Neither is installed; Ray's other processes keep
    their own."""
    handler = signal.getsignal(signal.SIGTERM)
    replace = ray_utils.set_sigterm_handler
    disabled = ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER
    ray_utils.set_sigterm_handler = lambda sigterm_handler: None
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = replace
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = disabled
        signal.signal(signal.SIGTERM, handler)


def _connect(address: str | None, num_cpus: int | None) -> bool:
    if address:
        if address != "auto" and "://" not in address:
            check_reachable(address)
        if "RAY_AUTH_MODE" not in os.environ and auth_token_available():
            use_auth_token()
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError) as error:
            raise ConnectionError(f"cannot join the Ray cluster at {address}: {error}") from None
        return False
    ray.init(
        address="local",  # a cluster of its own, even where another runs or RAY_ADDRESS is set
        num_cpus=num_cpus or 2,
        include_dashboard=False,
        log_to_driver=False,
        _system_config={"max_direct_call_object_size": INLINE_OBJECT_BYTES},
    )
    return True


def cluster_machines() -> list[str]:
    """The Ray node ids of the cluster's alive machines: the head first, then by id."""
    alive = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
    alive.sort(key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
    return [n["NodeID"] for n in alive]


def check_reachable(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """A TCP connection to `address` (HOST:PORT) opens within `timeout_s`, or a clear
    ConnectionError (Ray itself would retry for a long time)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"cluster address {address!r}: expected HOST:PORT, or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ConnectionError(
            f"no Ray cluster answers at {address} ({error.strerror or error}); start one "
            "with `ray start --head --port=PORT` there, or check the address"
        ) from None


def use_auth_token() -> None:
    """Send Ray's token to the cluster. Ray (2.60, pinned) does so by itself only for a
    cluster it found itself ("auto"); a cluster named by its address needs token mode set,
    and Ray reads its mode when it is imported: its own helper for "auto" sets the mode
    and reloads its config."""
    from ray._private.authentication.authentication_token_setup import (
        maybe_enable_token_auth_if_token_available,
    )

    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def auth_token_available() -> bool:
    """A Ray authentication token is configured (environment) or saved (~/.ray)."""
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return True
    return (Path.home() / ".ray" / "auth_token").is_file()
