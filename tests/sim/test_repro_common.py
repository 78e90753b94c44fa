"""What the reproductions share runs on the simulator as it is: a segment, then its score."""

from __future__ import annotations

import torch

from experiments.repro.common import CLUSTER_COST, run_segment, score, strategy
from recsync.data.synthetic import SyntheticSpec, SyntheticTask
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec

SYNTHETIC = SyntheticSpec(num_train=4_096, num_test=1_000, num_dense=4, table_rows=(50,) * 4)
MODEL = ModelSpec(
    num_dense=4,
    tables=tuple(TableSpec(f"C{i}", 50, 8) for i in range(4)),
    bottom_mlp=(16, 8),
    top_mlp=(16,),
)


def test_a_segment_is_scored_on_a_held_out_set_by_the_model_it_ended_with() -> None:
    torch.set_num_threads(1)
    sim, summary = run_segment(
        strategy("sync"),
        SYNTHETIC,
        None,
        cost=CLUSTER_COST,
        model=MODEL,
        train=TrainSpec(batch_size=64),
        trainers=2,
        dense_servers=1,
    )
    assert summary["examples_trained"] == SYNTHETIC.num_train
    test, _ = SyntheticTask(SYNTHETIC).test_set()
    auc = score(sim, test)
    assert 0.5 < auc < 1.0
    assert abs(auc - summary["test_auc"]) < 1e-9  # the summary scored the same model
