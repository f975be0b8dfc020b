"""Turn streamed mutations into changes in a table's column order, with the values a target wants.

Values travel as protocol ``Value``s; a target chooses how to read them: the
PostgreSQL target reads rows straight into COPY text (``copyrows``, the same
text as ``codec.to_text``), the Parquet target takes Arrow values. A mutation
whose row lacks a column of the table's shape, or has one the shape does not
know, is an error naming table, columns and batch: a value is never invented or
dropped. A row holding the table's columns in order (what a relay writes) is
read by position; any other order is read by name.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pgshovel.errors import SchemaError, StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.changes import Change, Operation
from pgshovel.source import Column, TableShape
from pgshovel.stream import codec
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.operations import OPERATION_NAMES

#: How a target reads one value of one column.
Convert = Callable[[Column, stream_pb2.Value], Any]

#: A mutation with the batch that carried it and its change in the target's values.
Entry = tuple[CommittedBatch, stream_pb2.Mutation, Change]

#: Protocol operation -> the change's operation.
OPERATIONS: dict[int, Operation] = {
    number: Operation(name) for number, name in OPERATION_NAMES.items()
}

T = TypeVar("T")

column_name = operator.attrgetter("name")
_NULL = stream_pb2.Value(null=stream_pb2.Value.NULL)


def as_text(_column: Column, value: stream_pb2.Value) -> str | None:
    """PostgreSQL's text for a value (None for NULL): what the PostgreSQL target writes."""
    return codec.to_text(value)


def in_shape_order(row: stream_pb2.Row, names: list[str]) -> bool:
    """Whether ``row`` holds exactly the columns ``names``, in that order (the fast check)."""
    columns = row.columns
    return len(columns) == len(names) and list(map(column_name, columns)) == names


def row_values(
    row: stream_pb2.Row,
    table: TableShape,
    required: Sequence[str],
    side: str,
    convert: Callable[[Column, stream_pb2.Value], T],
) -> tuple[T, ...]:
    """``row``'s values in ``table``'s column order, read by ``convert``.

    Columns may come in any order; a column of ``required`` the row lacks, or a
    column the table does not have, is a ``SchemaError``. A column that is
    neither required nor present reads as NULL.
    """
    values = {column.name: column.value for column in row.columns}
    missing = [name for name in required if name not in values]
    unknown = sorted(set(values) - set(table.column_names))
    if missing or unknown or len(values) < len(row.columns):
        if missing:
            problem = f"lacks columns {missing!r}"
        elif unknown:
            problem = f"has columns {unknown!r}"
        else:
            problem = f"has columns {_repeated(row)!r} more than once"
        raise SchemaError(
            f"{side} row of a mutation on {table.qualified!r} {problem} that do not match "
            f"the table's shape {list(table.column_names)!r}; a value is never dropped or "
            "invented: the stream and the worker's state disagree, reload the target"
        )
    return tuple(convert(column, values.get(column.name, _NULL)) for column in table.columns)


def _repeated(row: stream_pb2.Row) -> list[str]:
    seen: set[str] = set()
    repeated: list[str] = []
    for column in row.columns:
        if column.name in seen and column.name not in repeated:
            repeated.append(column.name)
        seen.add(column.name)
    return repeated


def _row(
    row: stream_pb2.Row,
    table: TableShape,
    names: list[str],
    required: Sequence[str],
    side: str,
    convert: Convert,
) -> tuple[Any, ...]:
    if in_shape_order(row, names):
        return tuple(
            convert(column, cell.value)
            for column, cell in zip(table.columns, row.columns, strict=True)
        )
    return row_values(row, table, required, side, convert)


def operation_of(mutation: stream_pb2.Mutation, table: TableShape) -> Operation:
    """The change operation of ``mutation``; a ``StreamError`` for a value no relay writes."""
    operation = OPERATIONS.get(mutation.operation)
    if operation is None:
        raise StreamError(
            f"mutation {mutation.id!r} on {table.qualified!r} has no valid operation "
            f"({mutation.operation!r}); the stream was not written by a pgshovel relay"
        )
    return operation


def to_change(
    mutation: stream_pb2.Mutation, table: TableShape, convert: Convert = as_text
) -> Change:
    """The change of one mutation on ``table``, its values read by ``convert``."""
    operation = operation_of(mutation, table)
    old = new = None
    names = list(table.column_names)
    if operation is Operation.UPDATE or operation is Operation.DELETE:
        # Keyed tables only need the old key; unkeyed ones match on every column.
        old = _row(mutation.old, table, names, table.key or names, "old", convert)
    if operation is Operation.INSERT or operation is Operation.UPDATE:
        new = _row(mutation.new, table, names, names, "new", convert)
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
    columns = row.columns
    if not columns or not table.key:
        return None
    names = table.column_names
    positions = table.key_positions
    if len(columns) == len(names) and all(
        columns[position].name == name for position, name in zip(positions, table.key, strict=True)
    ):
        return tuple(codec.to_text(columns[position].value) for position in positions)
    values = {column.name: column.value for column in columns}
    return tuple(codec.to_text(values[name]) if name in values else None for name in table.key)
