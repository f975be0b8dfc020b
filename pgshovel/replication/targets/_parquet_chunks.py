"""Incremental snapshot chunks in a Parquet target: staging files, merge, checksums in Python.

A chunk reader stages the range's rows in ``_staging/<attempt>.parquet`` (or the
source's checksums in ``_staging/<attempt>.sums.json``). The merge and the
comparison run on the table's current rows: which rows a range holds is decided
by comparing keys the way the source did (text in byte order, which is Python's
order of ``str``; numbers as numbers), and a row's checksum is computed from
each value's PostgreSQL text, exactly as ``pgshovel.source.checksum_query``
computes it in SQL.
"""

from __future__ import annotations

import decimal
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pgshovel.abc import ChangedKeys, Comparison
from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.targets import _arrow
from pgshovel.source import BUCKETS, Checksum, Chunk, Column, TableShape
from pgshovel.stream import codec
from pgshovel.stream._codec_float import format_float4

STAGING = "_staging"

Value = stream_pb2.Value


def staged_rows_path(root: Path, attempt: str) -> Path:
    return root / STAGING / f"{attempt}.parquet"


def staged_sums_path(root: Path, attempt: str) -> Path:
    return root / STAGING / f"{attempt}.sums.json"


def write_sums(root: Path, attempt: str, checksums: list[Checksum]) -> None:
    path = staged_sums_path(root, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(checksums))
    temporary.replace(path)


# -- PostgreSQL's text of stored values -------------------------------------------


def _value(column: Column, stored: Any) -> Value:
    """The protocol value of a stored Arrow value (the inverse of ``_arrow.arrow_value``)."""
    value = Value()
    if stored is None:
        value.null = Value.NULL
        return value
    kind = column.type_name
    if isinstance(stored, bool):
        value.bool = stored
    elif isinstance(stored, int) and kind in ("int2", "int4", "int8", "oid"):
        value.int64 = stored
    elif isinstance(stored, float):
        value.double = stored
    elif isinstance(stored, bytes):
        value.bytes = stored
    elif isinstance(stored, decimal.Decimal):
        value.decimal = format(stored, "f")
    elif kind == "date":
        _infinity(value.date, stored, _arrow.INT32_MAX, _arrow.INT32_MIN)
        if not value.date.infinity:
            value.date.days = stored
    elif kind in ("timestamp", "timestamptz"):
        value.timestamp.with_zone = kind == "timestamptz"
        _infinity(value.timestamp, stored, _arrow.INT64_MAX, _arrow.INT64_MIN)
        if not value.timestamp.infinity:
            value.timestamp.micros = stored
    else:
        value.string = str(stored)
    return value


def _infinity(target: Any, stored: int, top: int, bottom: int) -> None:
    if stored == top:
        target.infinity = stream_pb2.POSITIVE
    elif stored == bottom:
        target.infinity = stream_pb2.NEGATIVE


def _temporal_ints(table: pa.Table) -> pa.Table:
    """Dates, timestamps and times as their integers (what ``_value`` reads)."""
    columns = []
    for field in table.schema:
        column = table.column(field.name)
        if pa.types.is_date32(field.type):
            column = column.cast(pa.int32())
        elif pa.types.is_timestamp(field.type):
            column = column.cast(pa.int64())
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def rows_as_python(table: pa.Table) -> list[tuple[Any, ...]]:
    """Every row of an Arrow table of stored values, temporal values as integers."""
    plain = _temporal_ints(table)
    return list(zip(*(plain.column(name).to_pylist() for name in plain.column_names), strict=True))


def text_of(column: Column, stored: Any) -> str | None:
    """PostgreSQL's text of one stored value."""
    if column.type_name == "float4" and isinstance(stored, float):
        return format_float4(stored)  # a float4 prints its own shortest digits
    return codec.to_text(_value(column, stored))


def texts(shape: TableShape, row: Sequence[Any]) -> list[str | None]:
    """PostgreSQL's text of every value of a stored row."""
    return [text_of(column, stored) for column, stored in zip(shape.columns, row, strict=True)]


def _md5(values: Sequence[str | None]) -> str:
    text = json.dumps(list(values), ensure_ascii=False)
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def bucket_of(key: Sequence[str | None]) -> int:
    return int(_md5(key)[:8], 16) % BUCKETS


# -- ranges ----------------------------------------------------------------------


