"""The staged path's planning on the driver: which micro-batches it takes, and its tasks' runs."""

from __future__ import annotations

import dataclasses
from typing import Any

from pgshovel.protocol import stream_pb2
from pgshovel.replication.staged import Stager, partition_runs
from pgshovel.source import Column, TableShape
from pgshovel.stream.partitions import PartitionJoin
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import SnapshotTask, WorkerState
from tests.unit.relay.test_publish import TYPES
from tests.unit.stream.test_partitions import _stream

ORDERS = TableShape(
    "public",
    "orders",
    tuple(
        Column(name, kind, kind, False, number)
        for number, (name, kind) in enumerate(TYPES.items(), 1)
    ),
    ("id",),
)


class _Target:
    audit = False

    def stage_sink(self, micro_batch: str) -> Any:  # pragma: no cover - never staged here
        raise AssertionError


def _batches(partitions: int = 4) -> list[Any]:
    position = StreamPosition.start((0,) * partitions)
    return list(PartitionJoin(position).validate(_stream(partitions)))


def _state(**changes: Any) -> WorkerState:
    state = WorkerState("streaming", "10:10:", StreamPosition.start((0,)), tables=(ORDERS,))
    return state.replace(**changes)


def _stager(minimum: int = 1) -> Stager:
    return Stager(object(), _Target(), {}, "topic", minimum)  # any Spark: planning only


def test_runs_take_every_rows_message_of_every_partition_in_order() -> None:
    batches = _batches()
    runs = partition_runs(batches, task_rows=10_000)
    assert runs is not None
    assert [partition for partition, _ in runs] == [0, 1, 2, 3]
    for partition, takes in runs:
        offsets = [take.offset for take in takes]
        assert offsets == sorted(offsets)
        assert {take.ordinal for take in takes} == {0, 1, 2}
        expected = [
            message.offset
            for batch in batches
            for message in batch.mutations.parts[partition].messages
        ]
        assert offsets == expected


def test_runs_are_cut_at_batch_boundaries_once_large_enough() -> None:
    runs = partition_runs(_batches(), task_rows=1)
    assert runs is not None
    # Every batch of every partition starts a run of its own: one batch per run.
    assert all(len({take.ordinal for take in takes}) == 1 for _, takes in runs)
    assert len(runs) == 4 * 3


def test_a_one_partition_stream_is_staged_from_partition_0() -> None:
    runs = partition_runs(_batches(1))
    assert runs is not None and [partition for partition, _ in runs] == [0]


def test_only_whole_plain_micro_batches_of_known_shapes_large_enough_are_staged() -> None:
    batches = _batches()
    stager = _stager()
    assert stager.eligible(batches, _state(), driver_only=False)
    assert not stager.eligible(batches, _state(), driver_only=True)
    assert not _stager(minimum=10_000).eligible(batches, _state(), driver_only=False)
    assert not stager.eligible(batches, _state(broken=(("public", "orders"),)), False)
    task = SnapshotTask("t", "public", "orders", "backfill")
    assert not stager.eligible(batches, _state(tasks=(task,)), driver_only=False)
    marked = dataclasses.replace(batches[0], markers=((0, stream_pb2.Watermark()),))
    assert not stager.eligible([marked, *batches[1:]], _state(), driver_only=False)
    other = dataclasses.replace(ORDERS, columns=ORDERS.columns[:-1])
    assert not stager.eligible(batches, _state(tables=(other,)), driver_only=False)
    typed = dataclasses.replace(batches[0], mutations=tuple(batches[0].mutations))
    assert not stager.eligible([typed], _state(), driver_only=False)
    assert not Stager(object(), None, {}, "", 1).eligible(batches, _state(), driver_only=False)
    # a worker without Spark (driving the target itself) never stages
    assert not Stager(None, _Target(), {}, "t", 1).eligible(batches, _state(), driver_only=False)


def test_the_apply_lag_is_read_without_decoding_a_batch() -> None:
    from pgshovel.replication.metrics import oldest_change_seconds

    joined = _batches(4)
    single = _batches(1)
    assert oldest_change_seconds(joined) == oldest_change_seconds(single)
    assert joined[0].mutations._merged is None
    assert single[0].mutations._decoded is None
    decoded = [dataclasses.replace(batch, mutations=tuple(batch.mutations)) for batch in single]
    assert oldest_change_seconds(decoded) == oldest_change_seconds(single)


def test_a_failed_staging_job_is_a_data_error_or_transient() -> None:
    from pgshovel.errors import StreamError, TransientError
    from pgshovel.replication.staged import task_failure

    rewritten = Exception(
        "An error occurred while calling collect.\n: org.apache.spark.SparkException: Job "
        "aborted\nTraceback (most recent call last):\n  File ...\n"
        "pgshovel.errors.StreamError: staging task 3: the message at offset 7 of topic 't' "
        "partition 1 is not the one the micro-batch was planned with\n\tat org.apache..."
    )
    failure = task_failure(rewritten)
    assert isinstance(failure, StreamError)
    assert str(failure).startswith("a staging task failed: staging task 3: the message at")
    lost = task_failure(Exception("org.apache.spark.SparkException: Job aborted: executor lost"))
    assert isinstance(lost, TransientError) and not isinstance(lost, StreamError)
    assert "executor lost" in str(lost)
    broker = task_failure(Exception("...\npgshovel.errors.BrokerUnavailable: no message of x\n"))
    assert isinstance(broker, TransientError) and "no message of x" in str(broker)


def test_mutations_per_table_are_counted_without_decoding_a_batch() -> None:
    from collections import Counter

    from pgshovel.replication.metrics import table_counts

    joined = _batches(4)[0]
    single = _batches(1)[0]
    counted = table_counts(joined.mutations), table_counts(single.mutations)
    assert joined.mutations._merged is None and single.mutations._decoded is None
    expected = Counter((m.schema, m.table) for m in tuple(single.mutations))
    assert counted == (expected, expected)
    assert table_counts(tuple(single.mutations)) == expected
