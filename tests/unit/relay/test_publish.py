"""BatchPublisher.publish: decoding in place frames the same stream, and failures stay gapless.

The queue, the writer and the catalog are small in-memory stand-ins: publish's
framing and its failure handling are what is under test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from pgshovel.abc import BatchInfo, EventDecoder, Framer, QueueReader, StreamWriter, TickInfo
from pgshovel.cluster.watch import SetWatch
from pgshovel.errors import CodecError, MessageTooLarge, SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.protocol.configuration_pb2 import ReplicationSetConfiguration, TableConfiguration
from pgshovel.relay import events, framing
from pgshovel.relay.framing import MutationFramer, RowFramer
from pgshovel.relay.metrics import RelayMetrics
from pgshovel.relay.relay import BatchPublisher, _tick_message
from pgshovel.relay.schema import SchemaTracker, TableState, plan_of
from pgshovel.source import Column
from pgshovel.stream.publisher import Publisher
from pgshovel.stream.rows import partition_of, to_mutations

NODE = b"\x01" * 16
TYPES = {"id": "int8", "placed_at": "timestamptz", "tags": "_text", "total": "numeric"}


def _row(number: int, total: str = "1.50") -> tuple[Any, ...]:
    new = {
        "id": str(number),
        "tags": "{a,b}",
        "total": total,
        "placed_at": f"2024-03-15 12:34:{number % 60:02d}.5+00",
    }
    data = json.dumps([None, new])
    return (number, 1_700_000_000_000_000, 900, "I", data, "public", "orders", "v1", '["id"]')


class Schemas(SchemaTracker):
    """A tracker that knows one table, without a database."""

    def __init__(self) -> None:
        pass

    def table(self, schema: str, name: str, event_id: int) -> TableState:
        columns = tuple(Column(column, t, t) for column, t in TYPES.items())
        return TableState(None, plan_of(columns), frozenset(TYPES))


def Catalog() -> events.QueueEventDecoder:
    return events.QueueEventDecoder(Schemas())


class Queue:
    """A QueueReader holding one batch's events in memory."""

    queue = "pgshovel.test.set"

    def __init__(self, chunks: list[list[tuple[Any, ...]]]) -> None:
        self.chunks = chunks
        self.finished: list[int] = []
        self.abandoned = 0

    def check(self) -> None:
        pass

    def configure_ticker(self, interval: float, max_count: int) -> None:
        pass

    def tick(self) -> int | None:
        return None

    def force_tick(self) -> int | None:
        return None

    def last_tick_snapshot(self) -> str | None:
        return None

    def committed_after(self, snapshot: str) -> bool:
        return False

    def next_batch(self) -> BatchInfo | None:
        return None

    def close(self) -> None:
        pass

    def events(self, batch: BatchInfo) -> Iterator[list[tuple[Any, ...]]]:
        yield from self.chunks

    def finish(self, batch: BatchInfo) -> None:
        self.finished.append(batch.id)

    def abandon(self) -> None:
        self.abandoned += 1


class Writer:
    """A StreamWriter keeping what it was given (and each message's partition)."""

    def __init__(self, partitions: int = 0) -> None:
        self.stream: list[stream_pb2.Message] = []
        self.partitions: list[int] = []
        self.flushes = 0
        #: 0: the MUTATIONS encoding; N: ROWS over N partitions
        self.rows_partitions = partitions

    def framer(self, decoder: EventDecoder, epoch: int) -> Framer:
        if self.rows_partitions:
            return RowFramer(decoder, epoch, self.rows_partitions, 200)
        return MutationFramer(decoder, epoch)

    def bind(self, default_topic: str) -> None:
        pass

    @property
    def bytes_sent(self) -> int:
        return sum(message.ByteSize() for message in self.stream)

    def push(
        self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
    ) -> None:
        self.stream.extend(stream_pb2.Message.FromString(m.SerializeToString()) for m in messages)
        self.partitions.extend([0] * len(messages) if partitions is None else partitions)

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        pass

    def last_committed_begin(self) -> stream_pb2.Message | None:
        return None


def _batch(number: int) -> BatchInfo:
    return BatchInfo(number, TickInfo(1, "10:12:11", 5), TickInfo(2, "12:14:", 6))


