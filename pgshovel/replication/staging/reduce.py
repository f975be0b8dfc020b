"""What one staging task keeps of its row changes: the net effect per key, ordered, as COPY text.

A task reads a run of ROWS messages of one partition (``pgshovel.stream.rows``)
and keeps, per table, each key's last row change with its place in the
micro-batch — ``(ordinal, event id)``: the batch's position among the
micro-batch's batches and the PgQ event id, which orders the changes of a
batch — and whether it deleted the key. Tasks of the same micro-batch may hold
the same key (runs of one partition cut at batch boundaries, or a change that
moved a row across partitions): the commit takes each key's change with the
greatest place, so the cut does not matter. A TRUNCATE forgets what came
before it in the task and is reported with its place, so the commit also drops
what other tasks staged before it. Unkeyed tables keep every row change as a
signed row (+1 written, -1 removed): the commit applies their sum per row as a
multiset difference. Rows stay COPY text lines throughout: nothing is typed.
With ``copy`` (the PostgreSQL stage's), keyed tables keep each key's last
change as the bytes of the stage's COPY line itself (the row, or a deleted
key's key fields, then the place and the deleted flag): the loop works on the
messages' bytes, splitting a row only as far as its last key field, so the
task never decodes or re-formats a row. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.source import TableShape

__all__ = ["Place", "StagedTable", "reduce_messages", "shape_matches"]

#: A change's place in the micro-batch: (batch ordinal, PgQ event id).
Place = tuple[int, int]

_INSERT = stream_pb2.Mutation.INSERT
_UPDATE = stream_pb2.Mutation.UPDATE
_DELETE = stream_pb2.Mutation.DELETE
_TRUNCATE = stream_pb2.Mutation.TRUNCATE
_NULL = "\\N"
_OPERATIONS = frozenset({_INSERT, _UPDATE, _DELETE, _TRUNCATE})


@dataclass
class StagedTable:
    """One table's net effect in one task."""

    shape: TableShape
    #: keyed tables: key fields -> (place, deleted, line); a deleted key's line holds only
    #: its key fields
    rows: dict[tuple[str, ...], tuple[Place, bool, str]] = field(default_factory=dict)
    #: unkeyed tables: (place, +1 or -1, line) in stream order
    signed: list[tuple[Place, int, str]] = field(default_factory=list)
    #: the place of the last TRUNCATE the task read, if any
    truncated: Place | None = None
    #: row changes read
    changes: int = 0
    #: kept only when asked (``reduce_messages(details=True)``, the table formats' stages):
    #: keyed tables' key -> (source txid, timestamp, provenance index + 1 into ``provenances``)
    #: of the change that decided the key's row (a deleted key's: the deleting change's txid
    #: and timestamp, no provenance)
    details: dict[tuple[str, ...], tuple[int, int, int]] = field(default_factory=dict)
    #: the provenances ``details`` index (serialized ``Provenance`` messages)
    provenances: list[bytes] = field(default_factory=list)
    #: the last TRUNCATE's source txid and timestamp, when ``details`` are kept
    truncated_by: tuple[int, int] | None = None
    #: batch ordinal -> PgQ batch id of the task's batches (set by the task with ``details``)
    batch_ids: dict[int, int] = field(default_factory=dict)
    #: keyed tables reduced with ``copy`` (``rows`` then stays empty): key fields (bytes) ->
    #: the stage's COPY line of the key's last change
    copy: dict[object, bytes] = field(default_factory=dict)

    def deleted_line(self, key: tuple[str, ...]) -> str:
        fields = [_NULL] * len(self.shape.columns)
        for position, text in zip(self.shape.key_positions, key, strict=True):
            fields[position] = text
        return "\t".join(fields)


def shape_matches(entry: stream_pb2.TableShape, shape: TableShape) -> bool:
    """Whether rows written in ``entry``'s shape are rows of ``shape`` (columns and their
    type names in the same order, the same key)."""
    return (
        len(entry.columns) == len(shape.columns)
        and all(
            column.name == known.name and column.type_name == known.type_name
            for column, known in zip(entry.columns, shape.columns, strict=True)
        )
        and tuple(entry.key) == shape.key
    )


def _table_of(
    entry: stream_pb2.RowTable,
    shapes: Mapping[tuple[str, str], TableShape],
    staged: dict[tuple[str, str], StagedTable],
) -> StagedTable:
    identity = (entry.shape.schema, entry.shape.name)
    table = staged.get(identity)
    if table is not None:
        return table
    shape = shapes.get(identity)
    if shape is None or not shape_matches(entry.shape, shape):
        raise StreamError(
            f"rows of {identity[0]!r}.{identity[1]!r} arrive in a shape "
            f"({[column.name for column in entry.shape.columns]!r}, key {list(entry.shape.key)!r}) "
            "that is not the copy's at this point of the stream "
            f"({None if shape is None else list(shape.column_names)!r}); the worker's state "
            "does not match its stream: reload the target"
        )
    table = staged[identity] = StagedTable(shape)
    return table


