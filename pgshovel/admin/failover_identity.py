"""Step 1 of ``set failover``: is DSN the set's database, a physical copy of it, or neither?

A set may only move to a physical copy of its database (a streaming standby,
promoted or to promote): that is what carries the PgQ queue, its ticks and the
consumer position with the data. While the old primary answers, four facts
decide, each read from both servers (``Server``):

- the system identifier (``pg_control_system()``): a primary and every
  physical copy of it share it; any other cluster (a new ``initdb``, a
  ``pg_dump`` restored elsewhere) has its own;
- the database's oid: a physical copy keeps it; ``CREATE DATABASE ...
  TEMPLATE`` (a clone on the same server, node id and triggers included) gets
  a new one;
- the postmaster's start time, with the system identifier: tells one running
  server from another, so the set's own database reached under another
  spelling (host name, address, URI) is recognised as itself, not taken for a
  standby;
- whether each is in recovery or read-only: a promoted standby beside an old
  primary that still accepts writes would be two writable histories (the
  application's later writes on the old one never captured), so that is
  refused until the old primary is fenced or stopped.

With the old primary gone only the new database can be asked: it must carry
the set's node id and every captured table the set's triggers stamped with the
set's current version (a hash that includes the old DSN). A DSN that is the
set's own already is either done, the end of an interrupted failover (its
triggers not yet re-stamped), or the ``--accept-divergence`` remedy the relay
names (a new node id for the same database).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from psycopg2.extensions import connection

from pgshovel.admin.planning import Context
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn, refuse_password
from pgshovel.cluster.versions import set_version
from pgshovel.errors import ConfigurationError, DatabaseUnavailable, PgshovelError
from pgshovel.inspection import catalog
from pgshovel.protocol import configuration_pb2
from pgshovel.source import node_id

logger = logging.getLogger(__name__)

SetConfiguration = configuration_pb2.ReplicationSetConfiguration

#: How to fence a primary by hand (what ``--promote`` does itself; undone by ALTER SYSTEM RESET).
FENCE_SQL = "ALTER SYSTEM SET default_transaction_read_only = on; SELECT pg_reload_conf()"

_SERVER = (
    "SELECT (SELECT system_identifier::text FROM pg_catalog.pg_control_system()), "
    "extract(epoch FROM pg_catalog.pg_postmaster_start_time())::text, d.oid::int8, d.datname, "
    "pg_catalog.pg_is_in_recovery(), "
    "pg_catalog.current_setting('default_transaction_read_only') = 'on' "
    "FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()"
)


@dataclass(frozen=True)
class Server:
    """What tells databases and servers apart (see the module documentation)."""

    system: str
    started: str
    database: int
    database_name: str
    in_recovery: bool
    read_only: bool

    def same_server(self, other: Server) -> bool:
        return (self.system, self.started) == (other.system, other.started)


def describe(conn: connection) -> Server:
    with conn.cursor() as cursor:
        cursor.execute(_SERVER)
        row = cursor.fetchone()
    if row is None:
        raise ConfigurationError("cannot read the current database's oid")
    system, started, oid, name, recovery, read_only = row
    return Server(str(system), str(started), int(oid), str(name), bool(recovery), bool(read_only))


@dataclass(frozen=True)
class Target:
    """The verdict on DSN: whether it is a standby to promote, and what to tell the operator."""

    standby: bool
    note: str | None = None


def reachable(context: Context, dsn: str) -> connection | None:
    """A connection to the old primary, or None when it does not answer."""
    try:
        return context.connections.get(dsn)
    except DatabaseUnavailable as error:
        logger.warning("the old primary %r does not answer (%s)", mask_dsn(dsn), error)
        return None


def unstamped(
    context: Context, set_name: str, current: SetConfiguration, conn: connection
) -> str | None:
    """The first captured table in ``conn`` without the set's current version triggers."""
    version = set_version(current)
    for table in current.tables:
        triggers = catalog.installed_triggers(conn, table.schema, table.name)
        mine = triggers.get(names.trigger_name(context.cluster, set_name))
        if mine is None or mine.arguments[1:2] != (version,):
            return f"{table.schema!r}.{table.name!r}"
    return None


