"""The Parquet target computes the same range checksums in Python as PostgreSQL does in SQL.

``set verify`` compares a source's SQL checksums with a copy's; for a Parquet
copy they are computed from the stored values. Over the whole type matrix (odd
names, a composite text key, every kind of value), and over key ranges whose
bounds split the text keys, both sides agree bucket for bucket.
"""

from __future__ import annotations

import io

import pytest
from psycopg2 import sql

from pgshovel.replication import catalog
from pgshovel.replication.targets import _arrow, _parquet_chunks
from pgshovel.source import Chunk, KeyRange, checksum_query, chunk_condition, connect
from pgshovel.source.copytext import decode_line

from ._support import create_type_matrix

pytestmark = [pytest.mark.integration]


def test_python_and_sql_checksums_agree_over_the_type_matrix(database: str) -> None:
    configuration = create_type_matrix(database, 300)
    connection = connect(database, "pgshovel-tests")
    shape = catalog.set_shapes(connection, configuration)[0]
    buffer = io.BytesIO()
    with connection.cursor() as cursor:
        copy = sql.SQL("COPY {} ({}) TO STDOUT").format(
            sql.Identifier(shape.schema, shape.name),
            sql.SQL(", ").join(sql.Identifier(name) for name in shape.column_names),
        )
        cursor.copy_expert(copy.as_string(cursor), buffer)
        rows = [decode_line(line) for line in buffer.getvalue().decode().splitlines()]
        stored = _arrow.text_rows_to_arrow(shape, rows)
        # Bounds taken from the data itself: a range that splits the table.
        keys = sorted(tuple(str(row[p]) for p in shape.key_positions) for row in rows)
        middle = keys[len(keys) // 2]
        ranges: list[tuple[tuple[str, ...] | None, tuple[str, ...] | None]] = [
            (None, None),
            (None, middle),
            (middle, None),
        ]
        for index, (lower, upper) in enumerate(ranges):
            chunk = Chunk(f"a{index}", "q", KeyRange(shape, index, lower, upper))
            cursor.execute(checksum_query(shape, chunk_condition(chunk, "t")))
            in_sql = {int(b): (int(n), int(h)) for b, n, h in cursor.fetchall()}
            in_python = _parquet_chunks.checksums(stored, chunk)
            assert in_python == in_sql, f"range {index} ({lower} .. {upper})"
            assert sum(n for n, _ in in_sql.values()) > 0
    connection.close()
