"""The one way a pgshovel process opens a PostgreSQL connection, and what its failures mean.

Every connection (admin, relay, worker driver and Spark tasks, source and
PostgreSQL target) gets the same output settings, so a value printed by one
session reads back as the identical value in another, and carries an
``application_name`` naming the process and its role (visible in
``pg_stat_activity``). Failures are translated once, here: a connection lost or
refused, or a server starting up or shutting down, is ``DatabaseUnavailable``
(transient, retried); a bad password, an unknown database or role is a
``ConfigurationError``; any other statement failure is a ``DatabaseError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg2
from psycopg2 import errorcodes, sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import make_dsn

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import (
    ConfigurationError,
    DatabaseError,
    DatabaseUnavailable,
    PgshovelError,
)

CONNECT_TIMEOUT_SECONDS = 10

#: Output settings of every session: the text PostgreSQL prints under them is
#: what the codec reads and what COPY carries between databases.
TEXT_SETTINGS: tuple[tuple[str, str], ...] = (
    ("TimeZone", "UTC"),
    ("extra_float_digits", "1"),
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("bytea_output", "hex"),
    ("client_encoding", "UTF8"),
)

_SETTINGS_STATEMENT = sql.SQL("; ").join(
    sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
    for name, value in TEXT_SETTINGS
)

# SQLSTATEs of a server going away or not accepting sessions yet.
_UNAVAILABLE_STATES = frozenset(
    {
        errorcodes.ADMIN_SHUTDOWN,
        errorcodes.CRASH_SHUTDOWN,
        errorcodes.CANNOT_CONNECT_NOW,
        errorcodes.IDLE_SESSION_TIMEOUT,
    }
)
# What libpq says when the server refuses a login for a lasting reason.
_LOGIN_REFUSED = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "invalid dsn",
    "invalid connection option",
    'missing "="',
    "permission denied",
    "no password supplied",
)


def first_line(error: BaseException) -> str:
    """The first line of an error's text (psycopg2 appends context lines), or its class."""
    text = str(getattr(error, "pgerror", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def is_unavailable(error: BaseException) -> bool:
    """Whether a psycopg2 error means the connection or the server is gone (transient)."""
    if isinstance(error, psycopg2.InterfaceError):
        return True  # "connection already closed"
    if not isinstance(error, psycopg2.OperationalError):
        return False
    code = getattr(error, "pgcode", None)
    if code is None:
        return True  # libpq: the socket broke, the server closed the connection
    return code.startswith("08") or code in _UNAVAILABLE_STATES


def translate(error: psycopg2.Error, doing: str) -> PgshovelError:
    """The pgshovel error for a psycopg2 failure while ``doing`` (e.g. "applying batch 7")."""
    reason = first_line(error)
    if is_unavailable(error):
        return DatabaseUnavailable(f"{doing} failed: the database connection was lost ({reason})")
    if getattr(error, "pgcode", None) == errorcodes.READ_ONLY_SQL_TRANSACTION:
        # A standby, or a primary fenced by 'set failover': transient while a failover runs.
        return DatabaseUnavailable(
            f"{doing} failed: the database is read-only ({reason}): a standby, or a primary "
            "fenced by 'set failover'"
        )
    return DatabaseError(f"{doing} failed: {reason}")


@contextmanager
def translating(doing: str) -> Iterator[None]:
    """Raise the pgshovel error for any psycopg2 failure inside the block (see ``translate``)."""
    try:
        yield
    except psycopg2.Error as error:
        raise translate(error, doing) from error


def connect(
    dsn: str,
    application_name: str,
    *,
    autocommit: bool = False,
    connect_timeout: int = CONNECT_TIMEOUT_SECONDS,
) -> Connection:
    """A new connection to ``dsn`` with the text settings applied, outside any transaction.

    A refused login (password, role, database, pg_hba) is a ``ConfigurationError``;
    a server that cannot be reached or is not accepting sessions is
    ``DatabaseUnavailable``. Both name the database with its password masked.
    """
    try:
        connection = psycopg2.connect(
            make_dsn(dsn, application_name=application_name),
            connect_timeout=connect_timeout,
        )
    except psycopg2.ProgrammingError as error:
        raise ConfigurationError(
            f"invalid connection string {mask_dsn(dsn)!r}: {first_line(error)}"
        ) from error
    except psycopg2.Error as error:
        reason = first_line(error)
        where = f"database {mask_dsn(dsn)!r}"
        if any(marker in reason for marker in _LOGIN_REFUSED):
            raise ConfigurationError(
                f"cannot connect to {where}: {reason}; check the dsn and the role's privileges"
            ) from error
        raise DatabaseUnavailable(
            f"cannot connect to {where}: {reason}; is the server running?"
        ) from error
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(_SETTINGS_STATEMENT)
        connection.autocommit = autocommit
    except psycopg2.Error as error:
        connection.close()
        raise translate(error, f"setting up a session on {mask_dsn(dsn)!r}") from error
    return connection
