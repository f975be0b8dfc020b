"""Incremental snapshot chunks in a PostgreSQL target: staging, merge, comparison.

A chunk reader stages the range's rows in an unlogged table
``pgshovel_replication."chunk <attempt>"`` (or the source's checksums in
``"sums <attempt>"``) before it writes the high watermark. When the worker has
applied the micro-batch holding that watermark, ``merge`` makes the range of
the copy hold exactly the staged rows, leaving alone the keys the stream
changed while the chunk was read (it brought their state); a filtered chunk
(``set resnapshot --where``) stages every key of the range and marks the rows
the source's filter selected: those are written, the others left as they are,
and the copy's keys the source lacks deleted. ``compare``
computes the same checksums on the copy. An unkeyed table (one chunk, no key to
name a changed row) gets the staged rows plus the mutations the read did not
see, replayed as the stream applies them; its comparison takes their effect
out of the copy's checksums (a checksum is a sum: the rows they deleted are
added back, the rows they wrote taken away). Ranges compare text keys in byte
order (``COLLATE "C"``), as the reader did on the source.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Sequence

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.abc import ChangedKeys, Comparison
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import to_change
from pgshovel.replication.targets._pgapply import apply_unkeyed
from pgshovel.replication.targets._pgstate import STATE_SCHEMA
from pgshovel.source import (
    SELECTED,
    Checksum,
    Chunk,
    TableShape,
    bucket_expression,
    checksum_query,
    chunk_condition,
    copytext,
    hash_expression,
    output_text,
)

CHANGED = "pgshovel changed keys"
REPLAYED = "pgshovel replayed rows"
SIGN = "pgshovel sign"


def staging(attempt: str) -> sql.Identifier:
    return sql.Identifier(STATE_SCHEMA, f"chunk {attempt}")


def sums(attempt: str) -> sql.Identifier:
    return sql.Identifier(STATE_SCHEMA, f"sums {attempt}")


def _columns(names: Collection[str], alias: str | None = None) -> sql.Composable:
    return sql.SQL(", ").join(
        sql.Identifier(alias, name) if alias else sql.Identifier(name) for name in names
    )


def create_staging(cursor: Cursor, attempt: str, table: TableShape, selected: bool = False) -> None:
    """Create the attempt's staging table like the copy's table (no rows yet); ``selected``:
    with the column telling the rows a filter selected."""
    columns = _columns(table.column_names)
    if selected:
        columns = sql.SQL("{}, true AS {}").format(columns, sql.Identifier(SELECTED))
    cursor.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
            staging(attempt), columns, sql.Identifier(table.schema, table.name)
        )
    )


def copy_into_staging(attempt: str, table: TableShape, selected: bool = False) -> sql.Composable:
    names = [*table.column_names, SELECTED] if selected else table.column_names
    return sql.SQL("COPY {} ({}) FROM STDIN").format(staging(attempt), _columns(names))


def selected_rows(cursor: Cursor, attempt: str) -> int:
    """How many staged rows the filter selected."""
    cursor.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
            staging(attempt), sql.Identifier(SELECTED)
        )
    )
    return int(cursor.fetchone()[0])  # type: ignore[index]


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


def merge(
    cursor: Cursor,
    chunk: Chunk,
    changed: ChangedKeys,
    replay: Sequence[stream_pb2.Mutation] = (),
) -> int:
    """Make the chunk's range hold the staged rows, except changed keys (an unkeyed table:
    the staged rows, then ``replay``); return rows written."""
    table = chunk.key_range.table
    target = sql.Identifier(table.schema, table.name)
    if chunk.where and not table.key:
        raise ConfigurationError(
            f"{table.qualified!r} has no key: a filtered re-snapshot cannot tell its rows apart"
        )
    if not table.key:
        # The whole table as the read saw it, then what committed after the read's snapshot.
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
        written = int(cursor.rowcount)
        changes = [to_change(mutation, table) for mutation in replay]
        return written + apply_unkeyed(cursor, table, changes)
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
    # Filtered: the rows the source's filter did not select stay as the copy has them.
    wanted = _not_changed(table, "s")
    if chunk.where:
        wanted = sql.SQL("{} AND s.{}").format(wanted, sql.Identifier(SELECTED))
    cursor.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} AS s WHERE {} ON CONFLICT ({}) {}").format(
            target,
            _columns(table.column_names),
            _columns(table.column_names, "s"),
            staging(chunk.attempt),
            wanted,
            _columns(table.key),
            conflict,
        )
    )
    return int(cursor.rowcount)


def _replayed_sums(
    cursor: Cursor, table: TableShape, replay: Sequence[stream_pb2.Mutation]
) -> dict[int, tuple[int, int]]:
    """Per bucket: what ``replay`` did to the copy's checksums, negated (the rows it deleted
    count +1, the rows it wrote -1), computed by the copy's own types and output text."""
    rows: list[tuple[str | None, ...]] = []
    for mutation in replay:
        change = to_change(mutation, table)
        if change.old is not None:
            rows.append((*change.old, "1"))
        if change.new is not None:
            rows.append((*change.new, "-1"))
    if not rows:
        return {}
    identifier = sql.Identifier(REPLAYED)
    cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(identifier))
    cursor.execute(
        sql.SQL(
            "CREATE TEMPORARY TABLE {} ON COMMIT DROP AS SELECT {}, 0 AS {} FROM {} WITH NO DATA"
        ).format(
            identifier,
            _columns(table.column_names),
            sql.Identifier(SIGN),
            sql.Identifier(table.schema, table.name),
        )
    )
    cursor.copy_expert(
        sql.SQL("COPY {} FROM STDIN").format(identifier).as_string(cursor),
        io.StringIO(copytext.encode_rows(rows)),
    )
    cursor.execute(
        sql.SQL(
            "SELECT b, sum(s), sum(s * h) "
            "FROM (SELECT {} AS b, {} AS h, r.{} AS s FROM {} AS r) x GROUP BY b"
        ).format(
            bucket_expression(table, "r"),
            hash_expression(table, "r"),
            sql.Identifier(SIGN),
            identifier,
        )
    )
    return {int(b): (int(n), int(h)) for b, n, h in cursor.fetchall()}


def compare(
    cursor: Cursor,
    chunk: Chunk,
    changed: ChangedKeys,
    replay: Sequence[stream_pb2.Mutation] = (),
) -> Comparison:
    """The copy's checksums of the range (an unkeyed table's as before ``replay``) against
    the staged source checksums."""
    table = chunk.key_range.table
    cursor.execute(checksum_query(table, chunk_condition(chunk, "t")))
    mine = {int(b): (int(n), int(h)) for b, n, h in cursor.fetchall()}
    for bucket, (rows, total) in _replayed_sums(cursor, table, replay).items():
        before = mine.get(bucket, (0, 0))
        mine[bucket] = (before[0] + rows, before[1] + total)
        if mine[bucket] == (0, 0):
            del mine[bucket]
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
