"""Chunked table-topic snapshots against a fake writer and a fake reader: what goes out when."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence

import pytest

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.relay.table_topics import (
    ChunkedSnapshots,
    ChunkRead,
    Progress,
    Record,
    TableTopicTranslator,
)
from pgshovel.source import Column, TableShape
from pgshovel.stream.codec import to_value
from pgshovel.stream.typed_json import dumps

SHAPE = TableShape(
    "public",
    "items",
    (Column("id", "integer", "int4", True), Column("note", "text", "text")),
    ("id",),
    relation=77,
)
TOPIC = "shop.items"
STATE = "__pgshovel-snapshots.c.s"
FLUSH = Record("", None, b"FLUSH")


def key(id_: int) -> bytes:
    return dumps({"id": id_}).encode()


def row(id_: int) -> stream_pb2.Row:
    found = stream_pb2.Row()
    found.columns.add(name="id", value=to_value("int4", str(id_)))
    found.columns.add(name="note", value=to_value("text", f"n{id_}"))
    return found


class Output:
    def __init__(self, state: dict[bytes, bytes] | None = None) -> None:
        self.records: list[Record] = []
        self.state = state or {}
        self.topics: set[str] = set()
        #: what the table topic holds (key -> last value)
        self.held: dict[bytes, bytes] = {}

    def produce(self, records: Sequence[Record]) -> int:
        self.records.extend(records)
        return len(records)

    def flush(self) -> None:
        self.records.append(FLUSH)

    def read_state(self, topic: str) -> dict[bytes, bytes]:
        if topic == TOPIC:
            return dict(self.held)
        assert topic == STATE
        return dict(self.state)

    def holds_messages(self, topic: str) -> bool:
        return topic in self.topics


class Table:
    """A table of ids read in chunks of ``rows`` rows; records the reads."""

    def __init__(self, ids: list[int], status: str = "read") -> None:
        self.ids = sorted(ids)
        self.status = status
        self.calls: list[tuple[str, tuple[str, ...] | None]] = []
        self.lock = threading.Lock()

    def read(
        self,
        dsn: str,
        cluster: str,
        queue: str,
        table: configuration_pb2.TableConfiguration,
        attempt: str,
        lower: tuple[str, ...] | None,
        rows: int,
    ) -> ChunkRead:
        with self.lock:
            self.calls.append((attempt, lower))
        if self.status != "read":
            return ChunkRead(self.status)  # type: ignore[arg-type]
        start = 0 if lower is None else int(lower[0])
        inside = [i for i in self.ids if i >= start]
        upper = None if len(inside) <= rows else (str(inside[rows]),)
        chunk = inside[:rows]
        return ChunkRead("read", SHAPE, lower, upper, tuple((key(i), row(i)) for i in chunk))

    def attempt(self, number: int) -> str:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.calls) > number:
                    return self.calls[number][0]
            time.sleep(0.005)
        raise AssertionError(f"read {number} never started")


def snapshots(table: Table, output: Output, chunk_rows: int = 2) -> ChunkedSnapshots:
    found = ChunkedSnapshots(
        translator=TableTopicTranslator("shop", "json", name="shop"),
        output=output,
        state_topic=STATE,
        prefix="relay-abcdef",
        chunk_rows=chunk_rows,
        reader=table.read,
    )
    configuration = configuration_pb2.ReplicationSetConfiguration()
    configuration.tables.add(schema="public", name="items")
    found.attach("dbname=x", "c", "pgshovel.c.s", configuration)
    return found


def frame(
    s: ChunkedSnapshots, *marks: str, changed: Sequence[int] = (), truncate: bool = False
) -> None:
    s.begin()
    for mark in marks:
        s.watermark(mark)
    if changed:
        s.changed("public", "items", [Record(TOPIC, key(i), b"{}") for i in changed])
    if truncate:
        s.truncated("public", "items")
    s.commit()
    # What the writer does once a batch is acknowledged.
    s.output.flush()  # type: ignore[attr-defined]
    s.output.produce(s.acknowledged())


def reads(output: Output) -> list[int]:
    return [json.loads(r.key or b"")["id"] for r in output.records if r.topic == TOPIC]


def progress(output: Output) -> list[dict[str, object]]:
    return [json.loads(r.value or b"") for r in output.records if r.topic == STATE]


def test_rows_the_stream_changed_in_the_window_stay_out_then_progress_is_recorded() -> None:
    table, output = Table([1, 2, 3, 4, 5]), Output()
    s = snapshots(table, output)
    try:
        s.begin()  # the first batch starts the task and its first chunk
        first = table.attempt(0)
        assert table.calls[0][1] is None
        frame(s, f"{first}:low", changed=[2])
        assert reads(output) == []  # nothing before the high watermark's batch
        frame(s, f"{first}:high")
        assert reads(output) == [1]
        # the rows, then the batch's acknowledgement, then the progress record
        assert [r.topic for r in output.records[-3:]] == [TOPIC, "", STATE]
        assert progress(output)[-1] == {
            "schema": "public",
            "table": "items",
            "status": "running",
            "next": ["3"],
            "rows": 1,
            "chunks": 1,
        }
        second = table.attempt(1)
        assert table.calls[1][1] == ("3",)
        frame(s, f"{second}:low", f"{second}:high")
        third = table.attempt(2)
        frame(s, f"{third}:low")
        frame(s, f"{third}:high", changed=[4])  # the high watermark's batch counts whole
        assert reads(output) == [1, 3, 4, 5]
        assert progress(output)[-1]["status"] == "done"
        frame(s)
        assert len(table.calls) == 3  # done: no more reads
    finally:
        s.close()


def test_a_relay_that_starts_again_goes_on_from_the_recorded_bound() -> None:
    running = Progress("public", "items", next=("4",), rows=3, chunks=2)
    table = Table([1, 2, 3, 4, 5])
    output = Output({TOPIC.encode(): running.to_json()})
    s = snapshots(table, output)
    try:
        s.begin()
        attempt = table.attempt(0)
        assert table.calls[0][1] == ("4",)
        frame(s, f"{attempt}:low", f"{attempt}:high")
        assert reads(output) == [4, 5]
        assert progress(output)[-1] == {
            "schema": "public",
            "table": "items",
            "status": "done",
            "rows": 5,
            "chunks": 3,
        }
    finally:
        s.close()


def test_a_finished_snapshot_is_not_taken_again() -> None:
    done = Progress("public", "items", done=True, rows=5, chunks=3)
    table = Table([1])
    s = snapshots(table, Output({TOPIC.encode(): done.to_json()}))
    try:
        frame(s)
        time.sleep(0.05)
        assert table.calls == []
    finally:
        s.close()


def test_a_truncate_in_the_window_reads_the_chunk_again() -> None:
    table, output = Table([1, 2, 3]), Output()
    s = snapshots(table, output, chunk_rows=10)
    try:
        s.begin()
        first = table.attempt(0)
        frame(s, f"{first}:low", truncate=True)
        frame(s, f"{first}:high")
        assert reads(output) == [] and progress(output) == []
        second = table.attempt(1)
        assert second != first and table.calls[1][1] is None
        frame(s, f"{second}:low", f"{second}:high")
        assert reads(output) == [1, 2, 3]
    finally:
        s.close()


def test_a_writer_failure_forgets_flights_and_reads_progress_back() -> None:
    table, output = Table([1, 2, 3]), Output()
    s = snapshots(table, output, chunk_rows=10)
    try:
        s.begin()
        first = table.attempt(0)
        s.abandon()
        frame(s, f"{first}:low", f"{first}:high")  # the forgotten flight's marks match nothing
        assert reads(output) == []
        second = table.attempt(1)
        frame(s, f"{second}:low", f"{second}:high")
        assert reads(output) == [1, 2, 3]
    finally:
        s.close()


def test_a_missing_table_gets_no_snapshot_and_is_not_read_again() -> None:
    table, output = Table([], status="missing"), Output()
    s = snapshots(table, output)
    try:
        s.begin()
        table.attempt(0)
        time.sleep(0.05)
        frame(s)
        frame(s)
        assert len(table.calls) == 1 and reads(output) == [] and progress(output) == []
    finally:
        s.close()


def test_without_a_source_a_snapshot_is_a_configuration_error() -> None:
    found = ChunkedSnapshots(
        translator=TableTopicTranslator("shop", "json", name="shop"),
        output=Output(),
        state_topic=STATE,
        prefix="relay-abcdef",
        chunk_rows=2,
    )
    found.ensure("public", "items")
    with pytest.raises(ConfigurationError, match=r"table topic 'shop\.items' needs a snapshot"):
        found.begin()


def tombstones(output: Output) -> list[int]:
    return [
        json.loads(r.key or b"")["id"]
        for r in output.records
        if r.topic == TOPIC and r.value is None
    ]


def test_a_topic_holding_messages_gets_tombstones_for_keys_the_table_lost() -> None:
    # The topic holds keys 1..6, the table 1, 3, 5. While the snapshot runs, the stream
    # changes 4 (deleted: the stream's own tombstone) and 6 (inserted again: the stream's
    # row). Only 2 is stale: nothing confirms it.
    table, output = Table([1, 3, 5]), Output()
    output.topics.add(TOPIC)
    output.held = {key(i): b"{}" for i in range(1, 7)}
    s = snapshots(table, output)
    try:
        s.begin()
        first = table.attempt(0)
        frame(s, f"{first}:low", changed=[4])
        frame(s, f"{first}:high")
        assert reads(output) == [1, 3]
        assert progress(output) == []  # a sweeping snapshot records only its end
        second = table.attempt(1)
        assert table.calls[1][1] == ("5",)
        frame(s, f"{second}:low", changed=[6])
        frame(s, f"{second}:high")
        assert reads(output) == [1, 3, 5, 2]
        assert tombstones(output) == [2]
        assert [p["status"] for p in progress(output)] == ["done"]
    finally:
        s.close()


def test_a_sweeping_snapshot_interrupted_starts_over_and_sweeps_again() -> None:
    table, output = Table([1, 3, 5]), Output()
    output.topics.add(TOPIC)
    output.held = {key(2): b"{}"}
    s = snapshots(table, output)
    try:
        s.begin()
        first = table.attempt(0)
        frame(s, f"{first}:low", f"{first}:high")
        assert reads(output) == [1, 3]
        s.abandon()  # a writer failure: progress is read back from Kafka (none recorded)
        s.begin()
        again = table.attempt(2)
        assert table.calls[2][1] is None  # from the first key
        frame(s, f"{again}:low", f"{again}:high")
        last = table.attempt(3)
        frame(s, f"{last}:low", f"{last}:high")
        assert tombstones(output) == [2]
        assert [p["status"] for p in progress(output)] == ["done"]
    finally:
        s.close()


def test_a_topic_this_relay_published_into_is_not_swept() -> None:
    table, output = Table([1]), Output()
    s = snapshots(table, output)
    try:
        s.begin()
        first = table.attempt(0)
        output.topics.add(TOPIC)  # the stream published into it since
        output.held = {key(9): b"{}"}
        s.abandon()
        s.begin()
        again = table.attempt(1)
        frame(s, f"{again}:low", f"{again}:high")
        assert first != again and tombstones(output) == []
    finally:
        s.close()


def test_connecting_again_reads_the_open_chunk_again() -> None:
    table, output = Table([1, 2]), Output()
    s = snapshots(table, output, chunk_rows=10)
    try:
        s.begin()
        first = table.attempt(0)
        configuration = configuration_pb2.ReplicationSetConfiguration()
        s.attach("dbname=moved", "c", "pgshovel.c.s", configuration)
        frame(s, f"{first}:low", f"{first}:high")
        assert reads(output) == []  # its marks may be in the old database's queue
        second = table.attempt(1)
        frame(s, f"{second}:low", f"{second}:high")
        assert reads(output) == [1, 2]
    finally:
        s.close()


def test_a_table_removed_from_the_set_stops_its_snapshot() -> None:
    table, output = Table([1, 2, 3]), Output()
    s = snapshots(table, output, chunk_rows=1)
    try:
        s.begin()
        first = table.attempt(0)
        s.begin()
        s.schema_change(
            stream_pb2.SchemaChange(
                kind=stream_pb2.SchemaChange.REMOVE, schema="public", table="items"
            )
        )
        s.watermark(f"{first}:low")
        s.watermark(f"{first}:high")
        s.commit()
        frame(s)
        assert reads(output) == [] and len(table.calls) == 1
    finally:
        s.close()
