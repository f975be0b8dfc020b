"""The rows a ``pgshovel`` source yields: one per mutation of a committed batch, values typed JSON.

Columns (``COLUMNS``, in this order): ``batch_node`` (the source node's uuid as
32 hex digits) and ``batch_id`` (the PgQ batch id) name the source batch;
``ordinal`` is the mutation's place in its batch (0, 1, ...), so (batch_node,
batch_id, ordinal) is unique and orders a batch's mutations as they were
committed; ``event_id`` is the capture's event id; ``schema``, ``table``,
``operation`` (``INSERT``, ``UPDATE``, ``DELETE``, ``TRUNCATE``), ``transaction``
(the source txid) and ``timestamp`` (the commit time, UTC). ``key`` is the row's
key as a typed JSON object in the key's column order — of the new row for
INSERT and UPDATE, of the old row for DELETE, null for TRUNCATE and unkeyed
tables; ``old`` and ``new`` are the whole rows before and after as typed JSON
objects (``pgshovel.stream.typed_json``: exact integers, numeric as a string,
ISO 8601 temporals, json embedded, bytea base64), null where the operation has
none. ``partition`` is the set topic partition the row was read from. With one
partition ``ordinal`` orders a batch; with several, order a batch by
``event_id`` (``ordinal`` counts within the partition). Schema changes and
watermarks are not rows: a new column appears in the JSON of the rows that
have it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.spark_source.ownership import owners
from pgshovel.stream.batches import CommittedBatch, RowMutations
from pgshovel.stream.operations import OPERATION_NAMES
from pgshovel.stream.typed_json import dumps, key_object, row_object

__all__ = ["COLUMNS", "batch_records", "schema_ddl"]

#: (name, Spark SQL type) of every column, in row order
COLUMNS: tuple[tuple[str, str], ...] = (
    ("batch_node", "STRING"),
    ("batch_id", "BIGINT"),
    ("ordinal", "INT"),
    ("event_id", "BIGINT"),
    ("schema", "STRING"),
    ("table", "STRING"),
    ("operation", "STRING"),
    ("transaction", "BIGINT"),
    ("timestamp", "TIMESTAMP"),
    ("key", "STRING"),
    ("old", "STRING"),
    ("new", "STRING"),
    ("partition", "INT"),
)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DELETE = stream_pb2.Mutation.DELETE
_TRUNCATE = stream_pb2.Mutation.TRUNCATE


def schema_ddl() -> str:
    """The source's schema as a Spark DDL string."""
    return ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)


def _row(row: stream_pb2.Row) -> str | None:
    return dumps(row_object(row.columns)) if row.columns else None


def _key(mutation: stream_pb2.Mutation) -> str | None:
    if mutation.operation == _TRUNCATE or not mutation.key_columns:
        return None
    row = mutation.old if mutation.operation == _DELETE else mutation.new
    return dumps(key_object(row, mutation.key_columns))


def mutation_record(
    batch: CommittedBatch, ordinal: int, mutation: stream_pb2.Mutation, partition: int = 0
) -> tuple[Any, ...]:
    """One mutation as a row of ``COLUMNS``."""
    return (
        batch.node.hex(),
        batch.batch_id,
        ordinal,
        mutation.id,
        mutation.schema,
        mutation.table,
        OPERATION_NAMES.get(mutation.operation, "UNKNOWN"),
        mutation.transaction,
        _EPOCH + datetime.timedelta(microseconds=mutation.timestamp),
        _key(mutation),
        _row(mutation.old),
        _row(mutation.new),
        partition,
    )


def batch_records(
    batch: CommittedBatch, partition: int = 0, partitions: int = 1
) -> Iterator[tuple[Any, ...]]:
    """The mutations of a batch committed in ``partition`` of ``partitions`` as rows, in
    commit order: those this partition's task yields (``pgshovel.spark_source.ownership``)."""
    mutations = batch.mutations
    if partitions <= 1:
        for ordinal, mutation in enumerate(mutations):
            yield mutation_record(batch, ordinal, mutation)
        return
    if not isinstance(mutations, RowMutations):
        if not mutations:
            return
        raise StreamError(
            f"batch {batch.batch_id!r} of a topic with {partitions!r} partitions carries one "
            "message per mutation; a partitioned set topic carries row changes (encoding: "
            "rows): the relay's configuration does not match the topic"
        )
    keep = [
        owner == partition
        for message in mutations.messages
        for owner in owners(message.rows, partitions)
    ]
    for ordinal, (mutation, kept) in enumerate(zip(mutations, keep, strict=True)):
        if kept:
            yield mutation_record(batch, ordinal, mutation, partition)
