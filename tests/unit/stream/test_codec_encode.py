"""Encoders (encoder_for) give exactly the bytes of the Value the fillers build, errors included."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_encode
from pgshovel.stream._codec_wire import clustered_varint, signed, varint, zigzag
from pgshovel.stream.codec import NULL_VALUE, encoder_for, filler_for, known_types
from tests.unit.stream.test_codec_fill import SAMPLES
from tests.unit.stream.test_codec_properties import (
    FIRST_DAY,
    LAST_DATE_DAY,
    LAST_TIMESTAMP_MICROS,
    MAX_OFFSET,
    USECS_PER_DAY,
    render_clock,
    render_day,
    render_float,
    render_interval,
    render_offset,
    render_timestamp,
)


def filled(type_name: str, text: str) -> bytes:
    """What the relay published before encoders: the filled Value, serialized."""
    value = stream_pb2.Value()
    filler_for(type_name)(value, text)
    return value.SerializeToString()


EDGES = [
    ("int2", "0"),
    ("int8", "9223372036854775807"),
    ("int4", "-1"),
    ("float8", "0"),
    ("float8", "NaN"),
    ("float8", "-Infinity"),
    ("float4", "-3.4028235e+38"),
    ("numeric", "0"),
    ("numeric", "-Infinity"),
    ("bool", "f"),
    ("bytea", "\\x"),
    ("text", ""),
    ("text", "x" * 127),
    ("text", "é" * 200),
    ("bpchar", "y" * 20_000),
    ("json", ""),
    ("date", "1970-01-01"),
    ("date", "infinity"),
    ("date", "5874897-12-31"),
    ("time", "00:00:00"),
    ("timetz", "00:00:00+00"),
    ("timetz", "23:59:59.999999-15:59:59"),
    ("timestamp", "infinity"),
    ("timestamptz", "1970-01-01 00:00:00+00"),
    ("timestamptz", "1969-12-31 23:59:59.999999+00"),
    ("timestamp", "294276-12-31 23:59:59.999999"),
    ("interval", "00:00:00"),
    ("interval", "-178000000 years"),
    ("interval", "-2562047788 hours -54.775808 secs"),
    ("inet", ""),
    ("unknown", "anything at all"),
    ("", "a type without a name"),
    ("_int4", "{}"),
    ("_text", '{{a,b},{NULL,""}}'),
    ("_unknown_type", "{x,NULL}"),
]


@pytest.mark.parametrize(("type_name", "text"), SAMPLES + EDGES)
def test_encoding_gives_the_bytes_of_the_filled_value(type_name: str, text: str) -> None:
    assert encoder_for(type_name)(text) == filled(type_name, text)


def test_null_is_the_serialized_null_value() -> None:
    assert NULL_VALUE == stream_pb2.Value(null=stream_pb2.Value.NULL).SerializeToString()


def test_every_known_type_has_an_encoder() -> None:
    assert all(callable(encoder_for(type_name)) for type_name in known_types())


BAD = [
    ("int4", "2147483648"),
    ("int2", "01"),
    ("int8", "1.0"),
    ("int8", ""),
    ("float8", "1,5"),
    ("numeric", "1e5"),
    ("bool", "yes"),
    ("bytea", "0a"),
    ("bytea", "\\xz"),
    ("uuid", "not-a-uuid"),
    ("date", "2021-02-29"),
    ("time", "25:00:00"),
    ("timetz", "12:00:00+16:00"),
    ("timestamp", "2020-01-01 00:00:00+00"),
    ("timestamptz", "2020-01-01 23:59:60+00"),
    ("timestamptz", "yesterday"),
    ("interval", "1 fortnight"),
    ("_int4", "{1,x}"),
    ("_text", "{a,,b}"),
]


@pytest.mark.parametrize(("type_name", "text"), BAD)
def test_text_a_filler_rejects_the_encoder_rejects_with_the_same_reason(
    type_name: str, text: str
) -> None:
    with pytest.raises((ValueError, OverflowError)) as by_filler:
        filled(type_name, text)
    with pytest.raises((ValueError, OverflowError)) as by_encoder:
        encoder_for(type_name)(text)
    assert str(by_encoder.value) == str(by_filler.value)


@given(st.sampled_from(["int2", "int4", "int8", "oid"]), st.integers(-(2**64), 2**64))
def test_integers_encode_as_filled_or_fail_alike(type_name: str, number: int) -> None:
    text = str(number)
    try:
        expected = filled(type_name, text)
    except ValueError:
        with pytest.raises(ValueError, match="out of range"):
            encoder_for(type_name)(text)
        return
    assert encoder_for(type_name)(text) == expected


@given(st.floats())
def test_float8_encodes_as_filled(number: float) -> None:
    text = render_float(number)
    assert encoder_for("float8")(text) == filled("float8", text)
    if not math.isnan(number):
        assert encoder_for("float8")(text)[1:] == struct.pack("<d", number)


@given(
    st.integers(FIRST_DAY * USECS_PER_DAY, LAST_TIMESTAMP_MICROS + 10**12),
    st.one_of(st.none(), st.integers(-MAX_OFFSET, MAX_OFFSET)),
)
def test_timestamps_encode_as_filled_past_the_protocols_range_too(
    micros: int, offset: int | None
) -> None:
    if offset is None:
        text = render_timestamp(micros, None)
        assert encoder_for("timestamp")(text) == filled("timestamp", text)
    text = render_timestamp(micros, offset or 0)
    assert encoder_for("timestamptz")(text) == filled("timestamptz", text)


@given(st.integers(FIRST_DAY, LAST_DATE_DAY))
def test_dates_encode_as_filled(days: int) -> None:
    text = render_day(days)
    assert encoder_for("date")(text) == filled("date", text)


@given(st.integers(0, USECS_PER_DAY), st.one_of(st.none(), st.integers(-MAX_OFFSET, MAX_OFFSET)))
def test_times_encode_as_filled(micros: int, offset: int | None) -> None:
    if offset is None:
        text = render_clock(micros)
        assert encoder_for("time")(text) == filled("time", text)
    else:
        text = render_clock(micros) + render_offset(offset)
        assert encoder_for("timetz")(text) == filled("timetz", text)


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63) + 1, 2**63 - 1),
)
def test_intervals_encode_as_filled(months: int, days: int, micros: int) -> None:
    text = render_interval(months, days, micros)
    assert encoder_for("interval")(text) == filled("interval", text)


@given(st.text(max_size=300), st.sampled_from(["text", "varchar", "json", "inet", "_weird"]))
def test_any_text_encodes_as_filled(text: str, type_name: str) -> None:
    assert encoder_for(type_name)(text) == filled(type_name, text)


def test_the_timestamp_cache_stays_bounded_and_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_codec_encode, "CACHED_TIMESTAMPS", 3)
    encode = encoder_for("timestamptz")
    texts = [f"2024-03-15 12:34:{second:02d}.5+00" for second in range(10)]
    for _ in range(2):  # the second round meets texts cached, cleared and cached again
        for text in texts:
            assert encode(text) == filled("timestamptz", text)


@given(st.integers(0, 2**64 - 1))
def test_varints_are_the_runtimes(number: int) -> None:
    header = stream_pb2.Header(sequence=number)
    assert header.SerializeToString() == (b"\x10" + varint(number) if number else b"")


@given(st.integers(-(2**63), 2**63 - 1))
def test_signed_and_zigzag_varints_are_the_runtimes(number: int) -> None:
    assert stream_pb2.Value(int64=number).SerializeToString() == b"\x18" + zigzag(number)
    mutation = stream_pb2.Mutation(id=number)
    assert mutation.SerializeToString() == (b"\x08" + signed(number) if number else b"")


@given(
    st.lists(
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(1_700_000_000_000_000, 1_700_000_000_100_000),  # clustered
            st.integers(-10, 20_000),
        ),
        max_size=30,
    )
)
def test_clustered_varints_are_signed_varints_whatever_comes_in_between(
    numbers: list[int],
) -> None:
    encode = clustered_varint()
    assert [encode(number) for number in numbers] == [signed(number) for number in numbers]
