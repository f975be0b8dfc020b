"""Encoders: PostgreSQL text straight to the serialized bytes of a protocol ``Value``.

The relay's hot path: an encoder parses and checks the text exactly as the
matching filler (``_codec_fill``) does and returns the bytes the protobuf
runtime would serialize for the filled ``Value``, byte for byte, without
building the message (see ``_codec_wire``). Types whose values are rare or
nested (arrays) are filled through their filler and serialized, which gives the
same bytes by construction; the registry's types (``pgshovel.stream.types``)
get theirs by kind (``ENCODE_BY_KIND``). Errors are those of the fillers: ``ValueError`` or
``OverflowError`` with a lowercase reason, the public codec adds the type name.
"""

from __future__ import annotations

from collections.abc import Callable

from pgshovel.protocol import stream_pb2
from pgshovel.stream import _codec_scalar as scalar
from pgshovel.stream import _codec_temporal as temporal
from pgshovel.stream._codec_fill import MAX_TIMESTAMP_MICROS, Filler
from pgshovel.stream._codec_float import parse_float
from pgshovel.stream._codec_wire import (
    clustered_varint,
    length_prefixed,
    pack_double,
    varint,
    zigzag,
)
from pgshovel.stream.types import TYPES, PgType, ValueKind

Encoder = Callable[[str], bytes]

# The tag byte of each ``Value`` kind: field number << 3 | wire type.
NULL_VALUE = b"\x08\x00"  # null = NULL (0): a oneof member is written even at zero
_TRUE, _FALSE = b"\x10\x01", b"\x10\x00"
_INT64 = b"\x18"
_DOUBLE = b"\x21"
_STRING = b"\x2a"
_BYTES = b"\x32"
_DECIMAL = b"\x3a"
_TIMESTAMP = b"\x42"
_DATE = b"\x4a"
_TIME = b"\x52"
_INTERVAL = b"\x5a"
_UUID = b"\x62"
_JSON = b"\x6a"
_OTHER = b"\x7a"
# Fields of the nested messages (Timestamp, Date, Time, Interval, Other).
_FIELD1_VARINT, _FIELD2_VARINT, _FIELD3_VARINT = b"\x08", b"\x10", b"\x18"
_FIELD1_TEXT, _FIELD2_TEXT = b"\x0a", b"\x12"
_WITH_ZONE = b"\x10\x01"
#: Timestamp texts each timestamp encoder remembers (a dict, emptied when full).
CACHED_TIMESTAMPS = 4096


def _integer_encoder(bounds: tuple[int, int]) -> Encoder:
    low, high = bounds

    def encode(text: str) -> bytes:
        number = int(text)
        if str(number) != text:
            raise ValueError("expected a canonical decimal integer")
        if not low <= number <= high:
            raise ValueError(f"integer out of range {low}..{high}")
        return _INT64 + varint((number << 1) ^ (number >> 63))  # zigzag, inlined

    return encode


def _encode_float(text: str) -> bytes:
    return _DOUBLE + pack_double(parse_float(text))


def _encode_decimal(text: str) -> bytes:
    return length_prefixed(_DECIMAL, scalar.check_decimal(text).encode())


def _encode_bool(text: str) -> bytes:
    return _TRUE if scalar.parse_bool(text) else _FALSE


def _encode_bytea(text: str) -> bytes:
    return length_prefixed(_BYTES, scalar.parse_bytea(text))


def _encode_uuid(text: str) -> bytes:
    return length_prefixed(_UUID, scalar.parse_uuid(text))


def _encode_json(text: str) -> bytes:
    return length_prefixed(_JSON, text.encode())


def _encode_string(text: str) -> bytes:
    data = text.encode()
    return _STRING + varint(len(data)) + data


def _other(type_piece: bytes, text: str) -> bytes:
    body = type_piece + length_prefixed(_FIELD2_TEXT, text.encode()) if text else type_piece
    return length_prefixed(_OTHER, body)


def other_encoder(type_name: str) -> Encoder:
    """The encoder keeping text verbatim as ``Value.other`` of type ``type_name``."""
    type_piece = length_prefixed(_FIELD1_TEXT, type_name.encode()) if type_name else b""

    def encode(text: str) -> bytes:
        return _other(type_piece, text)

    return encode


