"""Identifier torture: hostile schema, table and column names work end to end."""

from __future__ import annotations

import psycopg2
import pytest
from kazoo.client import KazooClient
from psycopg2 import sql

from pgshovel.protocol import stream_pb2
from pgshovel.relay.packing import PACKED_EVENT
from tests.integration.admin._admin import execute
from tests.integration.capture._capture import captured, install, queue_rows, row

pytestmark = pytest.mark.integration

SCHEMA = 'Sch"éma ünï'
TABLE = 'Select "Tbl" 表'
KEY = "Key Col"
COLUMNS = ["select", 'quo"te', "MixedCase", "ключ, {x}", "back\\slash"]
UNCAPTURED = "order"


def test_hostile_names_end_to_end(database: str, cluster_name: str, zookeeper: KazooClient) -> None:
    target = sql.Identifier(SCHEMA, TABLE)
    execute(database, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
    execute(
        database,
        sql.SQL("CREATE TABLE {} ({} int PRIMARY KEY, {}, {} int)").format(
            target,
            sql.Identifier(KEY),
            sql.SQL(", ").join(sql.SQL("{} text").format(sql.Identifier(c)) for c in COLUMNS),
            sql.Identifier(UNCAPTURED),
        ),
    )
    install(
        zookeeper,
        cluster_name,
        database,
        [{"schema": SCHEMA, "name": TABLE, "columns": [KEY, *COLUMNS]}],
    )
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in [KEY, *COLUMNS, UNCAPTURED])
    execute(
        database,
        sql.SQL("INSERT INTO {} ({}) VALUES (1, 'a', 'b\"', 'C', 'д', '\\', 0)").format(
            target, columns
        ),
    )
    execute(database, sql.SQL("UPDATE {} SET {} = 1").format(target, sql.Identifier(UNCAPTURED)))
    execute(
        database,
        sql.SQL("UPDATE {} SET {} = 'changed'").format(target, sql.Identifier("ключ, {x}")),
    )
    execute(database, sql.SQL("DELETE FROM {}").format(target))

    mutations = captured(database, cluster_name)
    assert [m.operation for m in mutations] == [
        stream_pb2.Mutation.INSERT,
        stream_pb2.Mutation.UPDATE,
        stream_pb2.Mutation.DELETE,
    ]
    assert all((m.schema, m.table) == (SCHEMA, TABLE) for m in mutations)
    assert all(list(m.key_columns) == [KEY] for m in mutations)
    inserted = row(mutations[0].new)
    assert list(inserted) == [KEY, *COLUMNS]
    assert inserted[KEY].int64 == 1
    assert [inserted[c].string for c in COLUMNS] == ["a", 'b"', "C", "д", "\\"]
    assert row(mutations[1].new)["ключ, {x}"].string == "changed"
    assert row(mutations[2].old)["ключ, {x}"].string == "changed"

    # A transaction's changes packed into one queue row: the names travel in its header.
    conn = psycopg2.connect(database)
    try:
        with conn, conn.cursor() as cursor:
            for key in (2, 3):
                cursor.execute(
                    sql.SQL("INSERT INTO {} ({}, {}) VALUES (%s, %s)").format(
                        target, sql.Identifier(KEY), sql.Identifier('quo"te')
                    ),
                    (key, f'"{key}"\n'),
                )
            cursor.execute(
                sql.SQL("DELETE FROM {} WHERE {} = 2").format(target, sql.Identifier(KEY))
            )
    finally:
        conn.close()
    assert any(row[3] == PACKED_EVENT for row in queue_rows(database, cluster_name))
    packed = captured(database, cluster_name)[3:]
    assert [m.operation for m in packed] == [
        stream_pb2.Mutation.INSERT,
        stream_pb2.Mutation.INSERT,
        stream_pb2.Mutation.DELETE,
    ]
    assert all((m.schema, m.table, list(m.key_columns)) == (SCHEMA, TABLE, [KEY]) for m in packed)
    assert [row(m.new)['quo"te'].string for m in packed[:2]] == ['"2"\n', '"3"\n']
