"""Reading one chunk of a table for an incremental snapshot, between two watermarks.

``read_chunk`` writes a low watermark into the set's queue (committed at once),
reads the chunk's rows (or its checksums) in one read-only repeatable-read
transaction begun after that commit (and rolled back: a read leaves nothing
behind), then writes a high watermark. A consumer
of the stream that meets the high watermark knows the chunk holds every row of
its range as of a moment between the two marks; the keys the stream changed
between them tell which chunk rows are stale (DBLog's algorithm). A table
without a key has no key to tell its rows apart: the read returns its
transaction snapshot instead, and a consumer takes the stream's changes of
the table that the snapshot does not see as the ones to replay on the rows
read. Ranges compare text keys in byte order so that source and target agree
on what a range holds.

A chunk with a filter (``set resnapshot --where``, see ``_filters``) evaluates
it on the source only, once per row: the read returns every row of the range,
the selected ones whole and the others with only their key, and a last
column saying which is which. The copy takes the selected rows, keeps the
others as they are, and drops the keys the source does not have at all: no
expression is ever evaluated on the copy.

Checksums: the rows of a range fall into ``BUCKETS`` buckets by the md5 of
their key; each bucket sums the first 60 bits of the md5 of the row (every
column's text, as one JSON array) and counts its rows. Any database (and the
Parquet target, in Python) computes the same numbers from the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import psycopg2.errors
from psycopg2 import errorcodes, sql
from psycopg2.extensions import connection as Connection

from pgshovel.cluster import names
from pgshovel.errors import ConfigurationError, DatabaseError
from pgshovel.source._connection import connect, first_line, translating
from pgshovel.source._filters import STANDARD_STRINGS, captured_rows, filter_sql
from pgshovel.source._ranges import key_columns, own_rows, range_predicate
from pgshovel.source._shape import KeyRange, TableShape

#: Buckets per chunk a checksum comparison tells apart (a few rows each, so the
#: keys the stream changes while a chunk is read leave most buckets comparable).
BUCKETS = 1024

#: (bucket, rows, sum of row hashes)
Checksum = tuple[int, int, int]


class Watermarked:
    """An attempt read between two watermarks in the set's queue, named after it: the one
    spelling of ``<attempt>:low`` and ``<attempt>:high`` that readers write and the stream's
    followers (worker, relay) look for."""

    attempt: str

    @property
    def low(self) -> str:
        return f"{self.attempt}:low"

    @property
    def high(self) -> str:
        return f"{self.attempt}:high"


@dataclass(frozen=True)
class StagedChunk:
    """What a chunk read staged: how many rows (or rows summed), and the read's snapshot."""

    rows: int
    #: ``txid_current_snapshot()`` of the read (PostgreSQL's ``xmin:xmax:xip`` text): the
    #: transactions whose changes the rows hold
    snapshot: str


@dataclass(frozen=True)
class Chunk(Watermarked):
    """One attempt at one range of a table: what a reader reads between its watermarks."""

    attempt: str
    queue: str
    key_range: KeyRange
    #: a filter selecting the rows to copy (``set resnapshot --where``), evaluated on the
    #: source only; "" for none
    where: str = ""
    #: compute checksums instead of copying rows
    checksums: bool = False
    #: the cluster (its schema holds the watermark function)
    cluster: str = ""
    #: compare text keys byte by byte (two databases must agree on a range); False: in the
    #: table's own collation, which its key index serves (the relay's table-topic chunks)
    byte_order: bool = True


#: The column of a filtered chunk's rows saying whether the filter selected the row.
SELECTED = "pgshovel selected"


def chunk_condition(chunk: Chunk, alias: str | None = None) -> sql.Composable:
    """The rows of the chunk's key range (byte order); the same in source and copy."""
    return range_predicate(chunk.key_range, alias, byte_order=chunk.byte_order)


