"""``pgshovel-admin set failover SET --to DSN``: move a set to a promoted physical standby.

PgQ's queue, ticks and consumer position are ordinary tables, so a physical
standby carries them with the data: after its promotion capture goes on there
with the same node id and batch ids, and nothing is re-created. The command:

1. checks that DSN is a physical copy of the set's database and that moving
   there leaves one writable history (``pgshovel.admin.failover_identity``);
2. with ``--promote``, when DSN is still a standby: points the set at it first
   (the relay finishes its batch on the old primary, leaves it, and waits for
   the promotion), waits until no relay session of the set is left on the old
   primary, fences the old primary (below), waits until the standby replayed
   the old primary's WAL up to that point, then promotes it (``pg_promote``).
   If a wait times out before the promotion, the fence is lifted and the set
   points at the old primary again: nothing changed, the command can be run
   again;
3. re-installs the set's triggers on the new primary (stamped with the new
   version) and writes the set with the new DSN, in one two-phase change like
   ``set update``. With ``--accept-divergence`` the new primary also gets a new
   node id, after the relay reported that the stream holds batches the standby
   never received (see ``pgshovel.relay.failover``): readers then take its
   batches as a new source's, and ``set verify --repair`` removes from the
   copies the changes the standby lost.

The relay and the worker follow the set's DSN without a restart.

The fence (``--fence``, the default with ``--promote``) is what makes a
switchover under a live workload lose nothing: ``ALTER SYSTEM SET
default_transaction_read_only = on`` and a configuration reload on the old
primary, so every session's next transaction is read-only (writers get
"cannot execute ... in a read-only transaction" and can retry on the new
primary), then a wait until every transaction of the set's database that began
before the fence took effect has ended; only then is the old primary's WAL
position read. ``ALTER SYSTEM`` is not replicated, so the standby is not
fenced; the old primary stays read-only, across restarts too, until ``ALTER
SYSTEM RESET default_transaction_read_only``. It is a soft fence: a session
that sets ``default_transaction_read_only`` itself or begins ``READ WRITE``
transactions explicitly is not stopped by it (stop such writers, or shut the
old primary down, and use ``--no-fence``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import psycopg2.errors
from kazoo.client import KazooClient
from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.admin.failover_identity import reachable
from pgshovel.admin.plan import Plan
from pgshovel.admin.planning import Context, plan_set_update
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, refuse_password
from pgshovel.errors import ConfigurationError, DatabaseUnavailable
from pgshovel.protocol import configuration_pb2
from pgshovel.relay.queue import application_name
from pgshovel.source import NODE_TABLE

logger = logging.getLogger(__name__)

SetConfiguration = configuration_pb2.ReplicationSetConfiguration


def _value(conn: connection, query: str, parameters: tuple[object, ...] = ()) -> object:
    with conn.cursor() as cursor:
        cursor.execute(query, parameters)
        row = cursor.fetchone()
    return None if row is None else row[0]


def in_recovery(conn: connection) -> bool:
    return bool(_value(conn, "SELECT pg_is_in_recovery()"))


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise DatabaseUnavailable(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


# Seconds between seeing the fence in effect and the time that transactions begun before
# it are waited for: covers a backend that read its command just before the reload reached
# it and starts that command's transaction a moment later.
FENCE_MARGIN = 1.0

_READ_ONLY = "default_transaction_read_only"


def fence(old: connection, dsn: str) -> object:
    """Make every new transaction on the old primary read-only; return the time from which
    every transaction that begins is (a ``timestamptz``)."""
    try:
        with old.cursor() as cursor:
            cursor.execute(sql.SQL("ALTER SYSTEM SET {} = on").format(sql.Identifier(_READ_ONLY)))
            cursor.execute("SELECT pg_reload_conf()")
    except psycopg2.errors.InsufficientPrivilege as error:
        raise ConfigurationError(
            f"cannot fence the old primary {mask_dsn(dsn)!r}: "
            f"{str(error).strip().splitlines()[0]}; run as a superuser (or GRANT ALTER SYSTEM ON "
            f"PARAMETER {_READ_ONLY} to this role), or stop writes to it yourself and pass "
            "--no-fence"
        ) from error
    # This session reloads like every other one: once it sees the setting, the postmaster
    # has signalled them all.
    _wait(
        lambda: _value(old, "SELECT current_setting(%s)", (_READ_ONLY,)) == "on",
        30.0,
        "the fence to take effect",
    )
    time.sleep(FENCE_MARGIN)
    since = _value(old, "SELECT clock_timestamp()")
    logger.info("fenced the old primary %r (%s = on)", mask_dsn(dsn), _READ_ONLY)
    return since


def unfence(old: connection, dsn: str) -> None:
    with old.cursor() as cursor:
        cursor.execute(sql.SQL("SET {} = off").format(sql.Identifier(_READ_ONLY)))
        cursor.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(_READ_ONLY)))
        cursor.execute("SELECT pg_reload_conf()")
    logger.warning("lifted the fence on %r", mask_dsn(dsn))


_UNFENCED = (
    "SELECT pid, state, xact_start FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend' AND xact_start < %s ORDER BY xact_start"
)


def _unfenced(old: connection, since: object) -> list[tuple[object, ...]]:
    with old.cursor() as cursor:
        cursor.execute(_UNFENCED, (since,))
        return list(cursor.fetchall())


def wait_fenced(old: connection, since: object, timeout: float) -> None:
    """Wait until every transaction that began before ``since`` has ended."""
    deadline = time.monotonic() + timeout
    while pending := _unfenced(old, since):
        if time.monotonic() > deadline:
            sessions = ", ".join(f"pid {pid} ({state})" for pid, state, _ in pending[:5])
            raise DatabaseUnavailable(
                f"timed out after {timeout:g}s waiting for {len(pending)} transaction(s) begun "
                f"before the fence to end on the old primary: {sessions}; end them "
                "(pg_terminate_backend) or raise --timeout, then run the command again"
            )
        time.sleep(0.1)


def _abandon(
    old: connection, old_dsn: str, set_name: str, fence_set: bool, moved: Callable[[str], None]
) -> None:
    """Undo step 2 before the promotion: the fence lifted, the set on the old primary again."""
    try:
        if fence_set:
            unfence(old, old_dsn)
        moved(old_dsn)
    except Exception as error:  # the original failure is the one to report
        logger.error(
            "could not undo the failover of set %r (%s): check that the old primary %r is not "
            "read-only (ALTER SYSTEM RESET %s) and that the set points at it",
            set_name,
            error,
            mask_dsn(old_dsn),
            _READ_ONLY,
        )
    else:
        logger.warning("failover abandoned: set %r points at the old primary again", set_name)


def promote(
    context: Context,
    set_name: str,
    new_dsn: str,
    timeout: float,
    moved: Callable[[str], None],
    fenced: bool = True,
) -> None:
    """Step 2 of the module documentation (``moved(dsn)`` points the set at ``dsn``)."""
    current = context.store.read_set(set_name).value
    old_dsn = current.database.dsn
    new = context.connections.get(new_dsn)
    old = reachable(context, old_dsn)
    moved(new_dsn)
    if old is not None:
        fence_set = False
        try:
            relay = application_name(names.queue_name(context.cluster, set_name))
            _wait(
                lambda: (
                    not _value(
                        old,
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                        "AND datname = current_database()",
                        (relay,),
                    )
                ),
                timeout,
                f"the relay of set {set_name!r} to leave the old primary",
            )
            if fenced:
                since = fence(old, old_dsn)
                fence_set = True
                wait_fenced(old, since, timeout)
            position = _value(old, "SELECT pg_current_wal_lsn()::text")
            _wait(
                lambda: bool(
                    _value(new, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (position,))
                ),
                timeout,
                f"the standby to replay the old primary's WAL up to {position}",
            )
        except BaseException:
            _abandon(old, old_dsn, set_name, fence_set, moved)
            raise
    else:
        logger.warning(
            "the old primary does not answer: whatever it committed and did not send to the "
            "standby is lost; the relay checks that the stream holds nothing the standby lacks"
        )
    if not _value(new, "SELECT pg_promote(true, %s)", (int(timeout),)):
        raise DatabaseUnavailable(f"{mask_dsn(new_dsn)!r} did not finish its promotion")
    logger.info("promoted %r", mask_dsn(new_dsn))


def point_at(client: KazooClient, context: Context, set_name: str, dsn: str) -> None:
    """Write the set with ``dsn`` and nothing else changed (the relay follows it)."""
    current = context.store.read_set(set_name)
    configuration = SetConfiguration()
    configuration.CopyFrom(current.value)
    configuration.database.dsn = dsn
    client.set(
        current.path, configuration.SerializeToString(deterministic=True), version=current.version
    )


def plan_failover(
    context: Context, set_name: str, new_dsn: str, old_dsn: str, accept_divergence: bool
) -> Plan:
    """Step 3: the set's triggers on the new primary and the new DSN, in one change."""
    refuse_password(set_name, new_dsn)
    current = context.store.read_set(set_name).value
    new = context.connections.get(new_dsn)
    if in_recovery(new):
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} is a standby in recovery: promote it first "
            "(--promote, or pg_promote() on it)"
        )
    configuration = SetConfiguration()
    configuration.CopyFrom(current)
    configuration.database.dsn = new_dsn
    extra: list[sql.Composable] = []
    if accept_divergence:
        extra.append(
            sql.SQL("UPDATE {} SET id = pg_catalog.gen_random_uuid()").format(
                sql.Identifier(names.schema_name(context.cluster), NODE_TABLE)
            )
        )
    return plan_set_update(
        context,
        set_name,
        configuration,
        identity_checked=True,
        extra=extra,
        summary=(
            f"fail set {set_name!r} over from {mask_dsn(old_dsn)!r} to "
            f"{mask_dsn(new_dsn)!r}" + (" with a new node id" if accept_divergence else "")
        ),
    )
