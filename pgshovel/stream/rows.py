"""The ROWS encoding: many row changes to a ``MutationBatch`` message, rows as COPY text lines.

A row travels as one line of PostgreSQL's COPY text format (fields separated by
a tab, ``\\`` ``\\t`` ``\\n`` ``\\r`` escaped with a backslash, ``\\N`` for NULL,
no newline) holding its captured columns in the order of the shape the message
carries in ``tables``. The values are PostgreSQL's own text output, so nothing is
lost, and a PostgreSQL target copies the line as it is.

The writing side (``RowsBuilder``, in ``pgshovel.stream.rows_builder``) joins
pre-encoded bytes exactly as the protobuf runtime would serialize the message
(fields in number order, zero scalars left out): the relay never builds a
message object per row. The reading
side turns a message back into protocol ``Mutation``s (``to_mutations``, typed
with the codec's fillers, for readers that want the per-mutation form) or into
text fields (``split_line``). ``partition_of`` routes a row to a partition of the
set topic by its table and key (``line_partitions``: the same for many COPY lines).
"""

from __future__ import annotations

import operator
import zlib
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream.codec import decode_error, filler_for
from pgshovel.stream.rows_builder import EncodedChange, EncodedRun, RowsBuilder

__all__ = [
    "NULL_FIELD",
    "EncodedChange",
    "EncodedRun",
    "RowsBuilder",
    "copy_field",
    "copy_line",
    "key_fields",
    "line_partitions",
    "mutations_in",
    "partition_of",
    "split_line",
    "to_mutations",
]

NULL_FIELD = "\\N"
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}

_INSERT = stream_pb2.Mutation.INSERT
_UPDATE = stream_pb2.Mutation.UPDATE
_DELETE = stream_pb2.Mutation.DELETE
_TRUNCATE = stream_pb2.Mutation.TRUNCATE
_HAS_OLD = frozenset({_UPDATE, _DELETE})
_HAS_NEW = frozenset({_INSERT, _UPDATE})


def copy_field(text: str | None) -> str:
    """One value as a COPY text field (``\\N`` for NULL)."""
    if text is None:
        return NULL_FIELD
    if text.isprintable() and "\\" not in text:
        return text
    return text.translate(_ESCAPES)


def copy_line(values: Iterable[str | None]) -> bytes:
    """A row's values as one COPY text line (UTF-8, no newline)."""
    return "\t".join([copy_field(value) for value in values]).encode()


def _unescape(field_text: str) -> str:
    out: list[str] = []
    index, length = 0, len(field_text)
    while index < length:
        char = field_text[index]
        if char != "\\" or index + 1 == length:
            out.append(char)
            index += 1
            continue
        escaped = field_text[index + 1]
        simple = _UNESCAPES.get(escaped)
        if simple is not None:
            out.append(simple)
            index += 2
        elif escaped == "x" and index + 2 < length and field_text[index + 2] in _HEX:
            end = index + 3 if index + 3 < length and field_text[index + 3] in _HEX else index + 2
            out.append(chr(int(field_text[index + 2 : end + 1], 16)))
            index = end + 1
        elif escaped in _OCTAL:
            end = index + 1
            while end < min(index + 4, length) and field_text[end] in _OCTAL:
                end += 1
            out.append(chr(int(field_text[index + 1 : end], 8)))
            index = end
        else:
            out.append(escaped)
            index += 2
    return "".join(out)


_HEX = frozenset("0123456789abcdefABCDEF")
_OCTAL = frozenset("01234567")


def split_line(line: bytes) -> list[str | None]:
    """The values of a COPY text line (None for NULL): the inverse of ``copy_line``."""
    text = line.decode()
    if "\\" not in text:
        return list(text.split("\t"))
    return [
        None if part == NULL_FIELD else (_unescape(part) if "\\" in part else part)
        for part in text.split("\t")
    ]


def key_fields(line: bytes, positions: Sequence[int]) -> tuple[str, ...]:
    """The COPY fields (still escaped) of a line at the key's ``positions``."""
    fields = line.split(b"\t")
    return tuple(fields[position].decode() for position in positions)


