"""Table shapes on the wire: ``TableShape`` to the protocol's ``TableShape`` and back."""

from __future__ import annotations

from pgshovel.protocol import stream_pb2
from pgshovel.source import Column, TableShape


def shape_to_proto(shape: TableShape, relation: int = 0) -> stream_pb2.TableShape:
    """The protocol message of ``shape`` (``relation``: the table's oid, if not the shape's)."""
    return stream_pb2.TableShape(
        schema=shape.schema,
        name=shape.name,
        columns=[
            stream_pb2.ColumnShape(
                name=column.name,
                number=column.number,
                sql_type=column.sql_type,
                type_name=column.type_name,
                not_null=column.not_null,
            )
            for column in shape.columns
        ],
        key=list(shape.key),
        relation=relation or shape.relation,
    )


def shape_from_proto(message: stream_pb2.TableShape) -> TableShape:
    """The ``TableShape`` a protocol message describes."""
    return TableShape(
        schema=message.schema,
        name=message.name,
        columns=tuple(
            Column(
                name=column.name,
                sql_type=column.sql_type,
                type_name=column.type_name,
                not_null=column.not_null,
                number=column.number,
            )
            for column in message.columns
        ),
        key=tuple(message.key),
        relation=message.relation,
    )
