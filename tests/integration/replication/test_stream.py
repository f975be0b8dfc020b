"""Streaming into the PostgreSQL target: a published stream converges the target to the source."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from psycopg2 import sql

from pgshovel.protocol import stream_pb2
from pgshovel.replication.worker import Worker
from pgshovel.stream import codec
from pgshovel.stream.publisher import Publisher
from tests.stored_state import applied_offset, sole_postgres_state

from ._recording import RecordingSource
from ._support import (
    ODD_SCHEMA,
    ODD_TABLE,
    create_type_matrix,
    dump,
    ensure_topic,
    execute,
    publish,
    set_configuration,
    worker_configuration,
)
from ._workload import ITEMS, ITEMS_DDL

pytestmark = [pytest.mark.integration, pytest.mark.spark]

MATRIX = (ODD_SCHEMA, ODD_TABLE)


def stored_offset(target: str) -> int:
    offset = applied_offset(sole_postgres_state(target))
    return -1 if offset is None else offset


def until_offset(target: str, offset: int, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    return lambda: stored_offset(target) >= offset or time.monotonic() > deadline


def items_insert(source: RecordingSource, item: int, sub: str, payload: str) -> None:
    source.change(
        ITEMS,
        'INSERT INTO "Items" VALUES (%s, %s, %s, %s, now(), %s)',
        (item, sub, payload, item / 4, [item, None]),
        new_key=(str(item), sub),
    )


def items_update(source: RecordingSource, old: tuple[int, str], new: tuple[int, str]) -> None:
    source.change(
        ITEMS,
        'UPDATE "Items" SET "Id" = %s, sub = %s, payload = payload || \'+\' '
        'WHERE ("Id", sub) = (%s, %s)',
        (*new, *old),
        old_key=(str(old[0]), old[1]),
        new_key=(str(new[0]), new[1]),
    )


def items_delete(source: RecordingSource, key: tuple[int, str]) -> None:
    source.change(
        ITEMS,
        'DELETE FROM "Items" WHERE ("Id", sub) = (%s, %s)',
        key,
        old_key=(str(key[0]), key[1]),
    )


def test_published_stream_converges_target_to_source(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    create_type_matrix(source, rows=50)
    execute(source, ITEMS_DDL)
    configuration = set_configuration(source, [ITEMS, MATRIX])
    ensure_topic(kafka_config, topic)
    Worker(
        "test", "set", configuration, worker_configuration(target, kafka_config, topic), spark
    ).run(lambda: True)
    assert dump(target, *ITEMS) == dump(source, *ITEMS)

    publisher = Publisher(epoch=1)
    recorder = RecordingSource(source, [ITEMS, MATRIX])
    # A batch the snapshot already holds (its transaction is visible): must be skipped.
    stale = stream_pb2.Mutation(
        schema="public", table="Items", operation=stream_pb2.Mutation.TRUNCATE, transaction=1
    )
    messages = publisher.frame_batch(
        stream_pb2.BatchIdentifier(id=1000, node=uuid.uuid4().bytes),
        stream_pb2.Tick(id=1, snapshot=stream_pb2.Snapshot(xmin=1, xmax=2)),
        stream_pb2.Tick(id=2),
        "v1",
        [stale],
    )
    # Inserts, updates, a key change, a delete, insert-then-delete of one key, a key
    # moved onto a key deleted just before.
    items_insert(recorder, 1000, "a", "new")
    items_update(recorder, (1, "s1"), (1, "s1"))
    items_update(recorder, (2, "s2"), (2002, "moved"))
    items_delete(recorder, (3, "s0"))
    items_insert(recorder, 1001, "b", "gone")
    items_delete(recorder, (1001, "b"))
    items_delete(recorder, (5, "s2"))
    items_update(recorder, (4, "s1"), (5, "s2"))
    messages += recorder.commit().frame(publisher)
    # A rolled-back attempt of the next batch, then the same batch committed.
    items_update(recorder, (6, "s0"), (6, "s0"))
    items_insert(recorder, 1002, "c", "tab\there\\")
    retried = recorder.commit()
    attempt = retried.frame(publisher)[:-1]
    publisher.rewind(attempt[-1].header.sequence + 1)
    messages += [*attempt, publisher.rollback(retried.batch), *retried.frame(publisher)]
    # TRUNCATE then inserts in one transaction; a type-matrix row rewritten.
    recorder.truncate(ITEMS)
    for item in range(10):
        items_insert(recorder, item, "after", f"t{item}")
    recorder.change(
        MATRIX,
        sql.SQL(
            "UPDATE {} SET c_float8 = 'Infinity', c_ts = 'infinity', c_text = E'x\\ny', "
            'c_numeric_free = \'NaN\' WHERE "Key A" = 1 AND "kéy ""b""" = \'k1\''
        ).format(sql.Identifier(*MATRIX)),
        old_key=("1", "k1"),
        new_key=("1", "k1"),
    )
    truncating = recorder.commit()
    messages += truncating.frame(publisher)
    items_insert(recorder, 3000, "kept", "after truncate")
    messages += recorder.commit().frame(publisher)
    # The truncating batch re-sent by a new relay (new publisher): recognised, not
    # applied again (applying it again would lose the row inserted after it).
    resend = Publisher(epoch=2)
    messages += truncating.frame(resend)
    items_insert(recorder, 5000, "last", "end")
    messages += recorder.commit().frame(resend)
    recorder.close()
    publish(kafka_config, topic, messages)

    end = len(messages) - 1
    worker = Worker(
        "test", "set", configuration, worker_configuration(target, kafka_config, topic), spark
    )
    worker.run(until_offset(target, end))

    assert stored_offset(target) == end
    assert dump(target, *ITEMS) == dump(source, *ITEMS)
    assert dump(target, *MATRIX) == dump(source, *MATRIX)
    assert len(dump(target, *ITEMS)) == 12


