"""The C capture trigger and its PL/pgSQL twin write the same events.

Two clusters capture the same tables of one database, one with each
implementation (chosen by PGSHOVEL_CAPTURE as pgshovel-admin does), so every
statement fires both triggers; their queues must then decode to the same
mutations, and hold the same event types, times, transactions and extra fields,
in the same order. Plain tables get statement triggers (statements of more rows
than one batch of the C trigger, and of more bytes); an inheritance parent and
child get row triggers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.admin import capture_library
from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError
from pgshovel.relay.packed_run import PackedRun
from pgshovel.relay.packing import unpacked
from pgshovel.sandbox import SandboxConnection
from pgshovel.stream.rows import copy_line
from tests.fix_sandbox import delete_cluster, unique_name
from tests.integration.admin._admin import execute, rows
from tests.integration.capture import test_types
from tests.integration.capture._capture import (
    captured,
    event_rows,
    install,
    queue_events,
    queue_rows,
)

pytestmark = pytest.mark.integration

HOSTILE_SESSION = (
    "SET datestyle = 'SQL, DMY'; SET intervalstyle = 'sql_standard'; "
    "SET timezone = 'America/New_York'; SET extra_float_digits = 0; "
    "SET bytea_output = 'escape'; SET search_path = public, pg_catalog"
)


@pytest.fixture
def second_cluster(sandbox: SandboxConnection) -> Iterator[str]:
    name = unique_name("pl", separator="_", limit=40)
    yield name
    delete_cluster(sandbox, name)


def _function_language(dsn: str, cluster: str) -> str:
    found = rows(
        dsn,
        "SELECT l.lanname FROM pg_catalog.pg_proc p "
        "JOIN pg_catalog.pg_language l ON l.oid = p.prolang "
        "WHERE p.pronamespace = %s::regnamespace AND p.proname = 'capture'",
        (names.schema_name(cluster),),
    )
    return str(found[0][0])


def _trigger_levels(dsn: str, cluster: str) -> dict[str, set[str]]:
    """Per table, the levels (ROW, STATEMENT) of the cluster's INSERT/UPDATE/DELETE triggers."""
    found = rows(
        dsn,
        "SELECT c.relname, t.tgtype & 1 = 1 FROM pg_catalog.pg_trigger t "
        "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
        "WHERE t.tgname LIKE %s AND t.tgtype & 28 <> 0",
        (names.trigger_prefix(cluster).replace("_", "\\_") + "%",),
    )
    levels: dict[str, set[str]] = {}
    for table, row_level in found:
        levels.setdefault(str(table), set()).add("ROW" if row_level else "STATEMENT")
    return levels


def _raw_events(dsn: str, cluster: str) -> list[tuple[object, ...]]:
    """The row changes of the set's queue (each set create announced its shapes in its own
    transaction), packed rows expanded: time, txid, type, data, extra1..4, in event order.
    Key order inside a row object is not part of the contract; everything else is."""
    return [
        (event.time, event.txid, event.type, event_rows(event), *event[5:])
        for event in queue_events(dsn, cluster)
        if event.type in ("I", "U", "D", "T")
    ]


