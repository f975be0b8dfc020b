"""Set-based apply of net changes to PostgreSQL tables, and creating missing tables.

Keyed tables: the net effect of a micro-batch (``changes.reduce_keyed``) is
copied into a temporary staging table, then one ``DELETE ... USING staging``
removes every touched key and one ``INSERT ... SELECT`` writes the final rows;
a TRUNCATE in the micro-batch is applied first. The reduction reads only keys
(checking every row against the table's shape); values are read straight into
COPY text (``copyrows``) for the rows written, the last change of each key.
Unkeyed tables are applied change by change (slower): a row is matched on all
columns, NULLs equal.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.protocol import stream_pb2
from pgshovel.replication import copyrows
from pgshovel.replication.changes import (
    Change,
    KeyedChange,
    NetEffect,
    Operation,
    Row,
    reduce_keyed,
)
from pgshovel.replication.copyrows import Pending
from pgshovel.replication.mutations import OPERATIONS, operation_of
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


def _keyed_changes(
    table: TableShape, mutations: Iterable[stream_pb2.Mutation]
) -> Iterator[KeyedChange[Pending]]:
    """Each mutation as keys and its pending new row, every row checked against the shape."""
    rows = copyrows.row_text(table)
    old_key, new_key = rows.old_key, rows.new_key
    operations = OPERATIONS
    for mutation in mutations:
        operation = operations.get(mutation.operation) or operation_of(mutation, table)
        if operation is Operation.INSERT:
            key, pending = new_key(mutation.new)
            yield False, None, key, pending
        elif operation is Operation.UPDATE:
            old = old_key(mutation.old)
            key, pending = new_key(mutation.new)
            # An UPDATE that keeps its key only writes the row.
            yield False, None if old == key else old, key, pending
        elif operation is Operation.DELETE:
            yield False, old_key(mutation.old), None, None
        else:
            yield True, None, None, None


def apply_keyed(
    cursor: Cursor, table: TableShape, mutations: Sequence[stream_pb2.Mutation], stage: str
) -> int:
    """Apply a table's mutations as one merge through staging table ``stage``; return rows
    touched."""
    effect: NetEffect[Pending] = reduce_keyed(_keyed_changes(table, mutations))
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
    rows = copyrows.row_text(table)
    fields, deleted_fields = rows.fields, rows.deleted_fields
    lines = [
        fields(row) + "\tf\n" if row is not None else deleted_fields(key) + "\tt\n"
        for key, row in effect.rows.items()
    ]
    copy = sql.SQL("COPY {} ({}, {}) FROM STDIN").format(
        staging, _columns(names), sql.Identifier(DELETED_COLUMN)
    )
    cursor.copy_expert(copy.as_string(cursor), io.StringIO("".join(lines)))
    if len(lines) > 1000:
        # Statistics of the key columns (what the merge joins on) are enough for its plan,
        # at a fraction of the cost of the whole rows'.
        cursor.execute(sql.SQL("ANALYZE {} ({})").format(staging, _columns(table.key)))
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
