"""A target offers ``Target`` and, beyond it, capabilities; the worker asks for them.

``MinimalTarget`` implements ``Target`` only: the configuration accepts it and
says it offers nothing more, the worker refuses to load a snapshot into it, a
micro-batch that needs a table copied again stops with the table and the
remedy, and the request desk refuses re-snapshots and verifies with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pgshovel import abc
from pgshovel.abc import ChunkTarget, MicroBatch, SnapshotTarget, Target
from pgshovel.cluster.requests import Request
from pgshovel.errors import ConfigurationError, SchemaError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.replication import capabilities
from pgshovel.replication.config import ReplicationConfiguration, SparkSettings, TargetSpec
from pgshovel.replication.requests import RequestDesk
from pgshovel.replication.targets.parquet import ParquetTarget
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.replication.worker import Worker
from pgshovel.source import Column, TableShape
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import MicroBatchPlan
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.shapes import shape_to_proto
from pgshovel.stream.state import WorkerState
from tests._positions import after

ITEMS = TableShape("public", "items", (Column("id", "integer", "int4", True, 1),), ("id",), 1)
ADDED = TableShape("public", "added", (Column("id", "integer", "int4", True, 1),), ("id",), 2)


class MinimalTarget:
    """Every member of ``Target``, nothing of the capabilities."""

    def __init__(self, state: WorkerState | None = None) -> None:
        self.state = state
        self.applied: list[MicroBatchPlan] = []

    def open(self, cluster: str, set_name: str) -> WorkerState | None:
        return self.state

    def apply(self, plan: MicroBatchPlan, state: WorkerState, commit: bool = True) -> int:
        self.applied.append(plan)
        self.state = state
        return 0

    def abandon(self) -> None:
        pass

    def store_state(self, state: WorkerState) -> None:
        self.state = state

    def can_alter_type(self, old: Column, new: Column) -> bool:
        return old.sql_type == new.sql_type

    def close(self) -> None:
        pass


class HalfChunkTarget(MinimalTarget):
    """Part of ``ChunkTarget``: not enough to be one."""

    def can_filter(self) -> bool:
        return False


class FakeStream:
    """A stream of the given micro-batches."""

    def __init__(self, micro_batches: list[MicroBatch]) -> None:
        self.micro_batches_given = micro_batches

    def open(self, default_topic: str) -> None:
        pass

    def start_position(self) -> StreamPosition:
        return StreamPosition.start((0,))

    def micro_batches(
        self, state: WorkerState, should_stop: Callable[[], bool]
    ) -> Iterator[MicroBatch]:
        yield from self.micro_batches_given

    def close(self) -> None:
        pass


class NoLoader:
    def load(self, *arguments: Any) -> Any:
        raise AssertionError("the loader must not be called")


def worker(target: Any, micro_batches: list[MicroBatch] | None = None) -> Worker:
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.database.dsn = "host=127.0.0.1 dbname=source"
    return Worker(
        "c",
        "s",
        configuration,
        ReplicationConfiguration(
            spark=SparkSettings(),
            loader=NoLoader(),
            stream=FakeStream(micro_batches or []),
            target=target,
        ),
        spark=None,
    )


def test_the_minimal_target_is_a_target_and_offers_no_capability() -> None:
    target = MinimalTarget()
    assert isinstance(target, Target)
    assert not isinstance(target, SnapshotTarget) and not isinstance(target, ChunkTarget)
    assert capabilities.describe(target) == "no capability beyond Target"
    both = "SnapshotTarget, ChunkTarget"
    assert capabilities.describe(PostgresTarget("host=127.0.0.1")) == both
    assert capabilities.describe(ParquetTarget("/nonexistent")) == both
    assert abc.TARGET_CAPABILITIES == (SnapshotTarget, ChunkTarget)


def test_the_configuration_reports_the_capabilities_of_a_target(
    caplog: pytest.LogCaptureFixture,
) -> None:
    here = __name__
    minimal = TargetSpec.model_validate({"path": f"{here}:MinimalTarget"})
    assert minimal.offered == []
    postgres = TargetSpec.model_validate(
        {
            "path": "pgshovel.replication.targets.postgresql:PostgresTarget",
            "configuration": {"dsn": "host=127.0.0.1"},
        }
    )
    assert postgres.offered == ["SnapshotTarget", "ChunkTarget"]
    with caplog.at_level(logging.WARNING):
        half = TargetSpec.model_validate({"path": f"{here}:HalfChunkTarget"})
    assert half.offered == []
    assert "provides part of ChunkTarget (it lacks chunk_sink, compare_chunk" in caplog.text


def test_without_a_state_a_target_that_cannot_load_a_snapshot_stops_the_worker() -> None:
    with pytest.raises(ConfigurationError) as raised:
        worker(MinimalTarget()).run()
    message = str(raised.value)
    assert message == (
        "target MinimalTarget holds no state for set 's' of cluster 'c' and cannot load a "
        "snapshot (it offers no SnapshotTarget capability): the worker cannot start; "
        "configure a target that loads snapshots"
    )
    loading = WorkerState("snapshot", "1:1:", StreamPosition.start((0,)))
    with pytest.raises(ConfigurationError, match="a snapshot load that did not finish"):
        worker(MinimalTarget(loading)).run()


def announce(shape: TableShape) -> CommittedBatch:
    change = stream_pb2.SchemaChange(
        kind=stream_pb2.SchemaChange.ANNOUNCE,
        schema=shape.schema,
        table=shape.name,
        relation=shape.relation,
        transaction=50,
    )
    change.shape.CopyFrom(shape_to_proto(shape))
    begin = stream_pb2.Begin()
    # Started after the snapshot the copy was loaded from: past the handoff.
    begin.start.snapshot.xmin = begin.start.snapshot.xmax = 40
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=7,
        begin=begin,
        mutations=(),
        position=after(3),
        markers=((0, change),),
    )


def test_a_table_to_copy_again_stops_a_worker_whose_target_cannot_copy_chunks() -> None:
    streaming = WorkerState("streaming", "1:1:", StreamPosition.start((0,)), tables=(ITEMS,))
    target = MinimalTarget(streaming)
    added = MicroBatch(batches=(announce(ADDED),), messages=3, lag=0)
    with pytest.raises(SchemaError) as raised:
        worker(target, [added]).run()
    assert str(raised.value) == (
        "table 'public.added': added to the set, so the copy must copy it again while "
        "streaming, but target MinimalTarget cannot copy tables chunk by chunk (it offers no "
        "ChunkTarget capability); reload the target from a fresh snapshot (remove its stored "
        "state and start the worker again)"
    )
    assert target.applied == [] and target.state == streaming, "nothing of it was applied"
    # A micro-batch that needs nothing copied again streams on such a target.
    unchanged = MicroBatch(batches=(announce(ITEMS),), messages=3, lag=0)
    worker(target, [unchanged]).run()
    assert target.state is not None and target.state.position == after(3)


@pytest.mark.parametrize("kind", ["resnapshot", "verify"])
def test_requests_are_refused_with_the_reason_on_a_target_without_chunks(kind: Any) -> None:
    desk = RequestDesk("127.0.0.1:1", "c", "s", "host=127.0.0.1", MinimalTarget())
    state = WorkerState("streaming", "1:1:", StreamPosition.start((0,)), tables=(ITEMS,))
    assert desk._problem(Request(kind), state) == (
        "target MinimalTarget cannot copy or compare tables chunk by chunk (it offers no "
        f"ChunkTarget capability): {kind} refused"
    )
