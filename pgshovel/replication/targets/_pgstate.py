"""The worker's state table in a PostgreSQL target, written in the same transaction as the data.

One row per (cluster, set) in ``pgshovel_replication.worker_state``: the phase,
the loader's snapshot, the start offset, the last applied stream position, and
(as JSON) the tables' shapes as of that position, the tables whose capture broke,
and the incremental snapshots under way. A session-level advisory lock on
(cluster, set) keeps a second worker out.
"""

from __future__ import annotations

import json

from psycopg2 import sql
from psycopg2.extensions import cursor as Cursor

from pgshovel.errors import AlreadyRunning
from pgshovel.stream.batches import StreamPosition
from pgshovel.stream.state import WorkerState, from_document, to_document

STATE_SCHEMA = "pgshovel_replication"
STATE_TABLE = "worker_state"

_TABLE = sql.Identifier(STATE_SCHEMA, STATE_TABLE)

_CREATE = sql.SQL(
    """
CREATE TABLE IF NOT EXISTS {} (
    cluster text NOT NULL,
    set_name text NOT NULL,
    phase text NOT NULL CHECK (phase IN ('snapshot', 'streaming')),
    snapshot text NOT NULL,
    start_offset bigint NOT NULL,
    position_offset bigint,
    publisher bytea,
    sequence bigint,
    epoch bigint,
    committed_nodes bytea[] NOT NULL DEFAULT '{{}}',
    committed_batches bigint[] NOT NULL DEFAULT '{{}}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, set_name)
)"""
).format(_TABLE)

_SELECT = sql.SQL(
    "SELECT phase, snapshot, start_offset, position_offset, publisher, sequence, epoch, "
    "committed_nodes, committed_batches FROM {} WHERE cluster = %s AND set_name = %s"
).format(_TABLE)

_UPSERT = sql.SQL(
    """
INSERT INTO {} AS s (cluster, set_name, phase, snapshot, start_offset, position_offset,
                     publisher, sequence, epoch, committed_nodes, committed_batches)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::bytea[], %s::bigint[])
ON CONFLICT (cluster, set_name) DO UPDATE SET
    phase = excluded.phase, snapshot = excluded.snapshot, start_offset = excluded.start_offset,
    position_offset = excluded.position_offset, publisher = excluded.publisher,
    sequence = excluded.sequence, epoch = excluded.epoch,
    committed_nodes = excluded.committed_nodes, committed_batches = excluded.committed_batches,
    updated_at = now()"""
).format(_TABLE)


# Added in 0.2; a state table from 0.1 gets them when the worker starts.
_EXTEND = sql.SQL(
    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS tables jsonb NOT NULL DEFAULT '[]', "
    "ADD COLUMN IF NOT EXISTS broken jsonb NOT NULL DEFAULT '[]', "
    "ADD COLUMN IF NOT EXISTS tasks jsonb NOT NULL DEFAULT '[]'"
).format(_TABLE)

_SELECT_EXTENSION = sql.SQL(
    "SELECT tables, broken, tasks FROM {} WHERE cluster = %s AND set_name = %s"
).format(_TABLE)

_UPDATE_EXTENSION = sql.SQL(
    "UPDATE {} SET tables = %s::jsonb, broken = %s::jsonb, tasks = %s::jsonb "
    "WHERE cluster = %s AND set_name = %s"
).format(_TABLE)


def create(cursor: Cursor) -> None:
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(STATE_SCHEMA)))
    cursor.execute(_CREATE)
    cursor.execute(_EXTEND)


def lock(cursor: Cursor, cluster: str, set_name: str) -> None:
    """Take the (cluster, set) advisory lock for this session, or fail if another worker has it."""
    cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))", (cluster, set_name))
    row = cursor.fetchone()
    if row is None or not row[0]:
        raise AlreadyRunning(
            f"another replication worker is running for set {set_name!r} of cluster "
            f"{cluster!r} on this target; stop it first (one worker per set and target)"
        )


def read(cursor: Cursor, cluster: str, set_name: str) -> WorkerState | None:
    cursor.execute(_SELECT, (cluster, set_name))
    row = cursor.fetchone()
    if row is None:
        return None
    phase, snapshot, start_offset, offset, publisher, sequence, epoch, nodes, batches = row
    position = None
    if offset is not None:
        position = StreamPosition(
            offset=offset,
            publisher=bytes(publisher),
            sequence=sequence,
            epoch=epoch,
            committed=tuple(
                (bytes(node), batch) for node, batch in zip(nodes, batches, strict=True)
            ),
        )
    cursor.execute(_SELECT_EXTENSION, (cluster, set_name))
    tables, broken, tasks = cursor.fetchone() or ([], [], [])
    extension = from_document(
        {
            "phase": phase,
            "snapshot": snapshot,
            "start_offset": start_offset,
            "tables": tables,
            "broken": broken,
            "tasks": tasks,
        }
    )
    return extension.replace(position=position)


def write(cursor: Cursor, cluster: str, set_name: str, state: WorkerState) -> None:
    position = state.position
    cursor.execute(
        _UPSERT,
        (
            cluster,
            set_name,
            state.phase,
            state.snapshot,
            state.start_offset,
            None if position is None else position.offset,
            None if position is None else position.publisher,
            None if position is None else position.sequence,
            None if position is None else position.epoch,
            [] if position is None else [node for node, _ in position.committed],
            [] if position is None else [batch for _, batch in position.committed],
        ),
    )
    document = to_document(state)
    cursor.execute(
        _UPDATE_EXTENSION,
        (
            json.dumps(document["tables"]),
            json.dumps(document["broken"]),
            json.dumps(document["tasks"]),
            cluster,
            set_name,
        ),
    )
