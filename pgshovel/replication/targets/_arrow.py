"""Protocol values to typed Arrow columns, without loss; the mapping the Parquet target writes.

| PostgreSQL | Arrow / Parquet | notes |
|---|---|---|
| bool | bool | |
| int2, int4, int8, oid | int16, int32, int64, int64 | |
| float4, float8 | float32, float64 | NaN and ±Infinity kept |
| bytea | binary | |
| numeric(p,s), p <= 38 | decimal128(p, s) | NaN cannot be held: an error names table and column |
| numeric (no precision), p > 38 | string | the exact text ("NaN", "Infinity" included) |
| date | date32 | infinity / -infinity: 2147483647 / -2147483648 days |
| timestamp, timestamptz | timestamp(us), timestamp(us, UTC) | ±infinity: int64 max / min µs |
| everything else (time, timetz, interval, uuid, json, arrays, ...) | string | exact text |

(Spark cannot read Parquet's TIME type: times travel as their text.) Each
type's Arrow kind is declared in the type registry (``pgshovel.stream.types``);
``ARROW_BY_KIND`` is the one table of what each kind is stored as.

Values are read straight from the typed ``Value`` of the stream; snapshot rows
arrive as COPY text and are decoded first by the codec the relay uses
(``codec.to_value``), so both paths go through one conversion. Arrow's
timestamp range ends in 294247 AD and PostgreSQL's in 294276 AD: a value in
between cannot be written and is an error naming the column.
"""

from __future__ import annotations

import decimal
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pyarrow as pa

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape
from pgshovel.stream import codec
from pgshovel.stream.types import BY_TYPNAME, TYPES, ArrowKind, ValueKind

Value = stream_pb2.Value

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")
_FINITE = stream_pb2.FINITE
_POSITIVE = stream_pb2.POSITIVE


def _int(value: Value) -> int:
    return value.int64


def _float(value: Value) -> float:
    return value.double


def _date(value: Value) -> int:
    date = value.date
    if date.infinity == _FINITE:
        return date.days
    return INT32_MAX if date.infinity == _POSITIVE else INT32_MIN


def _timestamp(value: Value) -> int:
    timestamp = value.timestamp
    if timestamp.infinity == _FINITE:
        return timestamp.micros
    return INT64_MAX if timestamp.infinity == _POSITIVE else INT64_MIN


def _decimal(value: Value) -> decimal.Decimal:
    number = decimal.Decimal(value.decimal)
    if not number.is_finite():
        raise ValueError(f"{value.decimal!r} cannot be held by a Parquet decimal")
    return number


class _Stored(NamedTuple):
    """What an Arrow kind of the registry is stored as."""

    #: The Arrow type (None: chosen per column, see ``_decimal_type``).
    type: pa.DataType | None
    #: The Arrow kinds its stored values turn into by an exact cast.
    widens_to: tuple[ArrowKind, ...] = ()


#: The one table of Arrow kinds (``pgshovel.stream.types.ArrowKind``).
ARROW_BY_KIND: dict[ArrowKind, _Stored] = {
    "bool": _Stored(pa.bool_()),
    "int16": _Stored(pa.int16(), ("int32", "int64")),
    "int32": _Stored(pa.int32(), ("int64",)),
    "int64": _Stored(pa.int64()),
    "float32": _Stored(pa.float32(), ("float64",)),
    "float64": _Stored(pa.float64()),
    "binary": _Stored(pa.binary()),
    "date32": _Stored(pa.date32()),
    "timestamp": _Stored(pa.timestamp("us")),
    "timestamptz": _Stored(pa.timestamp("us", tz="UTC")),
    "decimal": _Stored(None),
    "text": _Stored(pa.string()),
    "string": _Stored(pa.string()),
}
# How a value of each kind a native Arrow type holds is read from the protocol.
_READ_BY_KIND: dict[ValueKind, Callable[[Value], Any]] = {
    "bool": lambda value: value.bool,
    "int64": _int,
    "double": _float,
    "bytes": lambda value: value.bytes,
    "date": _date,
    "timestamp": _timestamp,
}
_STRING: Callable[[Value], Any] = operator.attrgetter("string")
# Arrow kinds held as text: their values are the codec's text, not read natively.
_AS_TEXT = frozenset({"decimal", "text", "string"})
_BY_KIND: dict[str, tuple[pa.DataType, str, Callable[[Value], Any]]] = {
    pg_type.name: (
        ARROW_BY_KIND[pg_type.arrow].type,
        pg_type.kind,
        _READ_BY_KIND[pg_type.kind],
    )
    for pg_type in TYPES
    if pg_type.arrow not in _AS_TEXT
}


