"""The data path of the Ray engine: how a node's loops send a training step's messages to
their peers, without Ray (Ray places, watches and stops the nodes; runtime/ray hands each
loop its peers' endpoints).

- `channel`: a node's `ChannelServer` (listening on its node's own address) and a loop's
  `Connection` to each peer, requests and their replies in order.
- `handshake`: how a connection opens: the protocol's magic and version, and a proof of the
  server's key each way (HMAC-SHA256 over fresh nonces; the key never crosses the wire).
- `frames`: a message's frame, its header checked against the format's bounds before
  anything is allocated for it.
- `errors`: what the channel raises.
- `peers`: each peer's endpoint, replaced when a lost node restarts elsewhere.
- `wire`: tensors as numpy arrays, the form messages cross in (the channel and Ray calls).

Imports no Ray, no coordinator and no strategy family (import-linter holds it); its
timeouts are in runtime/timeouts.py, the engine's one table of them. How a trainer's
worker processes share its state on one machine (runtime/ray/shared_memory.py, wakeup.py)
is hosting, not the data path: no message crosses there, and nothing from another
machine reaches it."""
