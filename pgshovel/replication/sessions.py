"""Database sessions whose text forms round-trip exactly between source and target.

Every connection the worker opens (driver and Spark tasks, source and target)
uses the same output settings, so that a value written by ``COPY TO`` on the
source is read back by ``COPY FROM`` on the target as the identical value.
"""

from __future__ import annotations

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection
from psycopg2.extensions import make_dsn

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import DatabaseError

TEXT_SETTINGS: tuple[tuple[str, str], ...] = (
    ("TimeZone", "UTC"),
    ("extra_float_digits", "1"),
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("bytea_output", "hex"),
    ("client_encoding", "UTF8"),
)


def connect(dsn: str, application_name: str = "pgshovel-replicate") -> Connection:
    """Open a connection with the text settings applied; not in a transaction yet."""
    try:
        connection = psycopg2.connect(make_dsn(dsn, application_name=application_name))
    except psycopg2.Error as error:
        raise DatabaseError(
            f"cannot connect to {mask_dsn(dsn)!r}: {str(error).strip()}; "
            "check the dsn and that the server is running"
        ) from error
    connection.autocommit = True
    with connection.cursor() as cursor:
        for name, value in TEXT_SETTINGS:
            cursor.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
    connection.autocommit = False
    return connection
