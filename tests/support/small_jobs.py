"""Small jobs several test files share: the engine tests' synthetic task and model, and
the config overrides of a small continual job (the continual and scenario tests)."""

from __future__ import annotations

from typing import Any

from recsync.data.synthetic import SyntheticSpec
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec

# the engine tests' job: 40,000 synthetic examples, 8 tables; the bottom MLP widens (4 ->
# 32) then narrows (32 -> 8)
ENGINE_SYNTHETIC = SyntheticSpec(
    num_train=40_000, num_test=10_000, num_dense=4, table_rows=(100,) * 8
)
ENGINE_MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 100, 8) for i in range(8)),
    bottom_mlp=(32,),
    top_mlp=(32,),
)
ENGINE_TRAIN = TrainSpec(batch_size=128)


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
