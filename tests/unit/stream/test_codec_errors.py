"""Wrong text or damaged values raise CodecError naming the type and the text."""

from __future__ import annotations

import pytest

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import to_text, to_value

Value = stream_pb2.Value

BAD_TEXT = [
    ("int4", "abc"),
    ("int4", "1_000"),
    ("int4", " 1"),
    ("int4", "2147483648"),
    ("int2", "40000"),
    ("oid", "-1"),
    ("int8", "1.5"),
    ("float8", "inf"),
    ("float8", "1_0"),
    ("float8", ""),
    ("numeric", "1e5"),
    ("numeric", "nan"),
    ("numeric", "1."),
    ("bool", "yes"),
    ("bytea", "abc"),
    ("bytea", "\\xabc"),
    ("uuid", "not-a-uuid"),
    ("uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"),
    ("date", "2021-02-29"),
    ("date", "0000-01-01"),
    ("date", "2020-13-01"),
    ("date", "4714-11-23 BC"),
    ("date", "5874898-01-01"),
    ("date", "01/02/2020"),
    ("timestamp", "2020-01-01 00:00:00+00"),
    ("timestamp", "2020-01-01T00:00:00"),
    ("timestamp", "2020-01-01 25:00:00"),
    ("timestamp", "2020-01-01 00:60:00"),
    ("timestamp", "4714-11-23 23:59:59 BC"),
    ("timestamp", "2020-01-01 00:00:00.1234567"),
    ("timestamptz", "2020-01-01 00:00:00+16"),
    ("timestamptz", "294277-01-01 00:00:00+00"),
    ("time", "24:00:00.000001"),
    ("time", "12:00:00+00"),
    ("timetz", "12:00:00"),
    ("interval", ""),
    ("interval", "1 fortnight"),
    ("interval", "1 day 1 day"),
    ("interval", "1 year 00:00:00 2 days"),
    ("interval", "@ 1 day"),
    ("interval", "178956971 years"),
    ("interval", "2147483648 days"),
    ("interval", "2562047789:00:00"),
    ("_int4", "{1,2"),
    ("_int4", "1,2}"),
    ("_int4", "{1,,2}"),
    ("_int4", "{1,2,}"),
    ("_int4", "{{1,2},{3}}"),
    ("_int4", "{{1,2},3}"),
    ("_int4", "{1,{2}}"),
    ("_int4", "{{}}"),
    ("_int4", "{1}x"),
    ("_int4", "{1 2}"),
    ("_int4", "{a}"),
    ("_int4", "[1:3]={1,2}"),
    ("_text", '{"unterminated}'),
    ("_text", '{"a" "b"}'),
]


@pytest.mark.parametrize(("type_name", "text"), BAD_TEXT)
def test_bad_text_raises_codec_error_naming_type_and_text(type_name: str, text: str) -> None:
    with pytest.raises(CodecError) as raised:
        to_value(type_name, text)
    message = str(raised.value)
    assert f"cannot decode {type_name} text {text!r}" in message
    assert raised.value.__cause__ is not None


def test_error_on_array_element_names_the_element() -> None:
    with pytest.raises(CodecError, match=r"element 1 'x'"):
        to_value("_int4", "{1,x,3}")


def test_long_text_is_truncated_in_the_message() -> None:
    with pytest.raises(CodecError) as raised:
        to_value("int8", "9" * 5000)
    assert "(5000 characters)" in str(raised.value)
    assert len(str(raised.value)) < 500


DAMAGED = [
    Value(),
    Value(decimal="1e5"),
    Value(decimal="'; drop table t; --"),
    Value(uuid=b"short"),
    Value(time=stream_pb2.Time(micros=-1)),
    Value(time=stream_pb2.Time(micros=86_400_000_001)),
    Value(time=stream_pb2.Time(with_zone=True, utc_offset=16 * 3600)),
    Value(date=stream_pb2.Date(days=2145042906)),
    Value(timestamp=stream_pb2.Timestamp(micros=-(2**62))),
    Value(array=stream_pb2.Array(elements=[Value(int64=1)], dimensions=[2], lower_bounds=[1])),
    Value(array=stream_pb2.Array(elements=[Value(int64=1)], dimensions=[1])),
    Value(array=stream_pb2.Array(elements=[Value(int64=1)])),
    Value(
        array=stream_pb2.Array(
            elements=[Value(array=stream_pb2.Array())], dimensions=[1], lower_bounds=[1]
        )
    ),
    Value(array=stream_pb2.Array(elements=[Value()], dimensions=[1], lower_bounds=[1])),
]


@pytest.mark.parametrize("value", DAMAGED)
def test_damaged_value_raises_codec_error(value: stream_pb2.Value) -> None:
    with pytest.raises(CodecError, match="cannot encode value"):
        to_text(value)
