"""What the replica and hierarchical families share (neither is a family of its own):
replicas of the dense part synced through a center variable on sync servers (EASGD) or by
an all-reduce among them (MA, BMUF): the strategies' base configs and policies
(strategy.py), the sync server node and its spec (sync_server.py), and their messages
(messages.py)."""