def _sort_key(column: Column) -> Callable[[Any], Any]:
    """How the source orders a key column's stored values."""
    arrow = _arrow.arrow_type(column)
    if not pa.types.is_string(arrow):
        return lambda stored: stored
    if column.type_name == "numeric":
        return lambda stored: decimal.Decimal(stored)
    if column.type_name in ("text", "varchar", "bpchar", "uuid"):
        return lambda stored: stored  # byte order of UTF-8 = code point order of str
    raise SchemaError(
        f"key column {column.name!r} has type {column.sql_type!r}, which the Parquet target "
        "cannot order like PostgreSQL; incremental snapshots of this table need the "
        "postgresql target"
    )


class RangeTest:
    """Which stored rows a chunk's key range holds, decided as the source decided."""

    def __init__(self, chunk: Chunk) -> None:
        table = chunk.key_range.table
        self.positions = table.key_positions
        columns = [table.column(name) for name in table.key]
        self.orders = [_sort_key(column) for column in columns if column is not None]
        self.lower = self._bound(columns, chunk.key_range.lower)
        self.upper = self._bound(columns, chunk.key_range.upper)

    def _bound(
        self, columns: Sequence[Column | None], bound: tuple[str, ...] | None
    ) -> tuple[Any, ...] | None:
        if bound is None:
            return None
        stored = [
            _stored_int(column, _arrow.from_text(column, text))
            for column, text in zip(columns, bound, strict=True)
            if column is not None
        ]
        return tuple(order(value) for order, value in zip(self.orders, stored, strict=True))

    def key(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(order(row[p]) for order, p in zip(self.orders, self.positions, strict=True))

    def holds(self, row: Sequence[Any]) -> bool:
        key = self.key(row)
        return (self.lower is None or key >= self.lower) and (
            self.upper is None or key < self.upper
        )


def _stored_int(column: Column, stored: Any) -> Any:
    """Bounds arrive as Arrow values; compare temporal ones as the integers rows hold."""
    if stored is None:
        return None
    arrow = _arrow.arrow_type(column)
    if pa.types.is_date32(arrow) or pa.types.is_timestamp(arrow):
        return int(stored)
    return stored


def _changed_keys(table: TableShape, changed: ChangedKeys) -> set[tuple[str | None, ...]]:
    return {tuple(key) for key in changed}


def merge(current: pa.Table, staged: pa.Table, chunk: Chunk, changed: ChangedKeys) -> pa.Table:
    """The table's rows with the chunk's range holding the staged rows, except changed keys."""
    table = chunk.key_range.table
    test = RangeTest(chunk)
    changed_keys = _changed_keys(table, changed)
    rows = rows_as_python(current)
    positions = table.key_positions

    def key_text(row: Sequence[Any]) -> tuple[str | None, ...]:
        values = texts(table, row)
        return tuple(values[p] for p in positions)

    keep = [not test.holds(row) or key_text(row) in changed_keys for row in rows]
    staged_rows = rows_as_python(staged)
    add = [key_text(row) not in changed_keys for row in staged_rows]
    kept = current.filter(pa.array(keep, pa.bool_())) if rows else current
    added = staged.filter(pa.array(add, pa.bool_())) if staged_rows else staged
    return pa.concat_tables([kept, added.cast(kept.schema)])


def checksums(current: pa.Table, chunk: Chunk) -> dict[int, tuple[int, int]]:
    """Per bucket: rows of the chunk's range and the sum of their hashes."""
    table = chunk.key_range.table
    test = RangeTest(chunk)
    positions = table.key_positions
    sums: dict[int, tuple[int, int]] = {}
    for row in rows_as_python(current):
        if not test.holds(row):
            continue
        values = texts(table, row)
        bucket = bucket_of([values[p] for p in positions])
        count, total = sums.get(bucket, (0, 0))
        sums[bucket] = (count + 1, total + int(_md5(values)[:15], 16))
    return sums


def compare(
    current: pa.Table, chunk: Chunk, changed: ChangedKeys, source: list[Checksum]
) -> Comparison:
    mine = checksums(current, chunk)
    theirs = {bucket: (rows, total) for bucket, rows, total in source}
    skipped = {bucket_of(key) for key in changed}
    return Comparison.of(theirs, mine, skipped)


def read_staged(root: Path, attempt: str, table: TableShape) -> pa.Table:
    return pq.read_table(staged_rows_path(root, attempt), schema=_arrow.table_schema(table))


def read_sums(root: Path, attempt: str) -> list[Checksum]:
    return [
        (int(b), int(n), int(h))
        for b, n, h in json.loads(staged_sums_path(root, attempt).read_text())
    ]