def partition_of(schema: str, table: str, key: Sequence[str] | None, partitions: int) -> int:
    """The set topic partition of a row change: by table and key fields (COPY text), or by
    table alone for an unkeyed table (``key`` None). Stable across processes and releases."""
    if partitions <= 1:
        return 0
    text = f"{schema}\x00{table}"
    if key is not None:
        text = text + "\x00" + "\x1f".join(key)
    return zlib.crc32(text.encode()) % partitions


def line_partitions(
    schema: str, table: str, lines: list[bytes], positions: Sequence[int], partitions: int
) -> list[int]:
    """``partition_of`` of each COPY line's key, the fields at ``positions`` (still escaped,
    as ``partition_of`` takes them), for a keyed table: the same numbers, every line's
    computed at C speed (the crc32 of the key run on from that of "schema NUL table NUL")."""
    if partitions <= 1:
        return [0] * len(lines)
    prefix = zlib.crc32(f"{schema}\x00{table}\x00".encode())
    pick = operator.itemgetter(*positions)
    fields = map(bytes.split, lines, repeat(b"\t"))
    keys = map(pick, fields) if len(positions) == 1 else map(b"\x1f".join, map(pick, fields))
    return list(map(operator.mod, map(zlib.crc32, keys, repeat(prefix)), repeat(partitions)))


def row_table(shape: stream_pb2.TableShape, set_version: str) -> bytes:
    """The serialized ``RowTable`` of a shape and a set version."""
    return stream_pb2.RowTable(shape=shape, set_version=set_version).SerializeToString()


# -- reading ------------------------------------------------------------------------------


def _fill_row(
    row: stream_pb2.Row,
    line: bytes,
    columns: Sequence[stream_pb2.ColumnShape],
    change: stream_pb2.RowChange,
    table: stream_pb2.TableShape,
) -> None:
    values = split_line(line)
    if len(values) != len(columns):
        raise CodecError(
            f"row change {change.id!r} of {table.schema!r}.{table.name!r} holds "
            f"{len(values)!r} field(s), its shape {len(columns)!r}; the message is damaged"
        )
    add = row.columns.add
    for column, text in zip(columns, values, strict=True):
        value = add(name=column.name).value
        if text is None:
            value.null = stream_pb2.Value.NULL
            continue
        try:
            filler_for(column.type_name)(value, text)
        except (ValueError, OverflowError) as error:
            raise decode_error(column.type_name, text, error) from error


def to_mutations(rows: stream_pb2.MutationBatch) -> Iterator[stream_pb2.Mutation]:
    """The row changes of a message as the ``Mutation``s the MUTATIONS encoding carries."""
    tables = rows.tables
    provenances = rows.provenances
    for change in rows.changes:
        if change.table >= len(tables):
            raise CodecError(
                f"row change {change.id!r} names table {change.table!r} of a message holding "
                f"{len(tables)!r}; the message is damaged"
            )
        entry = tables[change.table]
        table = entry.shape
        mutation = stream_pb2.Mutation(
            id=change.id,
            schema=table.schema,
            table=table.name,
            operation=change.operation,
            key_columns=table.key,
            timestamp=change.timestamp,
            transaction=change.transaction,
            set_version=entry.set_version,
        )
        if change.operation in _HAS_OLD:
            _fill_row(mutation.old, change.old, table.columns, change, table)
        if change.operation in _HAS_NEW:
            _fill_row(mutation.new, change.new, table.columns, change, table)
        if change.provenance:
            if change.provenance > len(provenances):
                raise CodecError(
                    f"row change {change.id!r} names provenance {change.provenance!r} of a "
                    f"message holding {len(provenances)!r}; the message is damaged"
                )
            mutation.provenance.CopyFrom(provenances[change.provenance - 1])
        yield mutation


def mutations_in(message: stream_pb2.Message) -> list[stream_pb2.Mutation]:
    """The mutations one set-topic message carries, in either encoding: its ``Mutation``, or
    the row changes of its ``MutationBatch`` as ``Mutation``s (none for other operations)."""
    operation = message.operation
    kind = operation.WhichOneof("operation")
    if kind == "mutation":
        return [operation.mutation]
    if kind == "rows":
        return list(to_mutations(operation.rows))
    return []
