"""In-place decoders: PostgreSQL text written straight into an empty protocol ``Value``.

A filler takes a ``stream_pb2.Value`` (usually ``column.value`` of a column
just added to a row) and the non-NULL text of one value, and sets the matching
kind. Writing in place spares the relay's hot path an intermediate ``Value``
and the copy into the row (protobuf copies a message passed to ``add`` or a
constructor). Fillers never handle NULL (the caller sets ``null``) and raise
``ValueError`` or ``OverflowError`` with a lowercase reason for text PostgreSQL
does not print for the type; the public codec adds the type name. After a
failure the value may be partly written: callers discard it. ``build_fillers``
makes one per type of the registry (``pgshovel.stream.types``) by its kind
(``FILL_BY_KIND``).
"""

from __future__ import annotations

from collections.abc import Callable

from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_scalar as scalar
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_array import parse_array
from pgshovel.stream._codec_float import parse_float
from pgshovel.stream.types import TYPES, PgType, ValueKind

Filler = Callable[[stream_pb2.Value, str], None]

NULL = stream_pb2.Value.NULL
SHOWN_CHARS = 60
MAX_TIMESTAMP_MICROS = 2**63 - 1
# Built-in element types whose arrays are not comma-delimited (box uses ';'):
# such arrays are kept whole as Other rather than split at the wrong character.
NON_COMMA_ARRAYS = frozenset({"_box"})


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


def _timestamp_filler(type_name: str, with_zone: bool) -> Filler:
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


def _integer(pg_type: PgType) -> Filler:
    return _integer_filler(pg_type.integer_range())


#: How a type of each Value kind is filled, given its registry entry.
FILL_BY_KIND: dict[ValueKind, Callable[[PgType], Filler]] = {
    "int64": _integer,
    "double": lambda _type: _fill_float,
    "decimal": lambda _type: _fill_decimal,
    "bool": lambda _type: _fill_bool,
    "bytes": lambda _type: _fill_bytea,
    "uuid": lambda _type: _fill_uuid,
    "json": lambda _type: _fill_json,
    "string": lambda _type: _fill_string,
    "date": lambda _type: _fill_date,
    "time": lambda pg_type: _time_filler(pg_type.with_zone),
    "timestamp": lambda pg_type: _timestamp_filler(pg_type.name, pg_type.with_zone),
    "interval": lambda _type: _fill_interval,
}


def build_fillers() -> dict[str, Filler]:
    """The fillers of every registered type (``types.TYPES``) and of its array type."""
    fillers = {pg_type.name: FILL_BY_KIND[pg_type.kind](pg_type) for pg_type in TYPES}
    for pg_type in TYPES:
        name = pg_type.name
        if pg_type.kind == "string":
            fillers["_" + name] = _string_array_filler(name)
        else:
            fillers["_" + name] = _array_filler(name, fillers[name])
    return fillers