def test_c_and_plpgsql_write_the_same_events(
    database: str,
    cluster_name: str,
    second_cluster: str,
    zookeeper: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = psycopg2.connect(database)
    try:
        if not capture_library.serves(capture_library.library_version(conn)):
            pytest.fail("the C capture library is not installed: run make setup (make ext)")
    finally:
        conn.close()
    execute(database, test_types.SETUP)
    definitions = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(type_name))
        for column, (type_name, _kind, _values) in test_types.MATRIX.items()
    )
    execute(
        database,
        sql.SQL(
            'CREATE TABLE matrix (k serial PRIMARY KEY, "odd ""name""" text, gone int, {})'
        ).format(definitions),
    )
    execute(database, "ALTER TABLE matrix DROP COLUMN gone")
    execute(database, 'CREATE TABLE listed (k int PRIMARY KEY, "odd ""name""" text, skipped text)')
    # Columns named like the PL/pgSQL function's aliases and variables.
    execute(
        database,
        'CREATE TABLE awkward (k int PRIMARY KEY, n int, o int, "columns" text, old_row text,'
        ' "position" int, "row" text)',
    )
    execute(database, "CREATE TABLE parent (k int PRIMARY KEY, v text)")
    execute(database, "CREATE TABLE child (w int, PRIMARY KEY (k)) INHERITS (parent)")
    tables: list[dict[str, Any]] = [
        {"name": "matrix"},
        {"name": "listed", "columns": ["k", 'odd "name"']},
        {"name": "awkward"},
        {"name": "parent"},
        {"name": "child"},
    ]
    monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
    install(zookeeper, cluster_name, database, tables)
    monkeypatch.setenv(capture_library.ENVIRONMENT, "plpgsql")
    install(zookeeper, second_cluster, database, tables)
    assert _function_language(database, cluster_name) == "c"
    assert _function_language(database, second_cluster) == "plpgsql"
    for cluster in (cluster_name, second_cluster):
        assert _trigger_levels(database, cluster) == {
            "matrix": {"STATEMENT", "ROW"},  # the set's row trigger never fires: WHEN (false)
            "listed": {"STATEMENT", "ROW"},
            "awkward": {"STATEMENT", "ROW"},
            "parent": {"ROW"},
            "child": {"ROW"},
        }

    columns = list(test_types.MATRIX)
    insert = sql.SQL("INSERT INTO matrix ({}) VALUES ({})").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )
    conn = psycopg2.connect(database)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            for session in ("", HOSTILE_SESSION):
                if session:
                    cursor.execute(session)
                for values in test_types._rows():
                    cursor.execute(insert, [values[column] for column in columns])
            cursor.execute("UPDATE matrix SET i4 = i4 WHERE k = 1")  # no change: no event
            cursor.execute("UPDATE matrix SET i4 = coalesce(i4, 0) + 1, tsz = now()")
            cursor.execute("DELETE FROM matrix WHERE k % 2 = 0")
            cursor.execute("INSERT INTO listed VALUES (1, 'a', 'x'), (2, NULL, 'y')")
            # An event far past a page: stored out of line (TOAST) by either path.
            cursor.execute("INSERT INTO listed VALUES (4, repeat(md5('x'), 10000), NULL)")
            cursor.execute("UPDATE listed SET skipped = 'z'")  # outside the columns: no event
            cursor.execute('UPDATE listed SET "odd ""name""" = \'b\', skipped = \'w\'')
            cursor.execute("BEGIN")
            cursor.execute("INSERT INTO listed VALUES (3, 'rolled back', NULL)")
            cursor.execute("ROLLBACK")
            cursor.execute("DELETE FROM listed WHERE k = 1")
            # More rows than one batch of the C trigger, then more bytes than one.
            cursor.execute(
                "INSERT INTO listed SELECT g, 'row ' || g, NULL FROM generate_series(10, 2509) g"
            )
            cursor.execute('UPDATE listed SET "odd ""name""" = k::text WHERE k >= 10')
            cursor.execute(
                "INSERT INTO listed SELECT g, repeat(md5(g::text), 40000), NULL "
                "FROM generate_series(3000, 3003) g"
            )
            cursor.execute("DELETE FROM listed WHERE k >= 10")
            cursor.execute(
                "INSERT INTO awkward VALUES (1, 2, 3, 'c', 'r', 4, 'w'),"
                " (2, NULL, 0, '', NULL, 0, '')"
            )
            cursor.execute("UPDATE awkward SET n = coalesce(n, 0) + 1, \"row\" = 'x'")
            cursor.execute("DELETE FROM awkward WHERE k = 1")
            # Row triggers: the parent's rows and the child's, a statement on the parent
            # reaching both.
            cursor.execute("INSERT INTO parent VALUES (1, 'p')")
            cursor.execute("INSERT INTO child VALUES (2, 'c', 20)")
            cursor.execute("UPDATE parent SET v = v || '!'")
            cursor.execute("DELETE FROM parent")
            cursor.execute("TRUNCATE matrix")
    finally:
        conn.close()

    c_events = _raw_events(database, cluster_name)
    plpgsql_events = _raw_events(database, second_cluster)
    assert len(c_events) > 2 * len(test_types._rows()) + 3 * 2500
    assert c_events == plpgsql_events
    # Packed as COPY lines (packing on, no provenance), each line is byte for byte the
    # COPY line of the PL/pgSQL trigger's values: what the relay forwards as it is.
    position = copied = 0
    for chunk in unpacked([queue_rows(database, cluster_name)], runs=True):
        for item in chunk:
            if not isinstance(item, PackedRun):
                position += item[3] in ("I", "U", "D", "T")
                continue
            expected: list[bytes] = []
            for event in plpgsql_events[position : position + item.size]:
                rows = cast("list[Any]", event[3])[:2]
                expected.extend(
                    copy_line(row[column] for column in item.columns)
                    for row in rows
                    if row is not None
                )
            assert item.lines == expected
            position += item.size
            copied += item.size
    assert position == len(plpgsql_events) and copied > 3 * 2500
    # Row order within a statement: the order the statement changed the rows.
    bulk = [
        cast("list[dict[str, str]]", event[3])[1]["k"]
        for event in c_events
        if event[2] == "U" and event[5] == "listed"
    ]
    assert bulk[-2500:] == [str(k) for k in range(10, 2510)]
    inherited = [(event[2], event[5]) for event in c_events if event[5] in ("parent", "child")]
    assert inherited == [
        ("I", "parent"),
        ("I", "child"),
        ("U", "parent"),
        ("U", "child"),
        ("D", "parent"),
        ("D", "child"),
    ]
    assert captured(database, cluster_name) == captured(database, second_cluster)


