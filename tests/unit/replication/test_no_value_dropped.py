"""No code path drops (or invents) a column value: a row that does not match its shape stops."""

from __future__ import annotations

import pytest

from pgshovel.errors import SchemaError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import to_change
from pgshovel.replication.targets import _arrow
from pgshovel.source import Column, TableShape

TABLE = TableShape(
    "public",
    "t",
    (Column("id", "integer", "int4", True, 1), Column("b", "numeric", "numeric", False, 2)),
    ("id",),
)


def mutation(operation: int, **rows: dict[str, str | None]) -> stream_pb2.Mutation:
    message = stream_pb2.Mutation(operation=operation, schema="public", table="t")  # type: ignore[arg-type]
    for side, values in rows.items():
        row = getattr(message, side)
        for name, text in values.items():
            column = row.columns.add(name=name)
            if text is None:
                column.value.null = stream_pb2.Value.NULL
            else:
                column.value.string = text
    return message


@pytest.mark.parametrize("convert", [None, _arrow.arrow_value], ids=["text", "arrow"])
def test_a_value_of_a_column_the_shape_does_not_have_stops_the_worker(convert: object) -> None:
    extra = mutation(stream_pb2.Mutation.INSERT, new={"id": "1", "b": "2", "c": "lost?"})
    with pytest.raises(SchemaError, match=r"has columns \['c'\]"):
        if convert is None:
            to_change(extra, TABLE)
        else:
            to_change(extra, TABLE, convert)  # type: ignore[arg-type]


def test_a_column_the_row_lacks_is_never_invented() -> None:
    short = mutation(stream_pb2.Mutation.INSERT, new={"id": "1"})
    with pytest.raises(SchemaError, match=r"lacks columns \['b'\]"):
        to_change(short, TABLE)


def test_every_value_of_a_matching_row_arrives_in_shape_order() -> None:
    change = to_change(mutation(stream_pb2.Mutation.INSERT, new={"b": None, "id": "7"}), TABLE)
    assert change.new == ("7", None)
