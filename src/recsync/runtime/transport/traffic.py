"""The bytes this process's connections wrote, by the address of the machine they went to:
every frame whole (header, sizes, pickle, buffers), requests and replies, counted where they
are written to the socket. A node's measures report what its process wrote while it hosted
the node (`bytes_to`), so a run's summary can say what crossed each machine's link."""

from __future__ import annotations

import threading
from collections import defaultdict

_lock = threading.Lock()
_sent: dict[str, int] = defaultdict(int)


def count(peer: str, nbytes: int) -> None:
    """`nbytes` were written to a connection with the machine at `peer`."""
    with _lock:
        _sent[peer] += nbytes


def sent() -> dict[str, int]:
    """What this process wrote so far, by the peer machine's address."""
    with _lock:
        return dict(_sent)


def since(before: dict[str, int]) -> dict[str, int]:
    """What this process wrote after `before` (an earlier `sent()`), by peer machine."""
    now = sent()
    return {peer: n - before.get(peer, 0) for peer, n in now.items() if n > before.get(peer, 0)}
