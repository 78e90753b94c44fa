"""The replica family (ShadowSync): its strategies, sync and trainer (family.py)."""

from recsync.families.replica.family import ReplicaFamily

__all__ = ["ReplicaFamily"]
