"""COPY text to Arrow by columns gives exactly what the per-value conversion gives, over the
codec's whole sample matrix, and the same error where that one refuses a value."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgshovel.errors import CodecError
from pgshovel.replication.tables._text import copy_text_to_arrow, lines_to_arrow, text_to_arrow
from pgshovel.replication.targets._arrow import arrow_type, from_text
from pgshovel.source import Column, TableShape
from pgshovel.source.copytext import encode_row
from pgshovel.stream._codec_float import format_float4
from tests.unit.stream.test_codec_arrays import CANONICAL as ARRAYS
from tests.unit.stream.test_codec_fill import SAMPLES
from tests.unit.stream.test_codec_scalars import SCALARS
from tests.unit.stream.test_codec_temporal import CANONICAL as TEMPORAL

MATRIX = sorted(
    {(sample[0], sample[1]) for sample in [*SCALARS, *TEMPORAL, *ARRAYS, *SAMPLES]},
)
TYPED = [
    ("numeric(10,2)", "1.50"),
    ("numeric(10,2)", "-99999999.99"),
    ("numeric(38,0)", "9" * 38),
    ("numeric(50,2)", "1.50"),
    ("character varying(3)", "abc"),
]


def column(type_name: str, sql_type: str | None = None) -> Column:
    return Column("c", sql_type or type_name, type_name)


def per_value(col: Column, texts: list[str | None]) -> pa.Array:
    return pa.array([from_text(col, text) for text in texts], arrow_type(col))


def same(left: pa.Array, right: pa.Array) -> bool:
    # to_string prints every value exactly (floats shortest round-trip, NaN, out-of-range
    # date sentinels), where equals() would call NaN unequal to itself.
    return left.type == right.type and left.to_string() == right.to_string()


@pytest.mark.parametrize(("type_name", "text"), MATRIX)
def test_every_codec_sample_converts_as_the_per_value_path_does(type_name: str, text: str) -> None:
    col = column(type_name)
    texts = [text, None, text]
    try:
        expected = per_value(col, texts)
    except CodecError:
        with pytest.raises(CodecError):
            text_to_arrow(col, pa.array(texts, pa.string()))
        return
    assert same(text_to_arrow(col, pa.array(texts, pa.string())), expected)


@pytest.mark.parametrize(("sql_type", "text"), TYPED)
def test_typed_numerics_and_varchar(sql_type: str, text: str) -> None:
    col = column(sql_type.split("(")[0].replace("character varying", "varchar"), sql_type)
    assert same(text_to_arrow(col, pa.array([text, None])), per_value(col, [text, None]))


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_a_decimal_column_refuses_what_a_decimal_cannot_hold_like_the_per_value_path(
    text: str,
) -> None:
    col = column("numeric", "numeric(10,2)")
    with pytest.raises(CodecError, match=r"column 'c' \(numeric\(10,2\)\)"):
        text_to_arrow(col, pa.array(["1.00", text]))


def test_ordinary_and_unusual_dates_and_timestamps_mixed_keep_their_places() -> None:
    cases: list[tuple[str, list[str | None]]] = [
        ("date", ["2000-01-01", "infinity", None, "0044-03-15 BC", "10000-01-01", "1970-01-02"]),
        (
            "timestamptz",
            ["2000-01-01 00:00:00+00", "-infinity", "0001-01-01 00:00:00+00 BC", None],
        ),
        ("timestamp", ["2000-02-29 12:34:56.789", "infinity", "1999-12-31 23:59:59.999999"]),
    ]
    for type_name, texts in cases:
        col = column(type_name)
        assert same(text_to_arrow(col, pa.array(texts, pa.string())), per_value(col, texts))


@settings(deadline=None, max_examples=300)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_float4_as_postgresql_prints_it(bits: int) -> None:
    value = struct.unpack("<f", struct.pack("<I", bits))[0]
    text = format_float4(value)
    col = column("float4")
    assert same(text_to_arrow(col, pa.array([text])), per_value(col, [text]))


SHAPE = TableShape(
    "public",
    "t",
    (
        Column("id", "integer", "int4", True, 1),
        Column("note", "text", "text", False, 2),
        Column("at", "timestamp with time zone", "timestamptz", False, 3),
        Column("tags", "text[]", "_text", False, 4),
        Column("raw", "bytea", "bytea", False, 5),
        Column("ok", "boolean", "bool", False, 6),
    ),
    ("id",),
)
ROWS: list[tuple[str | None, ...]] = [
    ("1", "tab\there\nnew \\ line", "2000-01-01 00:00:00+00", '{a,"b c",NULL}', "\\x00ff", "t"),
    ("2", "", None, "{}", "\\x", "f"),
    ("3", "\\N", "infinity", None, None, None),
    ("4", None, "2024-05-06 07:08:09.123456+00", '{"\\\\"}', "\\x5c", "t"),
]


def test_copy_lines_with_every_escape_become_the_rows_values() -> None:
    converted = lines_to_arrow(SHAPE, [encode_row(row) for row in ROWS])
    for index, col in enumerate(SHAPE.columns):
        texts = [row[index] for row in ROWS]
        assert same(converted.column(index).combine_chunks(), per_value(col, texts)), col.name
    assert converted.column("note").to_pylist()[2] == "\\N"
    assert converted.column("note").to_pylist()[3] is None


def test_a_one_column_row_holding_the_empty_string_is_a_row() -> None:
    shape = TableShape("public", "t", (Column("s", "text", "text"),), ())
    assert lines_to_arrow(shape, ["", "x", ""]).column("s").to_pylist() == ["", "x", ""]


def test_no_lines_is_an_empty_table_of_the_shape() -> None:
    assert lines_to_arrow(SHAPE, []).num_rows == 0
    assert copy_text_to_arrow(SHAPE, b"").schema.names == list(SHAPE.column_names)


def test_a_line_of_the_wrong_width_names_the_table() -> None:
    with pytest.raises(CodecError, match=r"table 'public.t': COPY text does not hold 6 columns"):
        lines_to_arrow(SHAPE, ["1\tonly two"])
