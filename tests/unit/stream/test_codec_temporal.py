"""The codec on dates, times, timestamps and intervals, across PostgreSQL's whole range.

Expected numbers come from PostgreSQL 15 itself (``d - '1970-01-01'`` and
``extract(epoch from t) * 1000000``), texts are exactly what it prints.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgshovel.protocol import stream_pb2
from pgshovel.stream._codec_calendar import civil_from_days, days_from_civil
from pgshovel.stream.codec import to_text, to_value

Value = stream_pb2.Value
POSITIVE, NEGATIVE = stream_pb2.POSITIVE, stream_pb2.NEGATIVE
HOUR = 3_600_000_000


def timestamp(micros: int = 0, with_zone: bool = False, infinity: int = 0) -> stream_pb2.Value:
    return Value(
        timestamp=stream_pb2.Timestamp(micros=micros, with_zone=with_zone, infinity=infinity)  # type: ignore[arg-type]
    )


def date(days: int = 0, infinity: int = 0) -> stream_pb2.Value:
    return Value(date=stream_pb2.Date(days=days, infinity=infinity))  # type: ignore[arg-type]


def time(micros: int, with_zone: bool = False, utc_offset: int = 0) -> stream_pb2.Value:
    return Value(time=stream_pb2.Time(micros=micros, with_zone=with_zone, utc_offset=utc_offset))


def interval(months: int = 0, days: int = 0, micros: int = 0) -> stream_pb2.Value:
    return Value(interval=stream_pb2.Interval(months=months, days=days, micros=micros))


CANONICAL = [
    ("timestamp", "0044-03-15 00:00:00 BC", timestamp(-63517824000000000)),
    ("timestamp", "4714-11-24 00:00:00 BC", timestamp(-210866803200000000)),
    ("timestamp", "0001-12-31 23:59:59.999999 BC", timestamp(-62135596800000001)),
    ("timestamp", "0001-01-01 00:00:00", timestamp(-62135596800000000)),
    ("timestamp", "1969-12-31 23:59:59.999999", timestamp(-1)),
    ("timestamp", "1970-01-01 00:00:00", timestamp(0)),
    ("timestamp", "2000-02-29 12:34:56.789", timestamp(951827696789000)),
    ("timestamp", "9999-12-31 23:59:59.999999", timestamp(253402300799999999)),
    ("timestamp", "10000-01-01 00:00:00", timestamp(253402300800000000)),
    ("timestamp", "294247-01-10 04:00:54.775807", timestamp(2**63 - 1)),
    ("timestamp", "infinity", timestamp(infinity=POSITIVE)),
    ("timestamp", "-infinity", timestamp(infinity=NEGATIVE)),
    ("timestamptz", "0044-03-15 00:00:00+00 BC", timestamp(-63517824000000000, True)),
    ("timestamptz", "1999-12-31 23:59:59.000001+00", timestamp(946684799000001, True)),
    ("timestamptz", "2000-02-29 12:34:56.789+00", timestamp(951827696789000, True)),
    ("timestamptz", "10000-01-01 00:00:00+00", timestamp(253402300800000000, True)),
    ("timestamptz", "infinity", timestamp(with_zone=True, infinity=POSITIVE)),
    ("timestamptz", "-infinity", timestamp(with_zone=True, infinity=NEGATIVE)),
    ("date", "4714-11-24 BC", date(-2440588)),
    ("date", "0044-03-15 BC", date(-735160)),
    ("date", "0001-01-01 BC", date(-719528)),
    ("date", "0001-01-01", date(-719162)),
    ("date", "1970-01-01", date(0)),
    ("date", "2000-02-29", date(11016)),
    ("date", "2000-03-01", date(11017)),
    ("date", "5874897-12-31", date(2145042905)),
    ("date", "infinity", date(infinity=POSITIVE)),
    ("date", "-infinity", date(infinity=NEGATIVE)),
    ("time", "00:00:00", time(0)),
    ("time", "23:59:59.999999", time(24 * HOUR - 1)),
    ("time", "24:00:00", time(24 * HOUR)),
    ("time", "12:00:00.5", time(12 * HOUR + 500_000)),
    ("timetz", "12:00:00+00", time(12 * HOUR, True, 0)),
    ("timetz", "12:34:56.5+05:53:28", time(45296500000, True, 5 * 3600 + 53 * 60 + 28)),
    ("timetz", "00:00:00-00:30", time(0, True, -1800)),
    ("timetz", "24:00:00+15:59", time(24 * HOUR, True, 15 * 3600 + 59 * 60)),
    ("timetz", "00:00:00-15:59:59", time(0, True, -(15 * 3600 + 59 * 60 + 59))),
    ("interval", "00:00:00", interval()),
    ("interval", "1 year", interval(months=12)),
    ("interval", "1 mon", interval(months=1)),
    ("interval", "-1 days", interval(days=-1)),
    ("interval", "3 days", interval(days=3)),
    ("interval", "12:00:00", interval(micros=12 * HOUR)),
    ("interval", "-00:00:00.000001", interval(micros=-1)),
    ("interval", "1 day 00:00:00.5", interval(days=1, micros=500_000)),
    ("interval", "1 day -00:00:01", interval(days=1, micros=-1_000_000)),
    ("interval", "-1 days +00:00:01", interval(days=-1, micros=1_000_000)),
    ("interval", "-10 mons", interval(months=-10)),
    ("interval", "-1 years -2 mons", interval(months=-14)),
    ("interval", "-1 years +2 days", interval(months=-12, days=2)),
    (
        "interval",
        "1 year 2 mons -3 days +04:05:06.789",
        interval(14, -3, 4 * HOUR + 5 * 60_000_000 + 6_789_000),
    ),
    (
        "interval",
        "-1 years -2 mons +3 days -04:05:06",
        interval(-14, 3, -(4 * HOUR + 5 * 60_000_000 + 6_000_000)),
    ),
    (
        "interval",
        "178956970 years 7 mons 2147483647 days 2562047788:00:54.775807",
        interval(2**31 - 1, 2**31 - 1, 2**63 - 1),
    ),
]


@pytest.mark.parametrize(("type_name", "text", "expected"), CANONICAL)
def test_temporal_text_becomes_the_expected_value(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert to_value(type_name, text) == expected


@pytest.mark.parametrize(("type_name", "text", "expected"), CANONICAL)
def test_temporal_value_prints_postgresql_text(
    type_name: str, text: str, expected: stream_pb2.Value
) -> None:
    assert to_text(expected) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("2020-01-01 12:00:00+05:30", "2020-01-01 06:30:00+00"),
        ("2020-01-01 00:00:00-03", "2020-01-01 03:00:00+00"),
        ("1880-01-01 00:00:00+05:53:28", "1879-12-31 18:06:32+00"),
        ("0001-01-01 00:30:00+01", "0001-12-31 23:30:00+00 BC"),
        ("2020-01-01 00:00:00", "2020-01-01 00:00:00+00"),
    ],
)
def test_timestamptz_offsets_are_applied_and_printed_in_utc(text: str, canonical: str) -> None:
    assert to_text(to_value("timestamptz", text)) == canonical


@pytest.mark.parametrize("type_name", ["timestamp", "timestamptz"])
def test_timestamps_past_the_protocol_range_travel_as_text(type_name: str) -> None:
    # PostgreSQL counts microseconds from 2000, the protocol from 1970: the last
    # 29 years of PostgreSQL's range do not fit in a sint64 and stay text.
    suffix = "+00" if type_name == "timestamptz" else ""
    text = f"294276-12-31 23:59:59.999999{suffix}"
    value = to_value(type_name, text)
    assert value.other == stream_pb2.Other(type=type_name, text=text)
    assert to_text(value) == text


def test_smallest_interval_prints_a_form_postgresql_can_read_back() -> None:
    # PostgreSQL 15 prints -2^63 microseconds as '-2562047788:00:54.775808' but
    # rejects that text on input; the codec reads it and prints a readable form.
    printed = "-178956970 years -8 mons -2147483648 days -2562047788:00:54.775808"
    readable = "-178956970 years -8 mons -2147483648 days -2562047788 hours -54.775808 secs"
    expected = interval(-(2**31), -(2**31), -(2**63))
    assert to_value("interval", printed) == expected
    assert to_text(expected) == readable
    assert to_value("interval", readable) == expected
    assert to_text(interval(micros=-(2**63))) == "-2562047788 hours -54.775808 secs"


def test_interval_accepts_singular_and_plural_units_and_explicit_plus() -> None:
    assert to_value("interval", "+2 years +1 mons +1 day +01:00:00") == interval(25, 1, HOUR)


@given(st.dates())
def test_calendar_matches_python_where_python_reaches(day: datetime.date) -> None:
    days = day.toordinal() - datetime.date(1970, 1, 1).toordinal()
    assert days_from_civil(day.year, day.month, day.day) == days
    assert civil_from_days(days) == (day.year, day.month, day.day)


@given(st.integers(min_value=-2440588, max_value=2145042905))
def test_calendar_round_trips_over_postgresql_date_range(days: int) -> None:
    year, month, day = civil_from_days(days)
    assert 1 <= month <= 12
    assert 1 <= day <= 31
    assert days_from_civil(year, month, day) == days
