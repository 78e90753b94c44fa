"""The all-reduce family: its strategy and trainer (family.py)."""

from recsync.families.allreduce.family import AllReduceFamily

__all__ = ["AllReduceFamily"]
