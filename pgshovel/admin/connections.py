"""Database connections for one admin command, opened on first use and all closed at the end.

Connections are in autocommit mode: catalog reads see the latest state, and the
two-phase executor issues BEGIN / PREPARE TRANSACTION itself. They are opened by
``pgshovel.source.connect``, so their errors name the database with its
password masked.
"""

from __future__ import annotations

from types import TracebackType

from psycopg2.extensions import connection

from pgshovel.source import connect

APPLICATION_NAME = "pgshovel-admin"


class Connections:
    """One connection per DSN for the duration of a command (a context manager)."""

    def __init__(self) -> None:
        self._open: dict[str, connection] = {}

    def get(self, dsn: str) -> connection:
        conn = self._open.get(dsn)
        if conn is None or conn.closed:
            conn = self._open[dsn] = connect(dsn, APPLICATION_NAME, autocommit=True)
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
