"""Incremental snapshot chunks in a PostgreSQL target: staging, merge, comparison.

A chunk reader stages the range's rows in an unlogged table
``pgshovel_replication."chunk <attempt>"`` (or the source's checksums in
``"sums <attempt>"``) before it writes the high watermark. When the worker has
applied the micro-batch holding that watermark, ``merge`` makes the range of
the copy hold exactly the staged rows, leaving alone the keys the stream
changed while the chunk was read (it brought their state), and ``compare``
computes the same checksums on the copy. Ranges compare text keys in byte
order (``COLLATE "C"``), as the reader did on the source.
"""

from __future__ import annotations

import io
from collections.abc import Collection

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.abc import ChangedKeys, Comparison
from pgshovel.replication.targets._pgstate import STATE_SCHEMA
from pgshovel.source import (
    Checksum,
    Chunk,
    TableShape,
    bucket_expression,
    checksum_query,
    chunk_condition,
    copytext,
    output_text,
)

CHANGED = "pgshovel changed keys"


def staging(attempt: str) -> sql.Identifier:
    return sql.Identifier(STATE_SCHEMA, f"chunk {attempt}")


def sums(attempt: str) -> sql.Identifier:
    return sql.Identifier(STATE_SCHEMA, f"sums {attempt}")


def _columns(names: Collection[str], alias: str | None = None) -> sql.Composable:
    return sql.SQL(", ").join(
        sql.Identifier(alias, name) if alias else sql.Identifier(name) for name in names
    )


def create_staging(cursor: Cursor, attempt: str, table: TableShape) -> None:
    """Create the attempt's staging table like the copy's table (no rows yet)."""
    cursor.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
            staging(attempt), _columns(table.column_names), sql.Identifier(table.schema, table.name)
        )
    )


def copy_into_staging(attempt: str, table: TableShape) -> sql.Composable:
    return sql.SQL("COPY {} ({}) FROM STDIN").format(staging(attempt), _columns(table.column_names))


def stage_checksums(cursor: Cursor, attempt: str, checksums: list[Checksum]) -> None:
    cursor.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} (bucket int, rows bigint, hash numeric)").format(
            sums(attempt)
        )
    )
    if checksums:
        text = copytext.encode_rows([(str(b), str(n), str(h)) for b, n, h in checksums])
        cursor.copy_expert(
            sql.SQL("COPY {} FROM STDIN").format(sums(attempt)).as_string(cursor), io.StringIO(text)
        )


def _stage_changed(cursor: Cursor, table: TableShape, changed: ChangedKeys) -> sql.Composable:
    """A temporary table of the changed keys (text); returns the condition "t is not one"."""
    identifier = sql.Identifier(CHANGED)
    cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(identifier))
    cursor.execute(
        sql.SQL("CREATE TEMPORARY TABLE {} ({}) ON COMMIT DROP").format(
            identifier,
            sql.SQL(", ").join(
                sql.SQL("{} text").format(sql.Identifier(name)) for name in table.key
            ),
        )
    )
    if changed:
        cursor.copy_expert(
            sql.SQL("COPY {} FROM STDIN").format(identifier).as_string(cursor),
            io.StringIO(copytext.encode_rows(changed)),
        )
    return identifier


def _not_changed(table: TableShape, alias: str) -> sql.Composable:
    match = sql.SQL(" AND ").join(
        sql.SQL("c.{} = {}").format(sql.Identifier(name), output_text(sql.Identifier(alias, name)))
        for name in table.key
    )
    return sql.SQL("NOT EXISTS (SELECT 1 FROM {} c WHERE {})").format(
        sql.Identifier(CHANGED), match
    )


def merge(cursor: Cursor, chunk: Chunk, changed: ChangedKeys) -> int:
    """Make the chunk's range hold the staged rows, except changed keys; return rows written."""
    table = chunk.key_range.table
    target = sql.Identifier(table.schema, table.name)
    if not table.key:
        # A whole unkeyed table, read while the stream did not touch it.
        cursor.execute(
            sql.SQL("DELETE FROM {} AS t WHERE {}").format(target, chunk_condition(chunk, "t"))
        )
        cursor.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
                target,
                _columns(table.column_names),
                _columns(table.column_names),
                staging(chunk.attempt),
            )
        )
        return int(cursor.rowcount)
    _stage_changed(cursor, table, changed)
    same_key = sql.SQL(" AND ").join(
        sql.SQL("s.{} = t.{}").format(sql.Identifier(name), sql.Identifier(name))
        for name in table.key
    )
    cursor.execute(
        sql.SQL(
            "DELETE FROM {} AS t WHERE {} AND {} AND NOT EXISTS (SELECT 1 FROM {} s WHERE {})"
        ).format(
            target,
            chunk_condition(chunk, "t"),
            _not_changed(table, "t"),
            staging(chunk.attempt),
            same_key,
        )
    )
    updates = sql.SQL(", ").join(
        sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(name), sql.Identifier(name))
        for name in table.column_names
        if name not in table.key
    )
    conflict = (
        sql.SQL("DO UPDATE SET {}").format(updates)
        if len(table.column_names) > len(table.key)
        else sql.SQL("DO NOTHING")
    )
    cursor.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} AS s WHERE {} ON CONFLICT ({}) {}").format(
            target,
            _columns(table.column_names),
            _columns(table.column_names, "s"),
            staging(chunk.attempt),
            _not_changed(table, "s"),
            _columns(table.key),
            conflict,
        )
    )
    return int(cursor.rowcount)


def compare(cursor: Cursor, chunk: Chunk, changed: ChangedKeys) -> Comparison:
    """The copy's checksums of the range against the staged source checksums."""
    table = chunk.key_range.table
    cursor.execute(checksum_query(table, chunk_condition(chunk, "t")))
    mine = {int(b): (int(n), int(h)) for b, n, h in cursor.fetchall()}
    cursor.execute(sql.SQL("SELECT bucket, rows, hash FROM {}").format(sums(chunk.attempt)))
    theirs = {int(b): (int(n), int(h)) for b, n, h in cursor.fetchall()}
    skipped: set[int] = set()
    if changed and table.key:
        identifier = _stage_changed(cursor, table, changed)
        cursor.execute(
            sql.SQL("SELECT DISTINCT {} FROM {} AS c").format(
                bucket_expression(table, "c"), identifier
            )
        )
        skipped = {int(row[0]) for row in cursor.fetchall()}
    elif changed:
        skipped = set(mine) | set(theirs)
    return Comparison.of(theirs, mine, skipped)


def drop(cursor: Cursor, attempts: Collection[str]) -> None:
    for attempt in attempts:
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(staging(attempt)))
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sums(attempt)))


def leftovers(cursor: Cursor, prefix: str) -> list[str]:
    """Attempts whose staging tables are still there (their ids start with ``prefix``)."""
    cursor.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND (c.relname LIKE 'chunk %%' "
        "OR c.relname LIKE 'sums %%')",
        (STATE_SCHEMA,),
    )
    attempts = {name.split(" ", 1)[1] for (name,) in cursor.fetchall()}
    return sorted(attempt for attempt in attempts if attempt.startswith(prefix))
