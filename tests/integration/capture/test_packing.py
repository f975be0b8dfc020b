"""Packed capture (ext/packing.c) writes fewer queue rows holding exactly the events of before.

Three clusters capture the same tables of one database: the C trigger packing with
small limits (so rows fill up inside statements, transactions and savepoints), the C
trigger with packing off (a row per change, as before packing), and the PL/pgSQL
function. Every statement fires all three. Expanded as the relay expands them, the
packed queue's events are byte for byte those of the unpacked one (the same ids
too: each change takes its id where an unpacked event would), and decode to the same
mutations as the PL/pgSQL function's, through savepoints rolled back (also after a
row was written inside them), DDL between DML in one transaction, PREPARE
TRANSACTION, a PL/pgSQL loop of exception blocks, TRUNCATE, writes without capture
(session_replication_role) and provenance. A 1,000,000-row statement keeps the
writing backend's memory bounded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.admin import capture_library
from pgshovel.cluster import names
from pgshovel.protocol import stream_pb2
from pgshovel.relay.packing import PACKED_EVENT, unpacked
from pgshovel.sandbox import SandboxConnection
from tests.fix_sandbox import delete_cluster, unique_name
from tests.integration.admin._admin import execute, rows
from tests.integration.capture._capture import (
    SET,
    captured,
    event_rows,
    install,
    queue_events,
    queue_rows,
)
from tests.integration.capture.test_implementations import HOSTILE_SESSION

pytestmark = pytest.mark.integration

SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, name text, qty int);
CREATE TABLE notes (id int PRIMARY KEY, body text);
CREATE TABLE stamped (id int PRIMARY KEY, v text);
"""
TABLES: list[dict[str, Any]] = [
    {"name": "items"},
    {"name": "notes"},
    {"name": "stamped", "provenance": True},
]
#: small enough that statements, transactions and savepoints fill several rows
SMALL = {"rows": 5, "bytes": 300}

#: run one by one, autocommit outside BEGIN ... COMMIT
WORKLOAD = (
    "INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 12) g",
    "BEGIN",
    "INSERT INTO notes VALUES (1, 'single')",
    "UPDATE items SET qty = qty + 1 WHERE id = 1",
    "SAVEPOINT a",
    "INSERT INTO items SELECT g, repeat('x', 40) || g, g FROM generate_series(100, 111) g",
    "SAVEPOINT b",
    "DELETE FROM notes",
    "ROLLBACK TO b",
    "UPDATE items SET name = 'kept ' || id WHERE id BETWEEN 100 AND 103",
    "RELEASE a",
    "SAVEPOINT c",
    "INSERT INTO items VALUES (200, 'rolled back', 0), (201, 'rolled back', 0)",
    "INSERT INTO notes SELECT g, 'rolled back' FROM generate_series(200, 210) g",
    "ROLLBACK TO c",
    "INSERT INTO notes VALUES (2, 'after the savepoints')",
    "COMMIT",
    "BEGIN",
    "INSERT INTO items VALUES (300, 'before the DDL', 1)",
    "ALTER TABLE items ADD COLUMN extra int DEFAULT 7",
    "INSERT INTO items VALUES (301, 'with extra', 2, 70)",
    "UPDATE items SET extra = extra + 1 WHERE id IN (1, 300, 301)",
    "ALTER TABLE items DROP COLUMN name",
    "DELETE FROM items WHERE id IN (2, 3)",
    "UPDATE items SET qty = -qty WHERE id BETWEEN 4 AND 9",
    "COMMIT",
    "BEGIN",
    "INSERT INTO notes SELECT g, 'prepared ' || g FROM generate_series(10, 16) g",
    "UPDATE items SET qty = 0 WHERE id = 10",
    "PREPARE TRANSACTION 'GID'",
    "COMMIT PREPARED 'GID'",
    "BEGIN",
    "INSERT INTO notes VALUES (20, 'never')",
    "PREPARE TRANSACTION 'GID'",
    "ROLLBACK PREPARED 'GID'",
    """DO $$
BEGIN
    FOR i IN 30..41 LOOP
        BEGIN
            INSERT INTO notes VALUES (i, 'loop ' || i);
            UPDATE items SET qty = i WHERE id = 11;
            IF i % 3 = 0 THEN
                RAISE EXCEPTION 'undo %', i;
            END IF;
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
    END LOOP;
END
$$""",
    "BEGIN",
    "INSERT INTO notes VALUES (50, 'before the truncate')",
    "TRUNCATE notes",
    "INSERT INTO notes VALUES (51, 'after the truncate')",
    "SET LOCAL session_replication_role = replica",
    "INSERT INTO notes VALUES (52, 'not captured')",
    "SET LOCAL session_replication_role = origin",
    "INSERT INTO notes VALUES (53, 'captured again')",
    "COMMIT",
    "BEGIN",
    "SET LOCAL pgshovel.annotation = 'first'",
    "INSERT INTO stamped SELECT g, 'a' FROM generate_series(1, 7) g",
    "INSERT INTO items (id, qty) VALUES (400, 4)",
    "SET LOCAL pgshovel.annotation = 'second'",
    "UPDATE stamped SET v = 'b' WHERE id <= 3",
    "COMMIT",
)


