"""The worker's state table in a PostgreSQL target, written in the same transaction as the data.

One row per (cluster, set) in ``pgshovel_replication.worker_state``: the whole
``WorkerState`` (stream position, phase, the loader's snapshot, the tables'
shapes as of that position, the tables whose capture broke, the incremental
snapshots under way, the applied horizon) as one ``state`` document. A table
of an earlier release (one column per field) is converted on first open
(``_pgupgrade``). A session-level advisory lock on (cluster, set) keeps a
second worker out.
"""

from __future__ import annotations

import json

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import cursor as Cursor

from pgshovel.errors import AlreadyRunning, StateError
from pgshovel.replication.targets import _pgupgrade, _pgwake
from pgshovel.stream.state import WorkerState, from_document, to_document

STATE_SCHEMA = "pgshovel_replication"
STATE_TABLE = "worker_state"

_TABLE = sql.Identifier(STATE_SCHEMA, STATE_TABLE)

_CREATE = sql.SQL(
    """
CREATE TABLE IF NOT EXISTS {} (
    cluster text NOT NULL,
    set_name text NOT NULL,
    state jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, set_name)
)"""
).format(_TABLE)

_SELECT = sql.SQL("SELECT state FROM {} WHERE cluster = %s AND set_name = %s").format(_TABLE)

_UPSERT = sql.SQL(
    """
INSERT INTO {} AS s (cluster, set_name, state) VALUES (%s, %s, %s::jsonb)
ON CONFLICT (cluster, set_name) DO UPDATE SET state = excluded.state, updated_at = now()"""
).format(_TABLE)

#: Read-your-writes for applications (README "Read-your-writes"): is a source transaction's
#: effect in this copy, and wait until it is. A transaction is applied once it is visible in
#: the horizon of the last batch applied (the end tick's txid snapshot).
_FUNCTIONS = sql.SQL(
    """
CREATE OR REPLACE FUNCTION {schema}.applied(txid bigint, set_name text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql STABLE AS $f$
DECLARE
    horizons text[];
BEGIN
    SELECT array_agg(coalesce(nullif(s.state->>'horizon', ''), s.state->>'snapshot'))
      INTO horizons
      FROM {table} s
     WHERE s.state->>'phase' = 'streaming' AND ($2 IS NULL OR s.set_name = $2);
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
CREATE OR REPLACE FUNCTION {schema}.wait_applied(
    txid bigint, timeout interval DEFAULT '30 seconds', set_name text DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
DECLARE
    deadline timestamptz := clock_timestamp() + $2;
    done boolean;
    baton text;
    left_ms bigint;
    saved text := current_setting('lock_timeout');
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgshovel: wait_applied needs READ COMMITTED (each check needs a new '
            'snapshot to see the worker''s commits), not %',
            current_setting('transaction_isolation');
    END IF;
    PERFORM {schema}.applied($1, $3);  -- the errors: no such set, several sets
    LOOP
        -- A query with FROM: each run takes a new snapshot and sees the worker's commits
        -- (a plain expression would keep the one it started with).
        SELECT bool_and(txid_visible_in_snapshot($1,
                   coalesce(nullif(s.state->>'horizon', ''), s.state->>'snapshot')::txid_snapshot)),
               min(s.cluster || '/' || s.set_name)
          INTO done, baton
          FROM {table} s
         WHERE s.state->>'phase' = 'streaming' AND ($3 IS NULL OR s.set_name = $3);
        IF done THEN
            RETURN true;
        END IF;
        IF baton IS NULL THEN
            PERFORM {schema}.applied($1, $3);  -- the set stopped streaming: say so
        END IF;
        left_ms := ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000);
        IF left_ms <= 0 THEN
            RETURN false;
        END IF;
        IF pg_try_advisory_lock_shared(hashtext({baton_class}), hashtext(baton)) THEN
            -- No worker holds the wake-up lock: poll.
            PERFORM pg_advisory_unlock_shared(hashtext({baton_class}), hashtext(baton));
            PERFORM pg_sleep(least({idle_poll}, left_ms / 1000.0));
        ELSE
            -- Sleep until the worker's next commit hands the lock over (at most
            -- {longest_sleep} s: a commit made between the check above and this wait
            -- would otherwise go unnoticed until the one after it).
            BEGIN
                PERFORM set_config('lock_timeout',
                    least(left_ms, {longest_sleep_ms}) || 'ms', true);
                PERFORM pg_advisory_lock_shared(hashtext({baton_class}), hashtext(baton));
                PERFORM pg_advisory_unlock_shared(hashtext({baton_class}), hashtext(baton));
                PERFORM set_config('lock_timeout', saved, true);
            EXCEPTION WHEN lock_not_available THEN
                NULL;  -- no commit in that time: check again
            END;
        END IF;
    END LOOP;
END
$f$;
"""
)


