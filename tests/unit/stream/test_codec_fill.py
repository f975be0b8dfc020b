"""In-place decoding (filler_for) writes exactly what to_value returns, fast paths included."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream.codec import decode_error, filler_for, known_types, to_value

EPOCH = datetime.datetime(1970, 1, 1)

SAMPLES = [
    ("int2", "-32768"),
    ("int4", "2147483647"),
    ("int8", "-9223372036854775808"),
    ("oid", "4294967295"),
    ("float8", "-0"),
    ("float4", "1e+15"),
    ("numeric", "1.50"),
    ("numeric", "NaN"),
    ("bool", "t"),
    ("bytea", "\\x0a1b"),
    ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ("json", '{"b": 1,  "a": [2]}'),
    ("jsonb", '{"a": [2], "b": 1}'),
    ("text", "zoë"),
    ("varchar", ""),
    ("date", "0044-03-15 BC"),
    ("time", "24:00:00"),
    ("timetz", "12:34:56.5+05:53:28"),
    ("timestamp", "1970-01-01 00:00:00"),
    ("timestamp", "2024-02-29 23:59:59.000001"),
    ("timestamptz", "2024-03-15 12:34:56.123456+00"),
    ("timestamptz", "2020-01-01 24:00:00+00"),
    ("timestamptz", "2020-01-01 12:00:00+05:30"),
    ("timestamptz", "0044-03-15 00:00:00+00 BC"),
    ("timestamptz", "294247-01-10 04:00:54.775808+00"),
    ("timestamptz", "-infinity"),
    ("interval", "1 year 2 mons -3 days +04:05:06.789"),
    ("_text", "{a,b,vip}"),
    ("_text", '{"a b",NULL,"NULL",nuLL}'),
    ("_int8", "[0:1]={1,2}"),
    ("_int4", "{{1,2},{3,4}}"),
    ("_timestamptz", '{"2024-03-15 12:34:56+00",NULL}'),
    ("_numeric", "{}"),
    ("inet", "10.0.0.1/8"),
    ("_inet", "{10.0.0.1,NULL}"),
    ("_weird", "not an array"),
    ("_box", "{(1,1),(0,0);(2,2),(1,1)}"),
]


def _filled(type_name: str, text: str) -> stream_pb2.Value:
    """The value as the relay writes it: into a column just added to a row."""
    row = stream_pb2.Row()
    column = row.columns.add(name="c")
    filler_for(type_name)(column.value, text)
    return row.columns[0].value


@pytest.mark.parametrize(("type_name", "text"), SAMPLES)
def test_filling_in_place_gives_the_same_bytes_as_to_value(type_name: str, text: str) -> None:
    filled = _filled(type_name, text).SerializeToString(deterministic=True)
    assert filled == to_value(type_name, text).SerializeToString(deterministic=True)


def test_every_known_type_has_a_filler_and_samples_cover_the_common_ones() -> None:
    covered = {type_name for type_name, _ in SAMPLES}
    assert {"int8", "text", "numeric", "timestamptz", "jsonb", "_text", "bool"} <= covered
    assert all(callable(filler_for(type_name)) for type_name in known_types())


@given(
    st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31)),
    st.booleans(),
)
def test_timestamps_of_the_common_form_read_as_datetime_computes_them(
    moment: datetime.datetime, with_zone: bool
) -> None:
    text = moment.strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    if with_zone:
        text += "+00"
    expected = (moment - EPOCH) // datetime.timedelta(microseconds=1)
    value = to_value("timestamptz" if with_zone else "timestamp", text)
    assert (value.timestamp.micros, value.timestamp.with_zone) == (expected, with_zone)


@pytest.mark.parametrize(
    ("type_name", "text"),
    [
        ("timestamptz", "2020-01-01 23:59:60+00"),
        ("timestamptz", "2021-02-29 00:00:00+00"),
        ("timestamptz", "2020-01-01 00:60:00+00"),
        ("timestamptz", "2020-01-01 24:00:01+00"),
        ("timestamp", "2020-01-01 00:00:00+00"),
        ("timestamp", "0000-01-01 00:00:00"),
        ("timestamp", "2020-01-01 00:00:00.1234567"),
    ],
)
def test_timestamps_postgresql_never_prints_are_rejected(type_name: str, text: str) -> None:
    with pytest.raises(CodecError, match="cannot decode"):
        to_value(type_name, text)


def test_the_cache_of_minutes_stays_bounded_and_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(temporal, "_MINUTES", {})
    monkeypatch.setattr(temporal, "_MAX_CACHED_MINUTES", 3)
    minute = 60_000_000
    for index in range(10):
        text = f"1970-01-01 00:{index:02d}:30.5+00"
        assert to_value("timestamptz", text).timestamp.micros == index * minute + 30_500_000
        assert len(temporal._MINUTES) <= 3
    # Cached minutes give the same answer the second time.
    assert to_value("timestamptz", "1970-01-01 00:09:00+00").timestamp.micros == 9 * minute


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{a,NULL,b}", ["a", None, "b"]),
        ("{Null}", [None]),
        ("{NULLS,xNULL}", ["NULLS", "xNULL"]),
        ("{ a , b }", ["a", "b"]),
        ("{}", []),
    ],
)
def test_flat_text_arrays_keep_elements_and_nulls(text: str, expected: list[str | None]) -> None:
    array = _filled("_text", text).array
    assert [
        None if element.WhichOneof("kind") == "null" else element.string
        for element in array.elements
    ] == expected
    assert list(array.dimensions) == ([len(expected)] if expected else [])


@pytest.mark.parametrize("text", ["{a,,b}", "{a,}", "{,}"])
def test_flat_arrays_with_a_missing_element_are_rejected(text: str) -> None:
    with pytest.raises(CodecError, match="missing"):
        to_value("_text", text)


def test_an_unknown_array_type_that_is_no_array_keeps_only_its_text() -> None:
    value = _filled("_weird", '{"unterminated')
    assert value.WhichOneof("kind") == "other"
    assert value.other == stream_pb2.Other(type="_weird", text='{"unterminated')


def test_decode_error_names_the_type_the_text_and_the_reason() -> None:
    with pytest.raises(ValueError) as raised:
        filler_for("int4")(stream_pb2.Value(), "2147483648")
    error = decode_error("int4", "2147483648", raised.value)
    assert isinstance(error, CodecError)
    assert "cannot decode int4 text '2147483648'" in str(error)
    assert "out of range" in str(error)
