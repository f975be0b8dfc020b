"""What pgshovel-admin reads from a database's catalogs before planning a change.

Everything here only reads: settings, installed extensions, tables with their
columns and primary keys, the triggers a set installed and the database's node
id. Planning (``pgshovel.admin.install``) turns these facts into statements.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg2 import sql
from psycopg2.extensions import connection

from pgshovel.cluster import names


@dataclass(frozen=True)
class TableInfo:
    """A table as the catalog describes it."""

    schema: str
    name: str
    columns: tuple[str, ...]
    primary_key: tuple[str, ...]


@dataclass(frozen=True)
class InstalledTrigger:
    """A pgshovel trigger found on a table, with the arguments it was created with."""

    name: str
    arguments: tuple[str, ...]
    enabled: bool


def _one(conn: connection, query: sql.Composable | str, args: tuple[object, ...] = ()) -> object:
    with conn.cursor() as cursor:
        cursor.execute(query, args)
        row = cursor.fetchone()
    return None if row is None else row[0]


def max_prepared_transactions(conn: connection) -> int:
    return int(str(_one(conn, "SHOW max_prepared_transactions")))


def extension_schema(conn: connection, extension: str) -> str | None:
    """The schema an extension is installed in, or None when it is not installed."""
    found = _one(
        conn,
        "SELECT n.nspname FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = %s",
        (extension,),
    )
    return None if found is None else str(found)


def extension_available(conn: connection, extension: str) -> bool:
    found = _one(
        conn, "SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = %s", (extension,)
    )
    return found is not None


def schema_exists(conn: connection, schema: str) -> bool:
    found = _one(conn, "SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,))
    return found is not None


def queue_exists(conn: connection, queue: str) -> bool:
    if extension_schema(conn, "pgq") is None:
        return False
    found = _one(conn, "SELECT 1 FROM pgq.queue WHERE queue_name = %s", (queue,))
    return found is not None


def node_id(conn: connection, cluster: str) -> str | None:
    """The node id (uuid text) of this database in ``cluster``, None if not installed."""
    schema = names.schema_name(cluster)
    exists = _one(
        conn,
        "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = 'node'",
        (schema,),
    )
    if exists is None:
        return None
    found = _one(conn, sql.SQL("SELECT id::text FROM {}.node").format(sql.Identifier(schema)))
    return None if found is None else str(found)


def table_info(conn: connection, schema: str, table: str) -> TableInfo | None:
    """Columns (in order) and primary key of an ordinary table, None if there is none."""
    oid = _one(
        conn,
        "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s "
        "AND c.relkind = 'r'",
        (schema, table),
    )
    if oid is None:
        return None
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        )
        columns = tuple(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT a.attname FROM pg_catalog.pg_index i "
            "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, position) "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.position",
            (oid,),
        )
        primary_key = tuple(row[0] for row in cursor.fetchall())
    return TableInfo(schema=schema, name=table, columns=columns, primary_key=primary_key)


def installed_triggers(conn: connection, schema: str, table: str) -> dict[str, InstalledTrigger]:
    """Every pgshovel trigger on a table by name (empty when the table does not exist)."""
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT t.tgname, t.tgargs, t.tgenabled <> 'D' FROM pg_catalog.pg_trigger t "
            "JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND t.tgname LIKE 'pgshovel\\_%%' "
            "AND NOT t.tgisinternal",
            (schema, table),
        )
        rows = cursor.fetchall()
    found = {}
    for name, raw_arguments, enabled in rows:
        # tgargs holds each argument followed by a NUL byte.
        arguments = tuple(part.decode("utf-8") for part in bytes(raw_arguments).split(b"\x00")[:-1])
        found[name] = InstalledTrigger(name=name, arguments=arguments, enabled=bool(enabled))
    return found
