"""Errors of the Ray engine."""


class NodeFailure(RuntimeError):
    """A node the job depends on died, hung or failed; the message names it."""
