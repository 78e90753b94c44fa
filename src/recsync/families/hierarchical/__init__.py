"""The hierarchical-training family: its config, group plan, group PSs and trainer
(family.py)."""

from recsync.families.hierarchical.family import HierarchicalFamily

__all__ = ["HierarchicalFamily"]