def _timestamp_encoder(type_name: str, with_zone: bool) -> Encoder:
    type_piece = length_prefixed(_FIELD1_TEXT, type_name.encode())
    zone = _WITH_ZONE if with_zone else b""
    parse = temporal.parse_timestamp
    micros_varint = clustered_varint()
    # The rows of one transaction often share a timestamp (now() is the
    # transaction's start): remember the last few thousand texts.
    cache: dict[str, bytes] = {}
    cached = cache.get

    def encode(text: str) -> bytes:
        encoded = cached(text)
        if encoded is not None:
            return encoded
        micros, infinity = parse(text, with_zone)
        if micros > MAX_TIMESTAMP_MICROS:
            return _other(type_piece, text)  # past the protocol's sint64, as the filler does
        if infinity:
            body = zone + _FIELD3_VARINT + varint(infinity)
        elif micros:
            body = _FIELD1_VARINT + micros_varint((micros << 1) ^ (micros >> 63)) + zone
        else:
            body = zone
        encoded = _TIMESTAMP + varint(len(body)) + body
        if len(cache) >= CACHED_TIMESTAMPS:
            cache.clear()
        cache[text] = encoded
        return encoded

    return encode


def _time_encoder(with_zone: bool) -> Encoder:
    zone = _WITH_ZONE if with_zone else b""

    def encode(text: str) -> bytes:
        micros, offset = temporal.parse_time(text, with_zone)
        body = _FIELD1_VARINT + varint(micros) + zone if micros else zone
        if offset:
            body += _FIELD3_VARINT + zigzag(offset)
        return length_prefixed(_TIME, body)

    return encode


def _encode_date(text: str) -> bytes:
    days, infinity = temporal.parse_date(text)
    body = _FIELD1_VARINT + zigzag(days) if days else b""
    if infinity:
        body += _FIELD2_VARINT + varint(infinity)
    return length_prefixed(_DATE, body)


def _encode_interval(text: str) -> bytes:
    months, days, micros = temporal.parse_interval(text)
    body = b""
    if months:
        body += _FIELD1_VARINT + zigzag(months)
    if days:
        body += _FIELD2_VARINT + zigzag(days)
    if micros:
        body += _FIELD3_VARINT + zigzag(micros)
    return length_prefixed(_INTERVAL, body)


def filled_encoder(fill: Filler) -> Encoder:
    """The encoder that fills a ``Value`` with ``fill`` and serializes it (nested kinds)."""
    new_value = stream_pb2.Value

    def encode(text: str) -> bytes:
        value = new_value()
        fill(value, text)
        return value.SerializeToString()

    return encode


def _integer(pg_type: PgType) -> Encoder:
    return _integer_encoder(pg_type.integer_range())


#: How a type of each Value kind is encoded, given its registry entry.
ENCODE_BY_KIND: dict[ValueKind, Callable[[PgType], Encoder]] = {
    "int64": _integer,
    "double": lambda _type: _encode_float,
    "decimal": lambda _type: _encode_decimal,
    "bool": lambda _type: _encode_bool,
    "bytes": lambda _type: _encode_bytea,
    "uuid": lambda _type: _encode_uuid,
    "json": lambda _type: _encode_json,
    "string": lambda _type: _encode_string,
    "date": lambda _type: _encode_date,
    "time": lambda pg_type: _time_encoder(pg_type.with_zone),
    "timestamp": lambda pg_type: _timestamp_encoder(pg_type.name, pg_type.with_zone),
    "interval": lambda _type: _encode_interval,
}


def build_encoders(fillers: dict[str, Filler]) -> dict[str, Encoder]:
    """An encoder for every type of ``fillers`` (the codec's table of fillers): the
    registry's types by their kind, the others (arrays) through their filler."""
    encoders = {pg_type.name: ENCODE_BY_KIND[pg_type.kind](pg_type) for pg_type in TYPES}
    for name, fill in fillers.items():
        if name not in encoders:
            encoders[name] = filled_encoder(fill)
    return encoders