def chunk_query(chunk: Chunk) -> sql.Composable:
    """The chunk's rows, in the table's column order; with a filter, every row of the range
    with ``SELECTED`` last, the unselected ones holding only their key."""
    table = chunk.key_range.table
    if not chunk.where:
        return sql.SQL("SELECT {} FROM {} WHERE {}").format(
            sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names),
            own_rows(table),
            chunk_condition(chunk),
        )
    selected = sql.Identifier("f", SELECTED)
    columns = [
        sql.Identifier("f", name)
        if name in table.key
        else sql.SQL("CASE WHEN {} THEN {} END").format(selected, sql.Identifier("f", name))
        for name in table.column_names
    ]
    # OFFSET 0 keeps the subquery whole: the filter (maybe volatile) runs once per row.
    return sql.SQL(
        "SELECT {}, {} FROM (SELECT {}.*, {} IS TRUE AS {} FROM {} OFFSET 0) AS f"
    ).format(
        sql.SQL(", ").join(columns),
        selected,
        sql.Identifier(table.name),
        filter_sql(chunk.where),
        sql.Identifier(SELECTED),
        captured_rows(table, chunk_condition(chunk)),
    )


def output_text(expression: sql.Composable) -> sql.Composable:
    """A value's text as its type's output function prints it (what COPY and the relay see).

    ``::text`` is not that for every type (booleans give ``true``, ``char(n)`` loses its
    padding, ``inet`` gains a mask); ``concat`` calls the output function.
    """
    return sql.SQL("CASE WHEN {e} IS NULL THEN NULL ELSE pg_catalog.concat({e}) END").format(
        e=expression
    )


def _json_text(expressions: list[sql.Composable]) -> sql.Composable:
    return sql.SQL("pg_catalog.json_build_array({})::text").format(
        sql.SQL(", ").join(output_text(e) for e in expressions)
    )


def bucket_expression(table: TableShape, alias: str) -> sql.Composable:
    """A row's checksum bucket, from its key's text."""
    key = _json_text([sql.Identifier(alias, name) for name in table.key])
    return sql.SQL("(('x' || substr(md5({}), 1, 8))::bit(32)::bigint % {})").format(
        key, sql.Literal(BUCKETS)
    )


def hash_expression(table: TableShape, alias: str) -> sql.Composable:
    """A row's hash, from every column's text."""
    row = _json_text([sql.Identifier(alias, name) for name in table.column_names])
    return sql.SQL("('x' || substr(md5({}), 1, 15))::bit(60)::bigint").format(row)


def checksum_query(
    table: TableShape, condition: sql.Composable, alias: str = "t"
) -> sql.Composable:
    """Per bucket: rows and the sum of their hashes, over the rows ``condition`` selects."""
    return sql.SQL(
        "SELECT b, count(*), sum(h) FROM (SELECT {} AS b, {} AS h FROM {} AS {} WHERE {}) s "
        "GROUP BY b ORDER BY b"
    ).format(
        bucket_expression(table, alias),
        hash_expression(table, alias),
        own_rows(table),
        sql.Identifier(alias),
        condition,
    )


def insert_watermark(
    connection: Connection, cluster: str, queue: str, mark: str, table: TableShape
) -> None:
    """Write a watermark into the set's queue and commit (``connection`` is autocommit).

    Through the cluster's ``insert_watermark`` (sql/schema.sql), so the worker's
    role needs no right to write anything else into a queue.
    """
    function = sql.Identifier(names.schema_name(cluster), "insert_watermark")
    with connection.cursor() as cursor:
        try:
            cursor.execute(
                sql.SQL("SELECT {}(%s, %s, %s, %s)").format(function),
                (queue, mark, table.schema, table.name),
            )
        except psycopg2.errors.UndefinedFunction as error:
            raise ConfigurationError(
                f"the source database lacks {names.schema_name(cluster)}.insert_watermark "
                "(installed by an older pgshovel): run pgshovel-admin cluster upgrade"
            ) from error


