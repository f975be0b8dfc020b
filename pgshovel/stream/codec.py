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
Decoders and encoders are looked up in dicts built once at import from the
type registry (``pgshovel.stream.types``: which types have a native kind); hot
loops take a column's decoder once, either ``filler_for`` (writes each value
straight into a message being built) or ``encoder_for`` (the relay: each value
straight to its serialized bytes, the same bytes the filled message serializes
to).
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf import text_format

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_scalar as scalar
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_array import format_array
from pgshovel.stream._codec_encode import (
    NULL_VALUE,
    Encoder,
    build_encoders,
    filled_encoder,
    other_encoder,
)
from pgshovel.stream._codec_fill import (
    NON_COMMA_ARRAYS,
    Filler,
    build_fillers,
    other_filler,
    shorten,
    unknown_array_filler,
)
from pgshovel.stream._codec_float import format_float
from pgshovel.stream._codec_python import IntervalParts, to_python

__all__ = [
    "NULL_VALUE",
    "Encoder",
    "Filler",
    "IntervalParts",
    "decode_error",
    "encoder_for",
    "filler_for",
    "known_types",
    "to_python",
    "to_text",
    "to_value",
]

Value = stream_pb2.Value
TextEncoder = Callable[[stream_pb2.Value], str]

_NULL = Value.NULL
_FILLERS = build_fillers()
_VALUE_ENCODERS = build_encoders(_FILLERS)


def known_types() -> frozenset[str]:
    """The type names with a native kind (and their array types)."""
    return frozenset(_FILLERS)


def filler_for(type_name: str) -> Filler:
    """The in-place decoder of non-NULL text of type ``type_name`` (a ``pg_type.typname``).

    ``filler(value, text)`` writes the value into ``value``, an empty ``Value``
    (typically ``column.value`` of a column just added), and raises
    ``ValueError`` or ``OverflowError`` for text PostgreSQL does not print for
    the type: turn those into ``decode_error(type_name, text, error)``. Look a
    filler up once per column, not once per value.
    """
    filler = _FILLERS.get(type_name)
    if filler is not None:
        return filler
    if len(type_name) > 1 and type_name[0] == "_" and type_name not in NON_COMMA_ARRAYS:
        return unknown_array_filler(type_name)
    return other_filler(type_name)


def encoder_for(type_name: str) -> Encoder:
    """The encoder of non-NULL text of type ``type_name`` into a serialized ``Value``.

    ``encoder(text)`` returns exactly the bytes of the ``Value`` that
    ``filler_for(type_name)`` fills from ``text`` (NULL is ``NULL_VALUE``) and
    raises the same errors. Look an encoder up once per column, not per value.
    """
    encoder = _VALUE_ENCODERS.get(type_name)
    if encoder is not None:
        return encoder
    if len(type_name) > 1 and type_name[0] == "_" and type_name not in NON_COMMA_ARRAYS:
        return filled_encoder(unknown_array_filler(type_name))
    return other_encoder(type_name)


def decode_error(type_name: str, text: str, error: Exception) -> CodecError:
    """The error for ``text`` a filler of ``type_name`` rejected with ``error``."""
    return CodecError(
        f"cannot decode {type_name} text {shorten(text)!r}: {error}; check that the column's "
        f"type is {type_name!r} and that the text comes from PostgreSQL under the capture "
        "session settings"
    )


def to_value(type_name: str, text: str | None) -> stream_pb2.Value:
    """The protocol value of a column's text (None is SQL NULL).

    ``type_name`` is the ``pg_type.typname`` of the column's base type. Raises
    ``CodecError`` when the text is not what PostgreSQL prints for that type.
    """
    value = Value()
    if text is None:
        value.null = _NULL
        return value
    try:
        filler_for(type_name)(value, text)
    except (ValueError, OverflowError) as exc:
        raise decode_error(type_name, text, exc) from exc
    return value


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


_ENCODERS: dict[str, TextEncoder] = {
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
        shown = shorten(text_format.MessageToString(value, as_one_line=True))
        raise CodecError(
            f"cannot encode value {shown!r} as PostgreSQL text: {exc}; the message was not "
            "produced by this codec or was damaged"
        ) from exc
