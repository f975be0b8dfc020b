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

from pgshovel.abc import CopyOut, SnapshotSink
from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import DatabaseError, PgshovelError, ProgrammingError
from pgshovel.replication import catalog
from pgshovel.replication.mutations import group_by_table
from pgshovel.replication.targets import _pgapply, _pgstate
from pgshovel.settings import NonEmptyText
from pgshovel.source import KeyRange, TableShape, connect, translating
from pgshovel.stream.batches import CommittedBatch, WorkerState

logger = logging.getLogger(__name__)

STAGING_TABLE = "pgshovel_staging"


@dataclass(frozen=True)
class PostgresSnapshotSink:
    """Pipes a range's ``COPY TO`` output from the source into ``COPY FROM`` on the target."""

    dsn: str

    def load_range(self, key_range: KeyRange, copy_out: CopyOut) -> int:
        connection = connect(self.dsn, "pgshovel-replicate snapshot")
        try:
            return _pipe_range(connection, key_range.table, copy_out)
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
        if isinstance(failure[0], PgshovelError):
            raise failure[0]
        raise DatabaseError(
            f"reading a snapshot range of {table.qualified!r} from the source failed: {failure[0]}"
        ) from failure[0]
    connection.commit()
    return rows


class PostgresTarget:
    """Replicates into the PostgreSQL database at ``dsn`` (tables created when missing)."""

    def __init__(self, dsn: NonEmptyText) -> None:
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
            raise ProgrammingError("postgresql target is not open; call open() first")
        return self._connection

    def open(self, cluster: str, set_name: str, tables: Sequence[TableShape]) -> WorkerState | None:
        self._cluster, self._set_name, self._tables = cluster, set_name, list(tables)
        self._connection = connect(self.dsn, "pgshovel-replicate target")
        try:
            with translating("preparing the postgresql target"), self.connection.cursor() as cursor:
                _pgstate.lock(cursor, cluster, set_name)
                _pgstate.create(cursor)
                for table in tables:
                    _pgapply.create_table(cursor, table)
                state = _pgstate.read(cursor, cluster, set_name)
                self.connection.commit()
        except BaseException:
            self._roll_back()
            raise
        return state

    def begin_snapshot(self, state: WorkerState) -> None:
        with translating("starting a snapshot load"), self.connection.cursor() as cursor:
            for table in self._tables:
                _pgapply.truncate(cursor, table)
            _pgstate.write(cursor, self._cluster, self._set_name, state)
            self.connection.commit()

    def snapshot_sink(self) -> SnapshotSink:
        return PostgresSnapshotSink(self.dsn)

    def finish_snapshot(self, state: WorkerState) -> None:
        with translating("finishing a snapshot load"), self.connection.cursor() as cursor:
            for table in self._tables:
                cursor.execute(
                    sql.SQL("ANALYZE {}").format(sql.Identifier(table.schema, table.name))
                )
            _pgstate.write(cursor, self._cluster, self._set_name, state)
            self.connection.commit()

    def apply(self, batches: Sequence[CommittedBatch], state: WorkerState) -> int:
        first = batches[0].position.offset if batches else None
        doing = (
            f"applying {len(batches)!r} batch(es) from offset {first!r} to the postgresql target"
        )
        rows = 0
        try:
            with translating(doing + " (rolled back)"), self.connection.cursor() as cursor:
                grouped = group_by_table(batches, catalog.by_name(self._tables))
                for table in self._tables:
                    entries = grouped.get(table.identity)
                    if not entries:
                        continue
                    changes = [change for _, _, change in entries]
                    if table.key:
                        rows += _pgapply.apply_keyed(cursor, table, changes, STAGING_TABLE)
                    else:
                        rows += _pgapply.apply_unkeyed(cursor, table, changes)
                _pgstate.write(cursor, self._cluster, self._set_name, state)
                self.connection.commit()
        except BaseException:
            self._roll_back()
            raise
        return rows

    def _roll_back(self) -> None:
        connection = self._connection
        if connection is not None and not connection.closed:
            try:
                connection.rollback()
            except psycopg2.Error:
                connection.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
