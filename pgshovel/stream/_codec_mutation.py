"""A captured row change straight to the serialized bytes of a protocol ``Mutation``.

The relay's hot path joins pre-encoded pieces instead of building a
``Mutation`` field by field: every column of a table's plan carries its name
already encoded together with the framing of a ``Column`` around a value of
each short length, so a value costs one encoder call (``codec.encoder_for``)
and two appends. The bytes are exactly those the protobuf runtime serializes
for the ``Mutation`` the fillers would build (fields in number order, empty
proto3 fields left out, a row without columns left out), so a reader cannot
tell the two apart; the unit tests compare them byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from pgshovel.stream._codec_encode import NULL_VALUE, Encoder
from pgshovel.stream._codec_wire import clustered_varint, length_prefixed, signed, varint

__all__ = [
    "EncodedColumn",
    "MutationEncoder",
    "RowError",
    "encode_column",
    "encode_row",
    "keys_piece",
    "mutation_encoder",
    "provenance_piece",
    "provenance_reference_piece",
    "set_version_piece",
    "table_piece",
    "text_field",
]

# Field tags: Row.columns, Column.name, Column.value.
_COLUMN, _NAME, _VALUE = b"\x0a", b"\x0a", b"\x12"
# Mutation: id, schema, table, operation, key_columns, old, new, timestamp, transaction,
# set_version.
_ID, _SCHEMA, _TABLE, _OPERATION, _KEY = b"\x08", b"\x12", b"\x1a", b"\x20", b"\x2a"
_OLD, _NEW, _TIMESTAMP, _TRANSACTION, _SET_VERSION = b"\x32", b"\x3a", b"\x40", b"\x48", b"\x52"
# Mutation.provenance and its fields: current_user, session_user, application_name,
# client_addr, query_id, annotation.
_PROVENANCE = b"\x5a"
_CURRENT_USER, _SESSION_USER, _APPLICATION, _CLIENT_ADDR = b"\x0a", b"\x12", b"\x1a", b"\x22"
_QUERY_ID, _ANNOTATION = b"\x28", b"\x32"
# Mutation.provenance_of
_PROVENANCE_OF = b"\x60"
#: Values shorter than this find their column framing ready-made.
SHORT_VALUE = 128
_ABSENT = object()


class EncodedColumn(NamedTuple):
    """One column of a table's encoding plan."""

    name: str
    type_name: str
    encode: Encoder
    #: ``heads[n]``: the bytes of a ``Column`` of this name up to a value of ``n`` bytes
    heads: list[bytes]
    #: the encoded ``name`` field, for longer values
    name_piece: bytes


class RowError(Exception):
    """An encoder rejected a value: the column's type, its text and the encoder's error."""

    def __init__(self, type_name: str, text: object, error: Exception) -> None:
        super().__init__(type_name, text, error)
        self.type_name, self.text, self.error = type_name, text, error


def _head(name_piece: bytes, length: int) -> bytes:
    """A ``Column``'s tag, length, name and value tag and length, for a value of ``length``."""
    value_head = _VALUE + varint(length)
    return _COLUMN + varint(len(name_piece) + len(value_head) + length) + name_piece + value_head


def encode_column(name: str, type_name: str, encode: Encoder) -> EncodedColumn:
    """The plan entry of column ``name`` of type ``type_name`` encoded by ``encode``."""
    name_piece = length_prefixed(_NAME, name.encode()) if name else b""
    heads = [_head(name_piece, length) for length in range(SHORT_VALUE)]
    return EncodedColumn(name, type_name, encode, heads, name_piece)