def _decimal_type(column: Column) -> pa.DataType | None:
    match = _NUMERIC.fullmatch(column.sql_type.replace(" ", ""))
    pg_type = BY_TYPNAME.get(column.type_name)
    if pg_type is None or pg_type.arrow != "decimal" or match is None:
        return None
    precision, scale = int(match.group(1)), int(match.group(2))
    return pa.decimal128(precision, scale) if 0 < precision <= 38 else None


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type a column is stored as (see the module's table)."""
    native = _BY_KIND.get(column.type_name)
    if native is not None:
        return native[0]
    return _decimal_type(column) or pa.string()


def table_schema(table: TableShape) -> pa.Schema:
    return pa.schema(
        [pa.field(column.name, arrow_type(column), nullable=True) for column in table.columns]
    )


def arrow_value(column: Column, value: Value) -> Any:
    """The Python value Arrow stores for one protocol value of ``column`` (None for NULL)."""
    kind = value.WhichOneof("kind")
    if kind == "null":
        return None
    native = _BY_KIND.get(column.type_name)
    try:
        if native is not None and kind == native[1]:
            return native[2](value)
        if kind == "decimal" and _decimal_type(column) is not None:
            return _decimal(value)
    except ValueError as error:
        raise CodecError(
            f"column {column.name!r} ({column.sql_type}): {error}; make it an unconstrained "
            "numeric (stored as exact text) or replicate to PostgreSQL"
        ) from error
    if native is not None and kind == "other":
        raise CodecError(
            f"column {column.name!r} ({column.sql_type}) holds {value.other.text!r}, beyond "
            "what Arrow's timestamp can hold; replicate this table to PostgreSQL"
        )
    return codec.to_text(value)


def column_values(column: Column, values: Sequence[Value]) -> list[Any]:
    """``arrow_value`` of each of one column's ``values``, in one pass: the value kind a
    column's type travels as is read directly; any other kind goes through ``arrow_value``
    (same results, same errors)."""
    native = _BY_KIND.get(column.type_name)
    if native is not None:
        kind, read = native[1], native[2]
    elif _decimal_type(column) is None:
        kind, read = "string", _STRING
    else:
        return [arrow_value(column, value) for value in values]
    return [
        read(value) if value.WhichOneof("kind") == kind else arrow_value(column, value)
        for value in values
    ]


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


_PLAIN_TEXT = frozenset({"text", "varchar"})
_WIDENING = {
    stored.type: tuple(ARROW_BY_KIND[wider].type for wider in stored.widens_to)
    for stored in ARROW_BY_KIND.values()
    if stored.widens_to
}


def converts_exactly(old: Column, new: Column) -> bool:
    """Whether stored values of ``old``'s type turn into ``new``'s by an exact Arrow cast."""
    before, after = arrow_type(old), arrow_type(new)
    if before == after:
        if not pa.types.is_string(after):
            return True
        # Stored as text: the same type (a new length limit), or between text and varchar.
        return old.type_name == new.type_name or {old.type_name, new.type_name} <= _PLAIN_TEXT
    return after in _WIDENING.get(before, ())