def reduce_messages(
    messages: Iterable[tuple[int, stream_pb2.MutationBatch]],
    shapes: Mapping[tuple[str, str], TableShape],
    details: bool = False,
    copy: bool = False,
) -> dict[tuple[str, str], StagedTable]:
    """Fold ``(batch ordinal, message)`` pairs, in stream order, into each table's net
    effect; ``shapes`` are the copy's tables as of the micro-batch's start; ``details``: keep
    each keyed row's source transaction, timestamp and provenance too; ``copy``: keep keyed
    tables' rows as the stage's COPY lines (``StagedTable.copy``; not with ``details``)."""
    staged: dict[tuple[str, str], StagedTable] = {}
    for ordinal, message in messages:
        tables = [_table_of(entry, shapes, staged) for entry in message.tables]
        if copy and not details:
            _reduce_copy(ordinal, message, tables)
            continue
        if details:
            _keep_details(message, tables)
        _reduce_rows(ordinal, message, tables)
    return staged


def _reduce_rows(
    ordinal: int, message: stream_pb2.MutationBatch, tables: list[StagedTable]
) -> None:
    """One message's changes into its tables' net effect (``StagedTable.rows``)."""
    for change in message.changes:
        table = tables[change.table]
        positions = table.shape.key_positions
        operation = change.operation
        if not positions or operation not in _OPERATIONS or operation == _TRUNCATE:
            _reduce_one(ordinal, change, table)
            continue
        table.changes += 1
        place = (ordinal, change.id)
        rows = table.rows
        if operation != _INSERT:
            old = change.old.decode().split("\t")
            old_key = tuple([old[position] for position in positions])
        if operation != _DELETE:
            line = change.new.decode()
            fields = line.split("\t")
            key = tuple([fields[position] for position in positions])
            if operation == _UPDATE and old_key != key:
                rows.pop(old_key, None)
                rows[old_key] = (place, True, "")
            rows.pop(key, None)
            rows[key] = (place, False, line)
        else:
            rows.pop(old_key, None)
            rows[old_key] = (place, True, "")


def _key_cut(positions: tuple[int, ...]) -> Callable[[bytes], object]:
    """The key of a COPY line (bytes) for a table whose key fields are at ``positions``: one
    field as itself, several as a tuple; the line is split only up to the last of them."""
    if len(positions) == 1:
        position = positions[0]
        return lambda line: line.split(b"\t", position + 1)[position]
    cut = max(positions) + 1

    def key(line: bytes) -> object:
        fields = line.split(b"\t", cut)  # once per line, not once per key field
        return tuple([fields[position] for position in positions])

    return key


def _deleted_copy(shape: TableShape) -> Callable[[object], bytes]:
    """A deleted key's row in the stage (bytes): its key fields, NULL elsewhere."""
    positions = shape.key_positions
    width = len(shape.columns)
    if len(positions) == 1:
        before = b"\\N\t" * positions[0]
        after = b"\t\\N" * (width - positions[0] - 1)
        return lambda key: before + key + after  # type: ignore[operator]

    def line(key: object) -> bytes:
        fields = [b"\\N"] * width
        for position, text in zip(positions, key, strict=True):  # type: ignore[call-overload]
            fields[position] = text
        return b"\t".join(fields)

    return line


def _reduce_copy(
    ordinal: int, message: stream_pb2.MutationBatch, tables: list[StagedTable]
) -> None:
    """``reduce_messages`` with ``copy``: one message's changes into its tables' net effect,
    keyed rows as the stage's COPY lines (the row's fields, the batch ordinal, the event id
    and ``t`` or ``f`` for deleted, tab-separated)."""
    place = b"\t%d\t" % ordinal
    if len(tables) == 1 and len(tables[0].shape.key_positions) == 1:
        _reduce_copy_single(place, ordinal, message, tables[0])
        return
    cuts = [_key_cut(table.shape.key_positions) if table.shape.key else None for table in tables]
    deleted = [_deleted_copy(table.shape) if table.shape.key else None for table in tables]
    for change in message.changes:
        index = change.table
        if index >= len(tables):
            raise _no_table(change, len(tables))
        table = tables[index]
        key_of = cuts[index]
        operation = change.operation
        if key_of is None or operation not in _OPERATIONS or operation == _TRUNCATE:
            _reduce_one(ordinal, change, table)
            continue
        table.changes += 1
        rows = table.copy
        if operation == _INSERT:
            new = change.new
            rows[key_of(new)] = b"%s%s%d\tf\n" % (new, place, change.id)
        elif operation == _DELETE:
            key = key_of(change.old)
            rows[key] = b"%s%s%d\tt\n" % (deleted[index](key), place, change.id)  # type: ignore[misc]
        else:
            new = change.new
            key = key_of(new)
            old_key = key_of(change.old)
            if old_key != key:
                rows[old_key] = b"%s%s%d\tt\n" % (
                    deleted[index](old_key),  # type: ignore[misc]
                    place,
                    change.id,
                )
            rows[key] = b"%s%s%d\tf\n" % (new, place, change.id)


