"""The gradient family: its strategies, servers and trainer (family.py)."""

from recsync.families.gradient.family import GradientFamily

__all__ = ["GradientFamily"]
