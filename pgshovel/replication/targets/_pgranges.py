"""Snapshot ranges loaded into a PostgreSQL target, so that a retried range is loaded once.

Spark runs a task again when its executor is lost (a worker killed, a machine
gone) or when it failed, and an attempt that was cut off may already have
committed its rows. Each range's rows are therefore committed together with a
row of ``pgshovel_replication.snapshot_ranges`` naming the range; that row is
inserted first in the range's transaction, so a second attempt of the same
range waits there while the first is still open, and then either finds the
range loaded (the first committed: its row count is returned, nothing is
copied) or loads it (the first rolled back, e.g. died with its connection).
Rows are never deleted by key range, so the ranges need not have the same
order in the target as in the source (a different collation). The target
forgets a table's ranges when a snapshot load of it begins and when it ends.
"""

from __future__ import annotations

from collections.abc import Iterable

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.replication.targets._pgstate import STATE_SCHEMA
from pgshovel.source import KeyRange, TableShape

RANGES_TABLE = "snapshot_ranges"

_TABLE = sql.Identifier(STATE_SCHEMA, RANGES_TABLE)

_CREATE = sql.SQL(
    """
CREATE TABLE IF NOT EXISTS {} (
    table_schema text NOT NULL,
    table_name text NOT NULL,
    range_index integer NOT NULL,
    rows bigint NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_schema, table_name, range_index)
)"""
).format(_TABLE)

_CLAIM = sql.SQL(
    "INSERT INTO {} (table_schema, table_name, range_index, rows) VALUES (%s, %s, %s, 0) "
    "ON CONFLICT DO NOTHING"
).format(_TABLE)

_LOADED = sql.SQL(
    "SELECT rows FROM {} WHERE table_schema = %s AND table_name = %s AND range_index = %s"
).format(_TABLE)

_RECORD = sql.SQL(
    "UPDATE {} SET rows = %s WHERE table_schema = %s AND table_name = %s AND range_index = %s"
).format(_TABLE)

_FORGET = sql.SQL("DELETE FROM {} WHERE table_schema = %s AND table_name = %s").format(_TABLE)


def create(cursor: Cursor) -> None:
    cursor.execute(_CREATE)


def forget(cursor: Cursor, tables: Iterable[TableShape]) -> None:
    """Drop what is recorded about the ranges of ``tables`` (a load of them begins or ended)."""
    for table in tables:
        cursor.execute(_FORGET, (table.schema, table.name))


def claim(cursor: Cursor, key_range: KeyRange) -> int | None:
    """Claim ``key_range`` for this transaction; the rows an earlier attempt committed, if any.

    Returns None when the range is this transaction's to load (its row is now
    held until commit or rollback), else the row count the attempt that loaded
    it recorded. Waits while another open transaction holds the same range.
    """
    identity = (key_range.table.schema, key_range.table.name, key_range.index)
    while True:
        cursor.execute(_CLAIM, identity)
        if cursor.rowcount == 1:
            return None
        # A new statement, a new snapshot: it sees the attempt that committed meanwhile.
        cursor.execute(_LOADED, identity)
        row = cursor.fetchone()
        if row is not None:
            return int(row[0])
        # Forgotten between the two statements (a new load began): claim it again.


def record(cursor: Cursor, key_range: KeyRange, rows: int) -> None:
    """Store the claimed range's row count (committed with its rows)."""
    table = key_range.table
    cursor.execute(_RECORD, (rows, table.schema, table.name, key_range.index))
