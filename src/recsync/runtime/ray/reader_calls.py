"""The driver's calls to the readers' actors (progress, pause, resume, stop, requeue): each
encoded for the wire, sent to all at once where it goes to all; a dead reader is named, as
lost (`NodeFailure`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray

from recsync.protocol.address import Address
from recsync.protocol.messages import Message
from recsync.runtime.ray.errors import failure
from recsync.runtime.ray.hosts import JobActors
from recsync.runtime.transport import wire


def ask_reader(hosts: JobActors, reader: Address, message: Message) -> Any:
    """A reader's answer to a driver's message."""
    return reply_of(hosts.actors[reader].ask.remote(wire.encode(message)), reader)


def ask_readers(hosts: JobActors, readers: Sequence[Address], message: Message) -> list[Any]:
    """Every reader's answer to a driver's message, in reader order."""
    refs = [hosts.actors[a].ask.remote(wire.encode(message)) for a in readers]
    return [reply_of(ref, a) for ref, a in zip(refs, readers, strict=True)]


def reply_of(ref: Any, reader: Address) -> Any:
    """The reply of a call to a reader."""
    try:
        return ray.get(ref)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as error:
        raise failure(reader.name, error) from None
