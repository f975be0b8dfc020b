"""Which capture function a database gets: the C trigger where its library is installed,
else the PL/pgSQL one.

Both implement the one contract of ``sql/capture.sql`` and write the same events
byte for byte; the C trigger (``ext/pgshovel_capture.c``, built and installed by
``make setup``) costs the writing transaction about a third of the PL/pgSQL one
(see ``make bench``). Creating a C function needs a superuser, so the library is
used when the admin connection is a superuser's and the server loads
``pgshovel_capture`` answering the contract version this pgshovel expects.
``PGSHOVEL_CAPTURE`` overrides the choice: ``auto`` (default), ``c`` (an error
when the library cannot be used) or ``plpgsql``.

The contract is asked of ``pgshovel_capture_contract_version()``, which answers the
highest contract the library serves (every lower one included): 5 serves packs of COPY
lines (a sixth trigger argument ``ROWS,BYTES,copy``, ``ext/packing.c``) besides packing
(4, ``ROWS,BYTES``), provenance (the fifth argument), statement triggers with
transition tables and row triggers. A library answering less than 5 gets the PL/pgSQL
trigger (its packing argument would be refused), one older than 4 lacks the function
altogether; the library keeps answering 3 from
``pgshovel_capture_revision()``, 2 from ``pgshovel_capture_contract()`` and 1 from
``pgshovel_capture_version()``, what earlier pgshovel versions ask (their triggers
work as they did).
"""

from __future__ import annotations

import os
from typing import Literal

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.errors import ConfigurationError

LIBRARY = "pgshovel_capture"
#: the contract this pgshovel needs: pgshovel_capture_contract_version() answers it or more
CONTRACT_VERSION = 5
#: the library's function that answers it (ext/pgshovel_capture.c)
CONTRACT_FUNCTION = "pgshovel_capture_contract_version"
ENVIRONMENT = "PGSHOVEL_CAPTURE"
CHOICES = ("auto", "c", "plpgsql")

Implementation = Literal["c", "plpgsql"]


def requested() -> str:
    """``PGSHOVEL_CAPTURE``, checked; ``auto`` when unset or empty."""
    value = os.environ.get(ENVIRONMENT, "").strip() or "auto"
    if value not in CHOICES:
        raise ConfigurationError(
            f"{ENVIRONMENT}={value!r} is not one of {', '.join(CHOICES)}; "
            "unset it to let pgshovel-admin choose"
        )
    return value


def library_version(conn: connection) -> int | None:
    """The contract version the server's ``pgshovel_capture`` library answers, or None
    when it cannot be used from ``conn`` (not a superuser, library missing or broken).

    It creates a probe function in ``pg_temp`` inside a transaction it rolls back.
    """
    with conn.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER")
        row = cursor.fetchone()
    if row is None or not row[0]:
        return None
    if conn.autocommit:
        conn.autocommit = False
        try:
            return _probe(conn)
        finally:
            conn.rollback()
            conn.autocommit = True
    # Inside the caller's transaction: probe under a savepoint and undo just that.
    with conn.cursor() as cursor:
        cursor.execute("SAVEPOINT pgshovel_capture_probe")
    try:
        return _probe(conn)
    finally:
        with conn.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT pgshovel_capture_probe")
            cursor.execute("RELEASE SAVEPOINT pgshovel_capture_probe")


def _probe(conn: connection) -> int | None:
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                sql.SQL("CREATE FUNCTION {}() RETURNS integer LANGUAGE c AS {}, {}").format(
                    sql.Identifier("pg_temp", CONTRACT_FUNCTION),
                    sql.Literal(LIBRARY),
                    sql.Literal(CONTRACT_FUNCTION),
                )
            )
            cursor.execute(
                sql.SQL("SELECT {}()").format(sql.Identifier("pg_temp", CONTRACT_FUNCTION))
            )
            answer = cursor.fetchone()
    except psycopg2.Error:
        return None
    return None if answer is None else int(answer[0])


def serves(version: int | None) -> bool:
    """Whether a library answering ``version`` serves the triggers this pgshovel installs."""
    return version is not None and version >= CONTRACT_VERSION


def choose(conn: connection, database: str) -> Implementation:
    """The capture function for the database ``conn`` reaches (named ``database`` in errors)."""
    wanted = requested()
    if wanted == "plpgsql":
        return "plpgsql"
    version = library_version(conn)
    if serves(version):
        return "c"
    if wanted == "c":
        found = (
            f"is not loadable by a superuser or lacks {CONTRACT_FUNCTION}()"
            if version is None
            else f"answers {version}"
        )
        raise ConfigurationError(
            f"{ENVIRONMENT}=c but the {LIBRARY} library of database {database!r} {found} "
            f"(expected contract {CONTRACT_VERSION} or later): build and install it on that server "
            f"(make -C ext install, needs postgresql-server-dev-15) and connect as a "
            f"superuser, or unset {ENVIRONMENT}"
        )
    return "plpgsql"
