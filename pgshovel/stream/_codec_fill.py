"""In-place decoders: PostgreSQL text written straight into an empty protocol ``Value``.

A filler takes a ``stream_pb2.Value`` (usually ``column.value`` of a column
just added to a row) and the non-NULL text of one value, and sets the matching
kind. Writing in place spares the relay's hot path an intermediate ``Value``
and the copy into the row (protobuf copies a message passed to ``add`` or a
constructor). Fillers never handle NULL (the caller sets ``null``) and raise
``ValueError`` or ``OverflowError`` with a lowercase reason for text PostgreSQL
does not print for the type; the public codec adds the type name. After a
failure the value may be partly written: callers discard it.
"""

from __future__ import annotations

from collections.abc import Callable

from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_scalar as scalar
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_array import parse_array
from pgshovel.stream._codec_float import parse_float

Filler = Callable[[stream_pb2.Value, str], None]

NULL = stream_pb2.Value.NULL
SHOWN_CHARS = 60
MAX_TIMESTAMP_MICROS = 2**63 - 1
# Built-in element types whose arrays are not comma-delimited (box uses ';'):
# such arrays are kept whole as Other rather than split at the wrong character.
NON_COMMA_ARRAYS = frozenset({"_box"})
STRING_TYPES = ("text", "varchar", "bpchar", "name", "char")


def shorten(text: str) -> str:
    """``text`` cut to a length fit for an error message."""
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"... ({len(text)} characters)"


def _integer_filler(bounds: tuple[int, int]) -> Filler:
    low, high = bounds

    def fill(value: stream_pb2.Value, text: str) -> None:
        number = int(text)
        if str(number) != text:
            raise ValueError("expected a canonical decimal integer")
        if not low <= number <= high:
            raise ValueError(f"integer out of range {low}..{high}")
        value.int64 = number

    return fill


def _fill_float(value: stream_pb2.Value, text: str) -> None:
    value.double = parse_float(text)


def _fill_decimal(value: stream_pb2.Value, text: str) -> None:
    value.decimal = scalar.check_decimal(text)


def _fill_bool(value: stream_pb2.Value, text: str) -> None:
    value.bool = scalar.parse_bool(text)


def _fill_bytea(value: stream_pb2.Value, text: str) -> None:
    value.bytes = scalar.parse_bytea(text)


def _fill_uuid(value: stream_pb2.Value, text: str) -> None:
    value.uuid = scalar.parse_uuid(text)


def _fill_json(value: stream_pb2.Value, text: str) -> None:
    value.json = text


def _fill_string(value: stream_pb2.Value, text: str) -> None:
    value.string = text


def _timestamp_filler(with_zone: bool) -> Filler:
    type_name = "timestamptz" if with_zone else "timestamp"
    parse = temporal.parse_timestamp

    def fill(value: stream_pb2.Value, text: str) -> None:
        micros, infinity = parse(text, with_zone)
        if micros > MAX_TIMESTAMP_MICROS:
            # Past 294247-01-10 04:00:54.775807 UTC, microseconds since 1970 overflow
            # the protocol's sint64 (PostgreSQL counts from 2000): keep the text.
            other = value.other
            other.type = type_name
            other.text = text
            return
        timestamp = value.timestamp
        timestamp.micros = micros  # marks the timestamp present even when 0
        if with_zone:
            timestamp.with_zone = True
        if infinity:
            timestamp.infinity = infinity  # type: ignore[assignment]

    return fill


def _time_filler(with_zone: bool) -> Filler:
    def fill(value: stream_pb2.Value, text: str) -> None:
        micros, offset = temporal.parse_time(text, with_zone)
        time = value.time
        time.micros = micros
        time.with_zone = with_zone
        time.utc_offset = offset

    return fill


def _fill_date(value: stream_pb2.Value, text: str) -> None:
    days, infinity = temporal.parse_date(text)
    date = value.date
    date.days = days
    date.infinity = infinity  # type: ignore[assignment]


def _fill_interval(value: stream_pb2.Value, text: str) -> None:
    months, days, micros = temporal.parse_interval(text)
    interval = value.interval
    interval.months = months
    interval.days = days
    interval.micros = micros


def other_filler(type_name: str) -> Filler:
    """The filler keeping text verbatim as ``Value.other`` of type ``type_name``."""

    def fill(value: stream_pb2.Value, text: str) -> None:
        other = value.other
        other.type = type_name
        other.text = text

    return fill


def _start_array(
    value: stream_pb2.Value, element_type: str, text: str
) -> tuple[Callable[[], stream_pb2.Value], list[str | None]]:
    """Parse array text into ``value``'s header; its ``elements.add`` and the element texts."""
    dimensions, lower_bounds, items = parse_array(text)
    array = value.array
    array.element_type = element_type
    if dimensions:
        array.dimensions.extend(dimensions)
        array.lower_bounds.extend(lower_bounds)
    return array.elements.add, items


def _array_filler(element_type: str, fill_element: Filler) -> Filler:
    def fill(value: stream_pb2.Value, text: str) -> None:
        add, items = _start_array(value, element_type, text)
        for index, item in enumerate(items):
            element = add()
            if item is None:
                element.null = NULL
                continue
            try:
                fill_element(element, item)
            except ValueError as exc:
                raise ValueError(f"element {index} {shorten(item)!r}: {exc}") from exc

    return fill


def _string_array_filler(element_type: str) -> Filler:
    """Arrays of string types: nothing to check per element, so no call per element."""

    def fill(value: stream_pb2.Value, text: str) -> None:
        add, items = _start_array(value, element_type, text)
        for item in items:
            if item is None:
                add().null = NULL
            else:
                add().string = item

    return fill


def unknown_array_filler(type_name: str) -> Filler:
    """Array of Other elements; text that is no array literal stays whole as Other."""
    as_array = _array_filler(type_name[1:], other_filler(type_name[1:]))
    as_other = other_filler(type_name)

    def fill(value: stream_pb2.Value, text: str) -> None:
        try:
            as_array(value, text)
        except ValueError:
            value.Clear()
            as_other(value, text)

    return fill


def build_fillers() -> dict[str, Filler]:
    """The fillers of every type with a native kind, and of arrays of those types."""
    fillers: dict[str, Filler] = {
        name: _integer_filler(bounds) for name, bounds in scalar.INTEGER_RANGES.items()
    }
    fillers.update(
        {
            "float4": _fill_float,
            "float8": _fill_float,
            "numeric": _fill_decimal,
            "bool": _fill_bool,
            "bytea": _fill_bytea,
            "uuid": _fill_uuid,
            "json": _fill_json,
            "jsonb": _fill_json,
            "date": _fill_date,
            "time": _time_filler(False),
            "timetz": _time_filler(True),
            "timestamp": _timestamp_filler(False),
            "timestamptz": _timestamp_filler(True),
            "interval": _fill_interval,
        }
    )
    for name in STRING_TYPES:
        fillers[name] = _fill_string
    for name, fill in list(fillers.items()):
        if name in STRING_TYPES:
            fillers["_" + name] = _string_array_filler(name)
        else:
            fillers["_" + name] = _array_filler(name, fill)
    return fillers
