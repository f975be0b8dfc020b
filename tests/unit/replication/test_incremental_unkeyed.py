"""An unkeyed table's chunk: the stream's mutations meanwhile are kept, and those the read's
snapshot does not see are the ones replayed on the rows it read (pure, no services)."""

from __future__ import annotations

from concurrent.futures import Future

from pgshovel.protocol import stream_pb2
from pgshovel.replication.flights import Flight
from pgshovel.replication.incremental import IncrementalSnapshots, attempt_prefix
from pgshovel.source import Chunk, Column, KeyRange, StagedChunk, TableShape
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import MicroBatchPlan, plan_micro_batch
from tests._positions import after

JOURNAL = TableShape("public", "journal", (Column("n", "integer", "int4", False, 1),), ())
ITEMS = TableShape("public", "items", (Column("id", "integer", "int4", True, 1),), ("id",))


def insert(table: str, value: int, txid: int) -> stream_pb2.Mutation:
    message = stream_pb2.Mutation(
        schema="public", table=table, operation=stream_pb2.Mutation.INSERT, transaction=txid
    )
    message.new.columns.add(name="n" if table == "journal" else "id").value.int64 = value
    return message


def batch(*items: stream_pb2.Mutation | str) -> CommittedBatch:
    mutations = tuple(item for item in items if isinstance(item, stream_pb2.Mutation))
    markers, seen = [], 0
    for item in items:
        if isinstance(item, stream_pb2.Mutation):
            seen += 1
        else:
            markers.append((seen, stream_pb2.Watermark(request=item)))
    return CommittedBatch(
        node=b"n" * 16,
        batch_id=1,
        begin=stream_pb2.Begin(),
        mutations=mutations,
        position=after(0),
        markers=tuple(markers),
    )


def key_text(row: stream_pb2.Row, table: TableShape) -> tuple[str | None, ...] | None:
    return (str(row.columns[0].value.int64),) if row.columns and table.key else None


def plan(*batches: CommittedBatch) -> MicroBatchPlan:
    return plan_micro_batch(
        batches, (JOURNAL, ITEMS), (), can_alter_type=lambda a, b: True, key_text=key_text
    )


def test_the_mutations_the_read_did_not_see_are_replayed_and_only_those() -> None:
    snapshots = IncrementalSnapshots("c", "s", "dbname=x", target=None, parallel=1)  # type: ignore[arg-type]
    attempt = f"{attempt_prefix('c', 's')}task.0.abcdef"
    future: Future[StagedChunk] = Future()
    chunk = Chunk(attempt, "pgshovel.c.s", KeyRange(JOURNAL, 0, None, None), cluster="c")
    flight = Flight(chunk, "task", 0, future)
    snapshots._flights[attempt] = flight
    try:
        before = insert("journal", 1, 90)  # before the low watermark's batch: not kept
        snapshots._observe(plan(batch(before)))
        # The low watermark's batch counts whole: 100 committed before the read's snapshot,
        # 104 while it was taken (in progress), 107 after it.
        seen, racing = insert("journal", 2, 100), insert("journal", 3, 104)
        snapshots._observe(plan(batch(seen, f"{attempt}:low", racing, insert("items", 7, 105))))
        after = insert("journal", 4, 107)
        snapshots._observe(plan(batch(after, f"{attempt}:high")))
        assert flight.opened and flight.ready and not flight.invalid
        assert flight.mutations == [seen, racing, after]
        assert flight.changed == set()
        staged = StagedChunk(rows=2, snapshot="103:106:104")
        assert list(flight.replay(staged)) == [racing, after]
    finally:
        snapshots.close()


def test_a_keyed_chunk_keeps_keys_and_replays_nothing() -> None:
    snapshots = IncrementalSnapshots("c", "s", "dbname=x", target=None, parallel=1)  # type: ignore[arg-type]
    attempt = f"{attempt_prefix('c', 's')}task.0.abcdef"
    chunk = Chunk(attempt, "pgshovel.c.s", KeyRange(ITEMS, 0, None, None), cluster="c")
    flight = Flight(chunk, "task", 0, Future())
    snapshots._flights[attempt] = flight
    try:
        snapshots._observe(
            plan(batch(f"{attempt}:low", insert("items", 7, 200), f"{attempt}:high"))
        )
        assert flight.changed == {("7",)} and flight.mutations == []
        assert flight.replay(StagedChunk(1, "100:100:")) == ()
    finally:
        snapshots.close()
