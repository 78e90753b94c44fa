"""What the channel raises: a peer gone, a peer that is not the one an endpoint names, a
peer that speaks another protocol, a frame out of bounds, and a peer's own error."""

from __future__ import annotations


class ChannelClosed(ConnectionError):
    """The peer's end is gone: its process died, or it could not be reached."""


class AuthenticationFailed(ChannelClosed):
    """The server at an endpoint refused the endpoint's key, or could not prove it holds
    it. An endpoint carries its server's key, so that server is not the one the endpoint
    named (which is gone: its port is someone else's now): as for a closed channel, the
    peer is lost."""


class ProtocolMismatch(Exception):
    """The other end speaks another version of the channel's protocol, or not this
    protocol at all (`theirs` None); the message names both. Not a lost peer: a restart
    would meet the same mismatch."""

    def __init__(self, where: str, ours: int, theirs: int | None):
        spoken = "not recsync's channel protocol" if theirs is None else f"version {theirs}"
        super().__init__(f"{where} speaks {spoken}; this process speaks version {ours}")
        self.where, self.ours, self.theirs = where, ours, theirs


class FrameError(Exception):
    """A frame broke the format or its bounds (a status that is neither OK nor ERROR, too
    many buffers, more bytes than a frame may hold, a pickle that does not load). Found
    before anything is allocated for the frame; the connection it came on is closed."""


class RemoteError(Exception):
    """The peer raised `cause` while handling the request."""

    def __init__(self, cause: BaseException):
        super().__init__(cause)
        self.cause = cause
