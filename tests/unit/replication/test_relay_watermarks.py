"""The worker's incremental snapshots ignore the watermarks of the relay's table-topic chunks."""

from __future__ import annotations

from concurrent.futures import Future

from pgshovel.protocol import stream_pb2
from pgshovel.relay.table_topics import relay_attempt_prefix
from pgshovel.replication.flights import Flight
from pgshovel.replication.incremental import IncrementalSnapshots, attempt_prefix
from pgshovel.source import Chunk, Column, KeyRange, StagedChunk, TableShape
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import BatchChanges, MicroBatchPlan
from tests._positions import after

ITEMS = TableShape("public", "items", (Column("id", "integer", "int4", True),), ("id",))


def plan_with(*marks: str, keys: set[tuple[str | None, ...]] | None = None) -> MicroBatchPlan:
    batch = CommittedBatch(
        node=b"n" * 16,
        batch_id=1,
        begin=stream_pb2.Begin(),
        mutations=(),
        position=after(0),
    )
    changes = BatchChanges(
        batch,
        set(),
        tuple(stream_pb2.Watermark(request=mark) for mark in marks),
        known_keys={ITEMS.identity: keys or set()},
    )
    return MicroBatchPlan((), (ITEMS,), (), (), 0, (changes,))


def worker_with_flight() -> tuple[IncrementalSnapshots, Flight]:
    snapshots = IncrementalSnapshots("c", "s", "dbname=x", target=None, parallel=1)  # type: ignore[arg-type]
    attempt = f"{attempt_prefix('c', 's')}task.0.abcdef"
    future: Future[StagedChunk] = Future()
    chunk = Chunk(attempt, "pgshovel.c.s", KeyRange(ITEMS, 0, None, None), cluster="c")
    flight = Flight(chunk, "task", 0, future)
    snapshots._flights[attempt] = flight
    return snapshots, flight


def test_relay_watermarks_leave_the_worker_flights_alone() -> None:
    snapshots, flight = worker_with_flight()
    try:
        relay = f"{relay_attempt_prefix('c', 's')}.0a1b2c3d.1"
        snapshots._observe(plan_with(f"{relay}:low", f"{relay}:high", keys={("1",)}))
        assert not flight.opened and not flight.ready and flight.changed == set()
        # The worker's own marks, in the same kind of plan, do open and close it.
        attempt = flight.chunk.attempt
        snapshots._observe(plan_with(f"{attempt}:low", f"{relay}:low", keys={("2",)}))
        snapshots._observe(plan_with(f"{relay}:high", f"{attempt}:high"))
        assert flight.opened and flight.ready and flight.changed == {("2",)}
    finally:
        snapshots.close()
