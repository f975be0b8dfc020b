"""The ROWS encoding: many row changes to a ``MutationBatch`` message, rows as COPY text lines.

A row travels as one line of PostgreSQL's COPY text format (fields separated by
a tab, ``\\`` ``\\t`` ``\\n`` ``\\r`` escaped with a backslash, ``\\N`` for NULL,
no newline) holding its captured columns in the order of the shape the message
carries in ``tables``. The values are PostgreSQL's own text output, so nothing is
lost, and a PostgreSQL target copies the line as it is.

The writing side (``RowsBuilder``) joins pre-encoded bytes exactly as the
protobuf runtime would serialize the message (fields in number order, zero
scalars left out): the relay never builds a message object per row. The reading
side turns a message back into protocol ``Mutation``s (``to_mutations``, typed
with the codec's fillers, for readers that want the per-mutation form) or into
text fields (``split_line``). ``partition_of`` routes a row to a partition of the
set topic by its table and key.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat

from pgshovel.errors import CodecError
from pgshovel.protocol import stream_pb2
from pgshovel.stream._codec_wire import (
    clustered_varint,
    length_prefixed,
    signed,
    varint,
    varints,
)
from pgshovel.stream.codec import decode_error, filler_for

__all__ = [
    "NULL_FIELD",
    "EncodedChange",
    "EncodedRun",
    "RowsBuilder",
    "copy_field",
    "copy_line",
    "key_fields",
    "mutations_in",
    "partition_of",
    "split_line",
    "to_mutations",
]

NULL_FIELD = "\\N"
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}

# MutationBatch fields: tables, changes, provenances, count.
_TABLES, _CHANGES, _PROVENANCES, _COUNT = b"\x0a", b"\x12", b"\x1a", b"\x20"
# RowChange fields.
_ID, _TABLE, _OPERATION, _TRANSACTION = b"\x08", b"\x10", b"\x18", b"\x20"
_TIMESTAMP, _OLD, _NEW, _PROVENANCE = b"\x28", b"\x32", b"\x3a", b"\x40"

_INSERT = stream_pb2.Mutation.INSERT
_UPDATE = stream_pb2.Mutation.UPDATE
_DELETE = stream_pb2.Mutation.DELETE
_TRUNCATE = stream_pb2.Mutation.TRUNCATE
_HAS_OLD = frozenset({_UPDATE, _DELETE})
_HAS_NEW = frozenset({_INSERT, _UPDATE})
_FIRST_PARTITION = (0,)
#: what the framer adds to a change's rows to bound its size before adding it
CHANGE_ALLOWANCE = 64


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


@dataclass(frozen=True, slots=True)
class EncodedChange:
    """One row change ready for ``RowsBuilder.add``, and the partitions it goes to."""

    table: bytes
    event_id: int
    operation: int
    transaction: int
    timestamp: int
    old: bytes | None
    new: bytes | None
    provenance: bytes | None
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """A run of row changes ready for ``RowsBuilder.add_run``: consecutive events of one
    table shape, operation, transaction and timestamp, all to partition 0. ``olds`` and
    ``news`` hold every change's COPY line (None: no change of the run has that row);
    ``provenances`` every change's serialized ``Provenance`` (None: none has one)."""

    table: bytes
    operation: int
    transaction: int
    timestamp: int
    ids: list[int]
    olds: list[bytes] | None
    news: list[bytes] | None
    provenances: list[bytes] | None

    def changes(self) -> Iterator[EncodedChange]:
        """The run's changes one by one (for a run ``add_run`` does not take whole)."""
        nothing = repeat(None)
        for event_id, old, new, provenance in zip(
            self.ids,
            nothing if self.olds is None else self.olds,
            nothing if self.news is None else self.news,
            nothing if self.provenances is None else self.provenances,
            strict=False,  # ``repeat`` stands for a list the run does not hold
        ):
            yield EncodedChange(
                self.table,
                event_id,
                self.operation,
                self.transaction,
                self.timestamp,
                old,
                new,
                provenance,
                _FIRST_PARTITION,
            )


def _rows_field(tag: bytes, lines: list[bytes]) -> Iterator[bytes]:
    """Each of a run's COPY lines as the field ``tag`` (nothing for an empty line)."""
    return (
        map(b"".join, zip(repeat(tag), varints(list(map(len, lines))), lines))
        if all(lines)
        else (tag + varint(len(line)) + line if line else b"" for line in lines)
    )


def row_table(shape: stream_pb2.TableShape, set_version: str) -> bytes:
    """The serialized ``RowTable`` of a shape and a set version."""
    return stream_pb2.RowTable(shape=shape, set_version=set_version).SerializeToString()


