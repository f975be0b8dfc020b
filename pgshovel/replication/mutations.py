"""Turn streamed mutations into changes in a table's column order, with the values a target wants.

Values travel as protocol ``Value``s; a target chooses how to read them: the
PostgreSQL target takes ``codec.to_text`` (the text its input functions parse to
the exact original value), the Parquet target takes Arrow values. A mutation
whose row lacks a column of the table's shape is an error naming table, columns
and batch: a value is never invented or dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pgshovel.errors import SchemaError, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Change, Operation, Row
from pgshovel.source import Column, TableShape
from pgshovel.stream import codec
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.operations import OPERATION_NAMES

#: How a target reads one value of one column.
Convert = Callable[[Column, stream_pb2.Value], Any]

#: A mutation with the batch that carried it and its change in the target's values.
Entry = tuple[CommittedBatch, stream_pb2.Mutation, Change]


def as_text(_column: Column, value: stream_pb2.Value) -> str | None:
    """PostgreSQL's text for a value (None for NULL): what the PostgreSQL target writes."""
    return codec.to_text(value)


def _row(
    row: stream_pb2.Row,
    table: TableShape,
    required: Sequence[str],
    side: str,
    convert: Convert,
) -> Row:
    values = {column.name: column.value for column in row.columns}
    missing = [name for name in required if name not in values]
    unknown = sorted(set(values) - set(table.column_names))
    if missing or unknown:
        problem = f"lacks columns {missing!r}" if missing else f"has columns {unknown!r}"
        raise SchemaError(
            f"{side} row of a mutation on {table.qualified!r} {problem} that do not match "
            f"the table's shape {list(table.column_names)!r}; a value is never dropped or "
            "invented: the stream and the worker's state disagree, reload the target"
        )
    null = stream_pb2.Value(null=stream_pb2.Value.NULL)
    return tuple(convert(column, values.get(column.name, null)) for column in table.columns)


def to_change(
    mutation: stream_pb2.Mutation, table: TableShape, convert: Convert = as_text
) -> Change:
    """The change of one mutation on ``table``, its values read by ``convert``."""
    if mutation.operation not in OPERATION_NAMES:
        raise StreamError(
            f"mutation {mutation.id!r} on {table.qualified!r} has no valid operation "
            f"({mutation.operation!r}); the stream was not written by a pgshovel relay"
        )
    operation = Operation(OPERATION_NAMES[mutation.operation])
    old = new = None
    if operation in (Operation.UPDATE, Operation.DELETE):
        # Keyed tables only need the old key; unkeyed ones match on every column.
        old = _row(mutation.old, table, table.key or table.column_names, "old", convert)
    if operation in (Operation.INSERT, Operation.UPDATE):
        new = _row(mutation.new, table, table.column_names, "new", convert)
    return Change(operation=operation, old=old, new=new)


def group_by_table(
    batches: Iterable[CommittedBatch],
    tables: dict[tuple[str, str], TableShape],
    convert: Convert = as_text,
) -> dict[tuple[str, str], list[Entry]]:
    """Every batch's mutations per table, in stream order within each table."""
    grouped: dict[tuple[str, str], list[Entry]] = {}
    for batch in batches:
        for mutation in batch.mutations:
            name = (mutation.schema, mutation.table)
            table = tables.get(name)
            if table is None:
                raise SchemaError(
                    f"batch {batch.batch_id!r} holds a mutation on {mutation.schema!r}."
                    f"{mutation.table!r}, which is not a table of the set the worker loaded; "
                    "the set configuration changed: restart the worker"
                )
            grouped.setdefault(name, []).append(
                (batch, mutation, to_change(mutation, table, convert))
            )
    return grouped


def key_text(row: stream_pb2.Row, table: TableShape) -> tuple[str | None, ...] | None:
    """The text of a row's key values (None for an empty row or an unkeyed table)."""
    if not row.columns or not table.key:
        return None
    values = {column.name: column.value for column in row.columns}
    return tuple(codec.to_text(values[name]) if name in values else None for name in table.key)
