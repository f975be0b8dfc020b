"""Read one chunk of a captured table for its table topic, between two watermarks (reader thread).

``read_table_chunk`` looks the table up (its captured shape: the set's
``columns`` and ``key_columns``, else every column and the primary key), finds
where the chunk ends (the key ``rows`` rows past its lower bound, in the key's
order; None at the end of the table) and reads the range with
``pgshovel.source.read_chunk``: a low watermark committed into the set's
queue, the rows (COPY text, in a snapshot taken after it), a high watermark.
Rows are decoded with the codec the relay uses for events, so a chunk row and
an event row of the same state are the same protocol values and give the same
table-topic key. Memory is one chunk.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import ProgrammingError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.source import (
    Catalog,
    Chunk,
    KeyRange,
    TableShape,
    captured_shape,
    connect,
    key_columns,
    output_text,
    own_rows,
    range_predicate,
    read_chunk,
    translating,
)
from pgshovel.source.copytext import decode_line
from pgshovel.stream.codec import to_value
from pgshovel.stream.typed_json import dumps, key_object

__all__ = ["ChunkRead", "next_bound", "read_table_chunk"]

Bound = tuple[str, ...]

#: The interpreter's thread switch interval while a chunk is decoded (default 5 ms).
SWITCH_SECONDS = 0.0005


@dataclass(frozen=True)
class ChunkRead:
    """What a chunk read found: rows (key bytes, row) of ``[lower, upper)``, or why none."""

    status: Literal["read", "missing", "unkeyed"]
    shape: TableShape | None = None
    lower: Bound | None = None
    upper: Bound | None = None
    rows: tuple[tuple[bytes, stream_pb2.Row], ...] = ()


def next_bound(
    connection: Connection, shape: TableShape, lower: Bound | None, rows: int
) -> Bound | None:
    """The key ``rows`` rows past ``lower`` in key order (text forms); None past the end."""
    condition = range_predicate(KeyRange(shape, 0, lower, None))
    keys = key_columns(shape)
    query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} OFFSET {} LIMIT 1").format(
        sql.SQL(", ").join(output_text(sql.Identifier(name)) for name in shape.key),
        own_rows(shape),
        condition,
        sql.SQL(", ").join(keys),
        sql.Literal(rows),
    )
    with connection.cursor() as cursor:
        cursor.execute(query)
        found = cursor.fetchone()
    return None if found is None else tuple(str(value) for value in found)


def _decode(shape: TableShape, data: bytes) -> list[tuple[bytes, stream_pb2.Row]]:
    # The relay's main loop waits for the GIL after each of its I/O calls while this
    # thread decodes: a short switch interval keeps that wait short (see the README).
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_SECONDS)
    try:
        return _decode_rows(shape, data)
    finally:
        sys.setswitchinterval(previous)


def _decode_rows(shape: TableShape, data: bytes) -> list[tuple[bytes, stream_pb2.Row]]:
    rows: list[tuple[bytes, stream_pb2.Row]] = []
    columns = shape.columns
    key = shape.key
    # Split on newlines only: COPY escapes \n and \r in values, not other line breaks.
    for line in data.decode("utf-8").split("\n")[:-1]:
        row = stream_pb2.Row()
        for column, text in zip(columns, decode_line(line), strict=True):
            row.columns.add(name=column.name, value=to_value(column.type_name, text))
        rows.append((dumps(key_object(row, key)).encode("utf-8"), row))
    return rows


def read_table_chunk(
    dsn: str,
    cluster: str,
    queue: str,
    table: configuration_pb2.TableConfiguration,
    attempt: str,
    lower: Bound | None,
    rows: int,
) -> ChunkRead:
    """Plan and read the chunk of ``table`` starting at ``lower`` (about ``rows`` rows)."""
    label = f"{table.schema}.{table.name}"
    connection = connect(dsn, "pgshovel-relay table chunk", autocommit=True)
    try:
        with translating(f"planning a chunk of table {label!r} for its table topic"):
            info = Catalog(connection).table(table.schema, table.name)
            if info is None:
                return ChunkRead("missing")
            shape = captured_shape(table, info, allow_unkeyed=True, database=mask_dsn(dsn))
            if not shape.key:
                return ChunkRead("unkeyed", shape)
            upper = next_bound(connection, shape, lower, rows)
    finally:
        connection.close()
    chunk = Chunk(
        attempt,
        queue,
        KeyRange(shape, 0, lower, upper),
        cluster=cluster,
        byte_order=False,
    )
    found: list[tuple[bytes, stream_pb2.Row]] = []

    def stage_rows(copy_out: Callable[[IO[bytes]], None]) -> int:
        buffer = io.BytesIO()
        copy_out(buffer)
        found.extend(_decode(shape, buffer.getvalue()))
        return len(found)

    def no_checksums(_sums: object) -> None:
        raise ProgrammingError("a table-topic chunk reads rows, not checksums")

    read_chunk(dsn, chunk, stage_rows, no_checksums)
    return ChunkRead("read", shape, lower, upper, tuple(found))
