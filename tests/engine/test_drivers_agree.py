"""The simulator and the Ray engine run the same job the same way: for every strategy, on a
tiny job, they send the same bytes per node kind and message kind (one byte count), make the
same calls and yield the same effects.

Which worker trains which batch, and how many rounds a background sync makes, depend on
timing; totals over the job do not, except for the sync rounds themselves (EASGD's
exchanges, all-reduces, the waits around them): those are compared per call. Nor does
which of a replica worker's row gradients ride on its next lookup and which leave alone
(its last step's) depend on timing, only their sizes: their bytes are compared summed."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.data.synthetic import SyntheticSpec
from recsync.families import STRATEGIES, strategy_config
from recsync.families.allreduce.strategy import AllReduceStrategy
from recsync.families.hierarchical.config import HierarchicalConfig
from recsync.model.hash_spec import HashTables
from recsync.model.spec import ModelSpec, TableSpec
from recsync.optim.train_spec import TrainSpec
from recsync.runtime.ray.job import run_job
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob

pytestmark = pytest.mark.usefixtures("local_ray")

SYNTHETIC = SyntheticSpec(num_train=1_024, num_test=256, num_dense=2, table_rows=(20,) * 3)
MODEL = ModelSpec(
    num_dense=2, tables=tuple(TableSpec(f"C{i}", 20, 4) for i in range(3)), bottom_mlp=(4,)
)
TRAIN = TrainSpec(batch_size=64)
SYNC_KINDS = {"Exchange", "AllReduce"}  # how many there are depends on timing
FUSED = {"Lookup", "PushSparse", "PushSparse+Lookup"}  # a replica worker's, alone or fused
# likewise: the syncs, and the waits and wake-ups around them
TIMED_EFFECTS = {
    "Exchange",
    "AllReduce",
    "Notify",
    "AwaitIterations",
    "AwaitSyncRequest",
    "AwaitSync",
}
FIELDS = {"psp": {"push_count": 2, "pull_fraction": 0.5}, "gba": {"iota": 1}}
# every strategy, and hierarchical's other cross-group sync (an all-reduce among group PSs)
CASES = {
    **{name: (name, FIELDS.get(name, {})) for name in sorted(STRATEGIES)},
    "hierarchical-bmuf-topk": ("hierarchical", {"cross_group": "bmuf", "topk_fraction": 0.25}),
    # hash tables keyed by raw ids, under a replica and a gradient strategy
    "easgd-hash-tables": ("easgd", {}, True),
    "sync-hash-tables": ("sync", {}, True),
}


def job(name: str, fields: dict[str, object], hashed: bool = False) -> JobSpec:
    strategy = strategy_config(name, **fields)
    if isinstance(strategy, AllReduceStrategy):
        cluster = ClusterSpec(2, 1, 2)
    else:
        cluster = ClusterSpec(2, 2, 2, num_dense_servers=2)
    if hashed:
        model = dataclasses.replace(MODEL, hash_tables=HashTables())
        synthetic = dataclasses.replace(SYNTHETIC, keyed=True)
        return JobSpec(model, TRAIN, cluster, strategy, synthetic)
    return JobSpec(MODEL, TRAIN, cluster, strategy, SYNTHETIC)


def _calls(summary: dict, kind: str) -> int:
    return sum(k[kind]["calls"] for k in summary["traffic"].values() if kind in k)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_both_drivers_send_the_same_bytes_and_make_the_same_calls(case):
    spec = job(*case)
    torch.set_num_threads(1)
    sim = SimJob(spec, plan_for(spec), CostModel()).run()
    real = run_job(spec)
    assert sim["examples_trained"] == real["examples_trained"] == SYNTHETIC.num_train
    assert sim["traffic"].keys() == real["traffic"].keys()
    # a worker's first step looks its rows up alone, each later one carries the previous
    # step's push: the split of calls between the fused kinds holds where every worker
    # stepped, which a dynamic hand-out (async) leaves to timing on the engine (a trainer
    # that starts late on a loaded machine may find the data handed out); their bytes
    # add up either way
    all_stepped = real["worker_step_seconds"].keys() == sim["worker_step_seconds"].keys()
    for role, kinds in sim["traffic"].items():
        assert kinds.keys() == real["traffic"][role].keys(), role
        for kind, counted in kinds.items():
            other = real["traffic"][role][kind]
            if kind in SYNC_KINDS:  # per call made (by trainers or group servers)
                calls = _calls(sim, kind)
                real_calls = _calls(real, kind)
                assert calls > 0 and real_calls > 0, (role, kind)
                per_call, real_per_call = counted["bytes"] / calls, other["bytes"] / real_calls
                if isinstance(spec.strategy, HierarchicalConfig):
                    # the calls are group PS j's (an exchange with sync server j, or an
                    # all-reduce among group PS j of every group), each carrying the FCs it
                    # owns, of its own size, as many as its timing allows: the mean per call,
                    # on either end, depends on the mix
                    assert real_per_call == pytest.approx(per_call, rel=0.05), (role, kind)
                else:
                    assert per_call == real_per_call, (role, kind)
            elif role == "trainers" and kind in FUSED:
                assert counted["calls"] == other["calls"] or not all_stepped, (role, kind)
            else:
                assert counted == other, (role, kind)
        fused = [
            (k["bytes"], real["traffic"][role][n]["bytes"]) for n, k in kinds.items() if n in FUSED
        ]
        assert sum(s for s, _ in fused) == sum(r for _, r in fused), role
        assert sum(k["bytes"] for k in kinds.values()) == sim["bytes_sent"][role]
    counted = {k: v for k, v in sim["effects"].items() if k not in TIMED_EFFECTS}
    assert counted == {k: v for k, v in real["effects"].items() if k not in TIMED_EFFECTS}
