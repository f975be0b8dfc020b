"""``pgshovel-admin set failover SET --to DSN``: move a set to a promoted physical standby.

PgQ's queue, ticks and consumer position are ordinary tables, so a physical
standby carries them with the data: after its promotion capture goes on there
with the same node id and batch ids, and nothing is re-created. The command:

1. checks that DSN is the set's database or a physical copy of it: the same
   node id as the old primary when that one answers, else every captured
   table's triggers stamped with the set's current version (which hashes the
   old DSN: only the database the set was installed in, or a copy of it, has
   them);
2. with ``--promote``, when DSN is still a standby: points the set at it first
   (the relay finishes its batch on the old primary, leaves it, and waits for
   the promotion), waits until no relay session of the set is left on the old
   primary and the standby replayed the old primary's WAL up to that point,
   then promotes it (``pg_promote``). Writes to the old primary must have
   stopped: what it commits later is not on the standby;
3. re-installs the set's triggers on the new primary (stamped with the new
   version) and writes the set with the new DSN, in one two-phase change like
   ``set update``. With ``--accept-divergence`` the new primary also gets a new
   node id, after the relay reported that the stream holds batches the standby
   never received (see ``pgshovel.relay.failover``): readers then take its
   batches as a new source's, and ``set verify --repair`` removes from the
   copies the changes the standby lost.

The relay and the worker follow the set's DSN without a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.admin import catalog
from pgshovel.admin.plan import Plan
from pgshovel.admin.planning import Context, plan_set_update
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, refuse_password
from pgshovel.cluster.versions import set_version
from pgshovel.errors import ConfigurationError, DatabaseUnavailable, PgshovelError
from pgshovel.protocol import configuration_pb2
from pgshovel.relay.queue import application_name
from pgshovel.source import NODE_TABLE, node_id

logger = logging.getLogger(__name__)

SetConfiguration = configuration_pb2.ReplicationSetConfiguration


def _value(conn: connection, query: str, parameters: tuple[object, ...] = ()) -> object:
    with conn.cursor() as cursor:
        cursor.execute(query, parameters)
        row = cursor.fetchone()
    return None if row is None else row[0]


def in_recovery(conn: connection) -> bool:
    return bool(_value(conn, "SELECT pg_is_in_recovery()"))


def _reachable(context: Context, dsn: str) -> connection | None:
    try:
        return context.connections.get(dsn)
    except DatabaseUnavailable as error:
        logger.warning("the old primary %r does not answer (%s)", mask_dsn(dsn), error)
        return None


def check_identity(
    context: Context, set_name: str, current: SetConfiguration, new: connection, new_dsn: str
) -> None:
    """An error unless ``new`` is the set's database or a physical copy of it."""
    new_node = node_id(new, context.cluster)
    if new_node is None:
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} has no pgshovel node id for cluster {context.cluster!r}: "
            f"it is not a copy of set {set_name!r}'s database"
        )
    old = _reachable(context, current.database.dsn)
    if old is not None:
        old_node = node_id(old, context.cluster)
        if old_node != new_node:
            raise ConfigurationError(
                f"{mask_dsn(new_dsn)!r} (node {new_node}) is not a copy of set {set_name!r}'s "
                f"database {mask_dsn(current.database.dsn)!r} (node {old_node})"
            )
        return
    version = set_version(current)
    for table in current.tables:
        triggers = catalog.installed_triggers(new, table.schema, table.name)
        mine = triggers.get(names.trigger_name(context.cluster, set_name))
        if mine is None or mine.arguments[1:2] != (version,):
            raise ConfigurationError(
                f"cannot tell whether {mask_dsn(new_dsn)!r} is a copy of set {set_name!r}'s "
                f"database: the old primary does not answer and table {table.schema!r}."
                f"{table.name!r} there lacks the set's version {version} triggers"
            )


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise DatabaseUnavailable(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


def promote(
    context: Context,
    set_name: str,
    new_dsn: str,
    timeout: float,
    moved: Callable[[], None],
) -> None:
    """Step 2 of the module documentation (``moved`` writes the set's new DSN)."""
    current = context.store.read_set(set_name).value
    new = context.connections.get(new_dsn)
    old = _reachable(context, current.database.dsn)
    moved()
    if old is not None:
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
        position = _value(old, "SELECT pg_current_wal_lsn()::text")
        _wait(
            lambda: bool(_value(new, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (position,))),
            timeout,
            f"the standby to replay the old primary's WAL up to {position}",
        )
    else:
        logger.warning(
            "the old primary does not answer: whatever it committed and did not send to the "
            "standby is lost; the relay checks that the stream holds nothing the standby lacks"
        )
    if not _value(new, "SELECT pg_promote(true, %s)", (int(timeout),)):
        raise DatabaseUnavailable(f"{mask_dsn(new_dsn)!r} did not finish its promotion")
    logger.info("promoted %r", mask_dsn(new_dsn))


def point_at(client: KazooClient, context: Context, set_name: str, new_dsn: str) -> None:
    """Write the set with ``new_dsn`` and nothing else changed (the relay follows it)."""
    current = context.store.read_set(set_name)
    configuration = SetConfiguration()
    configuration.CopyFrom(current.value)
    configuration.database.dsn = new_dsn
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


def identity(context: Context, set_name: str, new_dsn: str) -> bool:
    """Check DSN (step 1); whether it is still a standby in recovery."""
    refuse_password(set_name, new_dsn)
    current = context.store.read_set(set_name).value
    if new_dsn == current.database.dsn:
        raise ConfigurationError(f"set {set_name!r} already uses {mask_dsn(new_dsn)!r}")
    try:
        new = context.connections.get(new_dsn)
    except PgshovelError as error:
        raise DatabaseUnavailable(f"the new primary does not answer: {error}") from error
    check_identity(context, set_name, current, new, new_dsn)
    return in_recovery(new)
