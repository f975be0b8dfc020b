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
``audit_rows`` is pure and unit-tested.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.replication.copytext import encode_row
from pgshovel.replication.mutations import key_text
from pgshovel.replication.provenance import stamp_of
from pgshovel.source import TableShape
from pgshovel.stream._codec_temporal import format_timestamp
from pgshovel.stream.operations import OPERATION_NAMES
from pgshovel.stream.plan import MicroBatchPlan, Segment

AUDIT_SCHEMA = "pgshovel_replication"
AUDIT_TABLE = "audit"

_TABLE = sql.Identifier(AUDIT_SCHEMA, AUDIT_TABLE)

#: The columns ``audit_rows`` fills, in order (``applied_at`` takes its default).
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


def _key(values: tuple[str | None, ...] | None, table: TableShape) -> str | None:
    if values is None:
        return None
    return json.dumps(dict(zip(table.key, values, strict=True)), ensure_ascii=False)


def audit_rows(cluster: str, set_name: str, plan: MicroBatchPlan) -> Iterator[list[str | None]]:
    """The audit row (PostgreSQL text of ``COLUMNS``) of every mutation ``plan`` applies.

    ``key`` is the row's key as a JSON object of PostgreSQL text values: the new key
    of an INSERT or UPDATE, the old key of a DELETE, NULL for a TRUNCATE and for
    tables without a key; ``old_key`` is the old key of an UPDATE that changed it.
    """
    nodes: dict[bytes, str] = {}
    for step in plan.steps:
        if not isinstance(step, Segment):
            continue
        for run in step.runs:
            table = run.table
            for batch, mutation in run.entries:
                node = nodes.get(batch.node)
                if node is None:
                    node = nodes[batch.node] = str(uuid.UUID(bytes=batch.node))
                operation = OPERATION_NAMES[mutation.operation]
                old = key_text(mutation.old, table)
                new = key_text(mutation.new, table)
                key, old_key = (old, None) if new is None else (new, old if old != new else None)
                stamp = stamp_of(mutation)
                timestamp = mutation.timestamp
                yield [
                    cluster,
                    set_name,
                    node,
                    str(batch.batch_id),
                    str(mutation.transaction),
                    str(mutation.id),
                    format_timestamp(timestamp, True, 0) if timestamp else None,
                    operation,
                    table.schema,
                    table.name,
                    _key(key, table),
                    _key(old_key, table),
                    *(
                        (None,) * 6
                        if stamp is None
                        else (
                            stamp.current_user,
                            stamp.session_user,
                            stamp.application_name,
                            stamp.client_addr,
                            None if stamp.query_id is None else str(stamp.query_id),
                            stamp.annotation,
                        )
                    ),
                ]


def write(cursor: Cursor, cluster: str, set_name: str, plan: MicroBatchPlan) -> int:
    """Copy the audit rows of ``plan``'s mutations in the open transaction; return how many."""
    lines = [encode_row(row) for row in audit_rows(cluster, set_name, plan)]
    if lines:
        cursor.copy_expert(_COPY.as_string(cursor), io.StringIO("".join(lines)))
    return len(lines)
