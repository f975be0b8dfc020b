"""The PostgreSQL target's audit table, driven directly (no Spark, no Kafka).

Parts of a batch write their audit rows in the open transaction (abandoned,
nothing is left); a provenance the table cannot hold fails the whole
micro-batch with a clear error; a worker starting while another one writes
audit rows takes no lock on the table.
"""

from __future__ import annotations

from typing import Any

import psycopg2
import pytest
from psycopg2.extensions import make_dsn

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.replication.targets.postgresql import PostgresTarget
from pgshovel.source import Column, TableShape, cast_is_exact, connect
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.plan import MicroBatchPlan, plan_micro_batch
from pgshovel.stream.position import StreamPosition
from pgshovel.stream.state import WorkerState
from tests._positions import after
from tests.stored_state import applied_offset, sole_postgres_state

pytestmark = [pytest.mark.integration]

TABLE = TableShape(
    "public",
    "notes",
    (Column("id", "integer", "int4", True, 1), Column("body", "text", "text", False, 2)),
    ("id",),
    relation=1,
)
NODE = bytes(range(16))


def insert(number: int, client_addr: str = "192.0.2.7") -> stream_pb2.Mutation:
    mutation = stream_pb2.Mutation(
        id=number, schema="public", table="notes", operation=stream_pb2.Mutation.INSERT
    )
    mutation.new.columns.add(name="id").value.int64 = number
    mutation.new.columns.add(name="body").value.string = f"note {number}"
    mutation.provenance.CopyFrom(
        stream_pb2.Provenance(current_user="carol", client_addr=client_addr, annotation="r1")
    )
    return mutation


def plan(batch_id: int, mutations: list[stream_pb2.Mutation], complete: bool) -> MicroBatchPlan:
    batch = CommittedBatch(
        node=NODE,
        batch_id=batch_id,
        begin=stream_pb2.Begin(),
        mutations=tuple(mutations),
        position=after(batch_id * 10, sequence=batch_id * 10),
        complete=complete,
    )
    return plan_micro_batch([batch], (TABLE,), (), can_alter_type=cast_is_exact, key_text=key_text)


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute(query)
        found = cursor.fetchall()
    connection.close()
    return found


AUDIT = (
    "SELECT batch_id, mutation_id, current_user_name, host(client_addr), annotation, key "
    "FROM pgshovel_replication.audit ORDER BY batch_id, mutation_id"
)


@pytest.fixture
def target(make_database: Any) -> Any:
    dsn = make_database("target")
    opened = PostgresTarget(dsn, audit=True)
    state = WorkerState("snapshot", "10:10:", StreamPosition.start((0,)), tables=(TABLE,))
    opened.open("c", "s")
    opened.begin_snapshot(state)
    opened.finish_snapshot(state.replace(phase="streaming"))
    yield opened, dsn, state.replace(phase="streaming")
    opened.close()


def test_parts_write_audit_rows_in_the_open_transaction_and_abandoned_parts_none(
    target: Any,
) -> None:
    opened, dsn, state = target
    opened.apply(plan(1, [insert(1), insert(2)], complete=False), state, commit=False)
    assert rows(dsn, AUDIT) == [], "parts are not committed"
    opened.abandon()
    opened.apply(plan(1, [insert(1)], complete=False), state, commit=False)
    committed = state.replace(position=after(10, sequence=10))
    opened.apply(plan(1, [insert(3)], complete=True), committed)
    assert rows(dsn, AUDIT) == [
        (1, 1, "carol", "192.0.2.7", "r1", {"id": "1"}),
        (1, 3, "carol", "192.0.2.7", "r1", {"id": "3"}),
    ]
    assert rows(dsn, "SELECT id FROM notes ORDER BY id") == [(1,), (3,)]


def test_a_provenance_the_table_cannot_hold_fails_the_micro_batch(target: Any) -> None:
    opened, dsn, state = target
    committed = state.replace(position=after(20, sequence=20))
    with pytest.raises(StreamError, match=r"audit rows .*'public\.notes'.*audit: false"):
        opened.apply(plan(2, [insert(5), insert(6, client_addr="not an address")], True), committed)
    assert rows(dsn, AUDIT) == []
    assert rows(dsn, "SELECT count(*) FROM notes") == [(0,)], "the data rolled back with it"
    assert applied_offset(sole_postgres_state(dsn)) is None


def test_a_worker_starting_takes_no_lock_on_an_existing_audit_table(target: Any) -> None:
    _, dsn, _ = target
    writer = psycopg2.connect(dsn)
    try:
        with writer.cursor() as cursor:
            # Another worker in the middle of a micro-batch that writes audit rows.
            cursor.execute("LOCK TABLE pgshovel_replication.audit IN ROW EXCLUSIVE MODE")
        other = PostgresTarget(make_dsn(dsn, options="-c lock_timeout=2s"), audit=True)
        try:
            assert other.open("c", "another set") is None
        finally:
            other.close()
    finally:
        writer.rollback()
        writer.close()
