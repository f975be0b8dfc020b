"""Render committed batches as JSON lines: one mutation per line, for people and ``jq``.

Each value is PostgreSQL's text form of it (``null`` for SQL NULL), so what a
user sees is exactly what ``psql`` would print, whatever the type.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator

from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.codec import to_text
from pgshovel.stream.operations import OPERATION_NAMES


def _row(row: stream_pb2.Row) -> dict[str, str | None] | None:
    if not row.columns:
        return None
    return {column.name: to_text(column.value) for column in row.columns}


def _time(micros: int) -> str:
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (moment + datetime.timedelta(microseconds=micros)).isoformat()


def mutation_record(batch: CommittedBatch, mutation: stream_pb2.Mutation) -> dict[str, object]:
    """One mutation with its batch and transaction, as a JSON-ready mapping."""
    return {
        "batch": batch.batch_id,
        "node": str(uuid.UUID(bytes=batch.node)) if len(batch.node) == 16 else batch.node.hex(),
        "offset": batch.position.offset,
        "transaction": mutation.transaction,
        "timestamp": _time(mutation.timestamp),
        "schema": mutation.schema,
        "table": mutation.table,
        "operation": OPERATION_NAMES.get(mutation.operation, "UNKNOWN"),
        "key_columns": list(mutation.key_columns),
        "old": _row(mutation.old),
        "new": _row(mutation.new),
        "set_version": mutation.set_version,
    }


def json_lines(batch: CommittedBatch) -> Iterator[str]:
    """The batch's mutations as JSON lines, in stream order."""
    for mutation in batch.mutations:
        yield json.dumps(mutation_record(batch, mutation), ensure_ascii=False, sort_keys=False)
