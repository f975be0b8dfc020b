"""A PostgreSQL target's state table exactly as pgshovel 0.2 (and 0.1) wrote it: fixtures.

The DDL, the upsert, the 0.2 extension and the read-your-writes function are
copied from the release (``git show cca7c05:pgshovel/replication/targets/_pgstate.py``),
so that upgrade tests start from what a user's target holds, not from what
today's code would write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from psycopg2 import sql

from pgshovel.source import connect
from pgshovel.stream.state import WorkerState, to_document

_TABLE = sql.Identifier("pgshovel_replication", "worker_state")

#: 0.1's table (0.2 created the same, then ran ``EXTEND``).
CREATE = sql.SQL(
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

UPSERT = sql.SQL(
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

#: Added by 0.2.
EXTEND = sql.SQL(
    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS tables jsonb NOT NULL DEFAULT '[]', "
    "ADD COLUMN IF NOT EXISTS broken jsonb NOT NULL DEFAULT '[]', "
    "ADD COLUMN IF NOT EXISTS tasks jsonb NOT NULL DEFAULT '[]', "
    "ADD COLUMN IF NOT EXISTS horizon text NOT NULL DEFAULT ''"
).format(_TABLE)

UPDATE_EXTENSION = sql.SQL(
    "UPDATE {} SET tables = %s::jsonb, broken = %s::jsonb, tasks = %s::jsonb, horizon = %s "
    "WHERE cluster = %s AND set_name = %s"
).format(_TABLE)

#: 0.2's read-your-writes function (its ``wait_applied`` reads the same columns).
APPLIED = sql.SQL(
    """
CREATE OR REPLACE FUNCTION pgshovel_replication.applied(txid bigint, set_name text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql STABLE AS $f$
DECLARE
    horizons text[];
BEGIN
    SELECT array_agg(CASE WHEN s.horizon <> '' THEN s.horizon ELSE s.snapshot END)
      INTO horizons
      FROM {table} s
     WHERE s.phase = 'streaming' AND ($2 IS NULL OR s.set_name = $2);
    IF horizons IS NULL THEN
        RAISE EXCEPTION 'pgshovel: no set % is streaming into this database',
            coalesce(quote_literal($2), '(any)')
            USING HINT = 'wait for the worker to finish its snapshot, or check the set name';
    END IF;
    IF cardinality(horizons) > 1 THEN
        RAISE EXCEPTION 'pgshovel: % sets stream into this database', cardinality(horizons)
            USING HINT = 'name one: applied(txid, set_name)';
    END IF;
    RETURN txid_visible_in_snapshot($1, horizons[1]::txid_snapshot);
END
$f$;
DO $d$ BEGIN
    IF to_regprocedure('pgshovel_replication.wait_applied(bigint,interval,text)') IS NOT NULL THEN
        COMMENT ON FUNCTION pgshovel_replication.wait_applied(bigint, interval, text)
            IS 'pgshovel read-your-writes 2';
    END IF;
END $d$;
"""
).format(table=_TABLE)


def old_values(state: WorkerState) -> tuple[Any, ...]:
    """What 0.2's ``write`` put into the nine columns for ``state`` (one partition)."""
    cursor = state.position.cursor(0)
    consumed = cursor.consumed
    committed = state.position.committed
    return (
        state.phase,
        state.snapshot,
        # 0.2 kept the offset noted before the snapshot; any value reads the same once a
        # batch is applied
        cursor.next_offset,
        cursor.next_offset - 1 if consumed else None,
        cursor.publisher if consumed else None,
        cursor.sequence if consumed else None,
        cursor.epoch if consumed else None,
        [node for node, _ in committed],
        [batch for _, batch in committed],
    )


def write_old_state(
    dsn: str, cluster: str, set_name: str, state: WorkerState, release: str = "0.2"
) -> None:
    """Replace the target's state table by one of ``release`` holding ``state``, as that
    release wrote it (functions included)."""
    connection = connect(dsn, "pgshovel-tests")
    with connection, connection.cursor() as cursor:
        cursor.execute("CREATE SCHEMA IF NOT EXISTS pgshovel_replication")
        cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_TABLE))
        cursor.execute(CREATE)
        if release == "0.2":
            cursor.execute(EXTEND)
        cursor.execute(UPSERT, (cluster, set_name, *old_values(state)))
        if release == "0.2":
            document = to_document(state)
            cursor.execute(
                UPDATE_EXTENSION,
                (
                    json.dumps(document["tables"]),
                    json.dumps(document["broken"]),
                    json.dumps(document["tasks"]),
                    state.horizon,
                    cluster,
                    set_name,
                ),
            )
        cursor.execute(APPLIED)
    connection.close()


def old_parquet_document(state: WorkerState, versions: dict[str, str]) -> dict[str, Any]:
    """0.2's ``_state.json``: the state's fields (the position names the last message
    consumed, ``start_offset`` beside it) and the versions, side by side."""
    cursor = state.position.cursor(0)
    document = to_document(state)
    del document["version"]
    document["start_offset"] = cursor.next_offset
    document["position"] = (
        {
            "offset": cursor.next_offset - 1,
            "publisher": cursor.publisher.hex(),
            "sequence": cursor.sequence,
            "epoch": cursor.epoch,
            "committed": [[node.hex(), batch] for node, batch in state.position.committed],
        }
        if cursor.consumed
        else None
    )
    return {**document, "versions": versions}


def old_name(name: str) -> str:
    """A version name of today (``v<commit>-<step>``) as 0.2 named its files
    (``<offset:020d>-<step:04d>``); the commit number stands for the offset, which was
    at or below the stored position just the same."""
    if not name.startswith("v"):
        return name
    commit, step = name[1:].split("-")
    return f"{int(commit):020d}-{int(step):04d}"


def make_parquet_directory_old(root: Path, state: WorkerState, versions: dict[str, str]) -> None:
    """Turn a Parquet target directory written by today's code into what 0.2 wrote for the
    same state: files and versions named by offsets, the state file of 0.2."""
    for directory in sorted(root.glob("*/*/changes")) + sorted(root.glob("*/*/current")):
        for entry in sorted(directory.iterdir()):
            stem, suffix = (entry.stem, ".parquet") if entry.is_file() else (entry.name, "")
            renamed = old_name(stem)
            if renamed != stem:
                entry.rename(directory / f"{renamed}{suffix}")
    old_versions = {table: old_name(version) for table, version in versions.items()}
    (root / "_state.json").write_text(
        json.dumps(old_parquet_document(state, old_versions), indent=1, sort_keys=True)
    )
