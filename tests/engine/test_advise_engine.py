"""`recsync advise` checked on Ray (app/advise/engine_check.py): the advice for the
default job on this machine (a `shared` cluster file of its 2 cores, the dev-2core
prices) names its fastest and slowest candidates; both train the same slice of the data
on the engine, and the engine ranks them as the advice did, the winner's examples/s within
a factor of the prediction. benchmarks/bench_advise_vs_engine.py measures the same with
repeats and reports the figures."""

from __future__ import annotations

import pytest

from recsync.app.advise.advice import AdviseOptions, advise
from recsync.app.advise.candidates import JobSource
from recsync.app.advise.cluster import parse_cluster
from recsync.app.advise.engine_check import engine_check
from recsync.runtime.ray.job import run_job

ONE_MACHINE = {
    "machines": {
        "count": 1,
        "cores": 2,
        "shared": True,
        "latency_us": 0.0,
        "nic_gbps": 8000.0,
        "preset": "dev-2core",
    },
    "grid": {"trainers": [2], "embedding_servers": [1, 2]},
}
# the winner's examples/s within a factor of the prediction: load only slows the engine, so
# the bound is wider that way. Two busy cores give the engine's jobs less than both (the
# benchmark measured it 1.8x the engine's under load; in CI, where the other pytest worker
# holds a core, 3.2x once); the slowest, hierarchical training, is predicted 2.6x-4x too fast
# there: reported, not held. A prediction off by more than these is a broken cost model.
FASTER = 3.0  # the engine faster than predicted, at most
SLOWER = 5.0  # the engine slower than predicted, at most


@pytest.mark.usefixtures("local_ray")
def test_the_engine_ranks_the_advices_fastest_and_slowest_as_it_did():
    job = JobSource(None, {})
    cluster = parse_cluster(ONE_MACHINE, "one machine")
    options = AdviseOptions(strategies=["bmuf", "hierarchical", "sync"], quality=False)
    advice = advise(job, cluster, options)
    check = engine_check(advice, job, examples=16_384, repeats=1, run_job=run_job)
    assert check.top.label.startswith("bmuf") and check.bottom.label.startswith("hierarchical")
    assert check.predicted_gap > 1.3  # the simulator sees hierarchical's stages cost
    assert check.ranking_held, check.as_dict()
    assert 1 / FASTER < check.top.predicted_over_engine < SLOWER, check.as_dict()
