"""The held-out set as an evaluation sees it: whether it can be scored at all, and the
bounded sample a mark in the middle of a run scores (the run's last record scores all)."""

from __future__ import annotations

import torch

from recsync.data.batch import Batch


def two_classes(test: Batch) -> bool:
    """The held-out labels hold both classes (AUC and NE are defined)."""
    labels = test.labels
    return bool(labels.numel()) and bool((labels != labels[0]).any())


def mark_test_set(test: Batch | None, examples: int) -> Batch | None:
    """The held-out examples a mark in the middle of a run is scored on: `examples` of
    `test` spread evenly over it (0, or a set no larger: all of it), so that scoring every
    mark costs a bounded share of training; None when no set (or no set of both classes)
    is there to score yet. A sample of one class falls back to the whole set."""
    if test is None or not two_classes(test):
        return None
    if 0 < examples < test.batch_size:
        sample = test.take(torch.linspace(0, test.batch_size - 1, examples).round().long())
        if two_classes(sample):
            return sample
    return test