def _reduce_copy_single(
    place: bytes, ordinal: int, message: stream_pb2.MutationBatch, table: StagedTable
) -> None:
    """``_reduce_copy`` of a message of one table with a key of one field (the usual case),
    the key cut inline."""
    position = table.shape.key_positions[0]
    cut = position + 1
    deleted = _deleted_copy(table.shape)
    rows = table.copy
    changes = 0
    for change in message.changes:
        if change.table:
            raise _no_table(change, 1)
        operation = change.operation
        if operation == _INSERT:
            new = change.new
            rows[new.split(b"\t", cut)[position]] = b"%s%s%d\tf\n" % (new, place, change.id)
        elif operation == _UPDATE:
            new = change.new
            key = new.split(b"\t", cut)[position]
            old_key = change.old.split(b"\t", cut)[position]
            if old_key != key:
                rows[old_key] = b"%s%s%d\tt\n" % (deleted(old_key), place, change.id)
            rows[key] = b"%s%s%d\tf\n" % (new, place, change.id)
        elif operation == _DELETE:
            key = change.old.split(b"\t", cut)[position]
            rows[key] = b"%s%s%d\tt\n" % (deleted(key), place, change.id)
        else:
            _reduce_one(ordinal, change, table)
            continue
        changes += 1
    table.changes += changes


def _no_table(change: stream_pb2.RowChange, tables: int) -> StreamError:
    return StreamError(
        f"row change {change.id!r} names table {change.table!r} of a message holding "
        f"{tables!r} table(s); the message is damaged"
    )


def _reduce_one(ordinal: int, change: stream_pb2.RowChange, table: StagedTable) -> None:
    """One change that is not a keyed row's: an unkeyed table's, a TRUNCATE, or an unknown
    operation (an error)."""
    table.changes += 1
    place = (ordinal, change.id)
    operation = change.operation
    if operation not in _OPERATIONS:
        raise StreamError(
            f"row change {change.id!r} of {table.shape.qualified!r} has no valid "
            f"operation ({operation!r}); the stream was not written by a pgshovel relay"
        )
    if operation == _TRUNCATE:
        table.truncated = place
        table.rows.clear()
        table.copy.clear()
        table.signed.clear()
        return
    if operation != _INSERT:
        table.signed.append((place, -1, change.old.decode()))
    if operation != _DELETE:
        table.signed.append((place, 1, change.new.decode()))


def _keep_details(message: stream_pb2.MutationBatch, tables: list[StagedTable]) -> None:
    """Record, per keyed row a change of ``message`` leaves, its transaction, timestamp and
    provenance (a pass of its own: the reduction above stays as the PostgreSQL stage has it);
    a deleted key the deleting change's transaction and timestamp. A later change of the same
    key replaces the earlier's."""
    provenances: dict[int, dict[int, int]] = {}
    for change in message.changes:
        table = tables[change.table]
        positions = table.shape.key_positions
        if not positions:
            continue
        operation = change.operation
        if operation == _TRUNCATE:
            table.details.clear()
            table.truncated_by = (change.transaction, change.timestamp)
            continue
        if operation not in _OPERATIONS:
            continue
        if operation != _INSERT:
            # A deleted key (or a key an UPDATE moved away from) keeps the deleting change's
            # transaction and time: a history closes the key's version with them.
            old = change.old.decode().split("\t")
            table.details[tuple([old[position] for position in positions])] = (
                change.transaction,
                change.timestamp,
                0,
            )
        if operation == _DELETE:
            continue
        fields = change.new.decode().split("\t")
        key = tuple([fields[position] for position in positions])
        index = 0
        if change.provenance:
            if change.provenance > len(message.provenances):
                raise StreamError(
                    f"row change {change.id!r} of {table.shape.qualified!r} names provenance "
                    f"{change.provenance!r} of a message holding {len(message.provenances)!r}; "
                    "the message is damaged"
                )
            mine = provenances.setdefault(id(table), {})
            index = mine.get(change.provenance, 0)
            if not index:
                raw = message.provenances[change.provenance - 1].SerializeToString()
                table.provenances.append(raw)
                index = mine[change.provenance] = len(table.provenances)
        table.details[key] = (change.transaction, change.timestamp, index)
