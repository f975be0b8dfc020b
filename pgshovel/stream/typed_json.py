"""Protocol values as typed JSON: the one mapping of table topics, Debezium envelopes and ``tail``.

Every value keeps its meaning and its precision (the README's "JSON mapping"
table is this module's contract):

* SQL NULL -> ``null``; ``boolean`` -> ``true``/``false``; a ``json``/``jsonb``
  document that is JSON's ``null`` is ``null`` too (the mapping's one ambiguity:
  the protocol value tells them apart);
* integers (``smallint``, ``integer``, ``bigint``, ``oid`` ...) -> exact JSON numbers;
* ``real``/``double precision`` -> JSON numbers, ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"`` as strings (JSON has no such numbers);
* ``numeric`` -> a string of its exact text (``"1.50"``, ``"NaN"``), never a float;
* ``timestamp`` -> ``"2024-01-02T03:04:05.5"``, ``timestamptz`` -> the same in UTC
  with ``Z``; ``date`` -> ``"2024-01-02"``; years use astronomical numbering as
  ISO 8601 does (1 BC is ``0000``, 2 BC is ``-0001``; a year above 9999 gets a
  ``+``); ``infinity``/``-infinity`` stay those words; the fraction of a second
  has no trailing zeros and is left out when zero; the whole of PostgreSQL's
  range (4714-11-24 BC to 294276-12-31, dates to 5874897-12-31) takes this form,
  also the timestamps past 294247-01-10 that the protocol carries as text;
* ``time`` -> ``"13:45:00"``, ``timetz`` -> ``"13:45:00+02:00"``;
* ``interval`` -> ISO 8601 duration as PostgreSQL's ``iso_8601`` style prints it
  (``"P1Y2M3DT4H5M6.5S"``, ``"PT0S"``; every part keeps its own sign);
* ``uuid`` -> its canonical text; ``bytea`` -> base64 (standard alphabet, padded);
* ``json``/``jsonb`` -> the document itself, embedded as it is stored (``json``
  keeps its text verbatim, so duplicate keys and number spellings survive);
* arrays -> JSON arrays, nested per dimension, elements mapped by these rules
  (lower bounds other than 1 are not represented);
* every other type (``text``, ``inet``, ``money``, ranges, enums ...) -> its
  PostgreSQL text as a string.

``dumps`` writes the result compactly (``,`` and ``:`` separators, UTF-8 text
unescaped), keeping dictionary order: a row's columns in table order, a key's
columns in the key's order, so the same row always serializes to the same bytes.
"""

from __future__ import annotations

import base64
import json
import math
import re
import uuid
from collections.abc import Iterable
from typing import Any

from pgshovel.protocol import stream_pb2
from pgshovel.stream._codec_calendar import civil_from_days
from pgshovel.stream._codec_temporal import parse_timestamp

__all__ = [
    "RawJSON",
    "dumps",
    "format_date",
    "format_interval",
    "format_time",
    "format_timestamp",
    "key_object",
    "row_object",
    "to_json",
]

_USECS_PER_SECOND = 1_000_000
_USECS_PER_DAY = 86_400 * _USECS_PER_SECOND
_INFINITY_WORDS: dict[int, str] = {
    stream_pb2.POSITIVE: "infinity",
    stream_pb2.NEGATIVE: "-infinity",
}


class RawJSON:
    """A JSON document embedded verbatim by ``dumps`` (a ``json``/``jsonb`` value)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJSON) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"RawJSON({self.text!r})"

    def parsed(self) -> Any:
        return json.loads(self.text)


def _year(year: int) -> str:
    if 0 <= year <= 9999:
        return f"{year:04d}"
    if year < 0:
        return f"-{-year:04d}"
    return f"+{year}"


def _fraction(micros: int) -> str:
    return "" if micros == 0 else "." + f"{micros:06d}".rstrip("0")


def _clock(micros: int) -> str:
    seconds, fraction = divmod(micros, _USECS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{hour:02d}:{minute:02d}:{second:02d}{_fraction(fraction)}"


def format_date(days: int, infinity: int = stream_pb2.FINITE) -> str:
    """ISO 8601 of a date (days since 1970-01-01), astronomical years."""
    if infinity in _INFINITY_WORDS:
        return _INFINITY_WORDS[infinity]
    year, month, day = civil_from_days(days)
    return f"{_year(year)}-{month:02d}-{day:02d}"


def format_timestamp(micros: int, with_zone: bool, infinity: int = stream_pb2.FINITE) -> str:
    """ISO 8601 of a timestamp (µs since 1970-01-01, UTC for ``timestamptz``: suffix ``Z``)."""
    if infinity in _INFINITY_WORDS:
        return _INFINITY_WORDS[infinity]
    days, clock = divmod(micros, _USECS_PER_DAY)
    return f"{format_date(days)}T{_clock(clock)}{'Z' if with_zone else ''}"


def _offset(seconds_east: int) -> str:
    sign = "-" if seconds_east < 0 else "+"
    minutes, second = divmod(abs(seconds_east), 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}:{minute:02d}"
    return f"{text}:{second:02d}" if second else text


def format_time(micros: int, with_zone: bool, utc_offset: int = 0) -> str:
    """ISO 8601 of a time of day (``24:00:00`` included); ``timetz`` with its offset."""
    return _clock(micros) + (_offset(utc_offset) if with_zone else "")


def _truncate(value: int, divisor: int) -> tuple[int, int]:
    """Quotient toward zero and the remainder with the sign of ``value``."""
    quotient = abs(value) // divisor
    if value < 0:
        quotient = -quotient
    return quotient, value - quotient * divisor


def format_interval(months: int, days: int, micros: int) -> str:
    """ISO 8601 duration with a sign per part, as PostgreSQL's ``intervalstyle iso_8601``."""
    years, months = _truncate(months, 12)
    hours, rest = _truncate(micros, 3600 * _USECS_PER_SECOND)
    minutes, rest = _truncate(rest, 60 * _USECS_PER_SECOND)
    seconds, fraction = _truncate(rest, _USECS_PER_SECOND)
    date = "".join(f"{n}{unit}" for n, unit in ((years, "Y"), (months, "M"), (days, "D")) if n)
    clock = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    if seconds or fraction:
        sign = "-" if rest < 0 else ""
        clock += f"{sign}{abs(seconds)}{_fraction(abs(fraction))}S"
    if not date and not clock:
        return "PT0S"
    return f"P{date}" + (f"T{clock}" if clock else "")