#: the set as the relay watches it (its version is stamped on Begin)
SET = SetWatch.fixed("set", ReplicationSetConfiguration(tables=[TableConfiguration(name="orders")]))


def test_the_stand_ins_satisfy_the_contracts() -> None:
    assert isinstance(Queue([]), QueueReader)
    assert isinstance(Writer(), StreamWriter)
    assert isinstance(Catalog(), EventDecoder)


def _publisher(queue: Queue, writer: Writer, decoder: EventDecoder) -> BatchPublisher:
    return BatchPublisher(
        queue,
        writer,
        decoder,
        NODE,
        SET,
        RelayMetrics(),
        epoch=4,
    )


def _without_stamps(message: stream_pb2.Message) -> bytes:
    copy = stream_pb2.Message()
    copy.CopyFrom(message)
    copy.header.publisher = b""
    copy.header.timestamp = 0
    return copy.SerializeToString()


def test_decoding_in_place_publishes_the_same_stream_as_framing_copies() -> None:
    chunks = [[_row(1), _row(2)], [_row(3)]]
    decoder = Catalog()
    in_place = Writer()
    assert _publisher(Queue(chunks), in_place, decoder).publish(_batch(7)) == 3
    batch = _batch(7)
    copied = Publisher(epoch=4).frame_batch(
        stream_pb2.BatchIdentifier(id=7, node=NODE),
        _tick_message(batch.start),
        _tick_message(batch.end),
        SET.version,
        [decoder.decode(row) for chunk in chunks for row in chunk],  # type: ignore[arg-type]
    )
    assert [_without_stamps(m) for m in in_place.stream] == [_without_stamps(m) for m in copied]
    kinds = [m.operation.WhichOneof("operation") for m in in_place.stream]
    assert kinds == ["begin", "mutation", "mutation", "mutation", "commit"]
    assert [m.header.sequence for m in in_place.stream] == [0, 1, 2, 3, 4]
    assert [m.operation.mutation.new.columns[0].value.int64 for m in in_place.stream[1:4]] == [
        1,
        2,
        3,
    ]
    assert {m.operation.batch.id for m in in_place.stream} == {7}


def test_mutations_are_counted_per_table_once_the_batch_is_finished() -> None:
    publisher = _publisher(Queue([[_row(1), _row(2)], [_row(3)]]), Writer(), Catalog())
    publisher.publish(_batch(7))
    assert publisher.metrics.tables == {("public", "orders"): 3}
    assert not publisher.metrics.publishing


def test_a_row_failing_to_decode_after_a_push_is_rolled_back_without_a_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing, "PUSH_CHUNK", 2)
    writer = Writer()
    bad = Queue([[_row(1), _row(2)], [_row(3), _row(4, total="1,5")]])
    publisher = _publisher(bad, writer, Catalog())
    with pytest.raises(CodecError, match="numeric text '1,5'"):
        publisher.publish(_batch(7))
    assert (bad.abandoned, bad.finished) == (1, [])
    good = Queue([[_row(5)]])
    publisher.queue = good
    publisher.publish(_batch(7))
    kinds = [m.operation.WhichOneof("operation") for m in writer.stream]
    assert kinds == ["begin", "mutation", "mutation", "rollback", "begin", "mutation", "commit"]
    assert [m.header.sequence for m in writer.stream] == list(range(7))
    assert len({m.header.publisher for m in writer.stream}) == 1
    assert good.finished == [7]


