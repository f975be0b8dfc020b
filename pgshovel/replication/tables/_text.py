"""PostgreSQL COPY text to typed Arrow columns, a whole column at a time.

The table formats receive rows as COPY text lines (the batched stream's
``RowChange.old``/``new``, a snapshot's COPY output). Parsing them value by
value through the codec costs microseconds per value; here pyarrow's CSV reader
splits the lines (tab-separated, no quoting, ``\\N`` is NULL), only the fields
holding a backslash are unescaped in Python, and the common types are cast by
pyarrow compute: booleans, integers, floats, ``numeric(p,s)``, dates and
timestamps in their ordinary form, and the text types whose Arrow value is
their text. Everything else — and any value a vectorised cast refuses (a BC
date, ``infinity``, a ``NaN`` numeric) — goes through
``pgshovel.replication.targets._arrow.from_text``, the Parquet target's
conversion, so both paths yield the same values and raise the same errors.
Which path a column takes follows its type's Arrow kind in the type registry
(``pgshovel.stream.types``, ``TEXT_BY_KIND``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from pgshovel.errors import CodecError
from pgshovel.replication.targets._arrow import arrow_type, from_text, table_schema
from pgshovel.source import Column, TableShape
from pgshovel.source.copytext import decode_value
from pgshovel.stream.types import TYPES, ArrowKind

__all__ = ["copy_text_to_arrow", "lines_to_arrow", "text_to_arrow"]

_DATE = r"^\d{4}-\d\d-\d\d$"
_TIMESTAMP = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$"
_TIMESTAMPTZ = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d)?$"


def _per_value(column: Column, values: pa.Array) -> pa.Array:
    return pa.array([from_text(column, text) for text in values.to_pylist()], arrow_type(column))


def _cast_or_per_value(column: Column, values: pa.Array) -> pa.Array:
    try:
        return pc.cast(values, arrow_type(column))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # The per-value path raises the error that names the value (or converts it).
        return _per_value(column, values)


def _bool(column: Column, values: pa.Array) -> pa.Array:
    valid = pc.is_in(values.drop_null(), value_set=pa.array(["t", "f"]))
    if not pc.all(valid).as_py() and len(valid):
        return _per_value(column, values)
    return pc.equal(values, "t")


def _by_pattern(pattern: str) -> Callable[[Column, pa.Array], pa.Array]:
    """Cast the values in their ordinary form; the rest (BC, infinity, 5-digit years) per value."""

    def convert(column: Column, values: pa.Array) -> pa.Array:
        ordinary = pc.fill_null(pc.match_substring_regex(values, pattern), True)
        if pc.all(ordinary).as_py():
            return _cast_or_per_value(column, values)
        if not pc.any(ordinary).as_py():
            return _per_value(column, values)
        # Cast the ordinary ones, convert the others one by one, put them back in place.
        fast = _cast_or_per_value(column, pc.if_else(ordinary, values, None))
        unusual = pc.invert(ordinary)
        slow = _per_value(column, values.filter(unusual))
        return pc.replace_with_mask(fast, unusual, slow)

    return convert


def _verbatim(column: Column, values: pa.Array) -> pa.Array:
    return values


def _numeric(column: Column, values: pa.Array) -> pa.Array:
    """``numeric(p,s)`` stored as a decimal is cast; any other numeric is its text."""
    if pa.types.is_decimal(arrow_type(column)):
        return _cast_or_per_value(column, values)
    return values


Converter = Callable[[Column, pa.Array], pa.Array]

#: How the text of each of the registry's Arrow kinds becomes its Arrow values.
TEXT_BY_KIND: dict[ArrowKind, Converter] = {
    "bool": _bool,
    "int16": _cast_or_per_value,
    "int32": _cast_or_per_value,
    "int64": _cast_or_per_value,
    "float32": _cast_or_per_value,
    "float64": _cast_or_per_value,
    "binary": _per_value,
    "date32": _by_pattern(_DATE),
    "timestamp": _by_pattern(_TIMESTAMP),
    "timestamptz": _by_pattern(_TIMESTAMPTZ),
    "decimal": _numeric,
    "text": _verbatim,
    "string": _per_value,
}
_CONVERTERS: dict[str, Converter] = {pg_type.name: TEXT_BY_KIND[pg_type.arrow] for pg_type in TYPES}


def _converter(column: Column) -> Converter:
    converter = _CONVERTERS.get(column.type_name)
    if converter is not None:
        return converter
    if column.type_name.startswith("_"):
        return _per_value  # arrays: their codec text
    # Unknown scalar types travel as ``Other`` text: their Arrow value is the text.
    return _verbatim


def text_to_arrow(column: Column, values: pa.Array) -> pa.Array:
    """One column's PostgreSQL text values (unescaped; null is NULL) as its Arrow type."""
    values = values.cast(pa.string()) if not pa.types.is_string(values.type) else values
    return _converter(column)(column, values)


def _unescape(field: pa.Array) -> pa.Array:
    """A column of COPY fields as values: ``\\N`` to null, backslash escapes undone."""
    escaped = pc.fill_null(pc.match_substring(field, "\\"), False)
    if not pc.any(escaped).as_py():
        return field
    texts = field.to_pylist()
    for position in pc.indices_nonzero(escaped).to_pylist():
        texts[position] = decode_value(texts[position])
    return pa.array(texts, pa.string())


def copy_text_to_arrow(table: TableShape, data: bytes) -> pa.Table:
    """COPY text (lines of tab-separated fields) of ``table``'s columns as a typed Arrow table."""
    schema = table_schema(table)
    if not data:
        return schema.empty_table()
    names = [f"c{index}" for index in range(len(table.columns))]
    try:
        parsed = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=True),
            parse_options=pacsv.ParseOptions(
                delimiter="\t",
                quote_char=False,
                escape_char=False,
                newlines_in_values=False,
                # A one-column row holding '' is an empty line.
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                null_values=["\\N"],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as error:
        raise CodecError(
            f"table {table.qualified!r}: COPY text does not hold {len(names)} columns per "
            f"line ({error}); the rows must be in the table's shape"
        ) from error
    columns = [
        text_to_arrow(column, _unescape(parsed.column(index).combine_chunks()))
        for index, column in enumerate(table.columns)
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def lines_to_arrow(table: TableShape, lines: Sequence[str]) -> pa.Table:
    """COPY text lines (each with or without its newline) as a typed Arrow table."""
    if not lines:
        return table_schema(table).empty_table()
    data = "\n".join(line[:-1] if line.endswith("\n") else line for line in lines) + "\n"
    return copy_text_to_arrow(table, data.encode("utf-8"))
