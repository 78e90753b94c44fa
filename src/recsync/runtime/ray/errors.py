"""Errors of the Ray engine."""

from __future__ import annotations

import ray


class NodeFailure(RuntimeError):
    """A node the job depends on died, hung or failed; the message names it."""


def failure(where: str, error: BaseException) -> NodeFailure:
    """A NodeFailure naming `where` for an error a Ray call raised: a node's own failure
    keeps its message (it names the node), a remote exception its type and message, with no
    remote traceback."""
    if isinstance(error, ray.exceptions.RayTaskError):
        error = getattr(error, "cause", None) or error
    if isinstance(error, NodeFailure):
        return NodeFailure(str(error))
    if isinstance(error, ray.exceptions.RayActorError):
        return NodeFailure(f"{where} is dead or unreachable")
    return NodeFailure(f"{where}: {type(error).__name__}: {error}")
