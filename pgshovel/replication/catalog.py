"""The shapes of a set's tables, read from the source catalog.

For each table of the set: its captured columns in order (every column unless
the set lists some; the key always), their SQL types as ``format_type`` writes
them, and its key: the set's declared key columns, else the primary key, else
none (allowed only when the set allows unkeyed tables). The rules are
``pgshovel.source.captured_shape``'s, the same that admin checked the set with.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg2.extensions import connection as Connection

from pgshovel.cluster.dsn import mask_dsn
from pgshovel.protocol import configuration_pb2
from pgshovel.source import Catalog, TableShape, captured_shape


def set_shapes(
    connection: Connection, configuration: configuration_pb2.ReplicationSetConfiguration
) -> list[TableShape]:
    """The shapes of every table of the set, in configuration order."""
    catalog = Catalog(connection)
    database = mask_dsn(configuration.database.dsn)
    return [
        captured_shape(
            table,
            catalog.table(table.schema or "public", table.name),
            allow_unkeyed=configuration.allow_unkeyed,
            database=database,
        )
        for table in configuration.tables
    ]


def by_name(tables: Sequence[TableShape]) -> dict[tuple[str, str], TableShape]:
    return {table.identity: table for table in tables}
