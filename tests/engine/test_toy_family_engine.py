"""The toy family of tests/support/toy_family.py (from outside the package tree: its own
server, role and message) run by the Ray engine, each node in a Ray worker process of its
own, which knows the family by `$RECSYNC_FAMILIES`; and the same job in the simulator
sends the same messages."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import toy_family
from test_toy_family import toy_job
from toy_family import FAMILY

from recsync.coordinator.spec import plan_for
from recsync.runtime.ray.job import connect, run_job
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob
from recsync.strategy.family import PLUGIN_FAMILIES, register_family, unregister_family

SUPPORT = str(Path(toy_family.__file__).parent)


@pytest.fixture(scope="module")
def ray_knowing_the_toy_family(no_local_ray: None) -> Iterator[None]:
    """A Ray of its own, started after the family's module was put on its workers' path
    and named in `$RECSYNC_FAMILIES` (they inherit the environment Ray starts with)."""
    import ray

    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", PLUGIN_FAMILIES)}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SUPPORT, saved["PYTHONPATH"]]))
    os.environ[PLUGIN_FAMILIES] = "toy_family"
    register_family(FAMILY)
    try:
        assert connect(None, 2)
        yield
    finally:
        ray.shutdown()  # its workers know the family: the next module starts another
        unregister_family(FAMILY)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.usefixtures("ray_knowing_the_toy_family")
def test_the_toy_family_trains_on_the_engine_as_in_the_simulator() -> None:
    spec = toy_job()
    engine = run_job(spec)
    sim = SimJob(spec, plan_for(spec), CostModel()).run()
    assert engine["strategy"] == sim["strategy"]
    assert engine["examples_trained"] == sim["examples_trained"] == spec.synthetic.num_train
    # fixed timing: every worker deposits after every 2nd of its iterations, whatever ran
    # where; each deposit is one call from a trainer to each mean server
    # (which worker trains which batch is timing's: a worker's odd last iteration makes no
    # deposit, at most one a worker, 4 workers)
    workers, batches = 4, spec.synthetic.num_train // spec.train.batch_size
    assert sim["deposits"] == batches  # 2 mean servers x (32 iterations / 2)
    assert batches - workers <= engine["deposits"] <= batches
    for summary in (engine, sim):
        traffic = summary["traffic"]
        assert traffic["trainers"]["Deposit"]["calls"] == summary["deposits"]
        assert set(traffic) == {"embedding_servers", "mean_servers", "reader", "trainers"}
    per_call = [s["traffic"]["trainers"]["Deposit"] for s in (engine, sim)]
    assert len({d["bytes"] / d["calls"] for d in per_call}) == 1  # the same slices sent
    assert engine["test_auc"] > 0.5