def read_chunk(
    source_dsn: str,
    chunk: Chunk,
    stage_rows: Callable[[Callable[[IO[bytes]], None]], int],
    stage_checksums: Callable[[list[Checksum]], None],
) -> StagedChunk:
    """Low watermark, the chunk's rows (to ``stage_rows``) or checksums, high watermark.

    Returns the rows read and the snapshot they were read in. ``stage_rows(copy_out)``
    receives a function writing the chunk's rows as COPY text; both stage functions
    must have stored what they got before returning: the high watermark tells
    consumers it is there.
    """
    table = chunk.key_range.table
    connection = connect(source_dsn, "pgshovel-replicate chunk", autocommit=True)
    try:
        with translating(f"reading a chunk of {table.qualified!r}"):
            insert_watermark(connection, chunk.cluster, chunk.queue, chunk.low, table)
            with _read_only(chunk), connection.cursor() as cursor:
                # One snapshot for the whole read, taken after the low watermark committed;
                # read-only: nothing the read evaluates (a filter) can write.
                cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                cursor.execute(STANDARD_STRINGS)
                cursor.execute("SELECT pg_catalog.txid_current_snapshot()::text")
                snapshot = str(cursor.fetchone()[0])  # type: ignore[index]
                if chunk.checksums:
                    cursor.execute(checksum_query(table, chunk_condition(chunk, "t")))
                    sums = [(int(b), int(n), int(h)) for b, n, h in cursor.fetchall()]
                    stage_checksums(sums)
                    rows = sum(count for _, count, _ in sums)
                else:

                    def copy_out(out: IO[bytes]) -> None:
                        copy = sql.SQL("COPY ({}) TO STDOUT").format(chunk_query(chunk))
                        # (a sink may call this in a thread of its own: translated here too)
                        with _read_only(chunk), connection.cursor() as reader:
                            reader.copy_expert(copy.as_string(reader), out, size=1 << 16)

                    rows = stage_rows(copy_out)
                # Rolled back, not committed: the read only reads, and whatever a filter's
                # function did in the database (read-only mode stops most writes, not
                # all: lo_import, for one) is undone.
                cursor.execute("ROLLBACK")
            insert_watermark(connection, chunk.cluster, chunk.queue, chunk.high, table)
        return StagedChunk(rows, snapshot)
    finally:
        connection.close()


@contextmanager
def _read_only(chunk: Chunk) -> Iterator[None]:
    """A write refused in the chunk's read-only transaction is its filter's doing: a lasting
    error naming it, not the read-only database a failover leaves (which is transient)."""
    try:
        yield
    except psycopg2.Error as error:
        if getattr(error, "pgcode", None) != errorcodes.READ_ONLY_SQL_TRANSACTION:
            raise
        raise DatabaseError(
            f"reading a chunk of {chunk.key_range.table.qualified!r} failed: --where "
            f"{chunk.where!r} tried to write ({first_line(error)}); a filter only reads"
        ) from error


def sample_boundaries(
    connection: Connection, table: TableShape, rows_per_chunk: int
) -> tuple[list[tuple[str, ...]], int]:
    """Range boundaries (text key values, byte order) for chunks of about ``rows_per_chunk``
    rows, and the number of rows they were planned for (every row: a filter decides which
    rows of a range are copied, never how the ranges are cut)."""
    target = own_rows(table)
    keys = key_columns(table, "t", byte_order=True)
    with translating(f"planning chunks of {table.qualified!r}"), connection.cursor() as cursor:
        cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(target))
        total = int(cursor.fetchone()[0])  # type: ignore[index]
        if not table.key or total <= rows_per_chunk:
            return [], total
        step = max(1, total // max(1, -(-total // rows_per_chunk)))
        cursor.execute(
            sql.SQL(
                "SELECT {} FROM (SELECT {}, row_number() OVER (ORDER BY {}) AS n "
                "FROM {} AS t) s WHERE n % {} = 1 AND n > 1 ORDER BY n"
            ).format(
                sql.SQL(", ").join(
                    output_text(sql.Identifier("s", f"k{i}")) for i in range(len(keys))
                ),
                sql.SQL(", ").join(
                    sql.SQL("{} AS {}").format(sql.Identifier("t", name), sql.Identifier(f"k{i}"))
                    for i, name in enumerate(table.key)
                ),
                sql.SQL(", ").join(keys),
                target,
                sql.Literal(step),
            )
        )
        boundaries = [tuple(str(value) for value in row) for row in cursor.fetchall()]
    return boundaries, total