def _double(number: float) -> float | str:
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def _nest(elements: list[Any], dimensions: list[int]) -> list[Any]:
    if len(dimensions) <= 1:
        return elements
    size = len(elements) // dimensions[0]
    return [
        _nest(elements[index * size : (index + 1) * size], dimensions[1:])
        for index in range(dimensions[0])
    ]


def _array(array: stream_pb2.Array) -> list[Any]:
    return _nest([to_json(element) for element in array.elements], list(array.dimensions))


def _timestamp(value: stream_pb2.Value) -> str:
    stamp = value.timestamp
    return format_timestamp(stamp.micros, stamp.with_zone, stamp.infinity)


#: Types whose values the protocol may carry as text (``Value.other``) although the mapping
#: has a form for them: timestamps past 294247-01-10 04:00:54.775807 do not fit the
#: protocol's signed 64-bit microseconds, yet PostgreSQL stores them up to 294276.
_TEXT_TIMESTAMPS = {"timestamp": False, "timestamptz": True}


def _other(value: stream_pb2.Value) -> str:
    other = value.other
    with_zone = _TEXT_TIMESTAMPS.get(other.type)
    if with_zone is None:
        return other.text
    micros, infinity = parse_timestamp(other.text, with_zone)
    return format_timestamp(micros, with_zone, infinity)


def _interval(value: stream_pb2.Value) -> str:
    interval = value.interval
    return format_interval(interval.months, interval.days, interval.micros)


_CONVERTERS: dict[str | None, Any] = {
    "null": lambda value: None,
    None: lambda value: None,
    "bool": lambda value: value.bool,
    "int64": lambda value: value.int64,
    "string": lambda value: value.string,
    "decimal": lambda value: value.decimal,
    "double": lambda value: _double(value.double),
    "timestamp": _timestamp,
    "date": lambda value: format_date(value.date.days, value.date.infinity),
    "time": lambda value: format_time(
        value.time.micros, value.time.with_zone, value.time.utc_offset
    ),
    "interval": _interval,
    "uuid": lambda value: str(uuid.UUID(bytes=value.uuid)),
    "bytes": lambda value: base64.b64encode(value.bytes).decode("ascii"),
    "json": lambda value: RawJSON(value.json),
    "array": lambda value: _array(value.array),
    "other": _other,
}


def to_json(value: stream_pb2.Value) -> Any:
    """The typed JSON of one protocol value (see the module documentation)."""
    return _CONVERTERS[value.WhichOneof("kind")](value)


def row_object(columns: Iterable[stream_pb2.Column]) -> dict[str, Any]:
    """A row as a JSON object, columns in their order."""
    return {column.name: to_json(column.value) for column in columns}


def key_object(row: stream_pb2.Row, key_columns: Iterable[str]) -> dict[str, Any]:
    """The key of ``row`` as a JSON object, columns in the key's order.

    Raises ``KeyError`` naming a key column the row does not hold.
    """
    wanted = tuple(key_columns)
    found: dict[str, stream_pb2.Value] = {}
    for column in row.columns:
        if column.name in wanted:
            found[column.name] = column.value
            if len(found) == len(wanted):
                break
    return {name: to_json(found[name]) for name in wanted}


# A ``json`` value travels through the C encoder as a string of its text behind a NUL
# (which no PostgreSQL text or json value holds), then is put back verbatim.
_RAW_MARK = "\x00"
_RAW_TOKEN = re.compile(r'"\\u0000((?:[^"\\]|\\.)*)"')


def _raw_placeholder(value: object) -> str:
    if isinstance(value, RawJSON):
        return _RAW_MARK + value.text.strip()
    raise TypeError(f"object of type {type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_raw_placeholder
)


def _embed(match: re.Match[str]) -> str:
    text: str = json.loads(f'"{match.group(1)}"')
    return text


def dumps(value: Any) -> str:
    """Compact JSON of ``value`` (mappings keep their order; ``RawJSON`` is embedded)."""
    out = _ENCODER.encode(value)
    if '"\\u0000' in out:
        out = _RAW_TOKEN.sub(_embed, out)
    return out
