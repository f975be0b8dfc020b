"""Render committed batches as JSON lines: one mutation or schema change per line, for ``jq``.

Row values use the typed JSON mapping of ``pgshovel.stream.typed_json`` (exact
integers as numbers, numeric as a string, ISO 8601 temporals, json embedded,
bytea base64, arrays as arrays), the same as the relay's table topics; the
``added_defaults`` of a schema change are PostgreSQL's text. A mutation of a table
captured with provenance carries a ``provenance`` object (README "Provenance").
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

from pgshovel.protocol import stream_pb2
from pgshovel.stream.batches import CommittedBatch
from pgshovel.stream.codec import to_text
from pgshovel.stream.operations import OPERATION_NAMES
from pgshovel.stream.typed_json import dumps, row_object


def _row(row: stream_pb2.Row) -> dict[str, object] | None:
    if not row.columns:
        return None
    return row_object(row.columns)


def _time(micros: int) -> str:
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (moment + datetime.timedelta(microseconds=micros)).isoformat()


def provenance_record(provenance: stream_pb2.Provenance) -> dict[str, object]:
    """Who made a mutation (tables captured with provenance); what was not available is null."""
    return {
        "current_user": provenance.current_user,
        "session_user": provenance.session_user,
        "application_name": provenance.application_name,
        "client_addr": provenance.client_addr or None,
        "query_id": provenance.query_id or None,
        "annotation": provenance.annotation or None,
    }


def mutation_record(batch: CommittedBatch, mutation: stream_pb2.Mutation) -> dict[str, object]:
    """One mutation with its batch and transaction, as a JSON-ready mapping; ``provenance``
    only for a mutation that carries it."""
    record: dict[str, object] = {
        "batch": batch.batch_id,
        "node": str(uuid.UUID(bytes=batch.node)) if len(batch.node) == 16 else batch.node.hex(),
        "offset": batch.offset,
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
    if mutation.HasField("provenance"):
        record["provenance"] = provenance_record(mutation.provenance)
    return record


def schema_record(batch: CommittedBatch, change: stream_pb2.SchemaChange) -> dict[str, object]:
    """One schema change with its batch, as a JSON-ready mapping."""
    record: dict[str, object] = {
        "batch": batch.batch_id,
        "offset": batch.offset,
        "transaction": change.transaction,
        "timestamp": _time(change.timestamp),
        "schema": change.schema,
        "table": change.table,
        "operation": "SCHEMA",
        "kind": stream_pb2.SchemaChange.Kind.Name(change.kind),
        "command": change.command,
        "set_version": change.set_version,
    }
    if change.HasField("shape"):
        record["columns"] = [
            {"name": c.name, "type": c.sql_type, "not_null": c.not_null}
            for c in change.shape.columns
        ]
        record["key"] = list(change.shape.key)
    if change.added_defaults:
        record["added_defaults"] = {c.name: to_text(c.value) for c in change.added_defaults}
    if change.rewrites_rows:
        record["rewrites_rows"] = True
    if change.problem:
        record["problem"] = change.problem
    return record


def json_lines(batch: CommittedBatch) -> Iterator[str]:
    """The batch's mutations and schema changes as JSON lines, in stream order."""
    markers = [
        (position, marker)
        for position, marker in batch.markers
        if isinstance(marker, stream_pb2.SchemaChange)
    ]
    index = 0
    for position, mutation in enumerate(batch.mutations):
        while index < len(markers) and markers[index][0] <= position:
            yield _dump(schema_record(batch, markers[index][1]))
            index += 1
        yield _dump(mutation_record(batch, mutation))
    for _, change in markers[index:]:
        yield _dump(schema_record(batch, change))


def _dump(record: dict[str, object]) -> str:
    return dumps(record)
