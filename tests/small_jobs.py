"""Config overrides of a small continual job that the continual and scenario tests share."""

from __future__ import annotations

from typing import Any


def small_continual(num_days: int, **more: Any) -> dict[str, Any]:
    """A sync job on `num_days` drifting synthetic days of 1,024 examples each, a tiny model;
    `more`: further dotted overrides."""
    return {
        "strategy.name": "sync",
        "data.synthetic.num_days": num_days,
        "data.synthetic.num_train": num_days * 1024,
        "data.synthetic.num_test": 500,
        "data.synthetic.drift": 0.1,
        "data.synthetic.table_rows": [50] * 4,
        "data.synthetic.num_dense": 3,
        "model.embedding_dim": 4,
        "model.bottom_mlp": [8, 4],
        "model.top_mlp": [8],
        "train.batch_size": 64,
        **more,
    }
