"""Set-based apply of net changes to PostgreSQL tables, and creating missing tables.

Keyed tables: the net effect of a micro-batch (``changes.reduce_changes``) is
copied into a temporary staging table, then one ``DELETE ... USING staging``
removes every touched key and one ``INSERT ... SELECT`` writes the final rows;
a TRUNCATE in the micro-batch is applied first. Unkeyed tables are applied
change by change (slower): a row is matched on all columns, NULLs equal.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.replication import copytext
from pgshovel.replication.changes import Change, Operation, Row, reduce_changes
from pgshovel.source import TableShape

DELETED_COLUMN = "pgshovel deleted"


def _table(table: TableShape) -> sql.Composable:
    return sql.Identifier(table.schema, table.name)


def _columns(names: Sequence[str], prefix: str | None = None) -> sql.Composable:
    if prefix is None:
        return sql.SQL(", ").join(sql.Identifier(name) for name in names)
    return sql.SQL(", ").join(sql.Identifier(prefix, name) for name in names)


def create_table(cursor: Cursor, table: TableShape) -> None:
    """Create the schema and table if missing, with the source's column types and key.

    Only the key is constrained (NOT NULL through the primary key): the source
    enforces its own constraints, and the copy only ever receives rows that
    satisfied them, so a copy never refuses a row or a schema change replayed
    in a different order of steps.
    """
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(table.schema)))
    # The types are format_type() output from the source catalog: SQL text that
    # PostgreSQL itself quoted, so it is passed through as SQL.
    definitions: list[sql.Composable] = [
        sql.SQL("{} {}").format(sql.Identifier(column.name), sql.SQL(column.sql_type))
        for column in table.columns
    ]
    if table.key:
        definitions.append(sql.SQL("PRIMARY KEY ({})").format(_columns(table.key)))
    cursor.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
            _table(table), sql.SQL(", ").join(definitions)
        )
    )


def truncate(cursor: Cursor, table: TableShape) -> None:
    cursor.execute(sql.SQL("TRUNCATE {}").format(_table(table)))


def apply_keyed(cursor: Cursor, table: TableShape, changes: Sequence[Change], stage: str) -> int:
    """Apply a table's changes as one merge through staging table ``stage``; return rows touched."""
    effect = reduce_changes(changes, table.key_positions)
    if effect.truncate:
        truncate(cursor, table)
    if not effect.rows:
        return 0
    staging = sql.Identifier(stage)
    names = table.column_names
    cursor.execute(
        sql.SQL(
            "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA"
        ).format(staging, _columns(names), _table(table))
    )
    cursor.execute(
        sql.SQL("ALTER TABLE {} ADD COLUMN {} boolean NOT NULL DEFAULT false").format(
            staging, sql.Identifier(DELETED_COLUMN)
        )
    )
    positions = table.key_positions
    lines = []
    for key, row in effect.rows.items():
        if row is None:
            deleted: list[str | None] = [None] * len(names)
            for position, value in zip(positions, key, strict=True):
                deleted[position] = value
            lines.append(copytext.encode_row([*deleted, "t"]))
        else:
            lines.append(copytext.encode_row([*row, "f"]))
    copy = sql.SQL("COPY {} ({}, {}) FROM STDIN").format(
        staging, _columns(names), sql.Identifier(DELETED_COLUMN)
    )
    cursor.copy_expert(copy.as_string(cursor), io.StringIO("".join(lines)))
    if len(lines) > 1000:
        cursor.execute(sql.SQL("ANALYZE {}").format(staging))
    match = sql.SQL(" AND ").join(
        sql.SQL("{} = {}").format(sql.Identifier("t", key), sql.Identifier("s", key))
        for key in table.key
    )
    cursor.execute(
        sql.SQL("DELETE FROM {} AS t USING {} AS s WHERE {}").format(_table(table), staging, match)
    )
    cursor.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE NOT {}").format(
            _table(table), _columns(names), _columns(names), staging, sql.Identifier(DELETED_COLUMN)
        )
    )
    cursor.execute(sql.SQL("DROP TABLE {}").format(staging))
    return len(lines)


def _record(table: TableShape, row: Row) -> str:
    return json.dumps(dict(zip(table.column_names, row, strict=True)))


def apply_unkeyed(cursor: Cursor, table: TableShape, changes: Sequence[Change]) -> int:
    """Apply a table's changes one by one, matching rows on every column (slow path)."""
    names = table.column_names
    record = sql.SQL("json_populate_record(NULL::{}, %s::json) AS r").format(_table(table))
    insert = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
        _table(table), _columns(names), _columns(names, "r"), record
    )
    equal = sql.SQL(" AND ").join(
        sql.SQL("{} IS NOT DISTINCT FROM {}").format(sql.Identifier("t", n), sql.Identifier("r", n))
        for n in names
    )
    delete = sql.SQL(
        "DELETE FROM {table} WHERE ctid = (SELECT t.ctid FROM {table} AS t, {record} WHERE {equal} "
        "LIMIT 1)"
    ).format(table=_table(table), record=record, equal=equal)
    for change in changes:
        if change.operation is Operation.TRUNCATE:
            truncate(cursor, table)
            continue
        if change.old is not None and change.operation is not Operation.INSERT:
            cursor.execute(delete, (_record(table, change.old),))
        if change.new is not None and change.operation is not Operation.DELETE:
            cursor.execute(insert, (_record(table, change.new),))
    return len(changes)
