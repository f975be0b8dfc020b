"""Applying a plan atomically across databases and ZooKeeper (two-phase commit).

The order, and what each failure leaves behind:

1. every database is checked for ``max_prepared_transactions > 0``; nothing
   has been touched if one fails;
2. each database runs its statements and ``PREPARE TRANSACTION
   'pgshovel_<cluster>_<uuid>'``; any failure rolls back what was prepared;
3. each prepared transaction is confirmed alive (connection up, listed in
   ``pg_prepared_xacts``); a lost one rolls everything back;
4. one ZooKeeper multi-op applies the changes while checking the versions that
   were read; a conflict (``VersionConflict``) rolls everything back;
5. each prepared transaction is committed (reconnecting once if needed); one
   that cannot be is reported with the exact ``COMMIT PREPARED`` to run by hand
   and the (masked) database to run it on — ZooKeeper already holds the change.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg2
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from psycopg2 import sql

from pgshovel.admin.connections import Connections
from pgshovel.admin.plan import Plan, ZooKeeperOperation
from pgshovel.cluster import names
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.cluster.zookeeper import access_denied
from pgshovel.errors import (
    ConfigurationError,
    DatabaseError,
    PgshovelError,
    RecoveryNeeded,
    VersionConflict,
)
from pgshovel.inspection import catalog
from pgshovel.source import first_line

logger = logging.getLogger(__name__)

LOCK_TIMEOUT = "10s"

_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)


@dataclass(frozen=True)
class Prepared:
    """A transaction prepared on one database, waiting for the ZooKeeper commit."""

    dsn: str
    gid: str
    backend_pid: int


def check_prepared_transactions(plan: Plan, connections: Connections) -> None:
    """Fail before touching anything when a database cannot prepare transactions."""
    for step in plan.databases:
        setting = catalog.max_prepared_transactions(connections.get(step.dsn))
        if setting <= 0:
            raise DatabaseError(
                f"database {mask_dsn(step.dsn)!r} has max_prepared_transactions = {setting}; "
                "pgshovel-admin needs two-phase commit: set it above 0 in postgresql.conf "
                "and restart the server (nothing was changed)"
            )


def _prepare(plan: Plan, connections: Connections) -> list[Prepared]:
    prepared: list[Prepared] = []
    prefix = names.prepared_transaction_prefix(plan.cluster)
    for step in plan.databases:
        conn = connections.get(step.dsn)
        gid = prefix + uuid.uuid4().hex
        try:
            with conn.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(
                    sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT))
                )
                for statement in step.statements:
                    cursor.execute(statement)
                cursor.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
        except psycopg2.Error as error:
            _abandon(conn)
            undone = _finish(prepared, connections, "ROLLBACK")
            raise DatabaseError(
                f"change failed on database {mask_dsn(step.dsn)!r}: {first_line(error)}; "
                f"{_outcome(undone, 'rolled back')}"
            ) from error
        prepared.append(Prepared(step.dsn, gid, conn.get_backend_pid()))
        logger.debug("prepared %s on %s", gid, mask_dsn(step.dsn))
    return prepared


def _abandon(conn: psycopg2.extensions.connection) -> None:
    """Roll back an open (not prepared) transaction, ignoring a dead connection."""
    if conn.closed:
        return
    try:
        with conn.cursor() as cursor:
            cursor.execute("ROLLBACK")
    except psycopg2.Error:
        conn.close()


def _finish(prepared: Sequence[Prepared], connections: Connections, verb: str) -> list[str]:
    """COMMIT or ROLLBACK each prepared transaction; return what must be done by hand."""
    manual = []
    for item in prepared:
        statement = sql.SQL(verb + " PREPARED {}").format(sql.Literal(item.gid))
        for attempt in range(2):
            try:
                conn = connections.get(item.dsn) if attempt == 0 else connections.replace(item.dsn)
                with conn.cursor() as cursor:
                    cursor.execute(statement)
                break
            except (psycopg2.Error, PgshovelError) as error:
                logger.warning(
                    "%s PREPARED %r on %s failed: %s", verb, item.gid, mask_dsn(item.dsn), error
                )
        else:
            manual.append(f"run {verb} PREPARED '{item.gid}' on database {mask_dsn(item.dsn)!r}")
    return manual


def _outcome(manual: list[str], done: str) -> str:
    if not manual:
        return f"every database was {done}; nothing was changed"
    return "some prepared transactions could not be undone: " + "; ".join(manual)


def _confirm(prepared: Sequence[Prepared], connections: Connections) -> None:
    for item in prepared:
        try:
            with connections.get(item.dsn).cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM pg_catalog.pg_prepared_xacts WHERE gid = %s", (item.gid,)
                )
                alive = cursor.fetchone() is not None
        except psycopg2.Error as error:
            undone = _finish(prepared, connections, "ROLLBACK")
            raise DatabaseError(
                f"lost the connection to database {mask_dsn(item.dsn)!r} after preparing "
                f"({first_line(error)}); {_outcome(undone, 'rolled back')}"
            ) from error
        if not alive:
            undone = _finish(prepared, connections, "ROLLBACK")
            raise DatabaseError(
                f"prepared transaction {item.gid!r} disappeared from database "
                f"{mask_dsn(item.dsn)!r} before the zookeeper commit; "
                f"{_outcome(undone, 'rolled back')}"
            )


def _commit_zookeeper(operations: Sequence[ZooKeeperOperation], client: KazooClient) -> None:
    transaction = client.transaction()
    for operation in operations:
        if operation.action == "check":
            transaction.check(operation.path, operation.version)
        elif operation.action == "create":
            transaction.create(operation.path, operation.data)
        elif operation.action == "set":
            transaction.set_data(operation.path, operation.data, operation.version)
        else:
            transaction.delete(operation.path, operation.version)
    results = transaction.commit()
    for operation, result in zip(operations, results, strict=True):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            kind = type(result).__name__
            if isinstance(result, _CONFLICTS):
                raise VersionConflict(
                    f"the configuration changed while this command ran: {operation.describe()} "
                    f"failed ({kind}); read it again and retry"
                )
            if isinstance(result, NoAuthError):
                raise access_denied(client, operation.path)
            raise ConfigurationError(
                f"zookeeper refused {operation.describe()}: {kind}; check the credentials and ACLs"
            )


def execute(
    plan: Plan,
    connections: Connections,
    client: KazooClient,
    *,
    before_zookeeper_commit: Callable[[Sequence[Prepared]], None] | None = None,
) -> None:
    """Apply ``plan``; see the module docstring for the order and the failure modes.

    ``before_zookeeper_commit`` is called with the prepared transactions just
    before they are confirmed and ZooKeeper is committed (tests use it to break
    things at that exact point).
    """
    check_prepared_transactions(plan, connections)
    prepared = _prepare(plan, connections)
    if before_zookeeper_commit is not None:
        before_zookeeper_commit(prepared)
    _confirm(prepared, connections)
    try:
        _commit_zookeeper(plan.zookeeper, client)
    except PgshovelError as error:
        undone = _finish(prepared, connections, "ROLLBACK")
        raise type(error)(f"{error}; {_outcome(undone, 'rolled back')}") from error
    except KazooException as error:
        # The multi-op may or may not have been applied: do not guess.
        pending = "; ".join(f"'{item.gid}' on database {mask_dsn(item.dsn)!r}" for item in prepared)
        raise RecoveryNeeded(
            f"lost zookeeper during the commit ({type(error).__name__}); the outcome is unknown: "
            "if the zookeeper nodes show the change run COMMIT PREPARED, else ROLLBACK PREPARED, "
            f"for {pending or 'no database'}"
        ) from error
    manual = _finish(prepared, connections, "COMMIT")
    if manual:
        raise RecoveryNeeded(
            "zookeeper holds the change but some databases do not yet: " + "; ".join(manual)
        )