@dataclass
class RowsBuilder:
    """Collects one partition's row changes into ``MutationBatch`` payloads.

    ``add`` appends a change of a table (its ``RowTable`` bytes, indexed on first use in
    the message) and takes the provenance's serialized ``Provenance`` (or None);
    ``take`` returns the serialized ``MutationBatch`` of everything added since the last
    ``take`` (None when nothing was) and starts a new one. ``size`` is the payload's
    size so far, for the caller to cut messages at a byte limit.
    """

    size: int = 0
    count: int = 0
    _tables: dict[bytes, int] = field(default_factory=dict)
    _provenances: dict[bytes, int] = field(default_factory=dict)
    _changes: list[bytes] = field(default_factory=list)
    _heads: dict[tuple[int, int], bytes] = field(default_factory=dict)
    _transaction: int = -1
    _transaction_piece: bytes = b""
    _clock: Callable[[int], bytes] = field(default_factory=clustered_varint)

    def add_change(self, change: EncodedChange) -> None:
        """``add`` of an encoded change."""
        self.add(
            change.table,
            change.event_id,
            change.operation,
            change.transaction,
            change.timestamp,
            change.old,
            change.new,
            change.provenance,
        )

    def add(
        self,
        table: bytes,
        event_id: int,
        operation: int,
        transaction: int,
        timestamp: int,
        old: bytes | None,
        new: bytes | None,
        provenance: bytes | None = None,
    ) -> None:
        index = self._tables.get(table)
        if index is None:
            index = self._tables[table] = len(self._tables)
            self.size += len(table) + 4
        # The fields in number order: id, table (0 left out), operation, transaction,
        # timestamp, old, new, provenance; what repeats from change to change is cached.
        head = self._heads.get((index, operation))
        if head is None:
            head = self._heads[(index, operation)] = (
                (_TABLE + varint(index) if index else b"") + _OPERATION + varint(operation)
            )
        if transaction != self._transaction:
            self._transaction = transaction
            self._transaction_piece = _TRANSACTION + varint(transaction) if transaction else b""
        change = b"".join(
            (
                _ID,
                varint(event_id) if event_id >= 0 else signed(event_id),
                head,
                self._transaction_piece,
                _TIMESTAMP + self._clock(timestamp) if timestamp else b"",
                _OLD + varint(len(old)) + old if old else b"",
                _NEW + varint(len(new)) + new if new else b"",
                b"" if provenance is None else _PROVENANCE + varint(self._provenance(provenance)),
            )
        )
        self._changes.append(_CHANGES + varint(len(change)) + change)
        self.size += len(change) + 4
        self.count += 1

    def _provenance(self, provenance: bytes) -> int:
        number = self._provenances.get(provenance)
        if number is None:
            number = self._provenances[provenance] = len(self._provenances) + 1
            self.size += len(provenance) + 4
        return number

    def add_run(self, run: EncodedRun, limit: int) -> bool:
        """Add every change of ``run`` when they all fit in the message below ``limit``
        with room to spare (then ``add`` of each, with the framer's limit checks, would cut
        nothing); else add nothing and return False: the caller adds them one by one.
        The changes' bytes are those ``add`` writes, built for the whole run at once."""
        ids = run.ids
        count = len(ids)
        index = self._tables.get(run.table)
        added = 0
        if index is None:
            index = len(self._tables)
            added = len(run.table) + 4
        operation = run.operation
        head = self._heads.get((index, operation))
        if head is None:
            head = (_TABLE + varint(index) if index else b"") + _OPERATION + varint(operation)
        transaction = run.transaction
        timestamp = run.timestamp
        common = b"".join(
            (
                head,
                _TRANSACTION + varint(transaction) if transaction else b"",
                _TIMESTAMP + self._clock(timestamp) if timestamp else b"",
            )
        )
        numbers: dict[bytes, int] = {}
        pieces: Iterable[bytes]
        if run.provenances is None:
            pieces = repeat(b"")
        else:
            known = self._provenances
            numbered = []
            for provenance in run.provenances:
                number = known.get(provenance) or numbers.get(provenance)
                if number is None:
                    number = numbers[provenance] = len(known) + len(numbers) + 1
                    added += len(provenance) + 4
                numbered.append(_PROVENANCE + varint(number))
            pieces = numbered
        rows = 0
        old_pieces: Iterable[bytes] = repeat(b"")
        new_pieces: Iterable[bytes] = repeat(b"")
        olds, news = run.olds, run.news
        if olds is not None:
            old_pieces = _rows_field(_OLD, olds)
            rows = max(map(len, olds))
        if news is not None:
            new_pieces = _rows_field(_NEW, news)
            rows += max(map(len, news))
        changes = list(
            map(
                b"".join,
                zip(repeat(_ID), varints(ids), repeat(common), old_pieces, new_pieces, pieces),
            )
        )
        lengths = list(map(len, changes))
        size = self.size + added + sum(lengths) + 4 * count
        # ``rows`` bounds every change's rows: no limit check of ``add`` one by one would cut.
        if size + rows + CHANGE_ALLOWANCE > limit:
            return False
        if run.table not in self._tables:
            self._tables[run.table] = index
        self._heads[(index, operation)] = head
        for provenance, number in numbers.items():
            self._provenances[provenance] = number
        self._changes.extend(map(b"".join, zip(repeat(_CHANGES), varints(lengths), changes)))
        self.size = size
        self.count += count
        if transaction != self._transaction:
            self._transaction = transaction
            self._transaction_piece = _TRANSACTION + varint(transaction) if transaction else b""
        return True

    def take(self) -> bytes | None:
        if not self._changes:
            return None
        payload = b"".join(
            [
                *(length_prefixed(_TABLES, table) for table in self._tables),
                *self._changes,
                *(length_prefixed(_PROVENANCES, item) for item in self._provenances),
                _COUNT,
                varint(self.count),
            ]
        )
        self._tables, self._provenances, self._changes, self._heads = {}, {}, [], {}
        self.size = self.count = 0
        return payload


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
