"""Read the shape of the set's tables from the source catalog.

For each table of the set: its columns in order (only the captured ones, plus
the key), their SQL types as ``format_type`` writes them, and its key: the
set's declared key columns, else the primary key, else none (allowed only when
the set allows unkeyed tables).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg2.extensions import connection as Connection

from pgshovel.errors import ConfigurationError
from pgshovel.protocol import configuration_pb2
from pgshovel.replication.model import ColumnShape, TableShape

_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), b.typname, a.attnotnull
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
-- the codec and the Parquet types go by the base type of a domain
JOIN pg_type b ON b.oid = CASE t.typtype WHEN 'd' THEN t.typbasetype ELSE t.oid END
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_PRIMARY_KEY = """
SELECT a.attname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE n.nspname = %s AND c.relname = %s AND i.indisprimary
ORDER BY array_position(i.indkey::int2[], a.attnum)
"""


def table_shape(
    connection: Connection,
    table: configuration_pb2.TableConfiguration,
    allow_unkeyed: bool,
) -> TableShape:
    """The shape of one configured table, read from ``connection``'s catalog."""
    schema = table.schema or "public"
    with connection.cursor() as cursor:
        cursor.execute(_COLUMNS, (schema, table.name))
        found = [
            ColumnShape(name, sql_type, type_name, not_null)
            for name, sql_type, type_name, not_null in cursor.fetchall()
        ]
        if not found:
            raise ConfigurationError(
                f"table {schema!r}.{table.name!r} of the set does not exist on the source "
                "(or has no columns); fix the set configuration or create the table"
            )
        cursor.execute(_PRIMARY_KEY, (schema, table.name))
        primary_key = tuple(row[0] for row in cursor.fetchall())
    key = tuple(table.key_columns) or primary_key
    names = {column.name for column in found}
    missing = [name for name in (*key, *table.columns) if name not in names]
    if missing:
        raise ConfigurationError(
            f"table {schema!r}.{table.name!r}: configured columns {missing!r} do not exist on "
            f"the source; it has {sorted(names)!r}"
        )
    wanted = set(table.columns) | set(key) if table.columns else names
    columns = tuple(column for column in found if column.name in wanted)
    if not key and not allow_unkeyed:
        raise ConfigurationError(
            f"table {schema!r}.{table.name!r} has no primary key and the set declares no key "
            "columns; declare key_columns or allow unkeyed tables in the set"
        )
    return TableShape(schema=schema, name=table.name, columns=columns, key=key)


def set_shapes(
    connection: Connection, configuration: configuration_pb2.ReplicationSetConfiguration
) -> list[TableShape]:
    """The shapes of every table of the set, in configuration order."""
    return [
        table_shape(connection, table, configuration.allow_unkeyed)
        for table in configuration.tables
    ]


def by_name(tables: Sequence[TableShape]) -> dict[tuple[str, str], TableShape]:
    return {(table.schema, table.name): table for table in tables}
