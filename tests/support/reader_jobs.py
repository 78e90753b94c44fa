"""Helpers of the tests of readers sharing files: build a job's reader nodes as the job
builds them, drain them as their trainers would, the names of the examples handed out
(each test file's dense value names its line or row), and a simulated job's cuts."""

from __future__ import annotations

import dataclasses

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.node_specs import BuildContext, ReaderSpec
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.spec import ClusterSpec, JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.batch import Batch
from recsync.data.skips import SkipReport
from recsync.families import strategy_config
from recsync.io.readers import open_dataset
from recsync.io.sources import FileData
from recsync.model.spec import ModelSpec
from recsync.optim.train_spec import TrainSpec
from recsync.protocol.address import Role
from recsync.protocol.reading import NextBatch
from recsync.runtime.sim.cost import CostModel
from recsync.runtime.sim.job import SimJob


def names(batches: list[Batch]) -> list[int]:
    """The examples' names (their first dense value), sorted."""
    return sorted(int(v) for b in batches for v in b.dense[:, 0].tolist())


def readers_of(spec: JobSpec) -> list[ReaderNode]:
    """The job's reader nodes, built as its driver builds them (in one process)."""
    topology = build_topology(spec, plan_for(spec))
    nodes = []
    for node_spec in topology.of_role(Role.READER):
        assert isinstance(node_spec, ReaderSpec)
        node = node_spec.build(BuildContext(one_at_a_time=True))
        assert isinstance(node, ReaderNode)
        nodes.append(node)
    return nodes


def drained(spec: JobSpec, nodes: list[ReaderNode] | None = None) -> list[Batch]:
    """Every batch the job's readers (`nodes`: as built already) hand out, each asked for
    by one of its trainers."""
    batches = []
    trainers = spec.cluster.num_trainers
    for index, node in enumerate(readers_of(spec) if nodes is None else nodes):
        trainer = next(t for t in range(trainers) if spec.cluster.reader_of(t) == index)
        while (handed := node.handle(NextBatch(trainer))).batch is not None:
            batches.append(handed.batch)
    return batches


def cuts_of(spec: JobSpec, every_examples: int = 3_000) -> list:
    """The states of the cuts a simulated run of `spec` takes (readers at uneven speeds)."""
    states: list = []
    sim = SimJob(
        spec,
        plan_for(spec),
        CostModel(speed_spread=0.5),
        checkpoint_every=CheckpointEvery(examples=every_examples),
        on_checkpoint=states.append,
    )
    sim.run()
    return states


def file_job(
    model: ModelSpec, train: TrainSpec, files: FileData, readers: int, resume=None, epochs=1
) -> JobSpec:
    """An `independent` job of 3 trainers (a worker each) on `files`, `readers` readers."""
    cluster = ClusterSpec(3, 1, 1, num_readers=readers)
    train = dataclasses.replace(train, epochs=epochs)
    strategy = strategy_config("independent")
    return JobSpec(model, train, cluster, strategy, files=files, resume=resume)


def one_read(files: FileData) -> tuple[list[int], SkipReport]:
    """The names of the examples of one read of the files as one stream, and its skips."""
    skips = SkipReport()
    read = open_dataset(files.paths, files.fmt, files.schema, batch_size=512, skips=skips)
    return names(list(read)), skips
