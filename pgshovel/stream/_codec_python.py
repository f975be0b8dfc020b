"""Protocol ``Value`` -> plain Python values, for consumers such as the Parquet target.

The mapping is lossless and simple: null is None; bool, int, float, str and
bytes are themselves; decimal is ``decimal.Decimal`` (``Decimal('NaN')``,
``Decimal('Infinity')`` included); uuid is ``uuid.UUID``; json is its text
(``str``); other types are their PostgreSQL text (``str``); arrays are nested
lists following the dimensions (lower bounds are dropped, an empty array is
``[]``). Dates, times and timestamps are ``datetime.date``, ``datetime.time``
and ``datetime.datetime`` (UTC-aware for timestamptz, with a fixed offset for
timetz) whenever Python can hold them exactly; otherwise (infinity, BC years,
years past 9999, the time 24:00:00) they are PostgreSQL's text as a ``str``.
Intervals are ``IntervalParts(months, days, micros)``, because ``timedelta``
cannot keep months and days apart as PostgreSQL does.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import NamedTuple

from google.protobuf import text_format

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_calendar import days_from_civil

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_FIRST_PYTHON_DAY = days_from_civil(1, 1, 1)
_LAST_PYTHON_DAY = days_from_civil(9999, 12, 31)
_SHOWN_CHARS = 60


class IntervalParts(NamedTuple):
    """A PostgreSQL interval's three independent fields."""

    months: int
    days: int
    micros: int


def _timestamp(value: stream_pb2.Value) -> object:
    timestamp = value.timestamp
    micros = timestamp.micros
    day = micros // temporal.USECS_PER_DAY
    if timestamp.infinity != temporal.FINITE or not (_FIRST_PYTHON_DAY <= day <= _LAST_PYTHON_DAY):
        return temporal.format_timestamp(micros, timestamp.with_zone, timestamp.infinity)
    epoch = _EPOCH_UTC if timestamp.with_zone else _EPOCH
    return epoch + datetime.timedelta(microseconds=micros)


def _date(value: stream_pb2.Value) -> object:
    date = value.date
    if date.infinity != temporal.FINITE or not _FIRST_PYTHON_DAY <= date.days <= _LAST_PYTHON_DAY:
        return temporal.format_date(date.days, date.infinity)
    return datetime.date.fromordinal(_EPOCH_ORDINAL + date.days)


def _time(value: stream_pb2.Value) -> object:
    time = value.time
    if time.micros >= temporal.USECS_PER_DAY or time.micros < 0:
        return temporal.format_time(time.micros, time.with_zone, time.utc_offset)
    seconds, micros = divmod(time.micros, temporal.USECS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    zone = None
    if time.with_zone:
        zone = datetime.timezone(datetime.timedelta(seconds=time.utc_offset))
    return datetime.time(hour, minute, second, micros, tzinfo=zone)


def _array(value: stream_pb2.Value) -> object:
    array = value.array
    items: list[object] = [to_python(element) for element in array.elements]
    for size in reversed(array.dimensions[1:]):
        items = [items[i : i + size] for i in range(0, len(items), size)]
    return items


_CONVERTERS: dict[str, Callable[[stream_pb2.Value], object]] = {
    "null": lambda value: None,
    "bool": lambda value: value.bool,
    "int64": lambda value: value.int64,
    "double": lambda value: value.double,
    "string": lambda value: value.string,
    "bytes": lambda value: value.bytes,
    "decimal": lambda value: Decimal(value.decimal),
    "timestamp": _timestamp,
    "date": _date,
    "time": _time,
    "interval": lambda value: IntervalParts(
        value.interval.months, value.interval.days, value.interval.micros
    ),
    "uuid": lambda value: uuid.UUID(bytes=value.uuid),
    "json": lambda value: value.json,
    "array": _array,
    "other": lambda value: value.other.text,
}


def to_python(value: stream_pb2.Value) -> object:
    """The Python value of a protocol value (see the module docstring for the mapping).

    Raises ``CodecError`` for a value without a kind or with impossible fields.
    """
    kind = value.WhichOneof("kind")
    try:
        if kind is None:
            raise ValueError("no kind is set")
        return _CONVERTERS[kind](value)
    except (ValueError, ArithmeticError) as exc:
        shown = text_format.MessageToString(value, as_one_line=True)[:_SHOWN_CHARS]
        raise CodecError(
            f"cannot convert value {shown!r} to python: {exc}; the message was not produced "
            "by this codec or was damaged"
        ) from exc
