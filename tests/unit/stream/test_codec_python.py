"""to_python: Python values for consumers, exact, with text where Python falls short."""

from __future__ import annotations

import datetime
import math
import uuid
from decimal import Decimal

import pytest

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import IntervalParts, to_python, to_value

UTC = datetime.timezone.utc

CONVERSIONS: list[tuple[str, str | None, object]] = [
    ("int4", None, None),
    ("bool", "t", True),
    ("int8", "-9223372036854775808", -(2**63)),
    ("float8", "-Infinity", -math.inf),
    ("float4", "0.1", 0.1),
    ("numeric", "1.50", Decimal("1.50")),
    ("numeric", "Infinity", Decimal("Infinity")),
    ("text", "é", "é"),
    ("bpchar", "a  ", "a  "),
    ("bytea", "\\x00ff", b"\x00\xff"),
    (
        "uuid",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ),
    ("jsonb", '{"a": 1}', '{"a": 1}'),
    ("inet", "10.0.0.1", "10.0.0.1"),
    ("date", "2000-02-29", datetime.date(2000, 2, 29)),
    ("date", "0001-01-01", datetime.date(1, 1, 1)),
    ("date", "9999-12-31", datetime.date(9999, 12, 31)),
    ("date", "0001-12-31 BC", "0001-12-31 BC"),
    ("date", "10000-01-01", "10000-01-01"),
    ("date", "infinity", "infinity"),
    ("timestamp", "2000-02-29 12:34:56.789", datetime.datetime(2000, 2, 29, 12, 34, 56, 789000)),
    ("timestamp", "0001-01-01 00:00:00", datetime.datetime(1, 1, 1)),
    (
        "timestamp",
        "9999-12-31 23:59:59.999999",
        datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
    ),
    ("timestamp", "0044-03-15 00:00:00 BC", "0044-03-15 00:00:00 BC"),
    ("timestamp", "10000-01-01 00:00:00", "10000-01-01 00:00:00"),
    ("timestamp", "-infinity", "-infinity"),
    (
        "timestamptz",
        "1969-12-31 23:59:59.999999+00",
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, UTC),
    ),
    ("timestamptz", "infinity", "infinity"),
    ("time", "12:00:00.5", datetime.time(12, 0, 0, 500000)),
    ("time", "24:00:00", "24:00:00"),
    (
        "timetz",
        "12:34:56+05:53:28",
        datetime.time(12, 34, 56, tzinfo=datetime.timezone(datetime.timedelta(seconds=21208))),
    ),
    ("interval", "1 year 2 mons -3 days +04:05:06.789", IntervalParts(14, -3, 14706789000)),
    ("_int4", "{}", []),
    ("_int4", "{1,NULL}", [1, None]),
    ("_int4", "[0:1][5:7]={{1,2,3},{4,5,6}}", [[1, 2, 3], [4, 5, 6]]),
    ("_text", '{{"a b",NULL}}', [["a b", None]]),
    ("_mood", "{happy}", ["happy"]),
]


@pytest.mark.parametrize(("type_name", "text", "expected"), CONVERSIONS)
def test_to_python_gives_the_documented_python_value(
    type_name: str, text: str | None, expected: object
) -> None:
    result = to_python(to_value(type_name, text))
    assert result == expected
    assert type(result) is type(expected)


def test_timestamptz_is_aware_utc_and_timestamp_is_naive() -> None:
    aware = to_python(to_value("timestamptz", "2020-01-01 12:00:00+05:30"))
    naive = to_python(to_value("timestamp", "2020-01-01 12:00:00"))
    assert isinstance(aware, datetime.datetime)
    assert isinstance(naive, datetime.datetime)
    assert aware == datetime.datetime(2020, 1, 1, 6, 30, tzinfo=UTC)
    assert naive.tzinfo is None


def test_nan_decimal_and_float_stay_nan() -> None:
    decimal_nan = to_python(to_value("numeric", "NaN"))
    float_nan = to_python(to_value("float8", "NaN"))
    assert isinstance(decimal_nan, Decimal)
    assert decimal_nan.is_nan()
    assert isinstance(float_nan, float)
    assert math.isnan(float_nan)


def test_value_without_kind_raises_codec_error() -> None:
    with pytest.raises(CodecError, match="no kind is set"):
        to_python(stream_pb2.Value())