def encode_row(
    values: Mapping[str, str | None],
    columns: Sequence[EncodedColumn],
    unknown: Encoder,
) -> bytes:
    """The serialized ``Row`` of ``values`` (column name to text or None).

    Columns come in ``columns`` order; names ``columns`` does not know follow
    in ``values`` order, encoded with ``unknown`` (their text kept as it is).
    Raises ``RowError`` for text a column's encoder rejects.
    """
    parts: list[bytes] = []
    append = parts.append
    get = values.get
    for name, type_name, encode, heads, name_piece in columns:
        text = get(name, _ABSENT)
        if text is _ABSENT:
            continue
        if text is None:
            append(heads[2])
            append(NULL_VALUE)
            continue
        try:
            value = encode(text)  # type: ignore[arg-type]
        except (ValueError, OverflowError, TypeError, AttributeError) as error:
            raise RowError(type_name, text, error) from error
        length = len(value)
        append(heads[length] if length < SHORT_VALUE else _head(name_piece, length))
        append(value)
    if len(parts) < 2 * len(values):
        known = {column[0] for column in columns}
        for name, text in values.items():
            if name not in known:
                if text is None:
                    value = NULL_VALUE
                else:
                    try:
                        value = unknown(text)
                    except (ValueError, TypeError, AttributeError) as error:
                        raise RowError("unknown", text, error) from error
                name_piece = length_prefixed(_NAME, name.encode()) if name else b""
                append(_head(name_piece, len(value)))
                append(value)
    return b"".join(parts)


def text_field(tag: bytes, text: str) -> bytes:
    """A string field, left out when empty (proto3)."""
    return length_prefixed(tag, text.encode()) if text else b""


MutationEncoder = Callable[
    [int, bytes, int, bytes, "bytes | None", "bytes | None", int, int, bytes], bytes
]


def mutation_encoder() -> MutationEncoder:
    """``encode_mutation`` for one stream of events (one relay's decoder).

    The event ids, times and transactions of a stream come clustered, so the
    varints of their high bits are kept from one event to the next.
    """
    id_varint, time_varint, transaction_varint = (
        clustered_varint(),
        clustered_varint(),
        clustered_varint(),
    )

    def encode_mutation(
        event_id: int,
        table: bytes,
        operation: int,
        keys: bytes,
        old: bytes | None,
        new: bytes | None,
        timestamp: int,
        transaction: int,
        set_version: bytes,
    ) -> bytes:
        """The serialized ``Mutation``; ``table``, ``keys`` and ``set_version`` pre-encoded.

        ``table`` is ``table_piece(schema, name)``, ``keys`` ``keys_piece(names)``,
        ``set_version`` ``set_version_piece(version)``; ``old`` and ``new`` are
        ``encode_row`` results or None (an empty row is left out, as the runtime does).
        """
        parts = [_ID + id_varint(event_id) if event_id else b"", table]
        if operation:
            parts.append(_OPERATION + varint(operation))
        parts.append(keys)
        if old:
            parts.append(_OLD + varint(len(old)))
            parts.append(old)
        if new:
            parts.append(_NEW + varint(len(new)))
            parts.append(new)
        if timestamp:
            parts.append(_TIMESTAMP + time_varint(timestamp))
        if transaction:
            parts.append(_TRANSACTION + transaction_varint(transaction))
        parts.append(set_version)
        return b"".join(parts)

    return encode_mutation


def provenance_piece(
    current_user: str,
    session_user: str,
    application_name: str,
    client_addr: str,
    query_id: int,
    annotation: str,
) -> bytes:
    """The ``provenance`` field of a Mutation (field 11: it follows every other field).

    Written even when every value is empty, as the runtime writes a set message field.
    """
    body = b"".join(
        (
            text_field(_CURRENT_USER, current_user),
            text_field(_SESSION_USER, session_user),
            text_field(_APPLICATION, application_name),
            text_field(_CLIENT_ADDR, client_addr),
            _QUERY_ID + signed(query_id) if query_id else b"",
            text_field(_ANNOTATION, annotation),
        )
    )
    return length_prefixed(_PROVENANCE, body)


def provenance_reference_piece(mutation_id: int) -> bytes:
    """The ``provenance_of`` field of a Mutation (field 12, instead of ``provenance``): the
    provenance of the earlier mutation ``mutation_id`` of the same transaction and batch."""
    return _PROVENANCE_OF + signed(mutation_id) if mutation_id else b""


def table_piece(schema: str, name: str) -> bytes:
    """The ``schema`` and ``table`` fields of a Mutation."""
    return text_field(_SCHEMA, schema) + text_field(_TABLE, name)


def keys_piece(names: Sequence[str]) -> bytes:
    """The ``key_columns`` field of a Mutation (every name written, empty ones too)."""
    return b"".join(length_prefixed(_KEY, name.encode()) for name in names)


def set_version_piece(version: str) -> bytes:
    """The ``set_version`` field of a Mutation."""
    return text_field(_SET_VERSION, version)