def test_unkeyed_table_is_applied_row_by_row(
    spark: Any, make_database: Any, kafka_config: dict[str, str], topic: str
) -> None:
    source, target = make_database("source"), make_database("target")
    execute(
        source,
        "CREATE TABLE log (n integer, note text, tags text[]);"
        "INSERT INTO log VALUES (1, 'same', '{a}'), (1, 'same', '{a}'), (2, NULL, NULL)",
    )
    table = ("public", "log")
    configuration = set_configuration(source, [table], allow_unkeyed=True)
    ensure_topic(kafka_config, topic)
    Worker(
        "test", "set", configuration, worker_configuration(target, kafka_config, topic), spark
    ).run(lambda: True)

    def row(n: str, note: str | None, tags: str | None) -> stream_pb2.Row:
        built = stream_pb2.Row()
        built.columns.add(name="n", value=codec.to_value("int4", n))
        built.columns.add(name="note", value=codec.to_value("text", note))
        built.columns.add(name="tags", value=codec.to_value("_text", tags))
        return built

    def mutation(operation: Any, old: Any = None, new: Any = None) -> stream_pb2.Mutation:
        built = stream_pb2.Mutation(
            schema="public", table="log", operation=operation, transaction=10**9
        )
        if old is not None:
            built.old.CopyFrom(old)
        if new is not None:
            built.new.CopyFrom(new)
        return built

    # One of two identical rows deleted, a NULL-holding row updated, a row added.
    changes = [
        ("DELETE FROM log WHERE ctid = (SELECT min(ctid) FROM log WHERE n = 1)", None),
        ("UPDATE log SET note = 'was null' WHERE n = 2", None),
        ("INSERT INTO log VALUES (3, E'x\\ty', '{\"b c\",NULL}')", None),
    ]
    for statement, _ in changes:
        execute(source, statement)
    mutations = [
        mutation(stream_pb2.Mutation.DELETE, old=row("1", "same", "{a}")),
        mutation(
            stream_pb2.Mutation.UPDATE, old=row("2", None, None), new=row("2", "was null", None)
        ),
        mutation(stream_pb2.Mutation.INSERT, new=row("3", "x\ty", '{"b c",NULL}')),
    ]
    messages = Publisher(epoch=1).frame_batch(
        stream_pb2.BatchIdentifier(id=1, node=bytes(16)),
        stream_pb2.Tick(id=1, snapshot=stream_pb2.Snapshot(xmin=10**9, xmax=10**9)),
        stream_pb2.Tick(id=2),
        "v1",
        mutations,
    )
    publish(kafka_config, topic, messages)
    Worker(
        "test", "set", configuration, worker_configuration(target, kafka_config, topic), spark
    ).run(until_offset(target, len(messages) - 1))

    assert dump(target, *table) == dump(source, *table)
    assert len(dump(target, *table)) == 3