def test_the_choice_of_implementation(database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = psycopg2.connect(database)
    try:
        monkeypatch.setenv(capture_library.ENVIRONMENT, "assembler")
        with pytest.raises(ConfigurationError, match="PGSHOVEL_CAPTURE='assembler' is not one"):
            capture_library.choose(conn, "db")
        monkeypatch.setenv(capture_library.ENVIRONMENT, "plpgsql")
        assert capture_library.choose(conn, "db") == "plpgsql"
        monkeypatch.delenv(capture_library.ENVIRONMENT)
        assert capture_library.choose(conn, "db") == "c"
        # A role that may not create C functions gets the PL/pgSQL trigger, or a clear
        # error when it asked for C.
        role = unique_name("plain", separator="_", limit=40)
        with conn.cursor() as cursor:
            cursor.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.commit()
        plain = psycopg2.connect(database, user=role)
        try:
            assert capture_library.library_version(plain) is None
            assert capture_library.choose(plain, "db") == "plpgsql"
            monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
            with pytest.raises(ConfigurationError, match="library of database 'db' is not"):
                capture_library.choose(plain, "db")
        finally:
            plain.close()
            with conn.cursor() as cursor:
                cursor.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
            conn.commit()
    finally:
        conn.close()


#: Role, application and annotation text that JSON must escape: quotes, backslashes,
#: control characters, non-ASCII (application_name keeps printable ASCII only).
HOSTILE_ROLE = 'Clérk "q"\\x'
HOSTILE_APPLICATION = 'till "7" \\ back'
HOSTILE_ANNOTATION = 'req-42 "é"\\\t\n\u2028'


def _provenance_texts(dsn: str, cluster: str) -> tuple[list[str], int]:
    """The provenance object of each row change's event as the trigger wrote it (its exact
    text; "" for none), in event order, a statement's later events (which hold 1: the
    transaction's previous event's) resolved; and how many events held 1."""
    found = [
        (event.txid, event.data)
        for event in queue_events(dsn, cluster)
        if event.type in ("I", "U", "D", "T")
    ]
    texts = []
    last: dict[int, str] = {}
    references = 0
    for txid, data in found:
        if isinstance(data, list):  # packed as COPY lines: the trigger stamped nothing
            assert len(data) == 2
            texts.append("")
            continue
        text = str(data)
        parsed = json.loads(text)
        if len(parsed) == 3 and parsed[2] == 1:
            assert text.endswith(",1]")
            texts.append(last[txid])
            references += 1
        elif len(parsed) == 3:
            # No ',{"' inside a JSON string (its quote is escaped): the last one starts
            # the last element.
            texts.append(text[text.rfind(',{"') + 1 : -1])
            last[txid] = texts[-1]
        else:
            texts.append("")
    return texts, references


def test_c_and_plpgsql_stamp_the_same_provenance(
    database: str,
    cluster_name: str,
    second_cluster: str,
    zookeeper: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    execute(database, "CREATE TABLE stamped (k int PRIMARY KEY, v text)")
    execute(database, "CREATE TABLE plain (k int PRIMARY KEY, v text)")
    execute(database, "CREATE TABLE base (k int PRIMARY KEY, v text)")
    execute(database, "CREATE TABLE derived (w int, PRIMARY KEY (k)) INHERITS (base)")
    tables: list[dict[str, Any]] = [
        {"name": "stamped", "provenance": True},
        {"name": "plain"},
        {"name": "base", "provenance": True},
        {"name": "derived", "provenance": True},
    ]
    monkeypatch.setenv(capture_library.ENVIRONMENT, "c")
    install(zookeeper, cluster_name, database, tables)
    monkeypatch.setenv(capture_library.ENVIRONMENT, "plpgsql")
    install(zookeeper, second_cluster, database, tables)
    assert _function_language(database, cluster_name) == "c"
    assert _function_language(database, second_cluster) == "plpgsql"
    role = HOSTILE_ROLE + unique_name("", separator="", limit=20)
    admin = psycopg2.connect(database)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
            cursor.execute(
                sql.SQL("GRANT ALL ON stamped, plain, base, derived TO {}").format(
                    sql.Identifier(role)
                )
            )
        conn = psycopg2.connect(database, application_name=HOSTILE_APPLICATION)
        conn.autocommit = True
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT session_user")
                (login,) = cursor.fetchone()  # type: ignore[misc]
                cursor.execute("SET compute_query_id = on")
                cursor.execute("INSERT INTO stamped VALUES (1, 'a'), (2, 'b')")
                cursor.execute("INSERT INTO plain VALUES (1, 'a')")
                cursor.execute("BEGIN")
                cursor.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
                cursor.execute(
                    "SELECT set_config('pgshovel.annotation', %s, true)", (HOSTILE_ANNOTATION,)
                )
                cursor.execute("UPDATE stamped SET v = v || '!'")
                cursor.execute("INSERT INTO base VALUES (3, 'p')")
                cursor.execute("INSERT INTO derived VALUES (4, 'c', 40)")
                cursor.execute("UPDATE base SET v = v || '?'")
                cursor.execute("COMMIT")
        finally:
            conn.close()
        # A session without query ids (a fresh one: plans made while compute_query_id was
        # on keep their query id, which PostgreSQL reports for a statement without one).
        conn = psycopg2.connect(database, application_name=HOSTILE_APPLICATION)
        conn.autocommit = True
        try:
            with conn.cursor() as cursor:
                cursor.execute("SET compute_query_id = off")
                cursor.execute("DELETE FROM stamped WHERE k = 1")
                cursor.execute("DELETE FROM base")
                cursor.execute("TRUNCATE stamped")
        finally:
            conn.close()
        c_events = _raw_events(database, cluster_name)
        plpgsql_events = _raw_events(database, second_cluster)
        assert c_events == plpgsql_events
        c_texts, references = _provenance_texts(database, cluster_name)
        assert (c_texts, references) == _provenance_texts(database, second_cluster)
        # A statement trigger writes its provenance once: the second row of each
        # two-row statement on "stamped" (INSERT, UPDATE) refers to the first's.
        assert references == 2
        seen = []
        for event, text in zip(c_events, c_texts, strict=True):
            kind, table = event[2], event[5]
            if table == "plain":
                assert text == "" and len(cast("list[Any]", event[3])) == 2
                continue
            stamp = json.loads(text)
            assert cast("list[Any]", event[3])[2] in (stamp, 1)
            in_transaction = kind == "U" or (kind == "I" and table in ("base", "derived"))
            # What says nothing is left out: "u" when it is "s", "n" when unset, "q"
            # when compute_query_id is off (the second session).
            if in_transaction:
                assert stamp["u"] == role and stamp["n"] == HOSTILE_ANNOTATION
            else:
                assert "u" not in stamp and "n" not in stamp
            assert stamp["s"] == login
            assert stamp["a"] == HOSTILE_APPLICATION
            assert stamp["c"] == "127.0.0.1"
            if kind in ("I", "U"):
                assert isinstance(stamp["q"], int) and stamp["q"] != 0
            else:
                assert "q" not in stamp
            seen.append((kind, table))
        assert seen == [
            ("I", "stamped"),
            ("I", "stamped"),
            ("U", "stamped"),
            ("U", "stamped"),
            ("I", "base"),
            ("I", "derived"),
            ("U", "base"),
            ("U", "derived"),
            ("D", "stamped"),
            ("D", "base"),
            ("D", "derived"),
            ("T", "stamped"),
        ]
        # A statement's events share one query id; different statements differ.
        queries = [json.loads(text).get("q") for text in c_texts if text]
        assert queries[0] == queries[1] and queries[2] == queries[3] and queries[0] != queries[2]
        decoded = captured(database, cluster_name)
        assert decoded == captured(database, second_cluster)
        # The provenance in full, or a reference to the transaction's mutation that has it.
        stamped = [m.HasField("provenance") or m.provenance_of != 0 for m in decoded]
        assert stamped == [bool(t) for t in c_texts]
    finally:
        with admin.cursor() as cursor:
            cursor.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            cursor.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
        admin.close()
