"""Turn streamed mutations into text-form changes in a table's column order.

Values travel as protocol ``Value``s; ``codec.to_text`` gives back the
PostgreSQL text form that the target's input functions parse to the exact
original value, so the targets only ever handle text (and NULL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgshovel.errors import ReplicationError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Change, Operation, Row
from pgshovel.replication.model import TableShape
from pgshovel.stream import codec
from pgshovel.stream.batches import CommittedBatch

_OPERATIONS = {
    stream_pb2.Mutation.INSERT: Operation.INSERT,
    stream_pb2.Mutation.UPDATE: Operation.UPDATE,
    stream_pb2.Mutation.DELETE: Operation.DELETE,
    stream_pb2.Mutation.TRUNCATE: Operation.TRUNCATE,
}


def _row(row: stream_pb2.Row, table: TableShape, required: Sequence[str], side: str) -> Row:
    values = {column.name: codec.to_text(column.value) for column in row.columns}
    missing = [name for name in required if name not in values]
    if missing:
        raise ReplicationError(
            f"{side} row of a mutation on {table.qualified!r} lacks columns {missing!r}; "
            f"it has {sorted(values)!r}; the set configuration changed: restart the worker "
            "or reload the target"
        )
    return tuple(values.get(name) for name in table.column_names)


def to_change(mutation: stream_pb2.Mutation, table: TableShape) -> Change:
    """The text-form change of one mutation on ``table``."""
    operation = _OPERATIONS.get(mutation.operation)
    if operation is None:
        raise ReplicationError(
            f"mutation {mutation.id!r} on {table.qualified!r} has no valid operation "
            f"({mutation.operation!r}); the stream was not written by a pgshovel relay"
        )
    old = new = None
    if operation in (Operation.UPDATE, Operation.DELETE):
        # Keyed tables only need the old key; unkeyed ones match on every column.
        old = _row(mutation.old, table, table.key or table.column_names, "old")
    if operation in (Operation.INSERT, Operation.UPDATE):
        new = _row(mutation.new, table, table.column_names, "new")
    return Change(operation=operation, old=old, new=new)


def group_by_table(
    batches: Iterable[CommittedBatch], tables: dict[tuple[str, str], TableShape]
) -> dict[tuple[str, str], list[Change]]:
    """The changes of every batch per table, in stream order within each table."""
    grouped: dict[tuple[str, str], list[Change]] = {}
    for batch in batches:
        for mutation in batch.mutations:
            name = (mutation.schema, mutation.table)
            table = tables.get(name)
            if table is None:
                raise ReplicationError(
                    f"batch {batch.batch_id!r} holds a mutation on {mutation.schema!r}."
                    f"{mutation.table!r}, which is not a table of the set the worker loaded; "
                    "the set configuration changed: restart the worker"
                )
            grouped.setdefault(name, []).append(to_change(mutation, table))
    return grouped