#: How often wait_applied checks while no worker holds the set's wake-up lock (seconds).
IDLE_POLL = 0.01

#: The longest wait_applied sleeps on the wake-up lock before checking again (seconds).
LONGEST_SLEEP = 0.1

#: Marks the read-your-writes functions' version (their comment): replaced only when older.
FUNCTIONS_VERSION = "pgshovel read-your-writes 3"


def create(cursor: Cursor) -> None:
    """The state schema, table and functions, each only when missing or older."""
    # Workers of several sets may start at once on one target: one creates at a time.
    cursor.execute("SELECT pg_advisory_xact_lock(hashtext('pgshovel_replication schema'))")
    cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(STATE_SCHEMA)))
    cursor.execute(_CREATE)
    # A table of an earlier release is converted (ALTER TABLE only then: it takes an exclusive
    # lock that a running wait_applied, reading the table, would hold up).
    present = _pgupgrade.columns(cursor, _TABLE, f"{STATE_SCHEMA}.{STATE_TABLE}")
    if "state" not in present:
        _pgupgrade.upgrade(cursor, _TABLE, present)
    cursor.execute(
        "SELECT pg_catalog.obj_description(to_regprocedure(%s)::oid, 'pg_proc') = %s",
        (f"{STATE_SCHEMA}.wait_applied(bigint,interval,text)", FUNCTIONS_VERSION),
    )
    current = cursor.fetchone()
    if not (current and current[0]):
        schema = sql.Identifier(STATE_SCHEMA)
        cursor.execute(
            _FUNCTIONS.format(
                schema=schema,
                table=_TABLE,
                baton_class=sql.Literal(_pgwake.BATON_CLASS),
                idle_poll=sql.Literal(IDLE_POLL),
                longest_sleep=sql.SQL(str(LONGEST_SLEEP)),
                longest_sleep_ms=sql.Literal(int(LONGEST_SLEEP * 1000)),
            )
        )
        cursor.execute(
            sql.SQL("COMMENT ON FUNCTION {}.wait_applied(bigint, interval, text) IS {}").format(
                schema, sql.Literal(FUNCTIONS_VERSION)
            )
        )


def lock(cursor: Cursor, cluster: str, set_name: str) -> None:
    """Take the (cluster, set) advisory lock for this session, or fail if another worker has it."""
    cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s), hashtext(%s))", (cluster, set_name))
    row = cursor.fetchone()
    if row is None or not row[0]:
        raise AlreadyRunning(
            f"another replication worker is running for set {set_name!r} of cluster "
            f"{cluster!r} on this target; stop it first (one worker per set and target)"
        )


def release(connection: Connection) -> None:
    """Give up the session's advisory locks before it closes (best effort): PostgreSQL drops
    them only once the closed session's backend has exited, which a worker opening the
    target again right away could otherwise beat, and be refused as ``AlreadyRunning``."""
    if connection.closed:
        return
    try:
        connection.rollback()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock_all()")
        connection.rollback()
    except psycopg2.Error:
        pass  # a broken connection: its backend ends, and its locks with it


def reload_statement(cursor: Cursor, cluster: str, set_name: str) -> str:
    """The statement that makes the worker of (cluster, set) load this target afresh."""
    return (
        sql.SQL("DELETE FROM {} WHERE cluster = {} AND set_name = {}")
        .format(_TABLE, sql.Literal(cluster), sql.Literal(set_name))
        .as_string(cursor)
    )


def read(cursor: Cursor, cluster: str, set_name: str) -> WorkerState | None:
    """The stored state of (cluster, set), None if none; a ``StateError`` naming the field
    and the reload when the stored document does not read."""
    cursor.execute(_SELECT, (cluster, set_name))
    row = cursor.fetchone()
    if row is None:
        return None
    try:
        return from_document(row[0])
    except StateError as error:
        raise StateError(
            f"the worker state of set {set_name!r} of cluster {cluster!r} in "
            f"{STATE_SCHEMA}.{STATE_TABLE} does not read: {error}; the target must be "
            f"reloaded: run {reload_statement(cursor, cluster, set_name)} on the target and "
            "start the worker again (it copies the set's tables afresh)"
        ) from error


def write(cursor: Cursor, cluster: str, set_name: str, state: WorkerState) -> None:
    cursor.execute(_UPSERT, (cluster, set_name, json.dumps(to_document(state))))
