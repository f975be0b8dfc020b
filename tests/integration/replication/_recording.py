"""A test source that runs real transactions and records them as stream batches.

Each change is executed on the source database and read back as text (old row
before, new row after), turned into protocol values with the codec, and framed
by a ``Publisher`` (``RecordedBatch.frame``) as the relay would: Begin (with
the transaction snapshot taken before it as the start tick), the mutations,
Commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg2 import sql

from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.replication import catalog
from pgshovel.source import TableShape, connect
from pgshovel.stream import codec
from pgshovel.stream.publisher import Publisher

NODE = bytes(range(16))
Key = Sequence[str]


@dataclass(frozen=True)
class RecordedBatch:
    """One committed source transaction, ready to be framed by a publisher."""

    batch: stream_pb2.BatchIdentifier
    start: stream_pb2.Tick
    end: stream_pb2.Tick
    mutations: tuple[stream_pb2.Mutation, ...]

    def frame(self, publisher: Publisher) -> list[stream_pb2.Message]:
        return publisher.frame_batch(self.batch, self.start, self.end, "v1", self.mutations)


class RecordingSource:
    """Runs transactions on ``dsn`` and frames each committed one as a batch."""

    def __init__(self, dsn: str, tables: Sequence[tuple[str, str]]) -> None:
        self.connection = connect(dsn, "pgshovel-tests")
        configuration = configuration_pb2.ReplicationSetConfiguration()
        for schema, name in tables:
            configuration.tables.add(schema=schema, name=name)
        self.shapes = {
            (shape.schema, shape.name): shape
            for shape in catalog.set_shapes(self.connection, configuration)
        }
        self.connection.rollback()
        self.batch_id = 0
        self._mutations: list[stream_pb2.Mutation] = []
        self._start: stream_pb2.Tick | None = None
        self._txid = 0

    def close(self) -> None:
        self.connection.close()

    def _row(self, shape: TableShape, key: Key) -> stream_pb2.Row | None:
        with self.connection.cursor() as cursor:
            cursor.execute(
                sql.SQL("SELECT {} FROM {} WHERE ({}) = ({})").format(
                    sql.SQL(", ").join(
                        sql.SQL("{}::text").format(sql.Identifier(c)) for c in shape.column_names
                    ),
                    sql.Identifier(shape.schema, shape.name),
                    sql.SQL(", ").join(sql.Identifier(k) for k in shape.key),
                    sql.SQL(", ").join(sql.Literal(value) for value in key),
                )
            )
            found = cursor.fetchone()
        if found is None:
            return None
        row = stream_pb2.Row()
        for column, text in zip(shape.columns, found, strict=True):
            row.columns.add(name=column.name, value=codec.to_value(column.type_name, text))
        return row

    def _begin_if_needed(self) -> None:
        if self._start is None:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT txid_current_snapshot()::text, txid_current()")
                snapshot_text, self._txid = cursor.fetchone()  # type: ignore[misc]
            xmin, xmax, xip = snapshot_text.split(":")
            self._start = stream_pb2.Tick(
                id=self.batch_id + 1,
                snapshot=stream_pb2.Snapshot(
                    xmin=int(xmin), xmax=int(xmax), xip=[int(x) for x in xip.split(",") if x]
                ),
            )

    def change(
        self,
        table: tuple[str, str],
        statement: str | sql.Composable,
        parameters: Sequence[Any] = (),
        old_key: Key | None = None,
        new_key: Key | None = None,
    ) -> None:
        """Run one single-row statement; record it as INSERT, UPDATE or DELETE by its keys."""
        shape = self.shapes[table]
        self._begin_if_needed()
        old = self._row(shape, old_key) if old_key is not None else None
        with self.connection.cursor() as cursor:
            cursor.execute(statement, parameters or None)
            assert cursor.rowcount == 1, f"{statement!r} changed {cursor.rowcount} rows"
        new = self._row(shape, new_key) if new_key is not None else None
        if old is not None and new is not None:
            operation = stream_pb2.Mutation.UPDATE
        elif new is not None:
            operation = stream_pb2.Mutation.INSERT
        else:
            operation = stream_pb2.Mutation.DELETE
        mutation = stream_pb2.Mutation(
            id=len(self._mutations) + 1,
            schema=shape.schema,
            table=shape.name,
            operation=operation,
            key_columns=list(shape.key),
            transaction=self._txid,
        )
        if old is not None:
            mutation.old.CopyFrom(old)
        if new is not None:
            mutation.new.CopyFrom(new)
        self._mutations.append(mutation)

    def truncate(self, table: tuple[str, str]) -> None:
        shape = self.shapes[table]
        self._begin_if_needed()
        with self.connection.cursor() as cursor:
            cursor.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(*table)))
        self._mutations.append(
            stream_pb2.Mutation(
                id=len(self._mutations) + 1,
                schema=shape.schema,
                table=shape.name,
                operation=stream_pb2.Mutation.TRUNCATE,
                key_columns=list(shape.key),
                transaction=self._txid,
            )
        )

    def commit(self) -> RecordedBatch:
        """Commit the source transaction; return it as a batch to frame."""
        self.connection.commit()
        self.batch_id += 1
        recorded = RecordedBatch(
            batch=stream_pb2.BatchIdentifier(id=self.batch_id, node=NODE),
            start=self._start or stream_pb2.Tick(id=self.batch_id),
            end=stream_pb2.Tick(id=self.batch_id + 1),
            mutations=tuple(self._mutations),
        )
        self._mutations, self._start = [], None
        return recorded
