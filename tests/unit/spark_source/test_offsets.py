"""The source's offsets and plan: batch boundaries only, ranges per partition, options read once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import pytest

from pgshovel.errors import ConfigurationError, StateError, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.spark_source.frontier import Frontier
from pgshovel.spark_source.offsets import (
    StreamRange,
    offset_document,
    plan_ranges,
    position_of,
)
from pgshovel.spark_source.options import SourceOptions
from pgshovel.spark_source.records import COLUMNS, batch_records, schema_ddl
from pgshovel.stream.position import PartitionCursor, StreamPosition
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.validation import StreamValidator

NODE = uuid.UUID(int=0xA).bytes


def _tick(number: int) -> stream_pb2.Tick:
    return stream_pb2.Tick(id=number, snapshot=stream_pb2.Snapshot(xmin=number, xmax=number + 1))


def _mutation(number: int, transaction: int = 7) -> stream_pb2.Mutation:
    mutation = stream_pb2.Mutation(
        id=number,
        schema="public",
        table="t",
        operation=stream_pb2.Mutation.INSERT,
        key_columns=["id"],
        transaction=transaction,
        timestamp=1_700_000_000_000_001,
    )
    column = mutation.new.columns.add(name="id")
    column.value.int64 = number
    note = mutation.new.columns.add(name="note")
    note.value.string = f"n{number}"
    return mutation


def _batch(source: Publisher, number: int, ids: Sequence[int]) -> list[stream_pb2.Message]:
    return source.frame_batch(
        stream_pb2.BatchIdentifier(id=number, node=NODE),
        _tick(number),
        _tick(number + 1),
        "v1",
        map(_mutation, ids),
    )


def _rolled_back(source: Publisher, number: int, ids: Sequence[int]) -> list[stream_pb2.Message]:
    batch = stream_pb2.BatchIdentifier(id=number, node=NODE)
    begin = source.begin(batch, _tick(number), _tick(number + 1), "v1")
    return [begin, *(source.mutation(batch, _mutation(i)) for i in ids), source.rollback(batch)]


def _stream() -> list[stream_pb2.Message]:
    source = Publisher(epoch=1, publisher=uuid.UUID(int=1).bytes, clock=lambda: 0)
    return [
        *_batch(source, 1, [1, 2]),  # offsets 0-3
        *_rolled_back(source, 2, [3]),  # 4-6
        *_batch(source, 3, [4]),  # 7-9
        *_batch(source, 4, [5, 6, 7]),  # 10-14
    ]


def test_the_frontier_stands_only_after_commits() -> None:
    messages = list(enumerate(_stream()))
    for cut in range(len(messages) + 1):
        frontier = Frontier(StreamPosition.start((0,)))
        frontier.add((0, o, m) for o, m in messages[:cut])
        boundary, _ = frontier.cut()
        commits = [
            offset
            for offset, message in messages[:cut]
            if message.operation.WhichOneof("operation") == "commit"
        ]
        assert boundary.partitions[0].next_offset == (commits[-1] + 1 if commits else 0)


def test_a_budget_ends_the_cut_at_the_first_batch_end_past_it_and_resumes_there() -> None:
    messages = list(enumerate(_stream()))
    frontier = Frontier(StreamPosition.start((0,)))
    frontier.add((0, o, m) for o, m in messages)
    first, used = frontier.cut(1)
    assert (first.partitions[0].next_offset, used) == (4, 2)
    second, used = frontier.cut(1)
    # The rolled-back batch is consumed on the way, never counted.
    assert (second.partitions[0].next_offset, used) == (10, 1)
    third, used = frontier.cut(None)
    assert (third.partitions[0].next_offset, used) == (15, 3)
    assert frontier.pending == 0


def test_a_range_between_two_offsets_validates_to_exactly_the_batches_in_it() -> None:
    messages = list(enumerate(_stream()))
    frontier = Frontier(StreamPosition.start((0,)))
    frontier.add((0, o, m) for o, m in messages)
    start, _ = frontier.cut(1)
    end, _ = frontier.cut(None)
    # The offsets survive Spark's JSON round trip.
    start_document = json.loads(json.dumps(offset_document("c.s", start)))
    end_document = json.loads(json.dumps(offset_document("c.s", end)))
    (task,) = plan_ranges(
        position_of(start_document, "c.s"),
        position_of(end_document, "c.s"),
        "c.s",
        "kafka:9092",
        (("api.version.request", "false"),),
    )
    task = StreamRange.from_json(json.loads(json.dumps(task.to_json())))
    assert (task.start_offset, task.end_offset) == (4, 15)
    assert task.kafka_properties() == {"api.version.request": "false"}
    validator = StreamValidator(task.start_position())
    batches = list(validator.validate(messages[task.start_offset : task.end_offset]))
    assert [b.batch_id for b in batches] == [3, 4]
    assert batches[-1].position.partitions[0].next_offset == task.end_offset
    rows = [row for batch in batches for row in batch_records(batch)]
    assert [(row[2], row[3]) for row in rows] == [(0, 4), (0, 5), (1, 6), (2, 7)]


def test_no_range_for_an_empty_micro_batch_and_an_error_for_one_going_back() -> None:
    position = StreamPosition((PartitionCursor(5, b"p" * 16, 3, 1),))
    assert plan_ranges(position, position, "c.s", "k:1") == []
    with pytest.raises(StreamError, match="lies before its start offset"):
        plan_ranges(position, StreamPosition.start((2,)), "c.s", "k:1")


def test_an_offset_of_another_topic_is_refused() -> None:
    document = offset_document("c.other", StreamPosition.start((0,)))
    with pytest.raises(StateError, match="belongs to another set"):
        position_of(document, "c.s")
    with pytest.raises(StateError, match="is not a pgshovel offset"):
        position_of({"offset": 3}, "c.s")


def test_records_are_typed_json_per_mutation() -> None:
    source = Publisher(epoch=1, publisher=uuid.UUID(int=1).bytes, clock=lambda: 0)
    (batch,) = StreamValidator().validate(enumerate(_batch(source, 9, [41])))
    (row,) = batch_records(batch)
    record = dict(zip([name for name, _ in COLUMNS], row, strict=True))
    assert record["batch_node"] == NODE.hex() and record["batch_id"] == 9
    assert (record["operation"], record["transaction"], record["key"]) == ("INSERT", 7, '{"id":41}')
    assert record["new"] == '{"id":41,"note":"n41"}' and record["old"] is None
    assert record["timestamp"].isoformat() == "2023-11-14T22:13:20.000001+00:00"
    assert schema_ddl().startswith("`batch_node` STRING, `batch_id` BIGINT")


def test_options_name_what_is_missing_or_wrong() -> None:
    options = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": "k:9092",
            "topic": "c.s",
            "kafka.api.version.request": "false",
            "maxMutationsPerTrigger": "100",
            "startingPosition": "LATEST",
        }
    )
    assert options.kafka_properties() == {"api.version.request": "false"}
    assert (options.starting, options.ending, options.max_mutations) == ("latest", "latest", 100)
    with pytest.raises(ConfigurationError, match=r"'kafka\.bootstrap\.servers'"):
        SourceOptions.parse({"topic": "c.s"})
    with pytest.raises(ConfigurationError, match="needs option 'topic'"):
        SourceOptions.parse({"kafka.bootstrap.servers": "k:1"})
    with pytest.raises(ConfigurationError, match="'endingposition' is 'earliest'"):
        SourceOptions.parse(
            {"kafka.bootstrap.servers": "k:1", "topic": "c.s", "endingPosition": "earliest"}
        )
    with pytest.raises(ConfigurationError, match="positive number"):
        SourceOptions.parse(
            {"kafka.bootstrap.servers": "k:1", "topic": "c.s", "maxMutationsPerTrigger": "0"}
        )
