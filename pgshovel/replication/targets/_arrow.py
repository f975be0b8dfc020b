"""PostgreSQL text forms to Arrow columns, without loss.

Booleans, integers, floats (NaN and infinities included) and bytea become
native Arrow types; every other type (numeric, dates, times, timestamps,
intervals, uuid, json, arrays, network types, ...) is kept as its exact
PostgreSQL text form in a string column, because Arrow cannot hold all of
their values (numeric beyond 38 digits or NaN, infinite or BC timestamps,
month-and-day intervals): Spark reads them as strings and PostgreSQL parses
them back to the identical value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pgshovel.errors import ReplicationError
from pgshovel.replication.model import ColumnShape, TableShape


def _bool(text: str) -> bool:
    if text in ("t", "true"):
        return True
    if text in ("f", "false"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea must be in hex format (bytea_output = hex)")
    return bytes.fromhex(text[2:])


_NATIVE: dict[str, tuple[pa.DataType, Callable[[str], Any]]] = {
    "bool": (pa.bool_(), _bool),
    "int2": (pa.int16(), int),
    "int4": (pa.int32(), int),
    "int8": (pa.int64(), int),
    "oid": (pa.int64(), int),
    "float4": (pa.float32(), float),
    "float8": (pa.float64(), float),
    "bytea": (pa.binary(), _bytea),
}


def arrow_type(column: ColumnShape) -> pa.DataType:
    native = _NATIVE.get(column.type_name)
    return native[0] if native is not None else pa.string()


def table_schema(table: TableShape) -> pa.Schema:
    return pa.schema(
        [pa.field(column.name, arrow_type(column), nullable=True) for column in table.columns]
    )


def parse(column: ColumnShape, text: str | None) -> Any:
    """The Python value Arrow stores for one text form."""
    if text is None:
        return None
    native = _NATIVE.get(column.type_name)
    if native is None:
        return text
    try:
        return native[1](text)
    except ValueError as error:
        raise ReplicationError(
            f"column {column.name!r} ({column.sql_type}): cannot read {text[:60]!r} as "
            f"{column.type_name}: {error}"
        ) from error


def to_arrow(table: TableShape, rows: Sequence[Sequence[str | None]]) -> pa.Table:
    """Text rows (column order of ``table``) as a typed Arrow table."""
    columns = [
        pa.array([parse(column, row[index]) for row in rows], type=arrow_type(column))
        for index, column in enumerate(table.columns)
    ]
    return pa.Table.from_arrays(columns, schema=table_schema(table))


def to_struct_array(table: TableShape, rows: Sequence[Sequence[str | None] | None]) -> pa.Array:
    """Rows (or None) as one struct column: the change log's before/after images."""
    struct = pa.struct(list(table_schema(table)))
    values = [
        None
        if row is None
        else {column.name: parse(column, row[index]) for index, column in enumerate(table.columns)}
        for row in rows
    ]
    return pa.array(values, type=struct)
