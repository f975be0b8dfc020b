"""The C trigger reads its queue's row in ``pgq.queue`` fresh in every transaction.

The library keeps where ``pgq.queue`` and its index are across transactions, and where
the index led to the queue's row last time (ext/queue.c), so that a transaction reads
the row without descending the index. Whatever happens to the row or the table between
one session's transactions, each of them must still write into the queue's current
event table and obey its current settings: PgQ rotating the event tables (the row
updated, ``queue_cur_table`` moving on), inserts disabled and enabled again, the table
rewritten by ``VACUUM FULL`` (every row at a new place), and the queue dropped and
created again under the same name (another row, another id and tables).
"""

from __future__ import annotations

from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.admin import capture_library
from pgshovel.cluster import names
from pgshovel.protocol import stream_pb2
from tests.integration.admin._admin import execute, rows
from tests.integration.capture._capture import SET, captured, install

pytestmark = pytest.mark.integration


def _run(dsn: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    for statement, args in statements:
        execute(dsn, statement, args)


def _current_table(dsn: str, queue: str) -> str:
    return str(
        rows(
            dsn,
            "SELECT queue_data_pfx || '_' || queue_cur_table FROM pgq.queue WHERE queue_name = %s",
            (queue,),
        )[0][0]
    )


def _newest_table(dsn: str, queue: str) -> str:
    """The event table holding the queue's newest row."""
    prefix = rows(dsn, "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = %s", (queue,))
    schema, table = str(prefix[0][0]).split(".")
    found = rows(
        dsn,
        sql.SQL("SELECT tableoid::regclass::text FROM {} ORDER BY ev_id DESC LIMIT 1").format(
            sql.Identifier(schema, table)
        ),
    )
    return str(found[0][0])


def _rotate(dsn: str, queue: str) -> None:
    """PgQ's own rotation of the event tables (no consumer left to hold the old one)."""
    _run(
        dsn,
        (
            "SELECT pgq.unregister_consumer(queue_name, consumer_name) "
            "FROM pgq.get_consumer_info(%s)",
            (queue,),
        ),
        ("SELECT pgq.set_queue_config(%s, 'rotation_period', '0')", (queue,)),
        ("SELECT pgq.maint_rotate_tables_step1(%s)", (queue,)),
        ("SELECT pgq.maint_rotate_tables_step2()", ()),
    )


def _inserted(mutations: list[stream_pb2.Mutation]) -> list[Any]:
    return [
        {column.name: column.value for column in mutation.new.columns}["id"].int64
        for mutation in mutations
        if mutation.operation == mutation.INSERT
    ]


def test_every_transaction_writes_where_the_queue_row_says_now(
    database: str, cluster_name: str, zookeeper: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    execute(database, "CREATE TABLE items (id integer PRIMARY KEY, note text)")
    monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
    install(zookeeper, cluster_name, database, [{"name": "items"}])
    queue = names.queue_name(cluster_name, SET)
    writer = psycopg2.connect(database, application_name="queue lookup test")
    writer.autocommit = True
    try:
        with writer.cursor() as cursor:

            def insert(*ids: int) -> str:
                """Insert ``ids`` in one transaction; the table its events went into."""
                with writer:
                    for number in ids:
                        cursor.execute("INSERT INTO items VALUES (%s, 'x')", (number,))
                return _newest_table(database, queue)

            first = _current_table(database, queue)
            assert insert(1) == first
            # Rotations: the queue's row changes, its current table moves on twice.
            _rotate(database, queue)
            second = _current_table(database, queue)
            assert second != first
            assert insert(2) == second
            _rotate(database, queue)
            third = _current_table(database, queue)
            assert third not in (first, second)
            assert insert(3, 33) == third
            # Inserts disabled: the next transaction sees it, then sees them enabled again.
            disable = "UPDATE pgq.queue SET queue_disable_insert = %s WHERE queue_name = %s"
            execute(database, disable, (True, queue))
            with pytest.raises(psycopg2.Error, match=f'inserts into queue "{queue}" are disabled'):
                insert(4)
            execute(database, disable, (False, queue))
            assert insert(4) == third
            # Every row of pgq.queue somewhere else.
            execute(database, "VACUUM FULL pgq.queue")
            assert insert(5) == third
            assert _inserted(captured(database, cluster_name)) == [1, 2, 3, 33, 4, 5]
            # The queue made again: another row, id and tables under the same name.
            _run(
                database,
                ("SELECT pgq.drop_queue(%s, true)", (queue,)),
                ("SELECT pgq.create_queue(%s)", (queue,)),
            )
            again = _current_table(database, queue)
            assert again not in (first, second, third)
            assert insert(6) == again
    finally:
        writer.close()
    assert _inserted(captured(database, cluster_name)) == [6]


def _block(dsn: str, queue: str) -> int:
    """The heap block of the queue's row in pgq.queue."""
    found = rows(
        dsn, "SELECT (ctid::text::point)[0]::int FROM pgq.queue WHERE queue_name = %s", (queue,)
    )
    return int(found[0][0])


def _blocks(dsn: str) -> int:
    return int(
        rows(dsn, "SELECT pg_relation_size('pgq.queue') / current_setting('block_size')::int")[0][0]
    )


def test_the_queue_row_found_where_vacuum_cut_the_table_off(
    database: str, cluster_name: str, zookeeper: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue's row moved to the table's first block and VACUUM cut off the block where a
    session found it last: that session's next transaction finds it through the index."""
    execute(database, "CREATE TABLE items (id integer PRIMARY KEY, note text)")
    monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
    install(zookeeper, cluster_name, database, [{"name": "items"}])
    queue = names.queue_name(cluster_name, SET)
    execute(database, "ALTER TABLE pgq.queue SET (autovacuum_enabled = false)")
    pad = (
        "INSERT INTO pgq.queue (queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq, "
        "queue_extra_maint) SELECT %s || g, 'pad', 'pad', 'pad', ARRAY[repeat('p', 1500)] "
        "FROM generate_series(1, %s) g"
    )
    # Four blocks of padding rows, then the queue's row moved after them, then its block filled.
    execute(database, pad, ("before ", 20))
    execute(
        database,
        "UPDATE pgq.queue SET queue_extra_maint = ARRAY[repeat('q', 1500)] WHERE queue_name = %s",
        (queue,),
    )
    execute(database, pad, ("after ", 8))
    last = _block(database, queue)
    assert last > 0
    writer = psycopg2.connect(database, application_name="queue lookup test")
    writer.autocommit = True
    try:
        with writer.cursor() as cursor:
            cursor.execute("INSERT INTO items VALUES (1, 'found at the end')")
            # Room made before it; the row moves there (its own block is full); the rest goes.
            execute(
                database,
                "DELETE FROM pgq.queue "
                "WHERE queue_data_pfx = 'pad' AND (ctid::text::point)[0] < %s",
                (last,),
            )
            execute(database, "VACUUM pgq.queue")
            execute(
                database,
                "UPDATE pgq.queue SET queue_extra_maint = ARRAY[repeat('m', 1500)] "
                "WHERE queue_name = %s",
                (queue,),
            )
            assert _block(database, queue) < last
            execute(database, "DELETE FROM pgq.queue WHERE queue_data_pfx = 'pad'")
            execute(database, "VACUUM pgq.queue")
            assert _blocks(database) <= last
            cursor.execute("INSERT INTO items VALUES (2, 'found at the start')")
    finally:
        writer.close()
    assert _inserted(captured(database, cluster_name)) == [1, 2]
