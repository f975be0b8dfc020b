"""Streamed rows straight into COPY text, through encoders chosen once per table shape.

The PostgreSQL target writes a micro-batch's net rows with ``COPY ... FROM
STDIN``. ``RowText(table)`` reads a protocol ``Row`` of ``table`` directly into
COPY fields (escaped text, ``\\N`` for NULL), with no text tuple in between.
Each column has an encoder picked by the kind its type travels as (the
registry, ``pgshovel.stream.types``) that reads that kind and hands any other
kind (NULL, ``other`` past the protocol's range, a damaged value) to the
general path, ``copytext.encode_value(codec.to_text())``:
every field is byte for byte what the codec prints, escaped, and a value the
codec refuses is the codec's ``CodecError``. A row that holds the table's
columns in order (what a relay writes) is read by position; any other row goes
through ``mutations.row_values``, which reads by name and raises ``SchemaError``
for a column missing or unknown. Keys are read first and values only for the
rows a target writes (the last change of each key).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from operator import attrgetter

from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Key
from pgshovel.replication.mutations import column_name, row_values
from pgshovel.source import Column, TableShape, copytext
from pgshovel.stream import codec
from pgshovel.stream._codec_scalar import check_decimal, format_uuid
from pgshovel.stream._codec_temporal import format_timestamp
from pgshovel.stream.types import TYPES, ValueKind

__all__ = ["Pending", "RowText", "encode_value", "row_text"]

#: One value as a COPY field.
Encode = Callable[[stream_pb2.Value], str]

#: A row whose fields are not rendered yet: the message itself when it is in
#: shape order, else its fields already joined (read by name).
Pending = stream_pb2.Row | str

NULL_FIELD = "\\N"


def encode_value(value: stream_pb2.Value) -> str:
    """The COPY field of any value: the codec's text, escaped (``\\N`` for NULL)."""
    return copytext.encode_value(codec.to_text(value))


def _escaped(text: str) -> str:
    # Printable text has no tab, newline or carriage return; only a backslash is left.
    if text.isprintable() and "\\" not in text:
        return text
    return copytext.encode_value(text)


# Encoders by the kind a type travels as. A oneof field reads as its default when
# another kind is set, so a value other than the default proves the kind; the
# default itself (0, "", no message) takes the general path, as does any error.


def _encode_integer(value: stream_pb2.Value) -> str:
    number = value.int64
    if number:
        return str(number)
    return encode_value(value)


def _text_encoder(kind: str) -> Callable[[stream_pb2.Value], str]:
    """The encoder of a kind that holds PostgreSQL's text as it is (string, json)."""
    read = attrgetter(kind)

    def encode(value: stream_pb2.Value) -> str:
        text = read(value)
        if text:
            return _escaped(text)
        return encode_value(value)

    return encode


_encode_string = _text_encoder("string")
_encode_json = _text_encoder("json")


def _encode_decimal(value: stream_pb2.Value) -> str:
    text = value.decimal
    if text:
        try:
            return check_decimal(text)  # digits, '.', '-', letters: nothing to escape
        except ValueError:
            pass
    return encode_value(value)


def _encode_timestamp(value: stream_pb2.Value) -> str:
    if value.HasField("timestamp"):
        timestamp = value.timestamp
        try:
            # Digits, '-', ':', '.', ' ', '+', letters: nothing to escape.
            return format_timestamp(timestamp.micros, timestamp.with_zone, timestamp.infinity)
        except ValueError:
            pass
    return encode_value(value)


def _encode_uuid(value: stream_pb2.Value) -> str:
    raw = value.uuid
    if len(raw) == 16:
        return format_uuid(raw)
    return encode_value(value)


def _encode_bytea(value: stream_pb2.Value) -> str:
    raw = value.bytes
    if raw:
        return "\\\\x" + raw.hex()  # the text '\x…' with its backslash escaped
    return encode_value(value)


#: The COPY encoder of each Value kind a registered type travels as; the kinds
#: without a shortcut take the general path.
COPY_BY_KIND: dict[ValueKind, Encode] = {
    "int64": _encode_integer,
    "double": encode_value,
    "decimal": _encode_decimal,
    "bool": encode_value,
    "bytes": _encode_bytea,
    "uuid": _encode_uuid,
    "json": _encode_json,
    "string": _encode_string,
    "date": encode_value,
    "time": encode_value,
    "timestamp": _encode_timestamp,
    "interval": encode_value,
}
_ENCODERS: dict[str, Encode] = {pg_type.name: COPY_BY_KIND[pg_type.kind] for pg_type in TYPES}


def encoder_for(type_name: str) -> Encode:
    """The COPY field encoder of a column of type ``type_name`` (a ``pg_type.typname``)."""
    return _ENCODERS.get(type_name, encode_value)


def _convert(_column: Column, value: stream_pb2.Value) -> str:
    return encode_value(value)


class RowText:
    """Reads rows of one table shape: keys (checking each row against the shape) and fields."""

    def __init__(self, table: TableShape) -> None:
        self.table = table
        self._names = list(table.column_names)
        self._count = len(self._names)
        self._encoders = [encoder_for(column.type_name) for column in table.columns]
        self._key_positions = table.key_positions
        self._required_old = table.key or table.column_names
        self._key_of = self._key_reader()

    def _key_reader(self) -> Callable[[Sequence[stream_pb2.Column]], Key]:
        """The key fields of a row's columns in shape order (one key column: no loop)."""
        parts = [(position, self._encoders[position]) for position in self._key_positions]
        if len(parts) == 1:
            ((position, encode),) = parts

            def single(columns: Sequence[stream_pb2.Column]) -> Key:
                return (encode(columns[position].value),)

            return single

        def several(columns: Sequence[stream_pb2.Column]) -> Key:
            return tuple([encode(columns[position].value) for position, encode in parts])

        return several

    def old_key(self, row: stream_pb2.Row) -> Key:
        """The key fields of a mutation's old row, after checking the row against the shape."""
        columns = row.columns
        if len(columns) == self._count and list(map(column_name, columns)) == self._names:
            return self._key_of(columns)
        fields = row_values(row, self.table, self._required_old, "old", _convert)
        return tuple([fields[position] for position in self._key_positions])

    def new_key(self, row: stream_pb2.Row) -> tuple[Key, Pending]:
        """The key fields of a mutation's new row, checked against the shape, and the row's
        pending fields (read by ``fields`` only if the row is written)."""
        columns = row.columns
        if len(columns) == self._count and list(map(column_name, columns)) == self._names:
            return self._key_of(columns), row
        fields = row_values(row, self.table, self._names, "new", _convert)
        return tuple([fields[position] for position in self._key_positions]), "\t".join(fields)

    def fields(self, pending: Pending) -> str:
        """The COPY fields of a row ``new_key`` read, tab-separated (no newline)."""
        if isinstance(pending, str):
            return pending
        return "\t".join(
            [
                encode(column.value)
                for column, encode in zip(pending.columns, self._encoders, strict=True)
            ]
        )

    def deleted_fields(self, key: Key) -> str:
        """The fields of a row known only by its key: the key's fields, NULL elsewhere."""
        fields = [NULL_FIELD] * self._count
        for position, field in zip(self._key_positions, key, strict=True):
            fields[position] = NULL_FIELD if field is None else field
        return "\t".join(fields)


@functools.lru_cache(maxsize=256)
def row_text(table: TableShape) -> RowText:
    """The ``RowText`` of ``table`` (one per shape, cached)."""
    return RowText(table)
