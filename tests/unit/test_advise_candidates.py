"""`recsync advise`'s candidates (app/advise/candidates.py): every strategy at every grid
point that fits the machines, the others with the reason, the key at fault named."""

from __future__ import annotations

import pytest

from recsync.app.advise.candidates import JobSource, candidates, grid_of
from recsync.app.advise.cluster import parse_cluster
from recsync.errors import ConfigError
from recsync.families import STRATEGIES

TINY = {
    "data.synthetic.num_train": 2000,
    "data.synthetic.table_rows": [40, 40, 40, 40],
    "model.embedding_dim": 4,
    "model.bottom_mlp": [8],
    "model.top_mlp": [8],
}


def cluster(count=4, cores=8, **grid):
    return parse_cluster({"machines": {"count": count, "cores": cores}, "grid": grid}, "c")


def test_every_strategy_at_every_grid_point_that_fits():
    job = JobSource(None, TINY)
    found, refused = candidates(job, cluster())
    assert refused == []
    assert sorted({c.strategy for c in found}) == sorted(STRATEGIES)
    assert grid_of(cluster(), job.config()) == ([2, 4], [2, 4], [1])
    assert len(found) == 4 * len(STRATEGIES)
    easgd = next(c for c in found if c.label == "easgd 4x2 e2 d1")
    assert easgd.changes["cluster.num_dense_servers"] == 1
    # 8 worker threads + reader + 2 embedding servers + 1 sync server
    assert easgd.cores == 12
    config = easgd.config(job)
    assert (config.strategy.name, config.cluster.num_trainers) == ("easgd", 4)
    async_ = next(c for c in found if c.label == "async 2x2 e4 d1")
    assert async_.config(job).cluster.num_dense_servers == 1
    # allreduce: a rank a worker thread, as many threads as the others
    ranks = [c for c in found if c.strategy == "allreduce"]
    assert {(c.trainers, c.workers_per_trainer) for c in ranks} == {(4, 1), (8, 1)}


def test_the_jobs_own_strategy_keeps_its_keys():
    job = JobSource(None, {**TINY, "strategy.name": "gba", "strategy.iota": 7})
    found, _ = candidates(job, cluster(), ["gba", "async"])
    gba = [c for c in found if c.strategy == "gba"]
    assert gba and all(c.config(job).strategy.iota == 7 for c in gba)  # type: ignore[attr-defined]
    assert all(c.strategy_table == {"name": "async"} for c in found if c.strategy == "async")


def test_points_too_big_for_the_cluster_are_refused_with_the_keys():
    found, refused = candidates(JobSource(None, TINY), cluster(count=1, cores=10), ["easgd"])
    assert [c.label for c in found] == ["easgd 2x2 e2 d1", "easgd 2x2 e4 d1"]  # 8 and 10 cores
    assert {r.point for r in refused} == {"4x2 e2 d1", "4x2 e4 d1"}
    assert all("machines.count x machines.cores" in r.reason for r in refused)
    wide = JobSource(None, {**TINY, "cluster.workers_per_trainer": 4})
    with pytest.raises(ConfigError, match="machines.cores: a trainer's 4 worker threads"):
        candidates(wide, cluster(count=8, cores=2), ["easgd"])


def test_too_few_cores_for_the_smallest_job_names_the_keys():
    with pytest.raises(ConfigError, match=r"machines.count / machines.cores: 1 machine\(s\) x 4"):
        candidates(JobSource(None, TINY), cluster(count=1, cores=4))


def test_on_a_shared_machine_every_point_runs_its_nodes_queue_for_the_cores():
    shared = parse_cluster({"machines": {"count": 1, "cores": 2, "shared": True}}, "c")
    found, refused = candidates(JobSource(None, TINY), shared, ["easgd"])
    assert refused == [] and len(found) == 4
    assert max(c.cores for c in found) == 14  # 8 worker threads + reader + 4 + 1 servers


def test_a_grid_of_readers_adds_them_to_every_point():
    found, refused = candidates(JobSource(None, TINY), cluster(readers=[2, 1]), ["easgd"])
    assert refused == []
    assert [c.label for c in found][:2] == ["easgd 2x2 e2 d1 r1", "easgd 2x2 e2 d1 r2"]
    one, two = found[:2]
    assert two.changes["cluster.num_readers"] == 2 and two.cores == one.cores + 1
    assert two.config(JobSource(None, TINY)).cluster.num_readers == 2
    plain, _ = candidates(JobSource(None, TINY), cluster(), ["easgd"])
    assert all(c.readers is None and "cluster.num_readers" not in c.changes for c in plain)


def test_a_strategy_that_cannot_split_the_model_names_the_key():
    three = {"strategy.name": "hierarchical", "cluster.num_dense_servers": 3}
    job = JobSource(None, {**TINY, **three})
    assert grid_of(cluster(), job.config())[2] == [3]  # the job's own count
    with pytest.raises(
        ConfigError, match="--strategies hierarchical: .*cluster.num_dense_servers = 3"
    ):
        candidates(job, cluster(), ["hierarchical"])
    found, refused = candidates(job, cluster(), ["easgd"])
    assert found and not refused
    # not asked for by name: listed as not applicable, the others go on
    found, refused = candidates(job, cluster(trainers=[2]), None)
    assert {r.strategy for r in refused} == {"hierarchical"}
    assert all("cluster.num_dense_servers = 3" in r.reason for r in refused)
    assert "hierarchical" not in {c.strategy for c in found}
    # a grid of counts: the count each point names
    grid = cluster(trainers=[2], dense_servers=[1, 3])
    found, refused = candidates(job, grid, ["hierarchical"])
    assert [c.label for c in found] == ["hierarchical 2x2 e2 d1", "hierarchical 2x2 e4 d1"]
    assert {r.point for r in refused} == {"2x2 e2 d3", "2x2 e4 d3"}


def test_unknown_strategy_names_the_option():
    with pytest.raises(ConfigError, match=r"--strategies: unknown strategy \['hogwild'\]"):
        candidates(JobSource(None, TINY), cluster(), ["hogwild"])


def test_a_bad_job_names_its_key():
    with pytest.raises(ConfigError, match="train.batch_size"):
        candidates(JobSource(None, {**TINY, "train.batch_size": "big"}), cluster())
