"""The Ray cluster a job runs on: joining one (or starting a local one), and its machines."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import ray
from ray._private import ray_constants
from ray._private import utils as ray_utils
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from recsync.runtime.ray.errors import PlacementError
from recsync.runtime.timeouts import MACHINE_ANSWER_S, RAY_CONNECT_TIMEOUT_S, START_TIMEOUT_S

INLINE_OBJECT_BYTES = 4 << 20  # batches, pooled embeddings and row gradients skip the object store


def connect(address: str | None, num_cpus: int | None, python_path: Sequence[str] = ()) -> bool:
    """Join the cluster at `address`, or start a local one of `num_cpus` CPUs (None: the
    machine's cores); this driver's workers import from `python_path` too (folders, ahead
    of their PYTHONPATH). True if we started it. The
    caller's SIGTERM handler stays in force throughout, so a SIGTERM while Ray starts is the
    caller's to handle (a run stops as soon as its job starts, with a checkpoint)."""
    if ray.is_initialized():
        return False
    env = _runtime_env(python_path)
    if threading.current_thread() is not threading.main_thread():
        return _connect(address, num_cpus, env)
    with _caller_keeps_sigterm():
        return _connect(address, num_cpus, env)


def _runtime_env(python_path: Sequence[str]) -> dict[str, Any] | None:
    if not python_path:
        return None
    paths = [*python_path, *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}


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


def _connect(address: str | None, num_cpus: int | None, env: dict[str, Any] | None) -> bool:
    if address:
        if address != "auto" and "://" not in address:
            check_reachable(address)
        if "RAY_AUTH_MODE" not in os.environ and auth_token_available():
            use_auth_token()
        try:
            ray.init(address=address, log_to_driver=False, runtime_env=env)
        except (ConnectionError, RuntimeError) as error:
            raise ConnectionError(f"cannot join the Ray cluster at {address}: {error}") from None
        return False
    ray.init(
        address="local",  # a cluster of its own, even where another runs or RAY_ADDRESS is set
        num_cpus=num_cpus or os.cpu_count() or 1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=env,
        _system_config={"max_direct_call_object_size": INLINE_OBJECT_BYTES},
    )
    return True


def cluster_facts(address: str | None) -> dict[str, object]:
    """The cluster this driver is connected to, for a run's summary: its address (None: a
    local one), its CPUs and its machines."""
    machines = [node for node in ray.nodes() if node.get("Alive")]  # type: ignore[no-untyped-call]
    cpus = int(ray.cluster_resources().get("CPU", 0))  # type: ignore[no-untyped-call]
    return {"address": address, "num_cpus": cpus, "num_machines": len(machines)}


@ray.remote(num_cpus=0)
class _Probe:
    """A trivial actor: starting one is what every node of a job needs of a machine."""

    def here(self) -> str:
        return str(ray.get_runtime_context().get_node_id())


def check_machines_answer(timeout_s: float = START_TIMEOUT_S) -> None:
    """This driver can run work on every machine of the cluster it joined: a task pinned to
    each answers within `timeout_s`; else a PlacementError that names the machines and, where
    this driver uses Ray's token authentication, says that the cluster's nodes could not
    call it back (a cluster started without authentication cancels what such a driver
    starts: its nodes would be lost one by one, recovery after recovery)."""
    machines = machines_with_addresses()
    probes = [
        _Probe.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote()
        for node_id, _ in machines
    ]
    refs = [probe.here.remote() for probe in probes]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for probe in probes:
        ray.kill(probe, no_restart=True)
    failed = []
    for (_, address), ref in zip(machines, refs, strict=True):
        if ref not in ready:
            failed.append(f"{address} (no answer in {timeout_s:.0f} s)")
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayError as error:
            failed.append(f"{address} ({str(error).strip().splitlines()[0][:200]})")
    if not failed:
        return
    if _token_auth():
        raise PlacementError(
            "this driver uses Ray's token authentication (RAY_AUTH_MODE=token, or a token in "
            "RAY_AUTH_TOKEN or ~/.ray/auth_token) and the cluster's machines could not start "
            f"its work: {'; '.join(failed)}. A cluster started without authentication cannot "
            "call such a driver back: run the driver with RAY_AUTH_MODE=disabled, or start "
            "the cluster with token authentication (the same token on every machine)"
        )
    raise PlacementError(f"cannot start the job's work on machines: {'; '.join(failed)}")


@ray.remote(num_cpus=0)
def _here() -> str:
    return str(ray.get_runtime_context().get_node_id())


def machines_answering(node_ids: Iterable[str], timeout_s: float = MACHINE_ANSWER_S) -> set[str]:
    """Those of the machines `node_ids` that run a task within `timeout_s`. A machine lost
    at once (its power, its network) answers nothing, while Ray lists it alive until its
    health checks fail (seconds to tens of seconds): a node restarted there would be lost
    again."""
    refs = {
        _here.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote(): node_id
        for node_id in node_ids
    }
    if not refs:
        return set()
    ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    answered = set()
    for ref in ready:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(ref)
            answered.add(refs[ref])
    for ref in waiting:
        with contextlib.suppress(ray.exceptions.RayError, TypeError, ValueError):
            ray.cancel(ref, force=True)
    return answered


def _token_auth() -> bool:
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    return bool(is_token_auth_enabled())


def cluster_machines() -> list[str]:
    """The Ray node ids of the cluster's alive machines: the head first, then by address
    (as `coordinator/machines.py` numbers them), then by id."""
    return [node_id for node_id, _ in machines_with_addresses()]


def machines_with_addresses() -> list[tuple[str, str]]:
    """(Ray node id, address) of the cluster's alive machines, in `cluster_machines` order."""
    alive = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
    alive.sort(
        key=lambda n: (
            "node:__internal_head__" not in n["Resources"],
            _address_key(n["NodeManagerAddress"]),
            n["NodeID"],
        )
    )
    return [(n["NodeID"], n["NodeManagerAddress"]) for n in alive]


def _address_key(address: str) -> tuple[int, str, tuple[int, ...]]:
    """IPv4 addresses in numeric order (10.0.0.9 before 10.0.0.10), then others as text."""
    parts = address.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return (0, "", tuple(int(p) for p in parts))
    return (1, address, ())


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