@pytest.mark.parametrize("dropped", [False, True], ids=["refused-before", "refused-by-broker"])
def test_a_message_too_large_rolls_back_or_abandons_the_batch(
    monkeypatch: pytest.MonkeyPatch, dropped: bool
) -> None:
    """Refused before the push reached the set topic: a Rollback at the next sequence. Refused
    after it was sent (the producer dropped the rest): a new publisher identity."""
    monkeypatch.setattr(framing, "PUSH_CHUNK", 2)

    class Refusing(Writer):
        refuse = True

        def push(
            self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
        ) -> None:
            if self.refuse and any(m.operation.mutation.id == 3 for m in messages):
                self.refuse = False
                raise MessageTooLarge("too large", dropped=dropped)
            super().push(messages, partitions)

    writer = Refusing()
    queue = Queue([[_row(1), _row(2)], [_row(3), _row(4)]])
    publisher = _publisher(queue, writer, Catalog())
    with pytest.raises(MessageTooLarge):
        publisher.publish(_batch(7))
    assert queue.finished == []
    publisher.publish(_batch(7))
    kinds = [m.operation.WhichOneof("operation") for m in writer.stream]
    sequences = [m.header.sequence for m in writer.stream]
    if dropped:
        assert kinds == ["begin", "mutation", "mutation"] + ["begin"] + ["mutation"] * 4 + [
            "commit"
        ]
        assert sequences == [0, 1, 2, *range(6)]
        assert len({m.header.publisher for m in writer.stream}) == 2
    else:
        assert kinds[:4] == ["begin", "mutation", "mutation", "rollback"]
        assert sequences == list(range(10))
        assert len({m.header.publisher for m in writer.stream}) == 1
    assert queue.finished == [7]


def test_one_flush_per_batch_and_finish_only_after_it() -> None:
    class Recording(Writer):
        def __init__(self, queue: Queue) -> None:
            super().__init__()
            self.queue = queue
            self.finished_before_flush: list[int] = []

        def flush(self) -> None:
            self.finished_before_flush.extend(self.queue.finished)
            super().flush()

    chunks = [[_row(n) for n in range(5)], [_row(n) for n in range(5, 9)]]
    queue = Queue(chunks)
    writer = Recording(queue)
    _publisher(queue, writer, Catalog()).publish(_batch(3))
    assert writer.flushes == 1
    assert writer.finished_before_flush == []
    assert queue.finished == [3]


def test_a_batch_that_cannot_hold_an_event_leaves_the_lag_alone() -> None:
    writer = Writer()
    publisher = _publisher(Queue([]), writer, Catalog())
    metrics = publisher.metrics
    metrics.batch_lag_seconds = 8.0  # the last batch with changes
    old = (time.time() - 60) * 1e6  # an empty batch whose start tick is a minute old
    empty = BatchInfo(9, TickInfo(1, "10:12:11", int(old), 40), TickInfo(2, "12:14:", 6, 40))
    seen: list[float] = []

    def events(batch: BatchInfo) -> Iterator[list[Any]]:
        seen.append(metrics.lag_seconds())  # while the batch is being read
        return iter(())

    publisher.queue.events = events  # type: ignore[method-assign]
    assert publisher.publish(empty) == 0
    assert seen == [0.0] and metrics.lag_seconds() == 0.0 and metrics.batch_lag_seconds == 8.0
    # The same ticks with the sequence moved (or unknown): pending since the start tick while
    # the batch is read; it held nothing, so nothing is pending after it and the last batch's
    # lag stays.
    for end_seq in (41, None):
        moved = BatchInfo(10, empty.start, TickInfo(2, "12:14:", 6, end_seq))
        seen.clear()
        assert publisher.publish(moved) == 0
        assert seen[0] >= 59.0
        assert metrics.lag_seconds() == 0.0 and metrics.batch_lag_seconds == 8.0


def test_a_batch_holding_events_written_before_its_start_tick_clears_the_lag() -> None:
    """A transaction in progress at the start tick wrote its events before it: the queue's
    sequence did not move between the ticks, yet the batch holds them. Once published,
    nothing is pending (the old code kept the lag growing forever)."""
    ten_seconds_ago = int((time.time() - 10) * 1e6)
    row = (1, ten_seconds_ago - 1_000_000, 900, *_row(1)[3:])
    publisher = _publisher(Queue([[row]]), Writer(), Catalog())
    metrics = publisher.metrics
    batch = BatchInfo(
        11, TickInfo(1, "10:12:11", ten_seconds_ago, 40), TickInfo(2, "12:14:", 6, 40)
    )
    assert publisher.publish(batch) == 1
    assert metrics.lag_seconds() == 0.0
    # its lag counts from the start tick (it committed after it), not from its older event
    assert 10.0 <= metrics.batch_lag_seconds < 20.0


