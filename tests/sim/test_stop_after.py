"""A job stopped after a number of examples (`job_spec(stop_after=...)`, what continual
days and `recsync advise` use) hands out no batch that would pass the limit; a limit the
data ends before trains the data whole, its last batch short (the one-pass check agrees)."""

from __future__ import annotations

import pytest

from recsync.app.config.load import load_config
from recsync.app.runs.distributed import job_spec
from recsync.coordinator.spec import plan_for
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

TINY = {
    "data.synthetic.num_train": 1000,  # 3 batches of 256 and one of 232
    "data.synthetic.num_test": 200,
    "data.synthetic.table_rows": [40] * 4,
    "model.embedding_dim": 4,
    "model.bottom_mlp": [8],
    "model.top_mlp": [8],
    "train.batch_size": 256,
    "cluster.num_trainers": 1,
    "cluster.workers_per_trainer": 1,
}


@pytest.mark.parametrize(
    ("stop_after", "trained"), [(1000, 1000), (1010, 1000), (5000, 1000), (999, 768), (768, 768)]
)
def test_a_limit_stops_at_a_whole_batch_or_the_datas_end(stop_after, trained):
    spec = job_spec(load_config(None, TINY), stop_after=stop_after)
    summary = SimJob(spec, plan_for(spec), CostModel()).run()
    assert summary["examples_trained"] == trained