def identity(
    context: Context,
    set_name: str,
    new_dsn: str,
    promote: bool = False,
    accept_divergence: bool = False,
) -> Target:
    """Check DSN (step 1); an error naming the reason unless the set may move there."""
    refuse_password(set_name, new_dsn)
    current = context.store.read_set(set_name).value
    try:
        new = context.connections.get(new_dsn)
    except PgshovelError as error:
        raise DatabaseUnavailable(f"the new primary does not answer: {error}") from error
    old_dsn = current.database.dsn
    if new_dsn == old_dsn:
        return _already_there(context, set_name, current, new, new_dsn, promote, accept_divergence)
    new_node = node_id(new, context.cluster)
    if new_node is None:
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} has no pgshovel node id for cluster {context.cluster!r}: "
            f"it is not a copy of set {set_name!r}'s database"
        )
    old = reachable(context, old_dsn)
    if old is None:
        missing = unstamped(context, set_name, current, new)
        if missing is not None:
            raise ConfigurationError(
                f"cannot tell whether {mask_dsn(new_dsn)!r} is a copy of set {set_name!r}'s "
                f"database: the old primary does not answer and table {missing} there lacks "
                f"the set's version {set_version(current)} triggers"
            )
        return _target(describe(new), new_dsn, promote)
    was, now = describe(old), describe(new)
    where = f"set {set_name!r}'s database {mask_dsn(old_dsn)!r}"
    if was.same_server(now):
        if was.database == now.database:
            return _already_there(
                context, set_name, current, new, new_dsn, promote, accept_divergence
            )
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} is database {now.database_name!r} on the server of {where}: "
            "a copy made on that server (CREATE DATABASE ... TEMPLATE, or a restore), not a "
            "physical standby; the set's database would go on taking writes no trigger "
            "publishes. Fail over only to a physical standby of the server (pg_basebackup), "
            "or move the set with 'set drop' and 'set create'"
        )
    _same_copy(was, now, where, new_dsn)
    old_node = node_id(old, context.cluster)
    if old_node != new_node:
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} (node {new_node}) is not a copy of {where} (node {old_node})"
        )
    if not now.in_recovery and not was.in_recovery and not was.read_only:
        raise ConfigurationError(
            f"{where} still answers and takes writes, and {mask_dsn(new_dsn)!r} is a "
            "promoted copy of it: two writable histories, and whatever the application "
            "writes on the old primary would never be captured. Fence the old primary first "
            f"(there, as a superuser: {FENCE_SQL}) or stop it, then run this command again; "
            "for a switchover from a standby still in recovery use --promote"
        )
    return _target(now, new_dsn, promote)


def _same_copy(was: Server, now: Server, where: str, new_dsn: str) -> None:
    """An error unless ``now`` is a physical copy of the database ``was`` describes."""
    if was.system != now.system:
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} is not a physical copy of {where}: its server has system "
            f"identifier {now.system}, the set's {was.system} (a physical standby shares it); "
            "a logical copy (pg_dump, another cluster) has no PgQ queue in step with the set's"
        )
    if was.database != now.database:
        raise ConfigurationError(
            f"{mask_dsn(new_dsn)!r} is database {now.database_name!r} (oid {now.database}) of a "
            f"copy of the server of {where} (oid {was.database}): another database than the "
            "set's, such as a CREATE DATABASE ... TEMPLATE clone; give the standby's DSN of "
            f"database {was.database_name!r}"
        )


def _target(new: Server, new_dsn: str, promote: bool) -> Target:
    if new.in_recovery:
        if not promote:
            raise ConfigurationError(
                f"{mask_dsn(new_dsn)!r} is a standby in recovery: pass --promote, or promote it "
                "first (pg_promote() on it)"
            )
        return Target(standby=True)
    if promote:
        return Target(
            standby=False,
            note="--promote: the new database is no longer in recovery (already promoted); "
            "nothing to promote or fence",
        )
    return Target(standby=False)


def _already_there(
    context: Context,
    set_name: str,
    current: SetConfiguration,
    new: connection,
    new_dsn: str,
    promote: bool,
    accept_divergence: bool,
) -> Target:
    """DSN reaches the set's database itself: done, an interrupted failover to finish, or the
    ``--accept-divergence`` remedy."""
    if describe(new).in_recovery:
        # The set points at a standby: a failover interrupted after step 2 moved the set.
        raise ConfigurationError(
            f"set {set_name!r} already points at {mask_dsn(new_dsn)!r}, a standby in "
            "recovery (an interrupted 'set failover --promote'): check that it replayed "
            "the old primary's WAL, promote it (pg_promote()) and run this command again "
            "without --promote; or point the set back with 'set failover --to OLD-DSN' (after "
            "ALTER SYSTEM RESET default_transaction_read_only there if it was fenced)"
        )
    if accept_divergence:
        logger.warning("giving set %r's database a new node id (--accept-divergence)", set_name)
        return Target(standby=False)
    if unstamped(context, set_name, current, new) is None:
        raise ConfigurationError(
            f"set {set_name!r} already uses {mask_dsn(new_dsn)!r}"
            + (
                ": it is the set's database itself, not a standby of it, so there is nothing "
                "to promote (give --to the standby's DSN)"
                if promote
                else ""
            )
        )
    logger.warning("finishing an interrupted failover of set %r", set_name)
    return Target(
        standby=False,
        note="--promote: the database is no longer in recovery (already promoted)"
        if promote
        else None,
    )