def _by_partition(writer: Writer) -> dict[int, list[stream_pb2.Message]]:
    found: dict[int, list[stream_pb2.Message]] = {}
    for message, partition in zip(writer.stream, writer.partitions, strict=True):
        found.setdefault(partition, []).append(message)
    return found


def test_rows_frame_every_batch_in_every_partition_with_its_counts() -> None:
    chunks = [[_row(n) for n in range(1, 30)], [_row(n) for n in range(30, 41)]]
    decoder = Catalog()
    writer = Writer(partitions=3)
    assert _publisher(Queue(chunks), writer, decoder).publish(_batch(7)) == 40
    streams = _by_partition(writer)
    assert sorted(streams) == [0, 1, 2]
    read: dict[int, stream_pb2.Mutation] = {}
    for partition, messages in streams.items():
        kinds = [m.operation.WhichOneof("operation") for m in messages]
        assert kinds[0] == "begin" and kinds[-1] == "commit"
        assert set(kinds[1:-1]) == {"rows"}
        assert [m.header.sequence for m in messages] == list(range(len(messages)))
        begin = messages[0].operation.begin
        assert (begin.encoding, begin.partition, begin.partitions) == (
            stream_pb2.Begin.ROWS,
            partition,
            3,
        )
        rows = [mutation for m in messages[1:-1] for mutation in to_mutations(m.operation.rows)]
        commit = messages[-1].operation.commit
        assert (commit.mutations, commit.batch_mutations) == (len(rows), 40)
        for mutation in rows:
            key = (str(mutation.new.columns[0].value.int64),)
            assert partition_of("public", "orders", key, 3) == partition
            read[mutation.id] = mutation
    assert len({m.header.publisher for m in writer.stream}) == 1
    expected = [decoder.decode(row) for chunk in chunks for row in chunk]  # type: ignore[arg-type]
    assert [read[number] for number in sorted(read)] == expected


def test_every_push_holds_whole_rounds_a_run_of_events_over_all_partitions() -> None:
    class Pushes(Writer):
        def __init__(self) -> None:
            super().__init__(partitions=2)
            self.pushes: list[list[int]] = []

        def push(
            self, messages: Sequence[stream_pb2.Message], partitions: Sequence[int] | None = None
        ) -> None:
            self.pushes.append(
                [
                    mutation.id
                    for m in messages
                    if m.operation.WhichOneof("operation") == "rows"
                    for mutation in to_mutations(m.operation.rows)
                ]
            )
            super().push(messages, partitions)

    chunks = [[_row(n) for n in range(1, 20)], [_row(n) for n in range(20, 60)]]
    writer = Pushes()
    _publisher(Queue(chunks), writer, Catalog()).publish(_batch(7))
    runs = [sorted(ids) for ids in writer.pushes if ids]
    assert len(runs) > 1
    assert [number for run in runs for number in run] == list(range(1, 60))
    rows = [m for m in writer.stream if m.operation.WhichOneof("operation") == "rows"]
    assert len(rows) > 2 * len(runs) - 1  # several rounds of a message per partition


def test_a_row_failing_after_a_push_rolls_back_every_partition_without_a_gap() -> None:
    writer = Writer(partitions=2)
    lacking = list(_row(40))
    lacking[4] = json.dumps(
        [None, {"id": "40", "tags": "{}", "placed_at": "2024-01-01 00:00:00+00"}]
    )
    bad = Queue([[_row(n) for n in range(1, 40)], [tuple(lacking)]])
    publisher = _publisher(bad, writer, Catalog())
    # The ROWS encoding carries values as text (the worker's COPY reads them); a row that
    # does not fit its table's shape is still refused by the relay.
    with pytest.raises(SchemaError, match="lacks column 'total'"):
        publisher.publish(_batch(7))
    assert bad.finished == []
    publisher.queue = Queue([[_row(41)]])
    publisher.publish(_batch(7))
    for messages in _by_partition(writer).values():
        kinds = [m.operation.WhichOneof("operation") for m in messages]
        assert "rollback" in kinds
        after = kinds[kinds.index("rollback") + 1 :]
        assert after[0] == "begin" and after[-1] == "commit"
        assert [m.header.sequence for m in messages] == list(range(len(messages)))
