"""The PostgreSQL target: replicated tables plus the worker's state in one database.

Commit order: each micro-batch's changes and the new stream position are
written in one target transaction, so after a crash the stored position names
exactly the last batch applied. A snapshot load is all or nothing: ranges are
committed by parallel Spark tasks, so if the worker dies during the load the
state stays in phase ``snapshot`` and the next start empties the set's tables
and loads again from a new snapshot.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as Connection

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import DatabaseError, ReplicationError
from pgshovel.replication import catalog, sessions
from pgshovel.replication.abc import CopyOut, SnapshotSink
from pgshovel.replication.model import TableShape, WorkerState
from pgshovel.replication.mutations import group_by_table
from pgshovel.replication.targets import _pgapply, _pgstate
from pgshovel.stream.batches import CommittedBatch

logger = logging.getLogger(__name__)

STAGING_TABLE = "pgshovel_staging"


@dataclass(frozen=True)
class PostgresSnapshotSink:
    """Pipes a range's ``COPY TO`` output from the source into ``COPY FROM`` on the target."""

    dsn: str

    def load_range(self, table: TableShape, index: int, copy_out: CopyOut) -> int:
        connection = sessions.connect(self.dsn, "pgshovel-replicate snapshot")
        try:
            return _pipe_range(connection, table, copy_out)
        finally:
            connection.close()


def _pipe_range(connection: Connection, table: TableShape, copy_out: CopyOut) -> int:
    read_fd, write_fd = os.pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        with os.fdopen(write_fd, "wb") as writer:
            try:
                copy_out(writer)
            except BaseException as error:
                failure.append(error)

    producer = threading.Thread(target=produce, name=f"copy-out {table.qualified}")
    producer.start()
    copy_in = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table.schema, table.name),
        sql.SQL(", ").join(sql.Identifier(name) for name in table.column_names),
    )
    try:
        with os.fdopen(read_fd, "rb") as reader, connection.cursor() as cursor:
            cursor.copy_expert(copy_in.as_string(cursor), reader, size=1 << 16)
            rows = cursor.rowcount
    finally:
        producer.join()
    if failure:
        connection.rollback()
        raise ReplicationError(
            f"reading a snapshot range of {table.qualified!r} from the source failed: {failure[0]}"
        ) from failure[0]
    connection.commit()
    return rows


class PostgresTarget:
    """Replicates into the PostgreSQL database at ``dsn`` (tables created when missing)."""

    def __init__(self, dsn: str) -> None:
        if not isinstance(dsn, str) or not dsn:
            raise ReplicationError(
                f"postgresql target: dsn must be a connection string, got {dsn!r}"
            )
        self.dsn = dsn
        self._connection: Connection | None = None
        self._tables: list[TableShape] = []
        self._cluster = ""
        self._set_name = ""

    def __repr__(self) -> str:
        return f"PostgresTarget(dsn={mask_dsn(self.dsn)!r})"

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise ReplicationError("postgresql target is not open; call open() first")
        return self._connection

    def open(self, cluster: str, set_name: str, tables: Sequence[TableShape]) -> WorkerState | None:
        self._cluster, self._set_name, self._tables = cluster, set_name, list(tables)
        self._connection = sessions.connect(self.dsn)
        try:
            with self.connection.cursor() as cursor:
                _pgstate.lock(cursor, cluster, set_name)
                _pgstate.create(cursor)
                for table in tables:
                    _pgapply.create_table(cursor, table)
                state = _pgstate.read(cursor, cluster, set_name)
            self.connection.commit()
        except psycopg2.Error as error:
            self.connection.rollback()
            raise DatabaseError(
                f"cannot prepare the postgresql target: {str(error).strip()}"
            ) from error
        return state

    def begin_snapshot(self, state: WorkerState) -> None:
        with self.connection.cursor() as cursor:
            for table in self._tables:
                _pgapply.truncate(cursor, table)
            _pgstate.write(cursor, self._cluster, self._set_name, state)
        self.connection.commit()

    def snapshot_sink(self) -> SnapshotSink:
        return PostgresSnapshotSink(self.dsn)

    def finish_snapshot(self, state: WorkerState) -> None:
        with self.connection.cursor() as cursor:
            for table in self._tables:
                cursor.execute(
                    sql.SQL("ANALYZE {}").format(sql.Identifier(table.schema, table.name))
                )
            _pgstate.write(cursor, self._cluster, self._set_name, state)
        self.connection.commit()

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        rows = 0
        try:
            with self.connection.cursor() as cursor:
                grouped = group_by_table(batches, catalog.by_name(self._tables))
                for table in self._tables:
                    changes = grouped.get((table.schema, table.name))
                    if not changes:
                        continue
                    if table.key:
                        rows += _pgapply.apply_keyed(cursor, table, changes, STAGING_TABLE)
                    else:
                        rows += _pgapply.apply_unkeyed(cursor, table, changes)
                _pgstate.write(cursor, self._cluster, self._set_name, state)
            self.connection.commit()
        except psycopg2.Error as error:
            self.connection.rollback()
            first = batches[0].position.offset if batches else None
            raise DatabaseError(
                f"applying {len(batches)!r} batch(es) from offset {first!r} to the postgresql "
                f"target failed and was rolled back: {str(error).strip()}"
            ) from error
        except BaseException:
            self.connection.rollback()
            raise
        return rows

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
