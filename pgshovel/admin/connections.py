"""Database connections for one admin command, opened on first use and all closed at the end.

Connections are in autocommit mode: catalog reads see the latest state, and the
two-phase executor issues BEGIN / PREPARE TRANSACTION itself. Connection errors
name the database with its password masked.
"""

from __future__ import annotations

from types import TracebackType

import psycopg2
from psycopg2.extensions import connection

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import DatabaseError

CONNECT_TIMEOUT_SECONDS = 10


def open_connection(dsn: str) -> connection:
    """A new autocommit connection to ``dsn``; a DatabaseError naming it when that fails."""
    try:
        conn = psycopg2.connect(dsn, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except psycopg2.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DatabaseError(f"cannot connect to database {mask_dsn(dsn)!r}: {reason}") from error
    conn.autocommit = True
    return conn


class Connections:
    """One connection per DSN for the duration of a command (a context manager)."""

    def __init__(self) -> None:
        self._open: dict[str, connection] = {}

    def get(self, dsn: str) -> connection:
        conn = self._open.get(dsn)
        if conn is None or conn.closed:
            conn = self._open[dsn] = open_connection(dsn)
        return conn

    def replace(self, dsn: str) -> connection:
        """Drop a (possibly broken) connection and open a fresh one."""
        old = self._open.pop(dsn, None)
        if old is not None and not old.closed:
            old.close()
        return self.get(dsn)

    def close(self) -> None:
        for conn in self._open.values():
            if not conn.closed:
                conn.close()
        self._open.clear()

    def __enter__(self) -> Connections:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
