"""Which partition's task yields a row change a partitioned set topic carries more than once.

The relay routes a row change to ``partition_of(schema, table, key, N)``; an
UPDATE that moves a row to a key of another partition goes to both partitions
(old key's, then new key's), and a TRUNCATE to every partition. A source task
reads one partition and must yield each row change once over all tasks, so it
yields a change only in the first partition the relay routed it to — for a
TRUNCATE partition 0 — recomputing that route from the message's own table
shapes and COPY lines exactly as the relay computed it (``owners``). With one
partition every change is yielded. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator

from pgshovel.protocol import stream_pb2
from pgshovel.stream.rows import key_fields, partition_of

__all__ = ["owners"]

_TRUNCATE = stream_pb2.Mutation.TRUNCATE
_INSERT = stream_pb2.Mutation.INSERT


def _first_partition(
    change: stream_pb2.RowChange, table: stream_pb2.TableShape, partitions: int
) -> int:
    if change.operation == _TRUNCATE:
        return 0
    if not table.key:
        return partition_of(table.schema, table.name, None, partitions)
    names = [column.name for column in table.columns]
    positions = [names.index(column) for column in table.key]
    line = change.new if change.operation == _INSERT else change.old
    return partition_of(table.schema, table.name, key_fields(line, positions), partitions)


def owners(rows: stream_pb2.MutationBatch, partitions: int) -> Iterator[int]:
    """For each row change of ``rows`` in order, the partition whose task yields it."""
    tables = rows.tables
    for change in rows.changes:
        if partitions <= 1:
            yield 0
        else:
            yield _first_partition(change, tables[change.table].shape, partitions)
