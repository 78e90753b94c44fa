"""Errors of the Ray engine."""

from __future__ import annotations

import ray

from recsync.errors import ConfigError
from recsync.runtime.transport.errors import ChannelClosed, RemoteError


class NodeFailure(RuntimeError):
    """A node the job depends on died, hung or failed; the message names it. `lost`: the
    node that is gone (its process died, its machine left, it stopped answering), which a
    restart can replace; None for a node's own error (a diverged worker, bad data), which a
    restart would only repeat."""

    def __init__(self, message: str, lost: str | None = None):
        super().__init__(message, lost)
        self.message, self.lost = message, lost

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[NodeFailure], tuple[str, str | None]]:
        return NodeFailure, (self.message, self.lost)


def failure(where: str, error: BaseException) -> NodeFailure:
    """A NodeFailure naming `where` for an error a call (Ray's or a channel's) raised: a
    node's own failure keeps its message (it names the node), a remote exception its type
    and message, with no remote traceback."""
    if isinstance(error, (ray.exceptions.RayTaskError, RemoteError)):
        error = getattr(error, "cause", None) or error
    if isinstance(error, NodeFailure):
        return NodeFailure(error.message, error.lost)
    if isinstance(error, (ray.exceptions.RayActorError, ChannelClosed)):
        return NodeFailure(f"{where} is dead or unreachable", lost=where)
    return NodeFailure(f"{where}: {type(error).__name__}: {error}")


class NotRecovered(NodeFailure):
    """A lost node the job did not recover from (its role's recovery action is `stop`, or
    the job already recovered `max_restarts` times). The message names the node, what the
    job was doing when it was lost (training, starting, restarting after losing another
    node, replacing one alone), why it stops, and the losses it recovered from before."""

    def __init__(self, message: str, lost: str, doing: str, why: str, recovered: list[str]):
        count, text = len(recovered), f"{message} while {doing}; not recovered: {why}"
        if recovered:
            plural = "y" if count == 1 else "ies"
            text += f" after {count} recover{plural} (from losing {', '.join(recovered)})"
        super().__init__(text, lost)
        self.doing, self.why, self.recovered = doing, why, recovered


class PlacementError(ConfigError):
    """The job's nodes cannot be placed on the cluster as asked: a pinned machine is not
    there, or the cluster does not let this driver start actors (its authentication); the
    message says which, before any node is started."""
