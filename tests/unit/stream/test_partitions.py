"""The cross-partition join: batches whole once every partition committed them, counts checked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pgshovel.abc import TickInfo
from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.relay.framing import RowFramer
from pgshovel.relay.relay import _tick_message
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.partitions import JoinedMutations, PartitionJoin
from pgshovel.stream.position import StreamPosition
from tests.unit.relay.test_publish import Catalog, _row

NODE = b"\x02" * 16
Record = tuple[int, int, stream_pb2.Message]


def _order(number: int) -> dict[str, str]:
    return {
        "id": str(number),
        "tags": "{a,b}",
        "total": f"{number}.50",
        "placed_at": "2024-03-15 12:34:56.5+00",
    }


def _event(number: int, kind: str, old: int | None, new: int | None) -> tuple[Any, ...]:
    data = json.dumps([None if old is None else _order(old), None if new is None else _order(new)])
    return (number, 1_700_000_000_000_000, 900, kind, data, "public", "orders", "v1", '["id"]')


def _events(batch: int) -> list[tuple[Any, ...]]:
    """Inserts, updates, key changes (old and new key in different partitions) and deletes."""
    base = batch * 100
    events = [_row(base + number) for number in range(1, 21)]
    events += [_event(base + 21, "U", base + 1, base + 1)]
    events += [_event(base + 22 + n, "U", base + 2 + n, base + 60 + n) for n in range(6)]
    events += [_event(base + 30, "D", base + 3, None)]
    return events


def _frame(framer: RowFramer, batches: range) -> list[tuple[int, stream_pb2.Message]]:
    out: list[tuple[int, stream_pb2.Message]] = []
    for batch in batches:
        framer.begin(
            stream_pb2.BatchIdentifier(id=batch, node=NODE),
            _tick_message(TickInfo(batch, "10:12:11", 5)),
            _tick_message(TickInfo(batch + 1, "12:14:", 6)),
            "v1",
        )
        framer.add(_events(batch))
        framer.commit()
        messages, partitions = framer.take()
        out += [
            (partition, stream_pb2.Message.FromString(message.SerializeToString()))
            for message, partition in zip(messages, partitions, strict=True)
        ]
    return out


def _offsets(framed: list[tuple[int, stream_pb2.Message]], start: dict[int, int]) -> list[Record]:
    """Kafka offsets per partition, continuing from ``start``."""
    records = []
    for partition, message in framed:
        offset = start.get(partition, 0)
        start[partition] = offset + 1
        records.append((partition, offset, message))
    return records


def _stream(partitions: int = 4, batches: int = 3) -> list[Record]:
    return _offsets(_frame(RowFramer(Catalog(), 3, partitions, 300), range(1, batches + 1)), {})


def _join(records: list[Record], position: StreamPosition | None = None) -> list[CommittedBatch]:
    join = PartitionJoin(position or StreamPosition.start((0, 0, 0, 0)))
    return list(join.validate(records))


def _ids(batch: CommittedBatch) -> list[int]:
    return [mutation.id for mutation in batch.mutations]


def test_a_partitioned_stream_joins_into_the_one_partition_stream() -> None:
    joined = _join(_stream(4))
    single = list(PartitionJoin().validate(_stream(1)))
    assert [b.batch_id for b in joined] == [b.batch_id for b in single] == [1, 2, 3]
    for four, one in zip(joined, single, strict=True):
        assert isinstance(four.mutations, JoinedMutations)
        assert len(four.mutations) == len(one.mutations) == 28
        assert list(four.mutations) == list(one.mutations)
        # A key change is in both partitions, and once in the joined batch.
        assert sum(len(part) for part in four.mutations.parts) > 28
        assert len(four.position.partitions) == 4
        assert all(cursor.consumed for cursor in four.position.partitions)


def test_a_batch_is_emitted_only_when_the_last_partition_commits_it() -> None:
    records = _stream(4, batches=2)
    lagging = [record for record in records if record[0] == 3]
    join = PartitionJoin(StreamPosition.start((0, 0, 0, 0)))
    assert list(join.validate([record for record in records if record[0] != 3])) == []
    assert join.held() > 0
    batches = list(join.validate(lagging))
    assert [b.batch_id for b in batches] == [1, 2]
    assert join.held() == 0
    commits = [
        offset for partition, offset, message in lagging if message.operation.commit.ByteSize()
    ]
    assert [b.position.partitions[3].next_offset for b in batches] == [o + 1 for o in commits]


def test_duplicated_messages_and_a_resumed_position_emit_each_batch_once() -> None:
    records = _stream(4)
    doubled = [record for record in records for _ in range(2)]
    batches = _join(doubled)
    assert [b.batch_id for b in batches] == [1, 2, 3]
    position = StreamPosition.from_document(batches[0].position.to_document())
    assert [b.batch_id for b in _join(records, position)] == [2, 3]


def test_a_batch_resent_after_a_relay_restart_joins_across_publishers() -> None:
    first = RowFramer(Catalog(), 3, 4, 300)
    old = _frame(first, range(1, 3))
    # The old relay died after partition 0's commit of batch 2 reached the topic.
    second_begin = next(
        index
        for index, (_partition, message) in enumerate(old)
        if message.operation.WhichOneof("operation") == "begin" and message.operation.batch.id == 2
    )
    cut = [
        item
        for index, item in enumerate(old)
        if index < second_begin
        or item[0] == 0
        or item[1].operation.WhichOneof("operation") == "begin"
    ]
    offsets: dict[int, int] = {}
    records = _offsets(cut, offsets)
    records += _offsets(_frame(RowFramer(Catalog(), 4, 4, 300), range(2, 4)), offsets)
    batches = _join(records)
    expected = list(PartitionJoin().validate(_stream(1)))
    assert [b.batch_id for b in batches] == [1, 2, 3]
    assert [_ids(b) for b in batches] == [_ids(b) for b in expected]


def test_a_gap_in_one_partition_names_the_partition() -> None:
    records = _stream(4)
    rows = [r for r in records if r[0] == 2 and r[2].operation.WhichOneof("operation") == "rows"]
    with pytest.raises(StreamError, match=r"^partition 2: .*sequence gap"):
        _join([record for record in records if record is not rows[0]])


def test_counts_that_do_not_add_up_are_an_error() -> None:
    records = _stream(4, batches=1)
    for partition, _offset, message in records:
        if partition == 1 and message.operation.WhichOneof("operation") == "commit":
            message.operation.commit.batch_mutations += 1
    with pytest.raises(StreamError, match="messages of the batch are missing"):
        _join(records)


def test_begins_that_disagree_with_the_topic_name_the_setting() -> None:
    records = [record for record in _stream(4, batches=1) if record[0] < 2]
    with pytest.raises(StreamError, match=r"set `partitions: 2` in relay.yml"):
        list(PartitionJoin(StreamPosition.start((0, 0))).validate(records))
    with pytest.raises(StreamError, match=r"set `partitions: 1` in relay.yml"):
        list(PartitionJoin().validate([r for r in records if r[0] == 0]))


def test_a_reader_starting_mid_topic_drops_a_batch_the_snapshot_holds() -> None:
    records = _stream(4)
    # Partition 0's start offset was read after batch 1's Begin there, the others' before it.
    begin_two = next(
        offset
        for partition, offset, message in records
        if partition == 0 and message.operation.batch.id == 2
    )
    start = StreamPosition.start((begin_two - 1, 0, 0, 0))
    kept = [r for r in records if r[0] != 0 or r[1] >= begin_two - 1]
    join = PartitionJoin(start)
    assert [b.batch_id for b in join.validate(kept)] == [2, 3]
    assert join.dropped == 3


def test_different_batches_next_after_the_first_join_are_an_error() -> None:
    records = _stream(4)
    commit_two = next(
        r
        for r in records
        if r[0] == 1
        and r[2].operation.WhichOneof("operation") == "commit"
        and r[2].operation.batch.id == 2
    )
    # Partition 1 lost batch 2 entirely (and the sequence numbers were renumbered to hide it).
    kept = [r for r in records if r[0] != 1 or r[2].operation.batch.id != 2]
    sequence = 0
    for partition, _offset, message in kept:
        if partition == 1:
            message.header.sequence = sequence
            sequence += 1
    assert commit_two not in kept
    with pytest.raises(StreamError, match="committed different batches next"):
        _join(kept)
