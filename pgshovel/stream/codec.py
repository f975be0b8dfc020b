"""The lossless value codec: PostgreSQL text form <-> protocol ``Value``.

Row values travel through pgshovel as the text PostgreSQL's output functions
print under fixed session settings (DateStyle 'ISO, MDY', IntervalStyle
'postgres', TimeZone 'UTC', extra_float_digits 1, bytea_output 'hex'), keyed by
the ``pg_type.typname`` of the column's base type (the caller resolves domains).
``to_value`` turns such text into a ``stream_pb2.Value`` of the matching kind,
``to_text`` turns a ``Value`` back into text PostgreSQL's input function reads
as exactly the same value (PostgreSQL's own canonical text, timestamptz in UTC
with ``+00``), and ``to_python`` gives consumers plain Python values. Array
types are ``_`` + element typname; types without a native kind travel as
``Value.other`` with their text verbatim, so nothing is ever lost or nulled;
so do timestamps after 294247-01-10 04:00:54.775807 UTC, where microseconds
since 1970 overflow the protocol's sint64 (PostgreSQL goes on to 294276 AD).
Decoders and encoders are looked up in dicts built once at import.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf import text_format

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_scalar as scalar
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_array import format_array, parse_array
from pgshovel.stream._codec_float import format_float, parse_float
from pgshovel.stream._codec_python import IntervalParts, to_python

__all__ = ["IntervalParts", "known_types", "to_python", "to_text", "to_value"]

Value = stream_pb2.Value
Decoder = Callable[[str], stream_pb2.Value]
Encoder = Callable[[stream_pb2.Value], str]

_NULL = Value.NULL
_SHOWN_CHARS = 60
_MAX_TIMESTAMP_MICROS = 2**63 - 1
# Built-in element types whose arrays are not comma-delimited (box uses ';'):
# such arrays are kept whole as Other rather than split at the wrong character.
_NON_COMMA_ARRAYS = frozenset({"_box"})
_STRING_TYPES = ("text", "varchar", "bpchar", "name", "char")


def _shorten(text: str) -> str:
    if len(text) <= _SHOWN_CHARS:
        return text
    return text[:_SHOWN_CHARS] + f"... ({len(text)} characters)"


def _integer_decoder(bounds: tuple[int, int]) -> Decoder:
    def decode(text: str) -> stream_pb2.Value:
        return Value(int64=scalar.parse_integer(text, bounds))

    return decode


def _timestamp_decoder(with_zone: bool) -> Decoder:
    type_name = "timestamptz" if with_zone else "timestamp"

    def decode(text: str) -> stream_pb2.Value:
        micros, infinity = temporal.parse_timestamp(text, with_zone)
        if micros > _MAX_TIMESTAMP_MICROS:
            # Past 294247-01-10 04:00:54.775807 UTC, microseconds since 1970 overflow
            # the protocol's sint64 (PostgreSQL counts from 2000): keep the text.
            return Value(other=stream_pb2.Other(type=type_name, text=text))
        # Filling the sub-message in place is about twice as fast as constructing it.
        value = Value()
        timestamp = value.timestamp
        timestamp.micros = micros
        timestamp.with_zone = with_zone
        timestamp.infinity = infinity  # type: ignore[assignment]
        return value

    return decode


def _time_decoder(with_zone: bool) -> Decoder:
    def decode(text: str) -> stream_pb2.Value:
        micros, offset = temporal.parse_time(text, with_zone)
        value = Value()
        time = value.time
        time.micros = micros
        time.with_zone = with_zone
        time.utc_offset = offset
        return value

    return decode


def _decode_date(text: str) -> stream_pb2.Value:
    days, infinity = temporal.parse_date(text)
    value = Value()
    date = value.date
    date.days = days
    date.infinity = infinity  # type: ignore[assignment]
    return value


def _decode_interval(text: str) -> stream_pb2.Value:
    months, days, micros = temporal.parse_interval(text)
    value = Value()
    interval = value.interval
    interval.months = months
    interval.days = days
    interval.micros = micros
    return value


def _other_decoder(type_name: str) -> Decoder:
    def decode(text: str) -> stream_pb2.Value:
        return Value(other=stream_pb2.Other(type=type_name, text=text))

    return decode


def _array_decoder(element_type: str, decode_element: Decoder) -> Decoder:
    def decode(text: str) -> stream_pb2.Value:
        dimensions, lower_bounds, items = parse_array(text)
        elements = []
        for index, item in enumerate(items):
            if item is None:
                elements.append(Value(null=_NULL))
                continue
            try:
                elements.append(decode_element(item))
            except ValueError as exc:
                raise ValueError(f"element {index} {_shorten(item)!r}: {exc}") from exc
        array = stream_pb2.Array(
            elements=elements,
            dimensions=dimensions,
            lower_bounds=lower_bounds,
            element_type=element_type,
        )
        return Value(array=array)

    return decode


def _unknown_array_decoder(type_name: str) -> Decoder:
    """Array of Other elements; text that is no array literal stays whole as Other."""
    as_array = _array_decoder(type_name[1:], _other_decoder(type_name[1:]))
    as_other = _other_decoder(type_name)

    def decode(text: str) -> stream_pb2.Value:
        try:
            return as_array(text)
        except ValueError:
            return as_other(text)

    return decode


def _build_decoders() -> dict[str, Decoder]:
    decoders: dict[str, Decoder] = {
        name: _integer_decoder(bounds) for name, bounds in scalar.INTEGER_RANGES.items()
    }
    decoders.update(
        {
            "float4": lambda text: Value(double=parse_float(text)),
            "float8": lambda text: Value(double=parse_float(text)),
            "numeric": lambda text: Value(decimal=scalar.check_decimal(text)),
            "bool": lambda text: Value(bool=scalar.parse_bool(text)),
            "bytea": lambda text: Value(bytes=scalar.parse_bytea(text)),
            "uuid": lambda text: Value(uuid=scalar.parse_uuid(text)),
            "json": lambda text: Value(json=text),
            "jsonb": lambda text: Value(json=text),
            "date": _decode_date,
            "time": _time_decoder(False),
            "timetz": _time_decoder(True),
            "timestamp": _timestamp_decoder(False),
            "timestamptz": _timestamp_decoder(True),
            "interval": _decode_interval,
        }
    )
    for name in _STRING_TYPES:
        decoders[name] = lambda text: Value(string=text)
    for name, decode in list(decoders.items()):
        decoders["_" + name] = _array_decoder(name, decode)
    return decoders


_DECODERS = _build_decoders()


def known_types() -> frozenset[str]:
    """The type names with a native kind (and their array types)."""
    return frozenset(_DECODERS)


def _decoder_for(type_name: str) -> Decoder:
    decoder = _DECODERS.get(type_name)
    if decoder is not None:
        return decoder
    if len(type_name) > 1 and type_name[0] == "_" and type_name not in _NON_COMMA_ARRAYS:
        return _unknown_array_decoder(type_name)
    return _other_decoder(type_name)


def to_value(type_name: str, text: str | None) -> stream_pb2.Value:
    """The protocol value of a column's text (None is SQL NULL).

    ``type_name`` is the ``pg_type.typname`` of the column's base type. Raises
    ``CodecError`` when the text is not what PostgreSQL prints for that type.
    """
    if text is None:
        return Value(null=_NULL)
    try:
        return _decoder_for(type_name)(text)
    except (ValueError, OverflowError) as exc:
        raise CodecError(
            f"cannot decode {type_name} text {_shorten(text)!r}: {exc}; check that the column's "
            f"type is {type_name!r} and that the text comes from PostgreSQL under the capture "
            "session settings"
        ) from exc


def _encode_array(value: stream_pb2.Value) -> str:
    array = value.array
    items: list[str | None] = []
    for element in array.elements:
        kind = element.WhichOneof("kind")
        if kind == "null":
            items.append(None)
        elif kind is None or kind == "array":
            raise ValueError(f"array element of kind {kind!r} (arrays hold scalar values)")
        else:
            items.append(_ENCODERS[kind](element))
    return format_array(array.dimensions, array.lower_bounds, items)


def _encode_timestamp(value: stream_pb2.Value) -> str:
    timestamp = value.timestamp
    return temporal.format_timestamp(timestamp.micros, timestamp.with_zone, timestamp.infinity)


def _encode_time(value: stream_pb2.Value) -> str:
    time = value.time
    return temporal.format_time(time.micros, time.with_zone, time.utc_offset)


def _encode_interval(value: stream_pb2.Value) -> str:
    interval = value.interval
    return temporal.format_interval(interval.months, interval.days, interval.micros)


_ENCODERS: dict[str, Encoder] = {
    "bool": lambda value: scalar.format_bool(value.bool),
    "int64": lambda value: str(value.int64),
    "double": lambda value: format_float(value.double),
    "string": lambda value: value.string,
    "bytes": lambda value: scalar.format_bytea(value.bytes),
    "decimal": lambda value: scalar.check_decimal(value.decimal),
    "timestamp": _encode_timestamp,
    "date": lambda value: temporal.format_date(value.date.days, value.date.infinity),
    "time": _encode_time,
    "interval": _encode_interval,
    "uuid": lambda value: scalar.format_uuid(value.uuid),
    "json": lambda value: value.json,
    "array": _encode_array,
    "other": lambda value: value.other.text,
}


def to_text(value: stream_pb2.Value) -> str | None:
    """PostgreSQL text for a protocol value (None for SQL NULL).

    The text reads back, through the input function of the value's original
    type, as exactly the value that was captured. Raises ``CodecError`` for a
    value without a kind or with fields no PostgreSQL value can have.
    """
    kind = value.WhichOneof("kind")
    if kind == "null":
        return None
    try:
        if kind is None:
            raise ValueError("no kind is set")
        return _ENCODERS[kind](value)
    except (ValueError, OverflowError) as exc:
        shown = _shorten(text_format.MessageToString(value, as_one_line=True))
        raise CodecError(
            f"cannot encode value {shown!r} as PostgreSQL text: {exc}; the message was not "
            "produced by this codec or was damaged"
        ) from exc