@pytest.fixture
def clusters(sandbox: SandboxConnection, cluster_name: str) -> Iterator[dict[str, str]]:
    """Three clusters: C packing, C not packing, PL/pgSQL (packing left to its defaults)."""
    made = {
        "packed": cluster_name,
        "unpacked": unique_name("up", separator="_", limit=40),
        "plpgsql": unique_name("pl", separator="_", limit=40),
    }
    yield made
    for name in (made["unpacked"], made["plpgsql"]):
        delete_cluster(sandbox, name)


def _raw(dsn: str, cluster: str) -> list[tuple[Any, ...]]:
    """The queue's row changes, packed rows expanded: time, txid, type, data (its exact text),
    schema, table and key columns (the set version differs: packing is part of the set)."""
    return [
        (
            event.time,
            event.txid,
            event.type,
            event_rows(event),
            event.extra1,
            event.extra2,
            event.extra4,
        )
        for event in queue_events(dsn, cluster)
        if event.type in ("I", "U", "D", "T")
    ]


def _mutations(dsn: str, cluster: str) -> list[stream_pb2.Mutation]:
    """The queue's mutations, decoded, without their set version."""
    found = captured(dsn, cluster)
    for mutation in found:
        mutation.ClearField("set_version")
    return found


def test_packed_rows_hold_exactly_the_events_of_before(
    database: str,
    clusters: dict[str, str],
    zookeeper: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    execute(database, SCHEMA)
    monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
    install(zookeeper, clusters["packed"], database, TABLES, packing=SMALL)
    install(zookeeper, clusters["unpacked"], database, TABLES, packing={"rows": 1})
    monkeypatch.setenv(capture_library.ENVIRONMENT, "plpgsql")
    install(zookeeper, clusters["plpgsql"], database, TABLES)
    conn = psycopg2.connect(database, application_name="packing test")
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute(HOSTILE_SESSION)
            gid = unique_name("packing", separator="_", limit=40)
            for statement in WORKLOAD:
                cursor.execute(statement.replace("'GID'", f"'{gid}'"))
    finally:
        conn.close()

    packed_rows = queue_rows(database, clusters["packed"])
    packed = _raw(database, clusters["packed"])
    assert packed == _raw(database, clusters["unpacked"])
    assert sum(row[3] == PACKED_EVENT for row in packed_rows) >= 10
    assert len(packed_rows) < len(queue_rows(database, clusters["unpacked"]))
    # Nothing of the savepoints and exception blocks rolled back, of the prepared
    # transaction rolled back or of the writes without capture.
    texts = [json.dumps(event[3]) for event in packed]
    assert not any("rolled back" in t or "never" in t or "not captured" in t for t in texts)
    assert len([t for t in texts if "loop" in t]) == 8
    # Decoded (schema changes between the mutations of one transaction included), the
    # three are the same mutations with the same ids.
    decoded = _mutations(database, clusters["packed"])
    assert decoded == _mutations(database, clusters["unpacked"])
    assert decoded == _mutations(database, clusters["plpgsql"])
    dropped = [m for m in decoded if m.table == "items" and m.operation == m.DELETE]
    assert [[c.name for c in m.old.columns] for m in dropped] == [["id", "qty", "extra"]] * 2


def test_events_written_between_packed_changes_keep_their_place(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, SCHEMA)
    install(zookeeper, cluster_name, database, TABLES)
    queue = names.queue_name(cluster_name, SET)
    watermark = sql.Identifier(names.schema_name(cluster_name), "insert_watermark")
    conn = psycopg2.connect(database)
    try:
        with conn, conn.cursor() as cursor:
            cursor.execute("INSERT INTO notes VALUES (1, 'a')")
            cursor.execute(
                sql.SQL("SELECT {}(%s, 'mark', 'public', 'notes')").format(watermark), (queue,)
            )
            cursor.execute("INSERT INTO notes VALUES (2, 'b'), (3, 'c')")
            cursor.execute("UPDATE items SET qty = 1")  # no rows: no event
            cursor.execute("DELETE FROM notes WHERE id = 2")
    finally:
        conn.close()
    found = queue_rows(database, cluster_name)
    changes = [row for row in found if row[3] in (PACKED_EVENT, "W")]
    # One packed row for the transaction's four changes, the watermark between its ids.
    assert [row[3] for row in changes] == [PACKED_EVENT, "W"]
    assert changes[0][0] < changes[1][0]
    events = [(e.type, e.data) for e in queue_events(database, cluster_name) if e.type != "S"]
    assert [kind for kind, _ in events] == ["I", "W", "I", "I", "D"]
    ids = [e.id for e in queue_events(database, cluster_name)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def _anonymous_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError(f"no RssAnon for backend {pid}")


def _peak_kb(dsn: str, statement: str) -> int:
    """The highest private memory of the backend that runs ``statement``, sampled."""
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (pid,) = cursor.fetchone()  # type: ignore[misc]
            peak = _anonymous_kb(pid)
            done = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.wait(0.02):
                    peak = max(peak, _anonymous_kb(pid))

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                cursor.execute(statement)
            finally:
                done.set()
                sampler.join()
            return max(peak, _anonymous_kb(pid))
    finally:
        conn.close()


def test_a_million_row_statement_is_packed_in_bounded_memory(
    database: str, cluster_name: str, zookeeper: KazooClient
) -> None:
    execute(database, "CREATE TABLE big (k int PRIMARY KEY, v int)")
    install(zookeeper, cluster_name, database, [{"name": "big"}])
    small = _peak_kb(database, "INSERT INTO big SELECT g, g FROM generate_series(-10000, -1) g")
    large = _peak_kb(database, "INSERT INTO big SELECT g, g FROM generate_series(1, 1000000) g")
    # The pack holds at most its limit; the transition tables spill to disk past work_mem.
    assert large < small + 32 * 1024, (small, large)
    (packed,) = rows(
        database,
        sql.SQL("SELECT count(*) FROM {} WHERE ev_type = 'P'").format(
            sql.Identifier(*_event_table(database, cluster_name))
        ),
    )[0]
    # 16 KB of changes (about 35 bytes each here) per row
    assert 1_010_000 // 1000 <= packed <= 1_010_000 * 40 // 16384, packed
    # Expanded in a stream (as the relay reads), every row in statement order.
    expected = iter([*range(-10000, 0), *range(1, 1000001)])
    conn = psycopg2.connect(database)
    try:
        with conn.cursor(name="events") as cursor:
            cursor.execute(
                sql.SQL("SELECT ev_id, 0, ev_txid, ev_type, ev_data FROM {} ORDER BY ev_id").format(
                    sql.Identifier(*_event_table(database, cluster_name))
                )
            )
            chunks = iter(lambda: cursor.fetchmany(200), [])
            last = 0
            for chunk in unpacked(chunks):
                for event in chunk:
                    if event[3] == "S":
                        continue
                    assert event[0] > last and event[4][1]["k"] == str(next(expected))
                    last = event[0]
        assert next(expected, None) is None
    finally:
        conn.close()


def _event_table(dsn: str, cluster: str) -> tuple[str, str]:
    (prefix,) = rows(
        dsn,
        "SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = %s",
        (names.queue_name(cluster, SET),),
    )[0]
    schema, table = str(prefix).split(".")
    return schema, table
