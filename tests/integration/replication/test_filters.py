"""A ``--where`` filter against a real source: parsed and planned by PostgreSQL, run read-only.

``check_filter`` accepts boolean expressions of the set's captured columns
(volatile ones too) and refuses, naming the table and the cause, anything that
reads more (an uncaptured column, a subquery, another table), is not a boolean,
or could end the statement. A chunk read with a filter evaluates it on the
source only, once per row: every key of the range comes back, the selected rows
whole and marked. A filter that calls a function with a side effect fails its
read (the read is read-only) or leaves no trace (the read is rolled back).
"""

from __future__ import annotations

import io
from typing import Any

import psycopg2
import pytest
from kazoo.client import KazooClient

from pgshovel.cluster import names
from pgshovel.cluster.zookeeper import ClusterStore
from pgshovel.errors import ConfigurationError, DatabaseError
from pgshovel.replication import catalog
from pgshovel.source import Chunk, KeyRange, TableShape, check_filter, connect, read_chunk
from pgshovel.source.copytext import decode_line
from tests.integration.capture._capture import SET, install

pytestmark = [pytest.mark.integration]

SCHEMA = """
CREATE TABLE t_res (id integer PRIMARY KEY, v integer, note text, secret text);
INSERT INTO t_res SELECT g, g * 10, 'n' || g, 's' || g FROM generate_series(1, 200) g;
CREATE TABLE other (id integer PRIMARY KEY);
CREATE SEQUENCE counter;
"""

ACCEPTED = [
    "id % 7 = 0",
    "random() < 0.5",
    "current_database() = 'elsewhere'",
    "v > 30 AND note LIKE 'n1%' -- a comment ; )",
    "t_res.id IN (1, 2, 3)",
    "id = ANY('{4,5}'::int[])",
]

REFUSED = [
    ("secret = 's1'", 'column "secret" does not exist'),
    ("(SELECT secret FROM t_res x WHERE x.id = t_res.id) = 's1'", "subquery"),
    ("id IN (SELECT id FROM other)", "subquery"),
    ("EXISTS (SELECT 1 FROM pg_catalog.pg_authid)", "subquery"),
    ("v", "must be type boolean"),
    ("count(*) > 0", "aggregate functions are not allowed"),
    ("true); CREATE TABLE pwned (); SELECT (1", "closes a parenthesis"),
    ("true; CREATE TABLE pwned ()", "';' ends a statement"),
]


def shape_of(dsn: str, zookeeper: KazooClient, cluster: str) -> TableShape:
    configuration = ClusterStore(zookeeper, cluster).read_set(SET).value
    connection = connect(dsn, "pgshovel-tests")
    try:
        return catalog.set_shapes(connection, configuration)[0]
    finally:
        connection.close()


def run(dsn: str, statement: str) -> Any:
    connection = psycopg2.connect(dsn)
    try:
        with connection, connection.cursor() as cursor:
            cursor.execute(statement)
            return cursor.fetchone() if cursor.description else None
    finally:
        connection.close()


def read(dsn: str, shape: TableShape, cluster: str, where: str) -> list[tuple[str | None, ...]]:
    chunk = Chunk(
        "test.0.abc",
        names.queue_name(cluster, SET),
        KeyRange(shape, 0, None, None),
        where,
        cluster=cluster,
    )
    found: list[tuple[str | None, ...]] = []

    def stage(copy_out: Any) -> int:
        buffer = io.BytesIO()
        copy_out(buffer)
        found.extend(decode_line(line) for line in buffer.getvalue().decode().splitlines())
        return len(found)

    read_chunk(dsn, chunk, stage, lambda sums: None)
    return found


def test_a_filter_is_one_read_only_boolean_expression_of_the_captured_columns(
    database: str, zookeeper: KazooClient, cluster_name: str
) -> None:
    run(database, SCHEMA)
    install(zookeeper, cluster_name, database, [{"name": "t_res", "columns": ["id", "v", "note"]}])
    shape = shape_of(database, zookeeper, cluster_name)
    assert shape.column_names == ("id", "v", "note")
    connection = connect(database, "pgshovel-tests", autocommit=True)
    try:
        for where in ACCEPTED:
            check_filter(connection, shape, where)
        for where, reason in REFUSED:
            with pytest.raises(ConfigurationError) as refused:
                check_filter(connection, shape, where)
            message = str(refused.value)
            assert reason in message, (where, message)
            assert "public.t_res" in message or "--where" in message, message
    finally:
        connection.close()
    assert run(database, "SELECT to_regclass('pwned') IS NULL") == (True,)

    # Evaluated once per row, on the source: every key comes back, the selected rows whole.
    rows = read(database, shape, cluster_name, "random() < 0.5")
    assert sorted(int(row[0]) for row in rows if row[0] is not None) == list(range(1, 201))
    selected = [row for row in rows if row[3] == "t"]
    assert 0 < len(selected) < 200
    assert all(row[1] == str(int(row[0]) * 10) and row[2] == f"n{row[0]}" for row in selected)  # type: ignore[arg-type]
    assert all(row[1:] == (None, None, "f") for row in rows if row[3] != "t")
    unselected = read(database, shape, cluster_name, "current_database() = 'elsewhere'")
    assert len(unselected) == 200 and {row[3] for row in unselected} == {"f"}

    # A function with a side effect: the read is read-only (a write is refused) and rolled
    # back (what read-only mode lets through, a server-side lo_import, is undone).
    with pytest.raises(DatabaseError, match="tried to write") as failed:
        read(database, shape, cluster_name, "nextval('counter') > 0")
    assert "a filter only reads" in str(failed.value)
    assert run(database, "SELECT last_value, is_called FROM counter") == (1, False)
    before = run(database, "SELECT count(*) FROM pg_catalog.pg_largeobject_metadata")
    assert len(read(database, shape, cluster_name, "lo_import('/etc/hostname') > 0")) == 200
    assert run(database, "SELECT count(*) FROM pg_catalog.pg_largeobject_metadata") == before
