"""translate: which psycopg2 failures are transient (retried) and how they are named."""

from __future__ import annotations

import psycopg2
import psycopg2.errors

from pgshovel.errors import DatabaseError, DatabaseUnavailable
from pgshovel.source import translate


class ReadOnly(psycopg2.errors.ReadOnlySqlTransaction):
    pgcode = "25006"  # what the server sends; a constructed error has none


class Unique(psycopg2.errors.UniqueViolation):
    pgcode = "23505"


def test_a_read_only_database_is_transient_and_named() -> None:
    error = translate(
        ReadOnly("cannot execute INSERT in a read-only transaction"), "taking batch 7"
    )
    assert isinstance(error, DatabaseUnavailable)
    assert str(error) == (
        "taking batch 7 failed: the database is read-only (cannot execute INSERT in a read-only "
        "transaction): a standby, or a primary fenced by 'set failover'"
    )


def test_a_lost_connection_is_transient_and_a_constraint_is_not() -> None:
    lost = translate(psycopg2.InterfaceError("connection already closed"), "applying batch 3")
    assert isinstance(lost, DatabaseUnavailable) and "connection was lost" in str(lost)
    constraint = translate(Unique("duplicate key value"), "applying batch 3")
    assert isinstance(constraint, DatabaseError)
    assert not isinstance(constraint, DatabaseUnavailable)
