"""Read one captured table in a REPEATABLE READ snapshot, for a new table topic (``op: r``).

``read_table`` opens its own connection to the source, starts a read-only
REPEATABLE READ transaction, takes ``txid_current_snapshot()`` (the first
statement fixes the snapshot, so the rows read are exactly that snapshot's) and
streams the table's captured columns through a server-side cursor, decoded
with the codec the relay uses for events: a snapshot row and an event row of
the same state are the same protocol values. The shape is the one capture uses
(``captured_shape``: the set's ``columns`` and ``key_columns``, else every
column and the primary key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from psycopg2 import sql

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2, stream_pb2
from pgshovel.source import Catalog, TableShape, captured_shape, connect, output_text, translating
from pgshovel.stream.codec import to_value
from pgshovel.stream.handoff import Snapshot, parse_txid_snapshot

__all__ = ["TableRead", "read_table"]

FETCH_ROWS = 5000


@dataclass(frozen=True)
class TableRead:
    """A table being read: its shape (None: no such table now), the snapshot, its rows."""

    shape: TableShape | None
    snapshot: Snapshot
    #: the rows, read as they are iterated (once)
    rows: Callable[[], Iterator[stream_pb2.Row]]


def _no_rows() -> Iterator[stream_pb2.Row]:
    return iter(())


@contextmanager
def read_table(dsn: str, table: configuration_pb2.TableConfiguration) -> Iterator[TableRead]:
    """The table's rows in a fresh snapshot (no shape and no rows when it does not exist)."""
    label = f"{table.schema}.{table.name}"
    connection = connect(dsn, "pgshovel-relay table snapshot")
    try:
        with translating(f"reading table {label!r} for its table topic"):
            connection.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current_snapshot()::text")
                found = cursor.fetchone()
            if found is None:
                raise ConfigurationError("txid_current_snapshot() returned no row")
            snapshot = parse_txid_snapshot(str(found[0]))
            info = Catalog(connection).table(table.schema, table.name)
            if info is None:
                yield TableRead(None, snapshot, _no_rows)
                return
            shape = captured_shape(table, info, allow_unkeyed=True, database=mask_dsn(dsn))

        def rows() -> Iterator[stream_pb2.Row]:
            query = sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(output_text(sql.Identifier(c.name)) for c in shape.columns),
                sql.Identifier(shape.schema, shape.name),
            )
            with translating(f"reading table {label!r} for its table topic"):
                with connection.cursor(name="pgshovel_table_snapshot") as cursor:
                    cursor.itersize = FETCH_ROWS
                    cursor.execute(query)
                    for values in cursor:
                        row = stream_pb2.Row()
                        for column, text in zip(shape.columns, values, strict=True):
                            row.columns.add(
                                name=column.name, value=to_value(column.type_name, text)
                            )
                        yield row

        yield TableRead(shape, snapshot, rows)
    finally:
        connection.close()
