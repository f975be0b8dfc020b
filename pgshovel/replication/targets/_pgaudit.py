"""The PostgreSQL target's optional audit table: one row per applied mutation, who made it.

With ``audit: true`` every micro-batch (or part of a batch) also copies one row
per mutation it applies into ``pgshovel_replication.audit``, with ``COPY`` in
the transaction that applies the mutations: the rows commit with the data and
the worker's position, or not at all (a kill, an abandoned batch), so each
applied mutation has exactly one row. Mutations of a table captured without
provenance get a row whose provenance columns are NULL; rows of snapshot loads
and incremental snapshot chunks are not mutations and get none, nor do the
mutations skipped because their table's capture broke. The table and its
indexes are created only when missing (no DDL lock at each worker start).
``audit_lines`` is pure and unit-tested.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from json.encoder import encode_basestring

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.errors import StreamError
from pgshovel.protocol import stream_pb2
from pgshovel.replication.mutations import key_text
from pgshovel.replication.provenance import stamp_of
from pgshovel.source import TableShape, first_line
from pgshovel.source.copytext import decode_line, encode_value
from pgshovel.stream._codec_temporal import format_timestamp
from pgshovel.stream.codec import to_text
from pgshovel.stream.operations import OPERATION_NAMES
from pgshovel.stream.plan import MicroBatchPlan, Segment

AUDIT_SCHEMA = "pgshovel_replication"
AUDIT_TABLE = "audit"

_TABLE = sql.Identifier(AUDIT_SCHEMA, AUDIT_TABLE)

NULL_FIELD = "\\N"

#: The columns ``audit_lines`` fills, in order (``applied_at`` takes its default).
COLUMNS = (
    "cluster",
    "set_name",
    "node",
    "batch_id",
    "transaction",
    "mutation_id",
    "changed_at",
    "operation",
    "schema_name",
    "table_name",
    "key",
    "old_key",
    "current_user_name",
    "session_user_name",
    "application_name",
    "client_addr",
    "query_id",
    "annotation",
)

_CREATE = sql.SQL(
    """
CREATE TABLE IF NOT EXISTS {table} (
    cluster text NOT NULL,
    set_name text NOT NULL,
    node uuid NOT NULL,
    batch_id bigint NOT NULL,
    transaction bigint NOT NULL,
    mutation_id bigint NOT NULL,
    changed_at timestamptz,
    applied_at timestamptz NOT NULL DEFAULT now(),
    operation text NOT NULL,
    schema_name text NOT NULL,
    table_name text NOT NULL,
    key jsonb,
    old_key jsonb,
    current_user_name text,
    session_user_name text,
    application_name text,
    client_addr inet,
    query_id bigint,
    annotation text
);
CREATE INDEX IF NOT EXISTS audit_transaction ON {table} (transaction);
CREATE INDEX IF NOT EXISTS audit_annotation ON {table} (annotation) WHERE annotation IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_table ON {table} (schema_name, table_name, changed_at);
"""
).format(table=_TABLE)

_COPY = sql.SQL("COPY {} ({}) FROM STDIN").format(
    _TABLE, sql.SQL(", ").join(sql.Identifier(name) for name in COLUMNS)
)


def create(cursor: Cursor) -> None:
    """The audit table and its indexes, only when the table is missing."""
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{AUDIT_SCHEMA}.{AUDIT_TABLE}",))
    found = cursor.fetchone()
    if found and found[0]:
        return
    # Workers of several sets may start at once on one target: one creates at a time
    # (the lock the worker state's creation takes, held to the end of the transaction).
    cursor.execute("SELECT pg_advisory_xact_lock(hashtext('pgshovel_replication schema'))")
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(AUDIT_SCHEMA)))
    cursor.execute(_CREATE)


def _escaped(text: str) -> str:
    """A COPY field of text (printable text without a backslash needs no escape)."""
    if text.isprintable() and "\\" not in text:
        return text
    return encode_value(text)


def _optional(text: str | None) -> str:
    return NULL_FIELD if text is None else _escaped(text)


class _KeyJson:
    """A table's keys as the COPY field of a JSON object of PostgreSQL text values."""

    def __init__(self, table: TableShape) -> None:
        self.table = table
        self.names = [encode_basestring(name) + ": " for name in table.key]
        self.count = len(table.columns)
        self.pairs = list(zip(table.key_positions, table.key, strict=True))

    def values(self, row: stream_pb2.Row) -> tuple[str | None, ...] | None:
        """The text of a row's key values (None for an empty row or an unkeyed table):
        ``mutations.key_text``, with its check of a row in shape order unrolled."""
        columns = row.columns
        if not columns or not self.pairs:
            return None
        if len(columns) == self.count:
            values = []
            for position, name in self.pairs:
                column = columns[position]
                if column.name != name:
                    return key_text(row, self.table)
                values.append(to_text(column.value))
            return tuple(values)
        return key_text(row, self.table)

    def field(self, values: tuple[str | None, ...] | None) -> str:
        if values is None:
            return NULL_FIELD
        text = (
            "{"
            + ", ".join(
                [
                    name + ("null" if value is None else encode_basestring(value))
                    for name, value in zip(self.names, values, strict=True)
                ]
            )
            + "}"
        )
        # JSON writes control characters as backslash escapes: only the backslash needs one.
        return text.replace("\\", "\\\\") if "\\" in text else text


