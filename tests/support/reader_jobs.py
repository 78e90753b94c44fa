"""Helpers of the tests of readers sharing files: build a job's reader nodes as the job
builds them, drain them as their trainers would, the names of the examples handed out
(each test file's dense value names its line or row), and a simulated job's cuts."""

from __future__ import annotations

from recsync.coordinator.cuts import CheckpointEvery
from recsync.coordinator.node_specs import BuildContext, ReaderSpec
from recsync.coordinator.reader import ReaderNode
from recsync.coordinator.spec import JobSpec, plan_for
from recsync.coordinator.topology import build_topology
from recsync.data.batch import Batch
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


def drained(spec: JobSpec) -> list[Batch]:
    """Every batch the job's readers hand out, each asked for by one of its trainers."""
    batches = []
    trainers = spec.cluster.num_trainers
    for index, node in enumerate(readers_of(spec)):
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
