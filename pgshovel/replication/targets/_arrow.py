"""Protocol values to Arrow columns, without loss.

Booleans, integers, floats (NaN and infinities included) and bytea become
native Arrow types, read straight from the typed protocol ``Value``; every
other type (numeric, dates, times, timestamps, intervals, uuid, json, arrays,
network types, ...) is kept as its exact PostgreSQL text form in a string
column, because Arrow cannot hold all of their values (numeric beyond 38
digits or NaN, infinite or BC timestamps, month-and-day intervals): Spark reads
them as strings and PostgreSQL parses them back to the identical value.
Snapshot rows arrive as COPY text; they are decoded by the same codec the relay
uses (``codec.to_value``), so both paths go through one conversion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape
from pgshovel.stream import codec

Value = stream_pb2.Value


def _int(value: Value) -> int:
    return value.int64


_NATIVE: dict[str, tuple[pa.DataType, Callable[[Value], Any]]] = {
    "bool": (pa.bool_(), lambda value: value.bool),
    "int2": (pa.int16(), _int),
    "int4": (pa.int32(), _int),
    "int8": (pa.int64(), _int),
    "oid": (pa.int64(), _int),
    "float4": (pa.float32(), lambda value: value.double),
    "float8": (pa.float64(), lambda value: value.double),
    "bytea": (pa.binary(), lambda value: value.bytes),
}


def arrow_type(column: Column) -> pa.DataType:
    native = _NATIVE.get(column.type_name)
    return native[0] if native is not None else pa.string()


def table_schema(table: TableShape) -> pa.Schema:
    return pa.schema(
        [pa.field(column.name, arrow_type(column), nullable=True) for column in table.columns]
    )


def arrow_value(column: Column, value: Value) -> Any:
    """The Python value Arrow stores for one protocol value of ``column`` (None for NULL)."""
    if value.WhichOneof("kind") == "null":
        return None
    native = _NATIVE.get(column.type_name)
    if native is not None and value.WhichOneof("kind") != "other":
        return native[1](value)
    return codec.to_text(value)


def from_text(column: Column, text: str | None) -> Any:
    """The Arrow value of one column's PostgreSQL text (a snapshot's COPY output)."""
    if text is None:
        return None
    return arrow_value(column, codec.to_value(column.type_name, text))


def to_arrow(table: TableShape, rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Rows of Arrow values (column order of ``table``) as a typed Arrow table."""
    columns = [
        pa.array([row[index] for row in rows], type=arrow_type(column))
        for index, column in enumerate(table.columns)
    ]
    return pa.Table.from_arrays(columns, schema=table_schema(table))


def text_rows_to_arrow(table: TableShape, rows: Sequence[Sequence[str | None]]) -> pa.Table:
    """Rows of PostgreSQL text (a snapshot's COPY output) as a typed Arrow table."""
    columns = table.columns
    return to_arrow(
        table,
        [
            tuple(from_text(column, text) for column, text in zip(columns, row, strict=True))
            for row in rows
        ],
    )


def to_struct_array(table: TableShape, rows: Sequence[Sequence[Any] | None]) -> pa.Array:
    """Rows (or None) as one struct column: the change log's before/after images."""
    struct = pa.struct(list(table_schema(table)))
    values = [
        None
        if row is None
        else {column.name: row[index] for index, column in enumerate(table.columns)}
        for row in rows
    ]
    return pa.array(values, type=struct)