def _provenance_fields(mutation: stream_pb2.Mutation) -> str:
    stamp = stamp_of(mutation)
    if stamp is None:
        return _NO_PROVENANCE
    return "\t".join(
        [
            _optional(stamp.current_user),
            _optional(stamp.session_user),
            _optional(stamp.application_name),
            _optional(stamp.client_addr),
            NULL_FIELD if stamp.query_id is None else str(stamp.query_id),
            _optional(stamp.annotation),
        ]
    )


_NO_PROVENANCE = "\t".join([NULL_FIELD] * 6)


def audit_lines(cluster: str, set_name: str, plan: MicroBatchPlan) -> Iterator[str]:
    """The audit row (a COPY text line of ``COLUMNS``) of every mutation ``plan`` applies.

    ``key`` is the row's key as a JSON object of PostgreSQL text values: the new key
    of an INSERT or UPDATE, the old key of a DELETE, NULL for a TRUNCATE and for
    tables without a key; ``old_key`` is the old key of an UPDATE that changed it.
    """
    worker = _escaped(cluster) + "\t" + _escaped(set_name) + "\t"
    nodes: dict[bytes, str] = {}
    operations = {number: name + "\t" for number, name in OPERATION_NAMES.items()}
    for step in _segments(plan):
        for run in step.runs:
            table = run.table
            keys = _KeyJson(table)
            names = _escaped(table.schema) + "\t" + _escaped(table.name) + "\t"
            for batch, mutation in run.entries:
                node = nodes.get(batch.node)
                if node is None:
                    node = nodes[batch.node] = str(uuid.UUID(bytes=batch.node))
                old = keys.values(mutation.old)
                new = keys.values(mutation.new)
                key, old_key = (old, None) if new is None else (new, old if old != new else None)
                timestamp = mutation.timestamp
                yield (
                    f"{worker}{node}\t{batch.batch_id}\t{mutation.transaction}\t{mutation.id}\t"
                    f"{format_timestamp(timestamp, True, 0) if timestamp else NULL_FIELD}\t"
                    f"{operations[mutation.operation]}{names}"
                    f"{keys.field(key)}\t{keys.field(old_key)}\t"
                    f"{_provenance_fields(mutation)}\n"
                )


def audit_rows(cluster: str, set_name: str, plan: MicroBatchPlan) -> list[tuple[str | None, ...]]:
    """The audit rows of ``plan`` as PostgreSQL text values (what ``COPY`` reads)."""
    return [decode_line(line.rstrip("\n")) for line in audit_lines(cluster, set_name, plan)]


def write(cursor: Cursor, cluster: str, set_name: str, plan: MicroBatchPlan) -> int:
    """Copy the audit rows of ``plan``'s mutations in the open transaction; return how many."""
    lines = list(audit_lines(cluster, set_name, plan))
    if not lines:
        return 0
    try:
        cursor.copy_expert(_COPY.as_string(cursor), io.StringIO("".join(lines)))
    except psycopg2.DataError as error:
        # Only provenance comes from outside the worker's own checks: an address that
        # is not one, or text PostgreSQL cannot hold.
        tables = sorted({run.table.qualified for step in _segments(plan) for run in step.runs})
        cause = error.diag.message_primary or first_line(error)
        raise StreamError(
            f"the audit rows of a micro-batch on {tables!r} do not fit "
            f"{AUDIT_SCHEMA}.{AUDIT_TABLE} ({cause}); their provenance is not what a pgshovel "
            "capture trigger writes: fix what produced the stream, or set audit: false"
        ) from error
    return len(lines)


def _segments(plan: MicroBatchPlan) -> list[Segment]:
    return [step for step in plan.steps if isinstance(step, Segment)]
